// `hookgate compile` and `hookgate schema` through the real executable: exit codes, what goes to
// stdout and what to stderr, the three output formats, usage errors, and the files written.
//
// Starting the compiler side costs ~0.7 s of CPU per process, so every distinct command line is run
// once, started when this file loads (a few at a time), and shared by the tests that read it.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { repoRoot } from '../helpers/paths.js'
import { FORMAT_VERSION } from '../../runtime/bundle/format.js'
import { describeRun, hookgate, scratchDir, startIn, stdoutJson } from './cli-helpers.js'

interface JsonDiagnostic {
  code: string
  severity: 'error' | 'warning'
  message: string
  file: string
  line: number
  column: number
  path: string
  hint?: string
}
interface JsonReport { errors: JsonDiagnostic[]; warnings: JsonDiagnostic[] }

/** Valid: two routes (at 6:7 and 11:7), one of them with a TypeScript transform that imports a helper. */
const VALID = `hooks:
  enabled: true
  token: \${HOOKGATE_TOKEN}
  transformsDir: transforms
  mappings:
    - id: deploys
      match: { path: deploys }
      action: agent
      messageTemplate: "Deploy of {{payload.service}}: {{payload.status}}"
      transform: { module: shape.ts }
    - id: ping
      match: { path: ping }
      action: wake
      textTemplate: ping
`
const VALID_TREE = {
  'hooks.yaml': VALID,
  'transforms/shape.ts': `import { prefix } from './lib/prefix'
export default function shape(input: { payload: { service?: string } }) {
  return { name: prefix + String(input.payload.service) }
}
`,
  'transforms/lib/prefix.ts': `export const prefix: string = 'deploy '\n`,
}

/** Four unknown keys, at 3:3, 5:25, 7:7 and 8:1 (as in the golden fixture schema-unknown-key). */
const UNKNOWN_KEYS = `hooks:
  enabled: false
  mapings: []
  mappings:
    - match: { path: a, sourc: x }
      action: wake
      textTemplat: hi
servr: {}
`

/** Errors found by different phases (templates, resolve) in an order that is not the file's. */
const MIXED = `hooks:
  enabled: false
  path: hooks//x/
  mappings:
    - match: { path: a }
      action: wake
      textTemplate: "{{paylod.x}}"
    - match: { path: wake }
      action: wake
    - match: { path: b }
      action: agent
      agentId: ghost
      messageTemplate: "{{payload.__proto__.x}}"
`

/** Valid, with one warning (BASE_PATH_NORMALISED at 3:9). */
const WARNING_ONLY = `hooks:
  enabled: false
  path: hooks//in/
`

/** Unknown keys holding "/", "~", "%" and a line break (quoted YAML keys may hold anything). */
const ODD_KEYS = `hooks:
  enabled: false
  "a/b~c": 1
  "50%\\nkey": 2
`

/** An unknown key whose text, printed verbatim, reads as a second diagnostic. */
const FORGING_KEY = `hooks:
  enabled: false
  "x\\nhooks.yaml:1:1: error FORGED: all good": 1
`

const DIAGNOSTIC_LINE = /^(.+):(\d+):(\d+): (error|warning) ([A-Z][A-Z_]*): (.*)$/

// Every command line this file checks, started now.
const validOut = startIn(VALID_TREE, ['compile', 'hooks.yaml', '--out', 'out'])
const validDefaults = { dir: validOut.dir, result: validOut.result.then(() => hookgate(['compile'], { cwd: validOut.dir })) }
const repoOut = scratchDir()
const repoCompile = hookgate(['compile', join(repoRoot, 'hooks.yaml'), '--out', repoOut], { cwd: repoOut })
const validCheck = startIn(VALID_TREE, ['compile', 'hooks.yaml', '--check', '--out', 'out'])
const unknownText = startIn({ 'hooks.yaml': UNKNOWN_KEYS }, ['compile', 'hooks.yaml', '--out', 'out'])
const missingFile = startIn({}, ['compile', 'missing.yaml', '--check'])
const maxErrors2 = startIn({ 'hooks.yaml': UNKNOWN_KEYS }, ['compile', '--check', '--max-errors', '2'])
const forging = startIn({ 'hooks.yaml': FORGING_KEY }, ['compile', '--check'])
const unknownJson = startIn({ 'hooks.yaml': UNKNOWN_KEYS }, ['compile', '--check', '--format', 'json'])
const mixedJson = startIn({ 'hooks.yaml': MIXED }, ['compile', '--check', '--format', 'json'])
const warningJson = startIn({ 'hooks.yaml': WARNING_ONLY }, ['compile', '--check', '--format', 'json'])
const oddGithub = startIn({ 'odd,name.yaml': ODD_KEYS }, ['compile', 'odd,name.yaml', '--check', '--format', 'github'])
const USAGE_CASES: Array<[string, string[]]> = [
  ['an unknown option', ['compile', '--bogus']],
  ['--format xml', ['compile', '--format', 'xml']],
  ['two config files', ['compile', 'a.yaml', 'b.yaml']],
]
const usageRuns = USAGE_CASES.map(([, args]) => startIn({ 'hooks.yaml': WARNING_ONLY }, args))
const maxErrors0 = startIn({ 'hooks.yaml': WARNING_ONLY }, ['compile', '--max-errors', '0'])
const schemaRun = startIn({}, ['schema'])
const unknownCommand = startIn({}, ['frobnicate'])
const topHelp = startIn({}, ['--help'])
const noArgs = startIn({}, [])

// ---------------------------------------------------------------------------------------------

/** The out dir's files, sorted, with the content hash in a transform module's name shown as `*`. */
function bundleFiles(dir: string): string[] {
  return readdirSync(dir).map((n) => n.replace(/^hookgate\.transforms\.[0-9a-f]{16}\.mjs$/, 'hookgate.transforms.*.mjs')).sort()
}

const compile = suite('hookgate compile of a valid config')

compile('exits 0 and writes the bundle and manifest.json into --out', async () => {
  const r = await validOut.result
  assert.is(r.code, 0, describeRun(r))
  assert.is(r.stdout, '', 'text format keeps stdout free for machine output')
  assert.match(r.stderr, /^compiled 2 routes into /m)
  assert.equal(bundleFiles(join(validOut.dir, 'out')), ['hookgate.bundle.mjs', 'hookgate.transforms.*.mjs', 'manifest.json'])
})

compile('writes a manifest with format version, compiler version, inputs hash and positioned routes', async () => {
  const r = await validOut.result
  assert.is(r.code, 0, describeRun(r))
  const manifest = JSON.parse(readFileSync(join(validOut.dir, 'out', 'manifest.json'), 'utf8'))
  assert.is(manifest.formatVersion, FORMAT_VERSION)
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'))
  assert.is(manifest.compilerVersion, pkg.version)
  assert.match(manifest.inputsHash, /^sha256:[0-9a-f]{64}$/)
  assert.equal(manifest.routes.map((rt: { id: string; file: string; line: number; column: number }) => [rt.id, rt.file, rt.line, rt.column]), [
    ['deploys', 'hooks.yaml', 6, 7],
    ['ping', 'hooks.yaml', 11, 7],
  ])
})

compile('reads hooks.yaml from the working directory and writes to dist when given no file and no --out', async () => {
  const r = await validDefaults.result
  assert.is(r.code, 0, describeRun(r))
  assert.equal(bundleFiles(join(validDefaults.dir, 'dist')), ['hookgate.bundle.mjs', 'hookgate.transforms.*.mjs', 'manifest.json'])
})

compile('gives byte-identical bundles and manifests when the same config is compiled twice into two directories', async () => {
  assert.is((await validOut.result).code, 0)
  assert.is((await validDefaults.result).code, 0)
  const a = readFileSync(join(validOut.dir, 'out', 'hookgate.bundle.mjs'))
  const b = readFileSync(join(validOut.dir, 'dist', 'hookgate.bundle.mjs'))
  assert.ok(a.equals(b), 'the two bundles differ')
  assert.is(readFileSync(join(validOut.dir, 'out', 'manifest.json'), 'utf8'), readFileSync(join(validOut.dir, 'dist', 'manifest.json'), 'utf8'))
})

compile('compiles the repo\'s own hooks.yaml with exit 0', async () => {
  const r = await repoCompile
  assert.is(r.code, 0, describeRun(r))
  assert.is(r.stdout, '')
  const manifest = JSON.parse(readFileSync(join(repoOut, 'manifest.json'), 'utf8'))
  const ids: string[] = manifest.routes.map((rt: { id: string }) => rt.id)
  assert.ok(ids.includes('github') && ids.includes('alerts'), `routes: ${ids.join(', ')}`)
})

compile.run()

// ---------------------------------------------------------------------------------------------

const check = suite('hookgate compile --check')

check('writes nothing and prints nothing at all for a valid config with transforms', async () => {
  const r = await validCheck.result
  assert.is(r.code, 0, describeRun(r))
  assert.is(r.stdout, '')
  assert.is(r.stderr, '')
  assert.not.ok(existsSync(join(validCheck.dir, 'out')), '--check created the out directory')
  assert.equal(readdirSync(validCheck.dir).sort(), ['hooks.yaml', 'transforms'])
  assert.equal(readdirSync(join(validCheck.dir, 'transforms')).sort(), ['lib', 'shape.ts'])
})

check.run()

// ---------------------------------------------------------------------------------------------

const text = suite('hookgate compile --format text with config errors')

text('exits 1 with file:line:col: error CODE: message lines on stderr and nothing on stdout', async () => {
  const r = await unknownText.result
  assert.is(r.code, 1, describeRun(r))
  assert.is(r.stdout, '')
  const lines = r.stderr.split('\n').filter((l) => DIAGNOSTIC_LINE.test(l))
  // The later phases still run on what validated, so the disabled-ingress warning comes too.
  assert.equal(lines, [
    'hooks.yaml:2:12: warning HOOKS_DISABLED: hooks.enabled is false: the server will answer 404 hooks_disabled on every hook path',
    'hooks.yaml:3:3: error SCHEMA_UNKNOWN_KEY: unknown key "mapings" in hooks',
    'hooks.yaml:5:25: error SCHEMA_UNKNOWN_KEY: unknown key "sourc" in hooks.mappings[0].match',
    'hooks.yaml:7:7: error SCHEMA_UNKNOWN_KEY: unknown key "textTemplat" in hooks.mappings[0]',
    'hooks.yaml:8:1: error SCHEMA_UNKNOWN_KEY: unknown key "servr"',
  ])
  assert.not.ok(existsSync(join(unknownText.dir, 'out')), 'a failed compile wrote output')
})

text('reports a missing config file as CONFIG_FILE_UNREADABLE with exit 1', async () => {
  const r = await missingFile.result
  assert.is(r.code, 1, describeRun(r))
  assert.is(r.stdout, '')
  assert.match(r.stderr, /^missing\.yaml:1:1: error CONFIG_FILE_UNREADABLE: /m)
})

text('prints only --max-errors errors and a line naming TOO_MANY_ERRORS for the rest', async () => {
  const r = await maxErrors2.result
  assert.is(r.code, 1, describeRun(r))
  const errors = r.stderr.split('\n').filter((l) => DIAGNOSTIC_LINE.exec(l)?.[4] === 'error')
  assert.equal(errors, [
    'hooks.yaml:3:3: error SCHEMA_UNKNOWN_KEY: unknown key "mapings" in hooks',
    'hooks.yaml:5:25: error SCHEMA_UNKNOWN_KEY: unknown key "sourc" in hooks.mappings[0].match',
  ])
  const more = r.stderr.split('\n').filter((l) => l.includes('TOO_MANY_ERRORS'))
  assert.is(more.length, 1, describeRun(r))
  assert.match(more[0]!, /\b2\b/, 'the line says how many more errors there are')
})

// Regression: compiler/diagnostics.ts formatText prints the message verbatim, and messages carry user text
// (here an unknown key), so a key with a line break splits one diagnostic over two lines and can
// forge a whole extra `file:line:col: error` line in CI logs and problem matchers. The github
// format escapes line breaks; the text format does not.
text('a config key containing a line break cannot forge an extra diagnostic line', async () => {
  const r = await forging.result
  assert.is(r.code, 1, describeRun(r))
  const lines = r.stderr.split('\n').filter((l) => l !== '')
  assert.not.ok(lines.some((l) => l.startsWith('hooks.yaml:1:1: error FORGED')), `a forged diagnostic line was printed:\n${r.stderr}`)
  const unexpected = lines.filter((l) => !DIAGNOSTIC_LINE.test(l) && !l.startsWith('  hint: ') && !/^\d+ errors?, \d+ warnings?$/.test(l))
  assert.equal(unexpected, [], 'every stderr line is a diagnostic, a hint or the summary')
})

text.run()

// ---------------------------------------------------------------------------------------------

const json = suite('hookgate compile --format json')

json('prints only {"errors":[…],"warnings":[…]} on stdout and nothing on stderr', async () => {
  const r = await unknownJson.result
  assert.is(r.code, 1, describeRun(r))
  assert.is(r.stderr, '')
  const report = stdoutJson<JsonReport>(r)
  assert.equal(Object.keys(report).sort(), ['errors', 'warnings'])
  assert.is(report.errors.length, 4)
  assert.equal(report.warnings.map((w) => w.code), ['HOOKS_DISABLED'])
})

json('gives every entry exactly code, severity, message, file, line, column, path and an optional hint', async () => {
  const r = await mixedJson.result
  assert.is(r.code, 1, describeRun(r))
  const report = stdoutJson<JsonReport>(r)
  const entries = [...report.errors, ...report.warnings]
  assert.ok(entries.length >= 5, describeRun(r))
  for (const d of entries) {
    const keys = Object.keys(d).filter((k) => k !== 'hint').sort()
    assert.equal(keys, ['code', 'column', 'file', 'line', 'message', 'path', 'severity'], JSON.stringify(d))
    if ('hint' in d) assert.type(d.hint, 'string')
    assert.match(d.code, /^[A-Z][A-Z_]*$/)
    assert.ok(Number.isInteger(d.line) && d.line >= 1, `line is 1-based: ${JSON.stringify(d)}`)
    assert.ok(Number.isInteger(d.column) && d.column >= 1, `column is 1-based: ${JSON.stringify(d)}`)
    assert.is(d.file, 'hooks.yaml')
    assert.ok(d.path === '' || d.path.startsWith('/'), `path is a JSON pointer: ${d.path}`)
  }
  assert.ok(report.errors.every((d) => d.severity === 'error'))
  assert.ok(report.warnings.every((d) => d.severity === 'warning'))
})

json('points line and column at the offending node and path at its JSON pointer', async () => {
  const report = stdoutJson<JsonReport>(await unknownJson.result)
  assert.equal(report.errors[0], {
    code: 'SCHEMA_UNKNOWN_KEY',
    severity: 'error',
    message: 'unknown key "mapings" in hooks',
    file: 'hooks.yaml',
    line: 3,
    column: 3,
    path: '/hooks/mapings',
    hint: '"mappings" is already set here: remove this misspelt copy',
  })
  const sourc = report.errors.find((d) => d.path === '/hooks/mappings/0/match/sourc')
  assert.ok(sourc, 'the unknown key inside a flow mapping is reported with its pointer')
  assert.is(sourc!.line, 5)
  assert.is(sourc!.column, 25)
})

json('sorts errors by position even when later phases find earlier lines', async () => {
  const r = await mixedJson.result
  assert.is(r.code, 1, describeRun(r))
  const report = stdoutJson<JsonReport>(r)
  const positions = report.errors.map((d) => [d.line, d.column])
  const sorted = [...positions].sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!)
  assert.equal(positions, sorted)
  assert.equal(report.errors.map((d) => d.code), ['TEMPLATE_UNKNOWN_ROOT', 'RESERVED_PATH', 'AGENT_UNKNOWN', 'TEMPLATE_FORBIDDEN_KEY'])
  assert.equal(report.errors.map((d) => d.path), ['/hooks/mappings/0/textTemplate', '/hooks/mappings/1/match/path', '/hooks/mappings/2/agentId', '/hooks/mappings/2/messageTemplate'])
  assert.equal(report.warnings.map((d) => [d.code, d.line, d.column, d.path]), [['HOOKS_DISABLED', 2, 12, '/hooks/enabled'], ['BASE_PATH_NORMALISED', 3, 9, '/hooks/path']])
})

json('exits 0 with no errors and the warning listed for a valid config with a warning', async () => {
  const r = await warningJson.result
  assert.is(r.code, 0, describeRun(r))
  assert.is(r.stderr, '')
  const report = stdoutJson<JsonReport>(r)
  assert.equal(report.errors, [])
  assert.equal(report.warnings.map((d) => [d.code, d.severity, d.line, d.column]), [['HOOKS_DISABLED', 'warning', 2, 12], ['BASE_PATH_NORMALISED', 'warning', 3, 9]])
})

json.run()

// ---------------------------------------------------------------------------------------------

const github = suite('hookgate compile --format github')

github('prints one ::error workflow command per error on stdout, escaping %, line breaks and commas', async () => {
  const r = await oddGithub.result
  assert.is(r.code, 1, describeRun(r))
  assert.not.match(r.stderr, 'SCHEMA_UNKNOWN_KEY')
  const lines = r.stdout.split('\n').filter((l) => l !== '' && !l.startsWith('::warning ') )
  assert.is(lines.length, 2, `one annotation per line:\n${r.stdout}`)
  assert.match(r.stdout, /^::warning file=odd%2Cname\.yaml,line=2,col=12,title=HOOKS_DISABLED::/m)
  for (const l of lines) assert.match(l, /^::error file=odd%2Cname\.yaml,line=\d+,col=\d+,title=SCHEMA_UNKNOWN_KEY::unknown key /)
  assert.ok(lines[0]!.startsWith('::error file=odd%2Cname.yaml,line=3,col=3,title=SCHEMA_UNKNOWN_KEY::unknown key "a/b~c" in hooks'), lines[0])
  assert.ok(lines[1]!.startsWith('::error file=odd%2Cname.yaml,line=4,col=3,title=SCHEMA_UNKNOWN_KEY::unknown key "50%25%0Akey" in hooks'), lines[1])
})

github.run()

// ---------------------------------------------------------------------------------------------

const usage = suite('hookgate usage errors')

USAGE_CASES.forEach(([what], i) => {
  usage(`exits 2 with the compile usage on stderr for ${what}`, async () => {
    const run = usageRuns[i]!
    const r = await run.result
    assert.is(r.code, 2, describeRun(r))
    assert.is(r.stdout, '')
    assert.match(r.stderr, 'usage: hookgate compile')
    assert.not.ok(existsSync(join(run.dir, 'dist')), 'a usage error still compiled')
  })
})

usage('exits 2 for --max-errors 0 and says what --max-errors takes', async () => {
  const r = await maxErrors0.result
  assert.is(r.code, 2, describeRun(r))
  assert.is(r.stdout, '')
  assert.match(r.stderr, '--max-errors')
  assert.not.ok(existsSync(join(maxErrors0.dir, 'dist')), 'a usage error still compiled')
})

// Regression: the compile command (now cli/verbs/compile.ts) prints the usage line after every other compile usage error, but not after
// the --max-errors one.
usage('prints the compile usage on stderr for --max-errors 0 like for every other usage error', async () => {
  const r = await maxErrors0.result
  assert.match(r.stderr, 'usage: hookgate compile')
})

usage('exits 2 with the command list on stderr for an unknown command', async () => {
  const r = await unknownCommand.result
  assert.is(r.code, 2, describeRun(r))
  assert.is(r.stdout, '')
  assert.match(r.stderr, 'unknown command "frobnicate"')
  assert.match(r.stderr, 'usage: hookgate <command>')
})

usage('exits 0 with the usage listing every command on stdout for --help', async () => {
  const r = await topHelp.result
  assert.is(r.code, 0, describeRun(r))
  assert.match(r.stdout, 'usage: hookgate <command>')
  for (const command of ['compile', 'schema', 'try', 'serve', 'runs']) assert.match(r.stdout, new RegExp(`^  ${command}( |$)`, 'm'))
  assert.is(r.stderr, '')
})

usage('exits 2 when run with no arguments at all', async () => {
  const r = await noArgs.result
  assert.is(r.code, 2, describeRun(r))
  assert.match(r.stdout + r.stderr, 'usage: hookgate <command>')
})

// Regression: bin/hookgate.js exits 2 (a usage error) with no arguments but writes the usage to stdout;
// every other usage error, and the rule "machine output on stdout, human text on stderr", puts it on stderr.
usage('prints the usage on stderr, not stdout, when run with no arguments', async () => {
  const r = await noArgs.result
  assert.is(r.stdout, '')
  assert.match(r.stderr, 'usage: hookgate <command>')
})

usage.run()

// ---------------------------------------------------------------------------------------------

const schema = suite('hookgate schema')

schema('prints a closed JSON Schema document for hooks.yaml on stdout', async () => {
  const r = await schemaRun.result
  assert.is(r.code, 0, describeRun(r))
  assert.is(r.stderr, '')
  const doc = stdoutJson<Record<string, any>>(r)
  assert.type(doc.$schema, 'string')
  assert.match(doc.$schema, 'json-schema.org')
  assert.is(doc.type, 'object')
  assert.is(doc.additionalProperties, false)
  assert.ok(doc.properties?.hooks, 'properties.hooks is missing')
  assert.ok(doc.required.includes('hooks'), 'hooks is required')
})

schema('describes mapping items with messageTemplate and transform and closes them to unknown keys', async () => {
  const doc = stdoutJson<Record<string, any>>(await schemaRun.result)
  const hooks = doc.properties.hooks
  assert.is(hooks.additionalProperties, false)
  const mapping = hooks.properties.mappings.items
  assert.is(mapping.additionalProperties, false)
  for (const key of ['id', 'match', 'action', 'messageTemplate', 'textTemplate', 'transform', 'allowUnsafeExternalContent']) {
    assert.ok(key in mapping.properties, `mapping property ${key} is missing`)
  }
  assert.is(mapping.properties.transform.additionalProperties, false)
  assert.ok('module' in mapping.properties.transform.properties)
})

schema('matches the hooks.schema.json committed beside hooks.yaml (regenerate: hookgate schema > hooks.schema.json)', async () => {
  const committed = JSON.parse(readFileSync(join(repoRoot, 'hooks.schema.json'), 'utf8'))
  assert.equal(committed, stdoutJson<Record<string, any>>(await schemaRun.result))
})

schema.run()
