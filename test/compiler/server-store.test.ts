// server.store in hooks.yaml becomes the bundle's server.store: the PostgreSQL URL only as a
// reference (env or file, resolved by the runtime at start), the timings in milliseconds with their
// defaults filled in. A URL written in the file is an error at its position, and its value reaches
// neither the findings nor the bundle.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileSource, type CompileOutcome } from '../../compiler/index.js'
import { DEFAULT_STORE } from '../../compiler/resolve.js'
import { loadBundle } from '../../runtime/bundle/load.js'
import type { BundleConfig } from '../../runtime/bundle/format.js'
import { DEFAULT_HOST_TTL_MS } from '../../runtime/store/postgres/index.js'
import { scratchDir } from '../helpers/paths.js'

const HOOKS = 'hooks:\n  enabled: false\n'
const PASSWORD = 'hunter2-' + 'x'.repeat(12)

async function compile(server: string): Promise<{ outcome: CompileOutcome; outDir: string }> {
  const dir = scratchDir('store-')
  const outDir = join(dir, 'dist')
  const outcome = await compileSource(`server:\n${server}\n${HOOKS}`, join(dir, 'hooks.yaml'), { outDir })
  return { outcome, outDir }
}

async function storeOf(server: string): Promise<BundleConfig['server']['store']> {
  const { outcome, outDir } = await compile(server)
  assert.ok(outcome.ok, JSON.stringify(outcome.diagnostics))
  return (await loadBundle(outDir)).config.server.store
}

function errors(outcome: CompileOutcome): string[] {
  return outcome.diagnostics.filter((d) => d.severity === 'error').map((d) => `${d.line}:${d.column} ${d.code} ${d.message}${d.hint ? ` (${d.hint})` : ''}`)
}

const accepted = suite('server.store accepted')

accepted('absent leaves the bundle without a store: the file store', async () => {
  assert.is(await storeOf('  port: 8787'), undefined)
})

accepted('${HOOKGATE_STORE_URL} is kept as an env reference with the default timings', async () => {
  assert.equal(await storeOf('  store: "${HOOKGATE_STORE_URL}"'), { url: { kind: 'env', name: 'HOOKGATE_STORE_URL' }, hostTtlMs: 15_000, sweepMs: 5_000, maxConnections: 10 })
})

accepted('{ env } and { file } are kept as references', async () => {
  assert.equal((await storeOf('  store: { env: PG_URL }'))?.url, { kind: 'env', name: 'PG_URL' })
  assert.equal((await storeOf('  store: { file: secrets/store-url }'))?.url, { kind: 'file', path: 'secrets/store-url' })
})

accepted('{ url, hostTtlSeconds, sweepSeconds, maxConnections } becomes milliseconds and a connection count', async () => {
  const store = await storeOf('  store:\n    url: { env: PG_URL }\n    hostTtlSeconds: 1.5\n    sweepSeconds: 0.1\n    maxConnections: 100')
  assert.equal(store, { url: { kind: 'env', name: 'PG_URL' }, hostTtlMs: 1500, sweepMs: 100, maxConnections: 100 })
})

accepted('{ url } alone takes the defaults, the same as the PostgreSQL store\'s own', async () => {
  const store = await storeOf('  store: { url: "${HOOKGATE_STORE_URL}" }')
  assert.equal(store, { url: { kind: 'env', name: 'HOOKGATE_STORE_URL' }, ...DEFAULT_STORE })
  assert.is(DEFAULT_STORE.hostTtlMs, DEFAULT_HOST_TTL_MS)
})

accepted('the bundle holds the reference, never the URL, even with the variable set while compiling', async () => {
  const before = process.env.HOOKGATE_STORE_URL
  process.env.HOOKGATE_STORE_URL = `postgres://hookgate:${PASSWORD}@db.internal/hookgate`
  try {
    const { outcome, outDir } = await compile('  store: "${HOOKGATE_STORE_URL}"')
    assert.ok(outcome.ok)
    const files = readdirSync(outDir)
    assert.ok(files.length > 0)
    for (const f of files) {
      const text = readFileSync(join(outDir, f), 'utf8')
      assert.not.ok(text.includes(PASSWORD) || text.includes('db.internal'), `${f} holds the store URL`)
    }
    assert.ok(readFileSync(join(outDir, 'hookgate.bundle.mjs'), 'utf8').includes('HOOKGATE_STORE_URL'), 'the reference is there')
  } finally {
    if (before === undefined) delete process.env.HOOKGATE_STORE_URL
    else process.env.HOOKGATE_STORE_URL = before
  }
})

const refused = suite('server.store refused')

refused('a postgres:// URL written in the file, at its position, naming ${HOOKGATE_STORE_URL} and not the password', async () => {
  const { outcome, outDir } = await compile(`  store: postgres://hookgate:${PASSWORD}@db.internal:5432/hookgate`)
  assert.not.ok(outcome.ok)
  assert.equal(errors(outcome), ['2:10 SECRET_LITERAL server.store must be a reference, not the secret itself (write store: ${HOOKGATE_STORE_URL} (or { file: path }))'])
  assert.not.ok(JSON.stringify(outcome.diagnostics).includes(PASSWORD))
  assert.throws(() => readdirSync(outDir), 'nothing written')
})

refused('a URL written as { url } in the file, at its position', async () => {
  const { outcome } = await compile(`  store:\n    maxConnections: 4\n    url: postgresql://hookgate:${PASSWORD}@/hookgate?host=/run/postgresql`)
  assert.equal(errors(outcome), ['4:10 SECRET_LITERAL server.store.url must be a reference, not the secret itself (write url: ${HOOKGATE_STORE_URL} (or { file: path }))'])
})

refused('a ${…} with something around it is not a reference', async () => {
  const { outcome } = await compile('  store: "postgres://hookgate:${PG_PASSWORD}@db/hookgate"')
  assert.equal(errors(outcome).map((e) => e.split(' ').slice(0, 2).join(' ')), ['2:10 SECRET_REF_INVALID'])
})

refused('a number, a list, or { url } without a url', async () => {
  assert.equal(errors((await compile('  store: 5')).outcome).map((e) => e.split(' ').slice(0, 2).join(' ')), ['2:10 SCHEMA_TYPE'])
  assert.equal(errors((await compile('  store: [a]')).outcome).map((e) => e.split(' ').slice(0, 2).join(' ')), ['2:10 SCHEMA_TYPE'])
  assert.equal(errors((await compile('  store: { maxConnections: 4 }')).outcome).map((e) => e.split(' ').slice(0, 2).join(' ')), ['2:10 SCHEMA_MISSING_KEY'])
})

refused('timings out of range, each at its value', async () => {
  const at = async (server: string, value: string) => {
    assert.equal(errors((await compile(server)).outcome).map((e) => e.split(' ').slice(0, 2).join(' ')), [`2:${server.indexOf(value) + 1} SCHEMA_RANGE`], server)
  }
  await at('  store: { url: { env: U }, hostTtlSeconds: 0.9 }', '0.9')
  await at('  store: { url: { env: U }, sweepSeconds: 0.05 }', '0.05')
  await at('  store: { url: { env: U }, maxConnections: 101 }', '101')
  await at('  store: { url: { env: U }, maxConnections: 1 }', '1 }')
})

accepted.run()
refused.run()
