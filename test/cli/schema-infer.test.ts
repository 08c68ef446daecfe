// `hookgate schema infer FILE…` through the real executable: the draft schema merged from samples
// (a key missing from one sample is not required, integer and number make number, arrays of
// objects merge their elements, null joins the type union), the drafted schema accepts every sample
// it came from (checked by TypeBox's JSON Schema validator), the output does not move when the
// samples or their keys come in another order, --out and --each, and the refusals: a missing file,
// invalid JSON at file:line:col, nesting deeper than 64, a file over 16 MiB, each in one line.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import Schema from 'typebox/schema'
import { ExitCode } from '../../cli/exit-codes.js'
import { repoRoot } from '../helpers/paths.js'
import { describeRun, hookgate, scratchDir, writeTree, type CliResult } from './cli-helpers.js'

const PUSH_FILE = join(repoRoot, 'examples', 'samples', 'github-push.json')
const push = JSON.parse(readFileSync(PUSH_FILE, 'utf8')) as Record<string, unknown>

/** A second GitHub-like delivery: no `forced`, dates as strings, a description, two commits of which one has a fraction and an extra key. */
const other = {
  ref: 'refs/heads/release',
  before: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
  after: '9b2c5d0e1f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c',
  created: true,
  deleted: false,
  compare: 'https://github.com/octo-org/api/compare/release',
  repository: { id: 186853002, name: 'api', full_name: 'octo-org/api', private: true, description: 'The API', created_at: '2019-05-15T15:19:25Z', pushed_at: '2024-05-02T08:00:00Z' },
  pusher: { name: 'hubot', email: null },
  head_commit: null,
  commits: [
    { id: 'a1', message: 'Release', timestamp: '2024-05-02T08:00:00Z', added: ['CHANGELOG.md'], removed: [], modified: [], author: { name: 'Hubot', email: 'hubot@github.com' }, score: 0.5 },
    { id: 'a2', message: 'Bump', timestamp: '2024-05-02T08:01:00Z', added: [], removed: [], modified: ['package.json'], author: { name: 'Hubot', email: 'hubot@github.com', username: 'hubot' }, score: 1, distinct: true },
  ],
}

const work = scratchDir('schema-infer-')
writeTree(work, {
  'other.json': JSON.stringify(other),
  // the same two samples with every object's keys reversed
  'push-reversed.json': JSON.stringify(reverseKeys(push)),
  'other-reversed.json': JSON.stringify(reverseKeys(other)),
  'both.json': JSON.stringify([push, other]),
  'odd-keys-1.json': '{"constructor": 1, "__proto__": {"a": 1}, "toString": "x"}',
  'odd-keys-2.json': '{"constructor": 2, "__proto__": {"a": 2}}',
  'when-1.json': '{"when": "2024-05-01T12:00:00Z"}',
  'when-2.json': '{"when": "yesterday"}',
  'bad.json': '{\n  "ref": "main",\n  "commits": [1, 2,]\n}\n',
  'truncated.json': '{"ref": "main", "commits": [',
  'deep-64.json': '['.repeat(64) + ']'.repeat(64),
  'deep-65.json': JSON.stringify({ a: JSON.parse('['.repeat(64) + ']'.repeat(64)) }),
  'not-array.json': '{"a": 1}',
})

function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys)
  if (value === null || typeof value !== 'object') return value
  return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reverseKeys(v)]))
}

const infer = (...args: string[]) => hookgate(['schema', 'infer', ...args], { cwd: work })

function schemaOf(run: CliResult): Record<string, any> {
  assert.is(run.code, ExitCode.ok, describeRun(run))
  return JSON.parse(run.stdout) as Record<string, any>
}

/** A refusal: the exit code, one line on stderr that says `hookgate schema infer: …`, no stack, nothing on stdout. */
function refused(run: CliResult, code: number, says: RegExp): void {
  assert.is(run.code, code, describeRun(run))
  assert.is(run.stdout, '', describeRun(run))
  assert.match(run.stderr, /^hookgate schema infer: /, describeRun(run))
  assert.match(run.stderr, says, describeRun(run))
  assert.not.match(run.stderr, /\n\s+at /, `a stack trace: ${run.stderr}`)
}

const merged = infer(PUSH_FILE, 'other.json')

const merging = suite('schema infer: merging samples')

merging('a key missing from one sample is not required; a key every sample has is', async () => {
  const schema = schemaOf(await merged)
  assert.is(schema.$schema, 'https://json-schema.org/draft/2020-12/schema')
  assert.match(schema.description, /from 2 sample payloads/)
  assert.ok(schema.properties.forced, 'a key seen in one sample is a property')
  assert.equal(schema.required, ['after', 'before', 'commits', 'compare', 'created', 'deleted', 'head_commit', 'pusher', 'ref', 'repository'])
  assert.is(schema.additionalProperties, true)
  assert.equal(schema.properties.pusher.required, ['email', 'name'])
})

merging('types unite: integer and number make number, a null joins the union, an integer and a date-time string make both', async () => {
  const { properties } = schemaOf(await merged)
  const commit = properties.commits.items
  assert.is(commit.properties.score.type, 'number')
  assert.is(properties.repository.properties.id.type, 'integer')
  assert.equal(properties.repository.properties.description.type, ['null', 'string'])
  assert.equal(properties.pusher.properties.email.type, ['null', 'string'])
  assert.equal(properties.head_commit.type, ['null', 'object'])
  assert.equal(properties.head_commit.required, ['author', 'id', 'message', 'timestamp'])
  assert.equal(properties.repository.properties.created_at, { type: ['integer', 'string'], format: 'date-time' })
  assert.not.ok('enum' in properties.ref, 'never an enum')
})

merging('an array of objects merges every element of every sample: keys of one element only are not required', async () => {
  const { properties } = schemaOf(await merged)
  const commit = properties.commits.items
  assert.is(properties.commits.type, 'array')
  assert.is(commit.type, 'object')
  assert.equal(commit.required, ['added', 'author', 'id', 'message', 'modified', 'removed', 'timestamp'])
  assert.ok(commit.properties.distinct && commit.properties.score)
  assert.equal(commit.properties.author.required, ['email', 'name'])
  assert.equal(commit.properties.modified, { type: 'array', items: { type: 'string' } })
  assert.equal(commit.properties.timestamp, { type: 'string', format: 'date-time' })
})

merging('the drafted schema accepts every sample it was drafted from, and refuses a value of a type none had', async () => {
  const schema = schemaOf(await merged)
  assert.ok(Schema.Check(schema, push), 'the first sample')
  assert.ok(Schema.Check(schema, other), 'the second sample')
  assert.ok(Schema.Check(schema, { ...other, extra: 'allowed: the samples are not the whole contract' }))
  assert.not.ok(Schema.Check(schema, { ...other, ref: 5 }), 'a number where every sample had a string')
  const { pusher: _gone, ...withoutPusher } = other
  assert.not.ok(Schema.Check(schema, withoutPusher), 'a key every sample had is missing')
})

merging('the output is the same byte for byte whatever the order of the samples and of their keys', async () => {
  const [a, b] = await Promise.all([infer('other-reversed.json', 'push-reversed.json'), merged])
  assert.is(a.code, ExitCode.ok, describeRun(a))
  assert.is(a.stdout, b.stdout)
})

merging('a key named constructor or __proto__ is a property like any other, required when every sample has it', async () => {
  const schema = schemaOf(await infer('odd-keys-1.json', 'odd-keys-2.json'))
  assert.equal(Object.keys(schema.properties), ['__proto__', 'constructor', 'toString'])
  assert.equal(schema.required, ['__proto__', 'constructor'])
  assert.equal(schema.properties.__proto__.required, ['a'])
})

merging('a string is format date-time only when every sample of it is an RFC 3339 date-time', async () => {
  const [mixed, dated] = await Promise.all([infer('when-1.json', 'when-2.json'), infer('when-1.json')])
  assert.equal(schemaOf(mixed).properties.when, { type: 'string' })
  assert.equal(schemaOf(dated).properties.when, { type: 'string', format: 'date-time' })
})

merging('--each reads a file holding an array of samples: the same schema as the same samples given one per file', async () => {
  const each = schemaOf(await infer('--each', 'both.json'))
  const files = schemaOf(await merged)
  assert.equal(each, files)
  const notArray = await infer('--each', 'not-array.json')
  refused(notArray, ExitCode.refused, /not-array\.json: --each needs a JSON array/)
})

merging('--out writes the schema to the file and nothing to stdout; an unwritable --out exits 2', async () => {
  const out = join(work, 'drafted.schema.json')
  const run = await infer(PUSH_FILE, 'other.json', '--out', out)
  assert.is(run.code, ExitCode.ok, describeRun(run))
  assert.is(run.stdout, '')
  assert.is(readFileSync(out, 'utf8'), (await merged).stdout)
  refused(await infer(PUSH_FILE, '--out', join(work, 'no-such-dir', 'x.json')), ExitCode.usage, /cannot write .*no-such-dir.*ENOENT/)
})

merging('`hookgate schema` still prints the config\'s schema, and its help names schema infer', async () => {
  const [config, help] = await Promise.all([hookgate(['schema'], { cwd: work }), hookgate(['schema', '--help'], { cwd: work })])
  assert.is(config.code, ExitCode.ok, describeRun(config))
  assert.ok(JSON.parse(config.stdout).properties.hooks, 'the hooks.yaml schema')
  assert.match(help.stdout, /schema infer FILE\.\.\. \[--out FILE\] \[--each\]/)
})

const refusals = suite('schema infer: refusals in one line, never a stack')

refusals('no file, a missing file: usage errors, exit 2', async () => {
  const [none, missing] = await Promise.all([infer(), infer(PUSH_FILE, 'missing.json')])
  refused(none, ExitCode.usage, /name at least one sample file\nusage: hookgate schema infer/)
  refused(missing, ExitCode.usage, /cannot read missing\.json: ENOENT/)
})

refusals('invalid JSON is named at its file:line:col, exit 1', async () => {
  const [bad, truncated] = await Promise.all([infer('bad.json'), infer(PUSH_FILE, 'truncated.json')])
  refused(bad, ExitCode.refused, /^hookgate schema infer: bad\.json:3:20: not valid JSON: unexpected "\]"\n$/)
  refused(truncated, ExitCode.refused, /^hookgate schema infer: truncated\.json:1:29: not valid JSON: unexpected end of the file\n$/)
})

refusals('nesting deeper than 64 is refused naming the file; 64 levels are drafted', async () => {
  const [deep, limit] = await Promise.all([infer(PUSH_FILE, 'deep-65.json'), infer('deep-64.json')])
  refused(deep, ExitCode.refused, /^hookgate schema infer: deep-65\.json: arrays and objects nested deeper than 64 levels\n$/)
  assert.is(schemaOf(limit).type, 'array')
})

refusals('a file over 16 MiB is refused before it is read', async () => {
  const big = join(work, 'big.json')
  writeFileSync(big, `[${'0,'.repeat(8 * 1024 * 1024)}0]`)
  refused(await infer(big), ExitCode.refused, /big\.json: 16777219 bytes is over the 16 MiB a sample may have/)
})

merging.run()
refusals.run()
