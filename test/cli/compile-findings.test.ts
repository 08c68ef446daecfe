// `hookgate compile` through the real executable on a config with faults for every phase: one run
// reports them all (a schema error leaves only its part out of the later phases), sorted by
// position, in each output format, and `--max-errors` caps each format alike.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { describeRun, startIn, stdoutJson } from './cli-helpers.js'

/** Five faults, each found by another phase: schema (key, enum), resolve (transform, duplicate path), templates. */
const FIVE_FAULTS = `hooks:
  enabled: true
  token: \${HOOKGATE_TOKEN}
  transformsDir: transforms
  mappings:
    - id: github
      match: { path: github }
      action: agent
      mesageTemplate: "push to {{payload.repo}}"
    - id: deploys
      match: { path: deploys }
      action: wkae
    - id: shaped
      match: { path: shaped }
      action: agent
      transform: { module: ../outside.js }
    - id: alerts
      match: { path: alerts }
      action: wake
      textTemplate: "alert: {{foo.bar}}"
    - id: alerts-again
      match: { path: alerts }
      action: wake
`
const TREE = { 'hooks.yaml': FIVE_FAULTS, 'transforms/ok.ts': 'export default () => undefined\n', 'outside.js': 'export default () => undefined\n' }

/** code, line, column, JSON pointer of each fault, in the order of the file */
const EXPECTED: Array<[string, number, number, string]> = [
  ['SCHEMA_UNKNOWN_KEY', 9, 7, '/hooks/mappings/0/mesageTemplate'],
  ['SCHEMA_ENUM', 12, 15, '/hooks/mappings/1/action'],
  ['TRANSFORM_PATH_ESCAPE', 16, 28, '/hooks/mappings/2/transform/module'],
  ['TEMPLATE_UNKNOWN_ROOT', 20, 31, '/hooks/mappings/3/textTemplate'],
  ['DUPLICATE_MATCH', 22, 22, '/hooks/mappings/4/match/path'],
]

interface JsonDiagnostic { code: string; severity: string; line: number; column: number; path: string; message: string }
interface JsonReport { errors: JsonDiagnostic[]; warnings: JsonDiagnostic[] }

const DIAGNOSTIC_LINE = /^hooks\.yaml:(\d+):(\d+): error ([A-Z_]+): /
const ANNOTATION = /^::error file=hooks\.yaml,line=(\d+),col=(\d+),title=([A-Z_]+)::/

const text = startIn(TREE, ['compile', '--check'])
const json = startIn(TREE, ['compile', '--check', '--format', 'json'])
const github = startIn(TREE, ['compile', '--check', '--format', 'github'])
const text2 = startIn(TREE, ['compile', '--check', '--max-errors', '2'])
const json2 = startIn(TREE, ['compile', '--check', '--format', 'json', '--max-errors', '2'])
const github2 = startIn(TREE, ['compile', '--check', '--format', 'github', '--max-errors', '2'])

function parsed(lines: string, pattern: RegExp): Array<[string, number, number]> {
  return lines.split('\n').flatMap((l) => {
    const m = pattern.exec(l)
    return m ? [[m[3]!, Number(m[1]), Number(m[2])] as [string, number, number]] : []
  })
}

const all = suite('hookgate compile of a config with five faults in different phases')

all('text: exits 1 and prints all five findings with their positions, in the order of the file', async () => {
  const r = await text.result
  assert.is(r.code, 1, describeRun(r))
  assert.equal(parsed(r.stderr, DIAGNOSTIC_LINE), EXPECTED.map(([c, l, col]) => [c, l, col]), describeRun(r))
  assert.match(r.stderr, /^5 errors, 0 warnings$/m)
})

all('json: lists all five errors with code, line, column and JSON pointer', async () => {
  const r = await json.result
  assert.is(r.code, 1, describeRun(r))
  const report = stdoutJson<JsonReport>(r)
  assert.equal(report.errors.map((d) => [d.code, d.line, d.column, d.path]), EXPECTED)
  assert.equal(report.warnings, [])
})

all('github: prints one ::error annotation per finding, all five', async () => {
  const r = await github.result
  assert.is(r.code, 1, describeRun(r))
  assert.equal(parsed(r.stdout, ANNOTATION), EXPECTED.map(([c, l, col]) => [c, l, col]), describeRun(r))
  assert.is(r.stdout.trim().split('\n').length, 5, describeRun(r))
})

all.run()

// ---------------------------------------------------------------------------------------------

const capped = suite('hookgate compile --max-errors 2 on the five faults')

capped('text: prints the first two and a TOO_MANY_ERRORS line for the other three', async () => {
  const r = await text2.result
  assert.is(r.code, 1, describeRun(r))
  assert.equal(parsed(r.stderr, DIAGNOSTIC_LINE), EXPECTED.slice(0, 2).map(([c, l, col]) => [c, l, col]))
  assert.match(r.stderr, /^… and 3 more errors \(TOO_MANY_ERRORS\)/m)
})

capped('json: lists the first two errors and one TOO_MANY_ERRORS entry for the other three', async () => {
  const r = await json2.result
  assert.is(r.code, 1, describeRun(r))
  const report = stdoutJson<JsonReport>(r)
  assert.equal(report.errors.slice(0, 2).map((d) => [d.code, d.line, d.column, d.path]), EXPECTED.slice(0, 2))
  assert.is(report.errors.length, 3, JSON.stringify(report.errors))
  const more = report.errors[2]!
  assert.equal([more.code, more.severity, more.path], ['TOO_MANY_ERRORS', 'error', ''])
  assert.match(more.message, /^3 more errors not shown/)
})

capped('github: prints two annotations and a TOO_MANY_ERRORS annotation for the other three', async () => {
  const r = await github2.result
  assert.is(r.code, 1, describeRun(r))
  const lines = r.stdout.trim().split('\n')
  assert.equal(parsed(lines.slice(0, 2).join('\n'), ANNOTATION), EXPECTED.slice(0, 2).map(([c, l, col]) => [c, l, col]))
  assert.is(lines.length, 3, describeRun(r))
  assert.match(lines[2]!, /^::error file=hooks\.yaml,line=1,col=1,title=TOO_MANY_ERRORS::3 more errors not shown/)
})

capped.run()

// ---------------------------------------------------------------------------------------------

/** The hooks block as one flow mapping with the token unquoted: yaml alone reports a cascade. */
const FLOW_REF = { 'hooks.yaml': 'hooks: { enabled: true, token: ${HOOKGATE_TOKEN}, mappings: [ { id: a, match: { path: a }, action: wake } ] }\n' }
const refJson = startIn(FLOW_REF, ['compile', '--check', '--format', 'json'])
const refGithub = startIn(FLOW_REF, ['compile', '--check', '--format', 'github'])

const flowRef = suite('hookgate compile of an unquoted ${…} in a flow mapping')

flowRef('json: one YAML_UNQUOTED_REFERENCE error at the ${, with the quoted value as the hint, instead of the cascade', async () => {
  const r = await refJson.result
  assert.is(r.code, 1, describeRun(r))
  const report = stdoutJson<JsonReport & { errors: Array<JsonDiagnostic & { hint?: string }> }>(r)
  assert.equal(report.errors.map((d) => [d.code, d.line, d.column, d.path]), [['YAML_UNQUOTED_REFERENCE', 1, 32, '']])
  assert.match(report.errors[0]!.message, /^unquoted \$\{HOOKGATE_TOKEN\} inside a flow mapping \{ … \}: /)
  assert.match(report.errors[0]!.hint ?? '', /^quote the value \("\$\{HOOKGATE_TOKEN\}"\)/)
})

flowRef('github: one ::error annotation at the ${ that carries the hint', async () => {
  const r = await refGithub.result
  assert.is(r.code, 1, describeRun(r))
  assert.equal(parsed(r.stdout, ANNOTATION), [['YAML_UNQUOTED_REFERENCE', 1, 32]], describeRun(r))
  assert.is(r.stdout.trim().split('\n').length, 1, describeRun(r))
  assert.match(r.stdout, /\(hint: quote the value \("\$\{HOOKGATE_TOKEN\}"\)/)
})

flowRef.run()
