// The emitted bundle and manifest: byte-identical for identical inputs wherever they are compiled,
// an inputs hash that follows every input, no secret value inside, template text that stays data
// (never code), a manifest that points at the source of every route, and atomic writes.
import { createHash, randomBytes } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileFile, type CompileOutcome } from '../../compiler/index.js'
import { COMPILER_VERSION } from '../../compiler/emit.js'
import { BUNDLE_FILE, FORMAT_VERSION, MANIFEST_FILE, TRANSFORMS_FILE, type BundleManifest } from '../../runtime/bundle/format.js'
import { loadBundle } from '../../runtime/bundle/load.js'
import { selectRoute } from '../../runtime/endpoints/mapping.js'
import { templateHelpers, type RenderContext } from '../../runtime/bundle/template-helpers.js'
import { tempDir } from '../helpers/paths.js'

/** One temp directory for the file; each project gets its own fresh directory inside it. */
const base = tempDir()

const CONFIG = `# emit test config, revision 1
hooks:
  enabled: false
  transformsDir: transforms
  presets: [gmail]
  mappings:
    - id: github
      match: { path: github }
      action: agent
      name: "GitHub {{headers.x-github-event}}"
      messageTemplate: "{{payload.repository.full_name}}: {{payload.head_commit.message}}"
      transform: { module: github.ts }
    - id: alerts
      match: { path: /alerts/prom/, source: prometheus }
      action: wake
      wakeMode: now
      textTemplate: "Alert {{payload.status}} at {{now}}"
      transform: { module: alerts, export: shape }
agents:
  - id: main
    default: true
    model: builtin/echo
    triggers:
      - name: Deploy finished
        path: deploys
        target: agent
        prompt: "Deploy of {{payload.service}}: {{payload.status}}"
`

const FILES: Record<string, string> = {
  'cfg/hooks.yaml': CONFIG,
  'cfg/transforms/github.ts': "import { label } from './lib/label.js'\nexport default function github(input: { payload: unknown }) {\n  return input.payload === null ? null : { name: label('github') }\n}\n",
  'cfg/transforms/lib/label.ts': 'export function label(kind: string): string {\n  return `[${kind}]`\n}\n',
  'cfg/transforms/alerts.mjs': 'export function shape(input) {\n  return { text: `alert from ${input.path}` }\n}\n',
}

function writeTree(root: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    const full = join(root, rel)
    mkdirSync(dirname(full), { recursive: true })
    writeFileSync(full, text)
  }
}

/** A fresh project directory holding `files` (the config is cfg/hooks.yaml). */
function project(files: Record<string, string> = FILES): string {
  const root = mkdtempSync(join(base, 'project-'))
  writeTree(root, files)
  return root
}

function show(outcome: CompileOutcome): string {
  return outcome.diagnostics.map((d) => `${d.file}:${d.line}:${d.column}: ${d.severity} ${d.code}: ${d.message}`).join('\n') || '(no findings)'
}

/** Compiles root/cfg/hooks.yaml into root/<out> and insists that it worked. */
async function build(root: string, out = 'out'): Promise<{ outcome: CompileOutcome; outDir: string; bundle: Buffer; manifestJson: Buffer; manifest: BundleManifest }> {
  const outDir = join(root, out)
  const outcome = await compileFile(join(root, 'cfg', 'hooks.yaml'), { outDir })
  assert.ok(outcome.ok, show(outcome))
  assert.is(outcome.bundlePath, join(outDir, BUNDLE_FILE))
  const manifestJson = readFileSync(join(outDir, MANIFEST_FILE))
  return { outcome, outDir, bundle: readFileSync(join(outDir, BUNDLE_FILE)), manifestJson, manifest: JSON.parse(manifestJson.toString('utf8')) as BundleManifest }
}

/** 1-based line and column of the first occurrence of `needle` in `text`. */
function where(text: string, needle: string): { line: number; column: number } {
  const at = text.indexOf(needle)
  if (at < 0) throw new Error(`test setup: ${JSON.stringify(needle)} is not in the text`)
  const before = text.slice(0, at).split('\n')
  return { line: before.length, column: before[before.length - 1]!.length + 1 }
}

/** A YAML double-quoted scalar for any text (JSON plus the two line separators YAML would keep raw). */
function dq(text: string): string {
  return JSON.stringify(text).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
}

/** The code with every complete string literal (and substitution-free template literal) removed. */
function withoutStringLiterals(code: string): string {
  return code.replace(/"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\$]|\\.|\$(?!\{))*`/g, '""')
}

function context(payload: unknown): RenderContext {
  return { payload, headers: {}, query: {}, path: 'p', now: '2025-01-01T00:00:00.000Z' }
}

const emit = suite('compileFile emitting the bundle and manifest')

// ---------------------------------------------------------------------------------------------
// determinism and the inputs hash

emit('compiling the same config twice gives byte-identical bundle and manifest', async () => {
  const root = project()
  const a = await build(root, 'out-a')
  const b = await build(root, 'out-b')
  assert.ok(a.bundle.equals(b.bundle), 'hookgate.bundle.mjs differs between two compiles')
  assert.ok(a.manifestJson.equals(b.manifestJson), 'manifest.json differs between two compiles')
  assert.match(a.manifest.inputsHash, /^sha256:[0-9a-f]{64}$/)
})

emit('a copy of the config in another directory gives the same inputs hash and the same bundle bytes', async () => {
  const first = project()
  const copy = mkdtempSync(join(base, 'copy-'))
  cpSync(join(first, 'cfg'), join(copy, 'cfg'), { recursive: true })
  const a = await build(first)
  const b = await build(copy)
  assert.is(b.manifest.inputsHash, a.manifest.inputsHash)
  assert.ok(a.bundle.equals(b.bundle), 'the bundle depends on where the config lies')
  assert.ok(a.manifestJson.equals(b.manifestJson), 'the manifest depends on where the config lies')
  assert.not.ok(a.bundle.toString('utf8').includes(first), 'the bundle holds an absolute path of the build machine')
})

emit('the inputs hash changes when hooks.yaml changes by one byte', async () => {
  const root = project()
  const before = await build(root)
  const file = join(root, 'cfg', 'hooks.yaml')
  writeFileSync(file, readFileSync(file, 'utf8').replace('revision 1', 'revision 2'))
  const after = await build(root)
  assert.is.not(after.manifest.inputsHash, before.manifest.inputsHash)
})

emit('the inputs hash changes when a transform changes', async () => {
  const root = project()
  const before = await build(root)
  const file = join(root, 'cfg', 'transforms', 'alerts.mjs')
  writeFileSync(file, readFileSync(file, 'utf8').replace('alert from', 'alarm from'))
  const after = await build(root)
  assert.is.not(after.manifest.inputsHash, before.manifest.inputsHash)
})

emit('the inputs hash changes when a file a transform imports changes', async () => {
  const root = project()
  const before = await build(root)
  const file = join(root, 'cfg', 'transforms', 'lib', 'label.ts')
  writeFileSync(file, readFileSync(file, 'utf8').replace('`[${kind}]`', '`<${kind}>`'))
  const after = await build(root)
  assert.is.not(after.manifest.inputsHash, before.manifest.inputsHash)
  assert.not.ok(after.bundle.equals(before.bundle))
})

emit('a tsconfig.json beside the transforms does not change the bundle (transforms compile with fixed settings)', async () => {
  // Regression: esbuild used to read the nearest tsconfig.json, which changed the bundle while the
  // inputs hash (which cannot see it) stayed the same.
  const root = project({
    'cfg/hooks.yaml': 'hooks:\n  enabled: false\n  transformsDir: transforms\n  mappings:\n    - match: { path: a }\n      action: agent\n      transform: { module: fields.ts }\n',
    'cfg/transforms/fields.ts': 'class Shape {\n  name = "shape"\n}\nexport default () => ({ name: new Shape().name })\n',
    'cfg/tsconfig.json': JSON.stringify({ compilerOptions: { useDefineForClassFields: true } }),
  })
  const before = await build(root)
  writeFileSync(join(root, 'cfg', 'tsconfig.json'), JSON.stringify({ compilerOptions: { useDefineForClassFields: false } }))
  const after = await build(root)
  assert.ok(after.bundle.equals(before.bundle), 'the tsconfig change must not change the bundle')
  assert.is(after.manifest.inputsHash, before.manifest.inputsHash)
})

// ---------------------------------------------------------------------------------------------
// secrets

emit('a ${ENV} token: the value of the variable at compile time never enters the bundle', async () => {
  const value = randomBytes(24).toString('hex')
  const root = project({ 'cfg/hooks.yaml': 'hooks:\n  enabled: true\n  token: "${HOOKGATE_TEST_TOKEN}"\n' })
  const saved = process.env.HOOKGATE_TEST_TOKEN
  process.env.HOOKGATE_TEST_TOKEN = value
  let built: Awaited<ReturnType<typeof build>>
  try {
    built = await build(root)
  } finally {
    if (saved === undefined) delete process.env.HOOKGATE_TEST_TOKEN
    else process.env.HOOKGATE_TEST_TOKEN = saved
  }
  assert.not.ok(built.bundle.toString('utf8').includes(value), 'the token value is in the bundle')
  assert.not.ok(built.manifestJson.toString('utf8').includes(value), 'the token value is in the manifest')
  const loaded = await loadBundle(built.outDir)
  assert.equal(loaded.config.token, { kind: 'env', name: 'HOOKGATE_TEST_TOKEN' })
})

emit('a literal token: only its SHA-256 reaches the bundle, never the literal', async () => {
  const literal = randomBytes(24).toString('hex')
  const digest = createHash('sha256').update(literal).digest('hex')
  const root = project({ 'cfg/hooks.yaml': `hooks:\n  enabled: true\n  token: ${literal}\n` })
  const built = await build(root)
  assert.ok(built.outcome.diagnostics.some((d) => d.code === 'TOKEN_LITERAL' && d.severity === 'warning'), show(built.outcome))
  const code = built.bundle.toString('utf8')
  assert.not.ok(code.includes(literal), 'the literal token is in the bundle')
  assert.not.ok(built.manifestJson.toString('utf8').includes(literal), 'the literal token is in the manifest')
  assert.ok(code.includes(digest), 'the digest of the token is not in the bundle')
  const loaded = await loadBundle(built.outDir)
  assert.equal(loaded.config.token, { kind: 'digest', sha256: digest })
})

emit('a { file: path } token: the bundle holds the path, never the contents of the file', async () => {
  const root = project({})
  const secret = randomBytes(24).toString('hex')
  const secretFile = join(root, 'secrets', 'hook-token')
  writeTree(root, { 'secrets/hook-token': secret + '\n', 'cfg/hooks.yaml': `hooks:\n  enabled: true\n  token: { file: ${dq(secretFile)} }\n` })
  const built = await build(root)
  const code = built.bundle.toString('utf8')
  assert.not.ok(code.includes(secret), 'the contents of the token file are in the bundle')
  assert.not.ok(built.manifestJson.toString('utf8').includes(secret))
  assert.ok(code.includes(JSON.stringify(secretFile)), 'the token file path is not in the bundle')
  const loaded = await loadBundle(built.outDir)
  assert.equal(loaded.config.token, { kind: 'file', path: secretFile })
})

// ---------------------------------------------------------------------------------------------
// template text is data

const HOSTILE = [
  'say "hi"',
  "it's",
  'back`tick` and `${1 + 1}`',
  '${process.exit(9)}',
  '"; process.exit(9); "',
  "'); process.exit(9); ('",
  '`+process.exit(9)+`',
  '</script><script>process.exit(9)</script>',
  '*/ process.exit(9) /*',
  '// process.exit(9)\nnext line',
  'line\u2028separator\u2029paragraph',
  'back\\slash \\n \\u0041 \\" \\',
]

emit('templates with quotes, backticks, ${…}, </script>, */, U+2028 and backslashes render exactly their text', async () => {
  let yaml = 'hooks:\n  enabled: false\n  mappings:\n'
  HOSTILE.forEach((text, i) => {
    yaml += `    - id: m${i}\n      match: { path: p${i} }\n      action: agent\n      name: ${dq(text)}\n      messageTemplate: ${dq(`${text}|{{payload.x}}|${text}`)}\n`
  })
  yaml += `    - id: woken\n      match: { path: woken }\n      action: wake\n      textTemplate: ${dq(HOSTILE.join(' {{payload.x}} '))}\n`
  const root = project({ 'cfg/hooks.yaml': yaml })
  const built = await build(root)

  // importing the bundle must not run any of it (a process.exit(9) would end this test run)
  const loaded = await loadBundle(built.outDir)
  const ctx = context({ x: 'X' })
  HOSTILE.forEach((text, i) => {
    const route = loaded.routeTable.get(`p${i}`)?.[0]
    assert.ok(route, `route p${i} is missing`)
    assert.is(route!.render.name!(ctx, templateHelpers), text)
    assert.is(route!.render.message!(ctx, templateHelpers), `${text}|X|${text}`)
  })
  assert.is(loaded.routeTable.get('woken')![0]!.render.text!(ctx, templateHelpers), HOSTILE.join(' X '))

  const code = withoutStringLiterals(built.bundle.toString('utf8'))
  assert.not.ok(code.includes('process.exit'), 'template text reached the bundle outside a string literal')
})

emit('payload values are inserted as text, never evaluated', async () => {
  const root = project({ 'cfg/hooks.yaml': 'hooks:\n  enabled: false\n  mappings:\n    - id: m\n      match: { path: m }\n      action: agent\n      messageTemplate: "[{{payload.x}}] {{payload}}"\n' })
  const built = await build(root)
  const loaded = await loadBundle(built.outDir)
  const payload = { x: '${process.exit(9)}"\u2028' }
  assert.is(loaded.routeTable.get('m')![0]!.render.message!(context(payload), templateHelpers), `[${payload.x}] ${JSON.stringify(payload)}`)
})

// ---------------------------------------------------------------------------------------------
// manifest

emit('the manifest lists every route with id, name, action, kind and the position of its definition', async () => {
  const root = project()
  const built = await build(root)
  const file = 'hooks.yaml'
  const expected: BundleManifest['routes'] = [
    { id: 'github', name: 'github', action: 'agent', definitionKind: 'hook', file, ...where(CONFIG, 'id: github'), transform: 'transforms/github.ts' },
    { id: 'alerts', name: 'alerts/prom', source: 'prometheus', action: 'wake', definitionKind: 'hook', file, ...where(CONFIG, 'id: alerts'), transform: 'transforms/alerts.mjs' },
    { id: 'trigger:main:deploy-finished', name: 'deploys', action: 'agent', definitionKind: 'trigger', file, ...where(CONFIG, 'name: Deploy finished') },
    { id: 'preset:gmail', name: 'gmail', action: 'agent', definitionKind: 'hook', file, ...where(CONFIG, 'gmail]') },
  ]
  assert.equal(built.manifest.routes, expected)
  assert.is(built.manifest.formatVersion, FORMAT_VERSION)
  assert.is(built.manifest.compilerVersion, COMPILER_VERSION)
  assert.is(built.manifest.configFile, 'hooks.yaml')
  assert.is(built.manifest.basePath, '/hooks')
  // the manifest inside the bundle is the one written beside it
  assert.equal(built.outcome.result!.manifest, built.manifest)
  const loaded = await loadBundle(built.outDir)
  assert.equal(loaded.manifest, built.manifest)
})

emit('the gmail preset route exists when presets: [gmail]', async () => {
  const root = project({ 'cfg/hooks.yaml': 'hooks:\n  enabled: false\n  presets: [gmail]\n' })
  const built = await build(root)
  assert.equal(built.manifest.routes.map((r) => [r.id, r.name]), [['preset:gmail', 'gmail']])
  const loaded = await loadBundle(built.outDir)
  const route = loaded.routeTable.get('gmail')![0]!
  assert.is(route.id, 'preset:gmail')
  assert.ok(route.maxBodyBytes !== null && route.maxBodyBytes > 262144, 'the gmail preset needs a larger body limit')
})

emit('without presets there is no gmail route', async () => {
  const root = project({ 'cfg/hooks.yaml': 'hooks:\n  enabled: false\n' })
  const built = await build(root)
  assert.equal(built.manifest.routes, [])
  const loaded = await loadBundle(built.outDir)
  assert.is(loaded.routeTable.get('gmail'), undefined)
})

emit('a user mapping on path gmail shadows the preset', async () => {
  const root = project({ 'cfg/hooks.yaml': 'hooks:\n  enabled: false\n  presets: [gmail]\n  mappings:\n    - id: my-gmail\n      match: { path: gmail }\n      action: wake\n      textTemplate: "mail {{payload.messages[0].subject}}"\n' })
  const built = await build(root)
  assert.ok(built.outcome.diagnostics.some((d) => d.code === 'PRESET_SHADOWED'), show(built.outcome))
  const loaded = await loadBundle(built.outDir)
  const routes = loaded.routeTable.get('gmail')!
  assert.is(routes[0]!.id, 'my-gmail')
  const chosen = selectRoute(routes, { payload: { messages: [] }, headers: {}, query: {}, path: 'gmail', now: '' })
  assert.is(chosen.kind === 'route' && chosen.route.id, 'my-gmail')
})

// ---------------------------------------------------------------------------------------------
// writing

emit('transform code is written only into transform modules, which a recompile keeps for the previous bundle and then drops', async () => {
  const root = project()
  const transformModules = () => readdirSync(join(root, 'out')).filter((f) => TRANSFORMS_FILE.test(f)).sort()
  const first = await build(root)
  assert.not.ok(first.bundle.toString('utf8').includes('alert from'), 'transform code is in the main bundle')
  const [v1] = transformModules()
  assert.ok(readFileSync(join(root, 'out', v1!), 'utf8').includes('alert from'))
  const file = join(root, 'cfg', 'transforms', 'alerts.mjs')
  writeFileSync(file, readFileSync(file, 'utf8').replace('alert from', 'alarm from'))
  await build(root)
  const afterOne = transformModules()
  assert.is(afterOne.length, 2, 'a runtime still serving the previous bundle needs its transform module')
  assert.ok(afterOne.includes(v1!))
  writeFileSync(file, readFileSync(file, 'utf8').replace('alarm from', 'alert: from'))
  await build(root)
  const afterTwo = transformModules()
  assert.is(afterTwo.length, 2)
  assert.not.ok(afterTwo.includes(v1!), 'a transform module two compiles old is dropped')
})

emit('output is written atomically: no *.tmp is left in the out dir', async () => {
  const root = project()
  await build(root)
  await build(root) // a second compile replaces the files in place
  const files = readdirSync(join(root, 'out')).sort()
  assert.equal(files.filter((f) => !TRANSFORMS_FILE.test(f)), [BUNDLE_FILE, MANIFEST_FILE].sort())
  assert.is(files.filter((f) => TRANSFORMS_FILE.test(f)).length, 1, `one transform module: ${files.join(', ')}`)
})

emit('check: true writes nothing', async () => {
  const root = project()
  const outcome = await compileFile(join(root, 'cfg', 'hooks.yaml'), { outDir: join(root, 'out'), check: true })
  assert.ok(outcome.ok, show(outcome))
  assert.is(outcome.bundlePath, undefined)
  assert.not.ok(existsSync(join(root, 'out')))
})

emit.run()
