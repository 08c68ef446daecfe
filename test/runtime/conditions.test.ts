// match.when predicates as the compiler emits them: each operator, nesting, header and query
// lookups, prototype-pollution paths, and the explanation `hookgate try` prints.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { loadBundle } from '../../runtime/bundle/load.js'
import { conditionHelpers, explainCondition, type CompiledWhen } from '../../runtime/bundle/conditions.js'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { BUNDLE_FILE, type BundleExports, type RenderContext } from '../../runtime/bundle/format.js'
import { loadPatternCompiler } from '../../runtime/bundle/regex.js'
import { compileProject } from './http/harness.js'

/** Each mapping sits on its own path, named after it; its `when` is the YAML given. */
const WHENS: Record<string, string> = {
  equals: '{ payload.action: opened }',
  'equals-object': '{ payload.labels: { equals: [bug, { name: urgent }] } }',
  'equals-number': '{ payload.number: { equals: 7 } }',
  in: '{ payload.action: { in: [opened, reopened] } }',
  exists: '{ payload.pull_request.draft: { exists: true } }',
  'not-exists': '{ payload.pull_request.merged_at: { exists: false } }',
  matches: '{ payload.ref: { matches: "^refs/tags/v\\\\d+" } }',
  'matches-i': '{ payload.title: { matches: "^wip\\\\b", flags: i } }',
  header: '{ headers.X-GitHub-Event: pull_request }',
  query: '{ query.n: 1 }',
  all: '{ all: [ { payload.a: 1 }, { payload.b: 2 } ] }',
  any: '{ any: [ { payload.a: 1 }, { payload.b: 2 } ] }',
  not: '{ not: { payload.draft: true } }',
  nested: '{ any: [ { all: [ { payload.a: 1 }, { not: { payload.b: 2 } } ] }, { payload.c: { in: [x, y] } } ] }',
  implicit: '{ payload.a: 1, payload.b: 2 }',
  polluted: '{ payload.polluted: { exists: true } }',
  inherited: '{ payload.toString: { exists: true } }',
  'inherited-deep': '{ payload.a.hasOwnProperty: { exists: true } }',
  'header-proto': '{ headers.tostring: { exists: true } }',
  secret: '{ headers.x-hub-signature-256: { equals: abc } }',
  're2-classes': '{ payload.name: { matches: "^[[:alpha:]]\\\\pL*\\\\z" } }',
  're2-dot': '{ payload.text: { matches: "^a.b$" } }',
  're2-space': '{ payload.text: { matches: "a\\\\sb" } }',
  're2-multiline': '{ payload.text: { matches: "^b$", flags: m } }',
}

const yaml = `hooks:\n  enabled: false\n  mappings:\n${Object.entries(WHENS).map(([id, when]) => `    - id: ${id}\n      match:\n        path: ${id}\n        when: ${when}\n      action: wake\n`).join('')}`
const project = await compileProject(yaml)
const bundle = await loadBundle(project.outDir)

function when(id: string): CompiledWhen {
  return bundle.routeTable.get(id)![0]!.when!
}

function ctx(payload: unknown, headers: Record<string, string> = {}, query: Record<string, string> = {}): RenderContext {
  return { payload, headers: Object.assign(Object.create(null), headers), query: Object.assign(Object.create(null), query), path: 'x', now: '' }
}

function holds(id: string, c: RenderContext): boolean {
  return when(id).test(c, conditionHelpers)
}

const operators = suite('a compiled match.when: each operator')

operators('equals holds for the same scalar only, and a number is not its text', () => {
  assert.ok(holds('equals', ctx({ action: 'opened' })))
  assert.not.ok(holds('equals', ctx({ action: 'closed' })))
  assert.not.ok(holds('equals', ctx({})))
  assert.ok(holds('equals-number', ctx({ number: 7 })))
  assert.not.ok(holds('equals-number', ctx({ number: '7' })))
})

operators('equals compares lists and objects by their JSON content', () => {
  assert.ok(holds('equals-object', ctx({ labels: ['bug', { name: 'urgent' }] })))
  assert.not.ok(holds('equals-object', ctx({ labels: ['bug', { name: 'urgent', extra: 1 }] })))
  assert.not.ok(holds('equals-object', ctx({ labels: ['bug'] })))
})

operators('in holds when the value is one of the list', () => {
  assert.ok(holds('in', ctx({ action: 'reopened' })))
  assert.not.ok(holds('in', ctx({ action: 'closed' })))
})

operators('exists tells a present key (null included) from a missing one', () => {
  assert.ok(holds('exists', ctx({ pull_request: { draft: null } })))
  assert.not.ok(holds('exists', ctx({ pull_request: {} })))
  assert.ok(holds('not-exists', ctx({ pull_request: {} })))
  assert.not.ok(holds('not-exists', ctx({ pull_request: { merged_at: '2024-01-01' } })))
})

operators('matches tests strings with the regular expression and its flags, and never objects', () => {
  assert.ok(holds('matches', ctx({ ref: 'refs/tags/v12' })))
  assert.not.ok(holds('matches', ctx({ ref: 'refs/heads/main' })))
  assert.not.ok(holds('matches', ctx({ ref: { toString: 'refs/tags/v1' } })))
  assert.ok(holds('matches-i', ctx({ title: 'WIP: not yet' })))
  assert.not.ok(holds('matches-i', ctx({ title: 'wipe the floor' })))
})

operators('matches is RE2, not JavaScript: its syntax, and the differences docs/mappings.md lists', () => {
  assert.ok(holds('re2-classes', ctx({ name: 'Zoë' })), 'POSIX classes, \\pL and \\z are RE2 syntax')
  assert.not.ok(holds('re2-classes', ctx({ name: 'Zoë\n' })))
  assert.ok(holds('re2-dot', ctx({ text: 'a\rb' })), '. matches everything but \\n (in JavaScript, not \\r either)')
  assert.not.ok(holds('re2-dot', ctx({ text: 'a\nb' })))
  assert.not.ok(holds('re2-space', ctx({ text: 'a\u00a0b' })), '\\s is ASCII white space ([\\t\\n\\f\\r ])')
  assert.ok(holds('re2-space', ctx({ text: 'a\tb' })))
  assert.ok(holds('re2-multiline', ctx({ text: 'a\nb\nc' })))
  assert.not.ok(holds('re2-multiline', ctx({ text: 'a\rb\rc' })), 'with m, only \\n ends a line')
})

operators('headers are read by lower-case name and query values are text', () => {
  assert.ok(holds('header', ctx({}, { 'x-github-event': 'pull_request' })))
  assert.ok(holds('header', ctx({}, { 'X-GitHub-Event': 'pull_request' })), 'a context built by hand may keep the sender\'s casing')
  assert.not.ok(holds('header', ctx({}, { 'x-github-event': 'push' })))
  assert.ok(holds('query', ctx({}, {}, { n: '1' })), 'query: 1 in YAML compares as the text "1"')
  assert.not.ok(holds('query', ctx({}, {}, { n: '2' })))
})

const nesting = suite('a compiled match.when: all, any, not and their nesting')

nesting('all needs every condition, any one of them, not the opposite', () => {
  assert.ok(holds('all', ctx({ a: 1, b: 2 })))
  assert.not.ok(holds('all', ctx({ a: 1, b: 3 })))
  assert.ok(holds('any', ctx({ a: 0, b: 2 })))
  assert.not.ok(holds('any', ctx({ a: 0, b: 0 })))
  assert.ok(holds('not', ctx({ draft: false })))
  assert.not.ok(holds('not', ctx({ draft: true })))
})

nesting('several entries in one mapping must all hold', () => {
  assert.ok(holds('implicit', ctx({ a: 1, b: 2 })))
  assert.not.ok(holds('implicit', ctx({ a: 1 })))
})

nesting('any of (all of a and not b) or c in a list', () => {
  assert.ok(holds('nested', ctx({ a: 1, b: 3 })))
  assert.not.ok(holds('nested', ctx({ a: 1, b: 2 })))
  assert.ok(holds('nested', ctx({ a: 1, b: 2, c: 'y' })))
  assert.not.ok(holds('nested', ctx({ c: 'z' })))
})

const pollution = suite('a compiled match.when: prototype pollution via condition path')

pollution('a payload key "__proto__" never makes an inherited key exist', () => {
  const payload = JSON.parse('{"__proto__": {"polluted": true}}')
  assert.not.ok(holds('polluted', ctx(payload)))
  assert.not.ok(({} as Record<string, unknown>).polluted, 'Object.prototype is untouched')
})

pollution('inherited members (toString, hasOwnProperty) never resolve, in the payload or the headers', () => {
  assert.not.ok(holds('inherited', ctx({})))
  assert.not.ok(holds('inherited-deep', ctx({ a: {} })))
  assert.not.ok(holds('header-proto', ctx({}, {})))
  assert.not.ok(holds('header-proto', ctx({}, Object.assign({}, { other: 'x' }))))
})

const once = suite('a bundle\'s patterns')

once('are compiled once, when the bundle loads, and never per request', async () => {
  // the bundle's own bundle(), handed a pattern compiler that counts (loadBundle hands it re2js's)
  const exported = await import(`${pathToFileURL(join(project.outDir, BUNDLE_FILE)).href}?count`) as BundleExports
  assert.is(exported.needsPatterns, true)
  const real = await loadPatternCompiler()
  let compiled = 0
  const mod = exported.bundle({ compilePattern: (source, flags) => { compiled++; return real(source, flags) } })
  const patterns = Object.values(WHENS).filter((w) => w.includes('matches')).length
  assert.is(compiled, patterns)
  const route = mod.routes.find((r) => r.id === 'matches')!
  for (let i = 0; i < 100; i++) route.when!.test(ctx({ ref: `refs/tags/v${i}` }), conditionHelpers)
  assert.is(compiled, patterns)
})

const explain = suite('explainCondition')

explain('names the first comparison of an all that failed, with the value it saw', () => {
  const e = explainCondition(when('all'), ctx({ a: 1, b: 3 }))
  assert.is(e.holds, false)
  assert.equal(e.failed, [{ at: '/hooks/mappings/10/match/when/all/1/payload.b', path: 'payload.b', op: 'equals', expected: 2, actual: 3, held: false }])
})

explain('names every comparison of an any, and a missing value has no actual', () => {
  const e = explainCondition(when('any'), ctx({ a: 0 }))
  assert.equal(e.failed.map((f) => [f.path, f.actual, f.held]), [['payload.a', 0, false], ['payload.b', undefined, false]])
  assert.not.ok('actual' in e.failed[1]!)
})

explain('under not, the comparison that held is the one that failed', () => {
  const e = explainCondition(when('nested'), ctx({ a: 1, b: 2, c: 'z' }))
  assert.equal(e.failed.map((f) => [f.path, f.held]), [['payload.b', true], ['payload.c', false]])
})

explain('a secret header\'s value is shown redacted', () => {
  const e = explainCondition(when('secret'), ctx({}, { 'x-hub-signature-256': 'sha256=deadbeef' }))
  assert.is(e.failed[0]!.actual, '[redacted]')
})

explain('a condition that holds names nothing', () => {
  assert.equal(explainCondition(when('equals'), ctx({ action: 'opened' })), { holds: true, failed: [] })
})

operators.run()
nesting.run()
pollution.run()
once.run()
explain.run()
