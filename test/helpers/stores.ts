// The store the behaviour suites run on: the file store, or with HOOKGATE_TEST_STORE=postgres
// PostgreSQL (scripts/test.mjs runs the behaviour suites a second time so). On PostgreSQL each state
// directory a test serves gets a database of its own (the same one whenever that state directory is
// served again, as a restarted runtime finds its state), on one throwaway server per test process,
// started at first need (test/helpers/pg.ts). A test serves through the harness (test/runtime/http/
// harness.ts), or opens a store with openTestStore(), and reads what was stored through
// test/helpers/history.ts: it runs on either store unchanged.
//
// A test file about the file store itself (its journal, fsync, a full disk, the state directory)
// says so in its first lines (`// store: file only …`), and a file that opens no store at all says
// `// store: none …`; scripts/test.mjs leaves both out of the PostgreSQL pass. A single test about
// the file store inside a file that runs on both is written `fileStoreOnly(suite)('…', …)`.
import { resolve } from 'node:path'
import type { Callback, Test } from 'uvu'
import { connectStore, openStore, type StoreOptions } from '../../runtime/store/open.js'
import type { Store } from '../../runtime/store/store.js'
import { startPostgres, type TestPostgres } from './pg.js'

export type TestStoreKind = 'file' | 'postgres'

export const testStoreKind: TestStoreKind = process.env.HOOKGATE_TEST_STORE === 'postgres' ? 'postgres' : 'file'

let server: Promise<TestPostgres> | undefined
/** per state directory (resolved), the database its runtime uses */
const databases = new Map<string, Promise<string>>()
const known = new Map<string, string>()
let made = 0

/** This test process's PostgreSQL server, started at first need. */
export function testPostgres(): Promise<TestPostgres> {
  server ??= startPostgres().then((pg) => {
    if (!pg) throw new Error('HOOKGATE_TEST_STORE=postgres, but this machine has no PostgreSQL server binaries')
    return pg
  })
  return server
}

/**
 * The store URL a runtime on `stateDir` is started with (`serve --store`): on PostgreSQL a database
 * of its own, created at the first call for that directory; undefined on the file store.
 */
export function storeUrlFor(stateDir: string): Promise<string | undefined> {
  if (testStoreKind === 'file') return Promise.resolve(undefined)
  const dir = resolve(stateDir)
  let url = databases.get(dir)
  if (!url) {
    const name = `state_${++made}`
    url = testPostgres().then((pg) => pg.createDatabase(name)).then((created) => { known.set(dir, created); return created })
    databases.set(dir, url)
  }
  return url
}

/** The URL storeUrlFor gave `stateDir`, if it gave one (nothing was stored there otherwise). */
export function knownStoreUrl(stateDir: string): string | undefined {
  return known.get(resolve(stateDir))
}

/** The store a runtime on `stateDir` opens, of the kind under test (for tests that build an engine themselves). */
export async function openTestStore(stateDir: string, options: StoreOptions = {}): Promise<Store> {
  const url = await storeUrlFor(stateDir)
  return url === undefined ? openStore(stateDir, options) : connectStore(url, stateDir, options)
}

/** `test`, or on another store its skip: for one test about the file store itself in a file that runs on both. */
export function fileStoreOnly<T>(test: Test<T>): (name: string, fn: Callback<T>) => void {
  return testStoreKind === 'file' ? test : (name, fn) => test.skip(name, fn)
}

/** The flags that point a CLI (`hookgate runs`, `rejects`, `tasks`, the page) at the store of the runtime on `stateDir`. */
export function storeArgs(stateDir: string): string[] {
  const url = knownStoreUrl(stateDir)
  return url === undefined ? [] : ['--store', url]
}

/**
 * `test`, or on PostgreSQL its skip: a behaviour the runtime does not (yet) keep alike on both
 * stores, found by running the behaviour suites there. Each use names the difference (`why`), and
 * is a defect to mend in the runtime, not in the test.
 */
export function divergesOnPostgres<T>(test: Test<T>, why: string): (name: string, fn: Callback<T>) => void {
  if (testStoreKind === 'file') return test
  return (name, fn) => test.skip(`${name} [diverges on PostgreSQL: ${why}]`, fn)
}

/** The flags a spawned `hookgate serve` on `stateDir` needs to run on the store under test (none on the file store). */
export async function serveStoreArgs(stateDir: string): Promise<string[]> {
  const url = await storeUrlFor(stateDir)
  return url === undefined ? [] : ['--store', url]
}

/**
 * A lease of 2 s and a sweep every 0.2 s, for a runtime on PostgreSQL that a test kills and starts
 * again: the new one takes the dead one's runs over within about 2 s (15 s + 5 s by default).
 * Only the timings: the URL is the `--store` each serve is started with, which wins over it.
 */
const TEST_STORE_SETTINGS = 'store: { url: "${HOOKGATE_TEST_STORE_URL}", hostTtlSeconds: 2, sweepSeconds: 0.2 }'

/** hooks.yaml as a test wrote it, with the store timings of the store under test (none on the file store). */
export function withTestStore(yaml: string): string {
  if (testStoreKind === 'file' || /^ {2,}store:/m.test(yaml)) return yaml
  const flow = /^server:[ \t]*\{/m
  if (flow.test(yaml)) return yaml.replace(flow, (m) => `${m} ${TEST_STORE_SETTINGS},`)
  const block = /^server:[ \t]*\n((?:[ \t]*\n)*)([ \t]+)/m.exec(yaml)
  if (block) return yaml.slice(0, block.index) + `server:\n${block[2]}${TEST_STORE_SETTINGS}\n` + yaml.slice(block.index + 'server:'.length).replace(/^[ \t]*\n/, '')
  return `server:\n  ${TEST_STORE_SETTINGS}\n${yaml}`
}

// The differences found so far (each skipped on PostgreSQL where a test meets it, and reported):
/** A runtime on PostgreSQL listens before it holds its agents' sessions: wakes it accepts meanwhile are read all together, at once, when it gains the session. */
export const WAKES_BEFORE_SESSION = 'wakes accepted before the runtime holds its agent\'s session (its first moments) are read at once and together when it gains it'
