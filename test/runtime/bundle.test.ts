// Loading a compiled bundle: where it is found, what the format-version check tells the operator
// (which side to upgrade), the frozen route table, and where relative config paths start from.
import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileFile } from '../../compiler/index.js'
import { BUNDLE_FILE, FORMAT_VERSION, type BundleModule } from '../../runtime/bundle/format.js'
import { BundleLoadError, checkBundle, loadBundle } from '../../runtime/bundle/load.js'
import { tempDir } from '../helpers/paths.js'

/** One temp directory for the file; each case gets its own fresh directory inside it. */
const base = tempDir()

function fresh(): string {
  return mkdtempSync(join(base, 'case-'))
}

function writeTree(root: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    const full = join(root, rel)
    mkdirSync(dirname(full), { recursive: true })
    writeFileSync(full, text)
  }
}

const CONFIG = `hooks:
  enabled: false
  mappings:
    - id: first
      match: { path: /a/b/, source: one }
      action: wake
      textTemplate: "first {{payload.x}}"
    - id: second
      match: { path: a/b }
      action: agent
      messageTemplate: "second {{payload.x}}"
    - id: other
      match: { path: other }
      action: wake
`

/** Compiles `yaml` from root/<cfg>/hooks.yaml into root/<out>; returns the out directory. */
async function compiled(root: string, yaml = CONFIG, cfg = 'cfg', out = 'out'): Promise<string> {
  writeTree(root, { [`${cfg}/hooks.yaml`]: yaml })
  const outDir = join(root, out)
  const outcome = await compileFile(join(root, cfg, 'hooks.yaml'), { outDir })
  assert.ok(outcome.ok, outcome.diagnostics.map((d) => `${d.line}:${d.column} ${d.code} ${d.message}`).join('\n'))
  return outDir
}

/** A hand-made module in a fresh directory, named like a bundle; returns the directory. */
function handMade(source: string): string {
  const dir = fresh()
  writeFileSync(join(dir, BUNDLE_FILE), source)
  return dir
}

function handMadeBundle(formatVersion: number): string {
  const manifest = { formatVersion, compilerVersion: '9.9.9', inputsHash: 'sha256:' + '0'.repeat(64), configFile: 'hooks.yaml', basePath: '/hooks', routes: [] }
  return handMade(`export const manifest = ${JSON.stringify(manifest)};\nexport const config = { configDirFromBundle: "." };\nexport const routes = [];\nexport const workflows = [];\n`)
}

/** The BundleLoadError that `promise` rejects with. */
async function loadError(promise: Promise<unknown>): Promise<BundleLoadError> {
  try {
    await promise
  } catch (err) {
    assert.instance(err, BundleLoadError)
    assert.is((err as Error).name, 'BundleLoadError')
    return err as BundleLoadError
  }
  assert.unreachable('loading should have failed')
  throw new Error('unreachable')
}

// ---------------------------------------------------------------------------------------------
const load = suite('loadBundle')

load('accepts the out directory or the bundle file in it', async () => {
  const out = await compiled(fresh())
  const byDir = await loadBundle(out)
  const byFile = await loadBundle(join(out, BUNDLE_FILE))
  assert.is(byDir.file, join(out, BUNDLE_FILE))
  assert.is(byFile.file, join(out, BUNDLE_FILE))
  assert.equal(byFile.manifest, byDir.manifest)
  assert.equal([...byFile.routeTable.keys()], [...byDir.routeTable.keys()])
})

load('accepts a path relative to the working directory', async () => {
  const out = await compiled(fresh())
  const loaded = await loadBundle(relative(process.cwd(), out))
  assert.is(loaded.file, join(out, BUNDLE_FILE))
})

load('a missing bundle is a BundleLoadError that says to run hookgate compile', async () => {
  const dir = fresh()
  const e = await loadError(loadBundle(dir))
  assert.ok(e.message.includes('hookgate compile'), e.message)
  assert.ok(e.message.includes(join(dir, BUNDLE_FILE)), 'the message names the file it looked for')
})

load('a missing out directory is a BundleLoadError whose hookgate compile --out names that directory', async () => {
  // Regression: bundleFileOf could not tell a missing directory from a missing file, so for `--bundle dist`
  // before any compile the advice is `hookgate compile hooks.yaml --out <parent of dist>`; following
  // it writes the bundle beside dist/, and the same `--bundle dist` still fails.
  const dist = join(fresh(), 'dist')
  const e = await loadError(loadBundle(dist))
  assert.ok(e.message.includes('hookgate compile'), e.message)
  assert.ok(e.message.includes(`--out ${dist}`), e.message)
})

load('a bundle of a newer format says to upgrade hookgate on this host', async () => {
  const e = await loadError(loadBundle(handMadeBundle(FORMAT_VERSION + 1)))
  assert.ok(e.message.includes('upgrade hookgate on this host'), e.message)
  assert.ok(e.message.includes(`bundle format ${FORMAT_VERSION + 1}`), e.message)
  assert.ok(e.message.includes('9.9.9'), 'the message names the hookgate that compiled it')
})

load('a bundle of format 8 (after RE2 patterns made format 7) says to upgrade hookgate on this host', async () => {
  const e = await loadError(loadBundle(handMadeBundle(8)))
  assert.match(e.message, /upgrade hookgate on this host/)
})

load('a bundle of format 6 (patterns built with RegExp, which backtracks) says to recompile', async () => {
  // a format-6 bundle builds its match.when patterns with new RegExp: irregexp on the main thread (issue 23)
  const e = await loadError(loadBundle(handMadeBundle(6)))
  assert.match(e.message, /recompile/)
})

load('a bundle of format 5 (before server.store) says to recompile', async () => {
  // a format-5 runtime would have ignored server.store and kept the runs in its state directory
  const e = await loadError(loadBundle(handMadeBundle(5)))
  assert.match(e.message, /recompile/)
})

load('a bundle of format 4 (before compiled task schedules and http, transform and deliver steps) says to recompile', async () => {
  // a format-4 runtime would have run an http step as an agent turn and never scheduled a task
  const e = await loadError(loadBundle(handMadeBundle(4)))
  assert.match(e.message, /recompile/)
})

load('a bundle of format 3 (before signature blocks) says to recompile', async () => {
  const e = await loadError(loadBundle(handMadeBundle(3)))
  assert.match(e.message, /recompile/)
})

load('a bundle of format 1 (transforms inside the bundle) says to recompile', async () => {
  const e = await loadError(loadBundle(handMadeBundle(1)))
  assert.match(e.message, /recompile/)
  assert.not.match(e.message, /upgrade hookgate on this host/)
})

load('a bundle of the current format loads', async () => {
  const loaded = await loadBundle(handMadeBundle(FORMAT_VERSION))
  assert.is(loaded.manifest.formatVersion, FORMAT_VERSION)
  assert.is(loaded.routeTable.size, 0)
})

load('a module that is not a bundle says it is not a hookgate bundle', async () => {
  const e = await loadError(loadBundle(handMade('export const answer = 42\n')))
  assert.match(e.message, /is not a hookgate bundle/)
})

load('a manifest without routes is not a hookgate bundle', async () => {
  const e = await loadError(loadBundle(handMade('export const manifest = { formatVersion: 1 };\nexport const config = {};\n')))
  assert.match(e.message, /is not a hookgate bundle/)
})

load('a file that cannot be imported is a BundleLoadError, not a crash', async () => {
  const dir = handMade('export const manifest = {\n')
  const e = await loadError(loadBundle(dir))
  assert.ok(e.message.startsWith(`cannot load bundle ${join(dir, BUNDLE_FILE)}`), e.message)
})

load('the route table is keyed by the normalised name and keeps match order', async () => {
  const loaded = await loadBundle(await compiled(fresh()))
  assert.equal([...loaded.routeTable.keys()], ['a/b', 'other'])
  assert.equal(loaded.routeTable.get('a/b')!.map((r) => r.id), ['first', 'second'])
  assert.is(loaded.routeTable.get('/a/b/'), undefined)
})

load('the route table is frozen: the per-name arrays and the routes', async () => {
  const loaded = await loadBundle(await compiled(fresh()))
  assert.ok(Object.isFrozen(loaded), 'the loaded bundle')
  for (const [name, list] of loaded.routeTable) {
    assert.ok(Object.isFrozen(list), `the list of routes on ${name}`)
    for (const route of list) assert.ok(Object.isFrozen(route), `route ${route.id}`)
  }
  const list = loaded.routeTable.get('a/b')! as unknown as Array<unknown>
  assert.throws(() => list.push({}))
  const route = loaded.routeTable.get('other')![0]! as unknown as Record<string, unknown>
  assert.throws(() => { route.action = 'agent' })
})

load('a rewritten bundle loads anew instead of coming from the module cache', async () => {
  const root = fresh()
  const out = await compiled(root)
  const first = await loadBundle(out)
  const changed = CONFIG.replace('path: other', 'path: renamed')
  await compiled(root, changed)
  const second = await loadBundle(out)
  assert.ok(first.routeTable.has('other'))
  assert.ok(second.routeTable.has('renamed'), 'the second load saw the old bundle')
  assert.not.ok(second.routeTable.has('other'))
})

// ---------------------------------------------------------------------------------------------
const check = suite('checkBundle')

function module(configDirFromBundle?: string, formatVersion = FORMAT_VERSION): Partial<BundleModule> {
  const config = configDirFromBundle === undefined ? {} : { configDirFromBundle }
  return { manifest: { formatVersion, compilerVersion: '1.2.3', inputsHash: '', configFile: 'hooks.yaml', basePath: '/hooks', routes: [] }, config, routes: [], workflows: [] } as unknown as Partial<BundleModule>
}

check('resolves configDir relative to the bundle file', () => {
  const file = join('/srv', 'hookgate', 'dist', BUNDLE_FILE)
  assert.is(checkBundle(module('../config'), file).configDir, join('/srv', 'hookgate', 'config'))
  assert.is(checkBundle(module('.'), file).configDir, join('/srv', 'hookgate', 'dist'))
  assert.is(checkBundle(module('../../etc/hooks'), file).configDir, join('/srv', 'etc', 'hooks'))
})

check('takes the bundle directory when the config gives no configDirFromBundle', () => {
  const file = join('/srv', 'hookgate', 'dist', BUNDLE_FILE)
  assert.is(checkBundle(module(), file).configDir, join('/srv', 'hookgate', 'dist'))
})

check('a compiled bundle finds the directory of its hooks.yaml, also after the tree is moved', async () => {
  const root = fresh()
  const out = await compiled(root, CONFIG, 'config', join('deep', 'er', 'out'))
  assert.is((await loadBundle(out)).configDir, join(root, 'config'))
  const moved = fresh()
  cpSync(root, moved, { recursive: true })
  assert.is((await loadBundle(join(moved, 'deep', 'er', 'out'))).configDir, join(moved, 'config'))
})

check('checks the format version without reading any file', () => {
  const file = join('/nowhere', BUNDLE_FILE)
  assert.throws(() => checkBundle(module('.', FORMAT_VERSION + 1), file), (e: Error) => e instanceof BundleLoadError && /upgrade hookgate on this host/.test(e.message))
  assert.throws(() => checkBundle(module('.', FORMAT_VERSION - 1), file), (e: Error) => e instanceof BundleLoadError && /recompile/.test(e.message))
  assert.throws(() => checkBundle({}, file), (e: Error) => e instanceof BundleLoadError && /is not a hookgate bundle/.test(e.message))
})

check('builds the route table from the routes in order, keyed by their name', () => {
  const routes = [{ id: 'x1', name: 'x' }, { id: 'y', name: 'y/z' }, { id: 'x2', name: 'x' }]
  const mod = { ...module('.'), routes } as unknown as Partial<BundleModule>
  const loaded = checkBundle(mod, join('/nowhere', BUNDLE_FILE))
  assert.equal([...loaded.routeTable.keys()], ['x', 'y/z'])
  assert.equal(loaded.routeTable.get('x')!.map((r) => r.id), ['x1', 'x2'])
})

load.run()
check.run()
