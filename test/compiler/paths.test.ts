// Path confinement of transforms: hooks.transformsDir must lie inside the directory tree of
// hooks.yaml, every transform.module (and everything a transform imports) must stay inside
// transformsDir, whatever the spelling ("..", absolute, Windows forms) or the symlinks on the way.
// Every escape is a compile error with its code at the offending node; the allowed forms compile.
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileFile, type CompileOutcome } from '../../compiler/index.js'
import type { Diagnostic } from '../../compiler/diagnostics.js'
import { tempDir } from '../helpers/paths.js'

/** One temp directory for the file; each project gets its own fresh directory inside it. */
const base = tempDir()

const TRANSFORM = 'export default function transform() {\n  return { name: "from the transform" }\n}\n'

interface Setup {
  /** transform.module as written in hooks.yaml */
  module: string
  /** transform.export, when not the default */
  exportName?: string
  /** hooks.transformsDir as written in hooks.yaml */
  transformsDir?: string
  /** files to write, relative to the temp root (the config lives in cfg/) */
  files?: Record<string, string>
  /** symlinks to create: link path → target, both relative to the temp root */
  links?: Record<string, string>
}

interface Project {
  root: string
  /** transform.module and transformsDir as written, after <root> was replaced */
  module: string
  transformsDir: string
  cfg: string
  file: string
  yaml: string
}

/** A YAML single-quoted scalar: backslashes stay literal, quotes are doubled. */
function sq(text: string): string {
  return `'${text.replace(/'/g, "''")}'`
}

function writeTree(root: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    const full = join(root, rel)
    mkdirSync(dirname(full), { recursive: true })
    writeFileSync(full, text)
  }
}

/**
 * Writes cfg/hooks.yaml with one mapping whose transform is `module`, plus the given files and
 * links; `<root>` in the module, transformsDir and file contents stands for the temp root.
 */
function project(setup: Setup): Project {
  const root = mkdtempSync(join(base, 'project-'))
  const cfg = join(root, 'cfg')
  const fill = (text: string) => text.replaceAll('<root>', root)
  mkdirSync(cfg, { recursive: true })
  writeTree(root, Object.fromEntries(Object.entries(setup.files ?? {}).map(([k, v]) => [k, fill(v)])))
  for (const [link, target] of Object.entries(setup.links ?? {})) {
    mkdirSync(dirname(join(root, link)), { recursive: true })
    symlinkSync(join(root, target), join(root, link))
  }
  const module = fill(setup.module)
  const transformsDir = fill(setup.transformsDir ?? 'transforms')
  const transform = setup.exportName === undefined ? `{ module: ${sq(module)} }` : `{ module: ${sq(module)}, export: ${sq(setup.exportName)} }`
  const yaml = [
    'hooks:',
    '  enabled: false',
    `  transformsDir: ${sq(transformsDir)}`,
    '  mappings:',
    '    - id: shaped',
    '      match: { path: shaped }',
    '      action: agent',
    `      transform: ${transform}`,
    '',
  ].join('\n')
  const file = join(cfg, 'hooks.yaml')
  writeFileSync(file, yaml)
  return { root, module, transformsDir, cfg, file, yaml }
}

function compile(p: Project): Promise<CompileOutcome> {
  return compileFile(p.file, { outDir: join(p.root, 'out'), check: true })
}

/** 1-based line and column of the first occurrence of `needle` in `text`. */
function where(text: string, needle: string): { line: number; column: number } {
  const at = text.indexOf(needle)
  if (at < 0) throw new Error(`test setup: ${JSON.stringify(needle)} is not in the text`)
  const before = text.slice(0, at).split('\n')
  return { line: before.length, column: before[before.length - 1]!.length + 1 }
}

function errorsOf(outcome: CompileOutcome): Diagnostic[] {
  return outcome.diagnostics.filter((d) => d.severity === 'error')
}

function show(outcome: CompileOutcome): string {
  return outcome.diagnostics.map((d) => `${d.file}:${d.line}:${d.column}: ${d.severity} ${d.code}: ${d.message}`).join('\n') || '(no findings)'
}

/** Exactly one error, with this code, in this file, at this line and column. */
function assertOnlyError(outcome: CompileOutcome, code: string, file: string, at: { line: number; column: number }): Diagnostic {
  assert.not.ok(outcome.ok, 'the config must not compile')
  const errors = errorsOf(outcome)
  assert.equal(errors.map((e) => e.code), [code], show(outcome))
  const e = errors[0]!
  assert.is(resolve(e.file), file, 'the finding names the file it is about')
  assert.equal({ line: e.line, column: e.column }, at, show(outcome))
  return e
}

/** The first error has this code, file and position (later ones may follow from it). */
function assertFirstError(outcome: CompileOutcome, code: string, file: string, at: { line: number; column: number }): Diagnostic {
  assert.not.ok(outcome.ok, 'the config must not compile')
  const e = errorsOf(outcome)[0]
  assert.ok(e, show(outcome))
  assert.is(e!.code, code, show(outcome))
  assert.is(resolve(e!.file), file)
  assert.equal({ line: e!.line, column: e!.column }, at, show(outcome))
  return e!
}

function assertCompiles(outcome: CompileOutcome): void {
  assert.equal(errorsOf(outcome), [], show(outcome))
  assert.ok(outcome.ok, show(outcome))
}

const paths = suite('compileFile confining transforms to transformsDir')

// ---------------------------------------------------------------------------------------------
// transform.module spelled to escape

for (const module of ['../x.ts', 'a/../../x.ts', '..\\x.ts']) {
  paths(`transform module escapes transformsDir with ".." (${module})`, async () => {
    const p = project({ module, files: { 'cfg/x.ts': TRANSFORM, 'cfg/transforms/a/t.ts': TRANSFORM } })
    const e = assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', p.file, where(p.yaml, sq(module)))
    assert.ok(e.message.includes(module), e.message)
    assert.is(e.path, '/hooks/mappings/0/transform/module')
  })
}

for (const module of ['/etc/passwd', 'C:\\x.ts']) {
  paths(`transform module escapes transformsDir as an absolute path (${module})`, async () => {
    const p = project({ module, files: { 'cfg/transforms/t.ts': TRANSFORM } })
    const e = assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', p.file, where(p.yaml, sq(module)))
    assert.match(e.message, /absolute/)
  })
}

paths('transform module given as an absolute path is refused even when it points inside transformsDir', async () => {
  const p = project({ module: '<root>/cfg/transforms/t.ts', files: { 'cfg/transforms/t.ts': TRANSFORM } })
  assert.is(p.module, join(p.cfg, 'transforms', 't.ts'))
  assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', p.file, where(p.yaml, sq(p.module)))
})

paths('transform module escapes transformsDir via symlink to a file outside', async () => {
  const p = project({
    module: 'evil.ts',
    files: { 'outside/evil.ts': TRANSFORM, 'cfg/transforms/t.ts': TRANSFORM },
    links: { 'cfg/transforms/evil.ts': 'outside/evil.ts' },
  })
  const e = assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', p.file, where(p.yaml, sq('evil.ts')))
  assert.match(e.message, /symlink/)
})

paths('transform module escapes transformsDir via a symlinked sub-directory pointing outside', async () => {
  const p = project({
    module: 'sub/evil.ts',
    files: { 'outside/evil.ts': TRANSFORM, 'cfg/transforms/t.ts': TRANSFORM },
    links: { 'cfg/transforms/sub': 'outside' },
  })
  assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', p.file, where(p.yaml, sq('sub/evil.ts')))
})

paths('transform module escapes transformsDir via a symlink into the config dir beside transformsDir', async () => {
  // inside the config tree, but not inside transformsDir: still an escape
  const p = project({
    module: 'near.ts',
    files: { 'cfg/near.ts': TRANSFORM, 'cfg/transforms/t.ts': TRANSFORM },
    links: { 'cfg/transforms/near.ts': 'cfg/near.ts' },
  })
  assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', p.file, where(p.yaml, sq('near.ts')))
})

// ---------------------------------------------------------------------------------------------
// transformsDir outside the config tree

paths('transformsDir escapes the config dir with ".." (../elsewhere)', async () => {
  const p = project({ module: 't.ts', transformsDir: '../elsewhere', files: { 'elsewhere/t.ts': TRANSFORM } })
  const e = assertFirstError(await compile(p), 'TRANSFORMS_DIR_ESCAPE', p.file, where(p.yaml, sq('../elsewhere')))
  assert.is(e.path, '/hooks/transformsDir')
})

paths('transformsDir escapes the config dir as an absolute path outside it', async () => {
  const p = project({ module: 't.ts', transformsDir: '<root>/elsewhere', files: { 'elsewhere/t.ts': TRANSFORM } })
  assertFirstError(await compile(p), 'TRANSFORMS_DIR_ESCAPE', p.file, where(p.yaml, sq(p.transformsDir)))
})

paths('transformsDir escapes the config tree via a symlink to a directory outside', async () => {
  const p = project({ module: 't.ts', files: { 'elsewhere/t.ts': TRANSFORM }, links: { 'cfg/transforms': 'elsewhere' } })
  const e = assertFirstError(await compile(p), 'TRANSFORMS_DIR_ESCAPE', p.file, where(p.yaml, sq('transforms')))
  assert.match(e.message, /symlink/)
})

paths('an escaping transformsDir is reported once, not also as "not set" on every mapping', async () => {
  // Regression: resolve.ts dropped the rejected transformsDir and then reported TRANSFORMS_DIR_REQUIRED
  // ("has a transform but hooks.transformsDir is not set") on each mapping with a transform,
  // although transformsDir *is* set: a follow-on finding that is noise and says something false.
  const p = project({ module: 't.ts', transformsDir: '../elsewhere', files: { 'elsewhere/t.ts': TRANSFORM } })
  const outcome = await compile(p)
  assert.equal(errorsOf(outcome).map((e) => e.code), ['TRANSFORMS_DIR_ESCAPE'], show(outcome))
})

paths('a missing transformsDir is TRANSFORMS_DIR_MISSING at the transformsDir value', async () => {
  const p = project({ module: 't.ts', transformsDir: 'nowhere' })
  assertFirstError(await compile(p), 'TRANSFORMS_DIR_MISSING', p.file, where(p.yaml, sq('nowhere')))
})

// ---------------------------------------------------------------------------------------------
// imports inside a transform

paths('transform import escapes transformsDir with a relative "../" import', async () => {
  const source = '// shapes the payload\n  import secret from \'../outside.js\'\nexport default () => ({ name: String(secret) })\n'
  const p = project({ module: 'leaks.ts', files: { 'cfg/outside.js': 'export default "outside"\n', 'cfg/transforms/leaks.ts': source } })
  const file = realpathSync(join(p.cfg, 'transforms', 'leaks.ts'))
  // esbuild reports a 0-based column; the finding must be 1-based: the opening quote of the specifier
  const at = where(source, "'../outside.js'")
  assert.equal(at, { line: 2, column: 22 })
  const e = assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', file, at)
  assert.ok(e.message.includes('../outside.js'), e.message)
  assert.ok(!e.message.endsWith('(TRANSFORM_PATH_ESCAPE)'), 'the internal marker is stripped from the message')
})

paths('transform import escapes transformsDir with an absolute import outside the config tree', async () => {
  const source = "import secret from '<root>/host/secret.js'\nexport default () => ({ name: String(secret) })\n"
  const p = project({ module: 'abs.ts', files: { 'host/secret.js': 'export default "host secret"\n', 'cfg/transforms/abs.ts': source } })
  const file = realpathSync(join(p.cfg, 'transforms', 'abs.ts'))
  assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', file, where(source, "'<root>/host/secret.js'"))
})

paths('transform import escapes transformsDir with require() of "../"', async () => {
  const source = "const secret = require('../outside.cjs')\nexport default () => ({ name: String(secret) })\n"
  const p = project({ module: 'req.js', files: { 'cfg/outside.cjs': 'module.exports = "outside"\n', 'cfg/transforms/req.js': source } })
  const file = realpathSync(join(p.cfg, 'transforms', 'req.js'))
  assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', file, where(source, "'../outside.cjs'"))
})

paths('transform import escapes transformsDir with a dynamic import() of "../"', async () => {
  const source = "export default async () => {\n  const m = await import('../outside.js')\n  return { name: String(m.default) }\n}\n"
  const p = project({ module: 'dyn.js', files: { 'cfg/outside.js': 'export default "outside"\n', 'cfg/transforms/dyn.js': source } })
  const file = realpathSync(join(p.cfg, 'transforms', 'dyn.js'))
  assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', file, where(source, "'../outside.js'"))
})

paths('transform import escapes transformsDir via a symlinked helper that points outside', async () => {
  const source = "import { label } from './helper.js'\nexport default () => ({ name: label })\n"
  const p = project({
    module: 'uses.ts',
    files: { 'outside/helper.ts': 'export const label = "outside"\n', 'cfg/transforms/uses.ts': source },
    links: { 'cfg/transforms/helper.ts': 'outside/helper.ts' },
  })
  const file = realpathSync(join(p.cfg, 'transforms', 'uses.ts'))
  assertOnlyError(await compile(p), 'TRANSFORM_PATH_ESCAPE', file, where(source, "'./helper.js'"))
})

paths('transform import escapes the config tree via a tsconfig.json "paths" alias', async () => {
  // Regression: esbuild applied the `paths` of the nearest tsconfig.json, so `import c from 'creds'`
  // resolved to any file on the host and bundled it. tsconfig.json is no longer read, so the alias
  // does not resolve at all.
  const secret = `secret-${Math.random().toString(36).slice(2)}`
  const p = project({
    module: 'alias.ts',
    files: {
      'host/creds.json': JSON.stringify({ key: secret }),
      'cfg/tsconfig.json': JSON.stringify({ compilerOptions: { paths: { creds: ['<root>/host/creds.json'] } } }),
      'cfg/transforms/alias.ts': "import creds from 'creds'\nexport default () => ({ name: String(creds.key) })\n",
    },
  })
  const outcome = await compileFile(p.file, { outDir: join(p.root, 'out') })
  if (outcome.result) assert.not.ok(outcome.result.code.includes(secret), 'a file from outside the config tree was bundled')
  assert.not.ok(outcome.ok, show(outcome))
  assert.ok(errorsOf(outcome).some((e) => (e.code === 'TRANSFORM_BUILD' && e.message.includes('"creds"')) || e.code === 'TRANSFORM_PATH_ESCAPE'), show(outcome))
})

// ---------------------------------------------------------------------------------------------
// allowed forms

paths('a symlink that stays inside transformsDir compiles', async () => {
  const p = project({ module: 'alias.ts', files: { 'cfg/transforms/real/t.ts': TRANSFORM }, links: { 'cfg/transforms/alias.ts': 'cfg/transforms/real/t.ts' } })
  const outcome = await compile(p)
  assertCompiles(outcome)
  assert.is(outcome.result!.manifest.routes[0]!.transform, 'transforms/real/t.ts', 'the manifest names the real file')
})

paths('a nested module sub/x.ts compiles', async () => {
  const p = project({ module: 'sub/x.ts', files: { 'cfg/transforms/sub/x.ts': TRANSFORM } })
  const outcome = await compile(p)
  assertCompiles(outcome)
  assert.is(outcome.result!.manifest.routes[0]!.transform, 'transforms/sub/x.ts')
})

paths('a module written without its extension compiles', async () => {
  const p = project({ module: 'shape', files: { 'cfg/transforms/shape.ts': TRANSFORM } })
  const outcome = await compile(p)
  assertCompiles(outcome)
  assert.is(outcome.result!.manifest.routes[0]!.transform, 'transforms/shape.ts')
})

for (const ext of ['.js', '.mjs', '.mts']) {
  paths(`a ${ext} module compiles`, async () => {
    const source = ext === '.mts' ? 'export default (input: { payload: unknown }): { name: string } => ({ name: typeof input.payload })\n' : TRANSFORM
    const p = project({ module: `shape${ext}`, files: { [`cfg/transforms/shape${ext}`]: source } })
    const outcome = await compile(p)
    assertCompiles(outcome)
    assert.is(outcome.result!.manifest.routes[0]!.transform, `transforms/shape${ext}`)
  })
}

paths('a transform importing a sibling helper and a node built-in compiles', async () => {
  const p = project({
    module: 'hash.ts',
    files: {
      'cfg/transforms/hash.ts': "import { createHash } from 'node:crypto'\nimport { label } from './lib/label.js'\nexport default () => ({ name: label + createHash('sha256').update('x').digest('hex') })\n",
      'cfg/transforms/lib/label.ts': 'export const label = "hash:"\n',
    },
  })
  assertCompiles(await compile(p))
})

paths('a config reached through a symlinked directory compiles its transforms', async () => {
  // Regression: emit.ts keyed the exports esbuild found by resolve(configDir, entryPoint), with configDir
  // the un-resolved (symlinked) directory of hooks.yaml, but looks them up by the real path of the
  // transform: the valid transform is reported as TRANSFORM_EXPORT_MISSING "it exports nothing".
  const p = project({ module: 't.ts', files: { 'cfg/transforms/t.ts': TRANSFORM } })
  const link = join(p.root, 'current')
  symlinkSync(p.cfg, link)
  const outcome = await compileFile(join(link, 'hooks.yaml'), { outDir: join(p.root, 'out'), check: true })
  assertCompiles(outcome)
})

// ---------------------------------------------------------------------------------------------
// missing modules, missing exports, build errors

paths('a missing module is TRANSFORM_NOT_FOUND at the module value', async () => {
  const p = project({ module: 'nope.ts', files: { 'cfg/transforms/t.ts': TRANSFORM } })
  const e = assertOnlyError(await compile(p), 'TRANSFORM_NOT_FOUND', p.file, where(p.yaml, sq('nope.ts')))
  assert.is(e.hint, 'looked for nope.ts')
})

paths('a missing module without extension lists every extension it tried', async () => {
  const p = project({ module: 'nope', files: { 'cfg/transforms/t.ts': TRANSFORM } })
  const e = assertOnlyError(await compile(p), 'TRANSFORM_NOT_FOUND', p.file, where(p.yaml, sq('nope')))
  assert.is(e.hint, 'looked for nope and nope{.ts,.mts,.js,.mjs}')
})

paths('a directory named like the module is not taken for the module', async () => {
  const p = project({ module: 'sub', files: { 'cfg/transforms/sub/x.ts': TRANSFORM } })
  assertOnlyError(await compile(p), 'TRANSFORM_NOT_FOUND', p.file, where(p.yaml, sq('sub')))
})

paths('a missing default export is TRANSFORM_EXPORT_MISSING with a hint listing the exports', async () => {
  const p = project({ module: 'named.ts', files: { 'cfg/transforms/named.ts': 'export const a = 1\nexport function b() {\n  return null\n}\n' } })
  const e = assertOnlyError(await compile(p), 'TRANSFORM_EXPORT_MISSING', p.file, where(p.yaml, sq('named.ts')))
  assert.is(e.message, 'transforms/named.ts has no export named "default"')
  assert.is(e.hint, 'it exports: a, b')
})

paths('a missing named export is TRANSFORM_EXPORT_MISSING at the export value', async () => {
  const p = project({ module: 'named.ts', exportName: 'shape', files: { 'cfg/transforms/named.ts': TRANSFORM } })
  const e = assertOnlyError(await compile(p), 'TRANSFORM_EXPORT_MISSING', p.file, where(p.yaml, sq('shape')))
  assert.is(e.hint, 'it exports: default')
})

paths('a module that exports nothing gets a hint saying how to export', async () => {
  const p = project({ module: 'empty.ts', files: { 'cfg/transforms/empty.ts': 'const unused = 1\nvoid unused\n' } })
  const e = assertOnlyError(await compile(p), 'TRANSFORM_EXPORT_MISSING', p.file, where(p.yaml, sq('empty.ts')))
  assert.match(e.hint ?? '', /exports nothing/)
})

paths('a TS syntax error is TRANSFORM_BUILD at the line and 1-based column in the transform', async () => {
  const source = 'export default function shape(input: { payload: unknown }) {\n  const n: number = ;\n  return { name: String(n) }\n}\n'
  const p = project({ module: 'broken.ts', files: { 'cfg/transforms/broken.ts': source } })
  const file = realpathSync(join(p.cfg, 'transforms', 'broken.ts'))
  // the stray ";" is at 0-based column 20 of line 2, so the finding says column 21
  const at = where(source, ';\n  return')
  assert.equal(at, { line: 2, column: 21 })
  const e = assertOnlyError(await compile(p), 'TRANSFORM_BUILD', file, at)
  assert.is(e.path, '')
})

paths('a build error after non-ASCII text on its line points at the character column, not the byte column', async () => {
  // Regression: esbuild's Location.column counts UTF-8 bytes; emit.ts added 1 but did not convert to
  // characters, so every multi-byte character before the error shifts the column to the right
  // (here: three "é" put it at 33 instead of 30), unlike the YAML findings, which count characters.
  const source = 'export default function shape() {\n  const s = "ééé"; const n = ;\n  return { name: s + n }\n}\n'
  const p = project({ module: 'accents.ts', files: { 'cfg/transforms/accents.ts': source } })
  const file = realpathSync(join(p.cfg, 'transforms', 'accents.ts'))
  const at = where(source, ';\n  return')
  assert.equal(at, { line: 2, column: 30 })
  assertOnlyError(await compile(p), 'TRANSFORM_BUILD', file, at)
})

paths.run()
