// GET /metrics through real HTTP: the Prometheus text format (0.0.4) read back by a real
// exposition-format parser, behind the hook token and its lock-out, with counters that move as
// requests, runs, reloads, transforms and journal flushes happen, and no label ever holding a
// request's path.
import { randomBytes } from 'node:crypto'
import { createRequire } from 'node:module'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { Journal } from '../../../runtime/store/file/journal.js'
import { fileStoreOnly } from '../../helpers/stores.js'
import { BUNDLE_FILE } from '../../../runtime/bundle/format.js'
import { assertError, assertOk, post, recompile, runReaches, send, serve, setTestToken, type Harness } from './harness.js'

const TOKEN = setTestToken()
const WRONG_TOKEN = 'wrong-token-3c9e1f0a'
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

/** parse-prometheus-text-format: its UMD build carries its one dependency inside, so it loads alone. */
const parsePrometheus = createRequire(import.meta.url)('parse-prometheus-text-format/dist/parse-prometheus-text-format.umd.js') as (text: string) => ParsedFamily[]

interface ParsedSample { value?: string; labels?: Record<string, string>; buckets?: Record<string, string>; count?: string; sum?: string }
interface ParsedFamily { name: string; help: string; type: string; metrics: ParsedSample[] }

/** One scrape, parsed, with lookups by family name and exact label set. */
class Scrape {
  readonly families: Map<string, ParsedFamily>
  constructor(readonly text: string) {
    this.families = new Map(parsePrometheus(text).map((f) => [f.name, f]))
  }

  family(name: string): ParsedFamily {
    const f = this.families.get(name)
    assert.ok(f, `no family ${name} in the scrape:\n${this.text}`)
    return f!
  }

  /** The sample with exactly these labels; 0 when the label set has not been seen yet. */
  value(name: string, labels: Record<string, string> = {}): number {
    const want = JSON.stringify(Object.entries(labels).sort())
    const sample = this.family(name).metrics.find((m) => JSON.stringify(Object.entries(m.labels ?? {}).sort()) === want)
    return sample ? Number(sample.value) : 0
  }

  histogram(name: string): { buckets: Array<[number, number]>; count: number; sum: number } {
    const f = this.family(name)
    assert.is(f.type, 'HISTOGRAM')
    const m = f.metrics[0]!
    const buckets = Object.entries(m.buckets ?? {}).map(([le, v]) => [le === '+Inf' ? Infinity : Number(le), Number(v)] as [number, number]).sort((a, b) => a[0] - b[0])
    return { buckets, count: Number(m.count), sum: Number(m.sum) }
  }
}

async function scrape(h: Harness): Promise<Scrape> {
  const reply = await send(h.origin, '/metrics', { method: 'GET', token: TOKEN })
  assert.is(reply.status, 200, reply.text)
  assert.is(reply.headers['content-type'], CONTENT_TYPE)
  return new Scrape(reply.text)
}

const CONFIG = `
server:
  bodyTimeoutSeconds: 0.5
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: deploys
      match: { path: deploys }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "deploy {{payload.service}}"
    - id: ci-github
      match: { path: ci, source: github }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "github"
    - id: ci-gitlab
      match: { path: ci, source: gitlab }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "gitlab"
    - id: hang
      match: { path: hang }
      action: agent
      messageTemplate: "x"
      transform: { module: hang.mjs, timeoutMs: 50 }
    - id: boom
      match: { path: boom }
      action: agent
      messageTemplate: "x"
      transform: { module: boom.mjs }
`

const TRANSFORMS = {
  'transforms/hang.mjs': 'export default () => new Promise(() => {})\n',
  'transforms/boom.mjs': 'export default () => { throw new Error("boom") }\n',
}

const WAKE = { text: 'metrics', mode: 'next-heartbeat' }

// ---------------------------------------------------------------------------------------------

const endpoint = suite<{ h: Harness }>('GET /metrics')

endpoint.before(async (ctx) => { ctx.h = await serve(CONFIG, TRANSFORMS) })
endpoint.after(async (ctx) => { await ctx.h.close() })

endpoint('with the hook token it answers the Prometheus text format 0.0.4, which a real parser reads whole', async ({ h }) => {
  const s = await scrape(h)
  assert.ok(s.text.endsWith('\n'))
  for (const name of ['hookgate_http_requests_total', 'hookgate_http_request_duration_seconds', 'hookgate_auth_failures_total', 'hookgate_auth_lockouts_total',
    'hookgate_runs_total', 'hookgate_bundle_reloads_total', 'hookgate_transform_failures_total', 'hookgate_journal_flushes_total',
    'hookgate_journal_write_seconds', 'hookgate_journal_fsync_seconds', 'hookgate_backlog_runs', 'hookgate_backlog_limit_runs', 'hookgate_queued_events',
    'hookgate_bundle_info', 'process_resident_memory_bytes', 'process_start_time_seconds', 'process_cpu_seconds_total']) {
    const f = s.family(name)
    assert.ok(f.help.length > 0, `${name} has no HELP`)
    assert.ok(['COUNTER', 'GAUGE', 'HISTOGRAM'].includes(f.type), `${name} has TYPE ${f.type}`)
    if (f.type === 'COUNTER') assert.ok(name.endsWith('_total'), `counter ${name} does not end in _total`)
  }
  // every line is a comment or a sample the parser placed in a family
  const samples = s.text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length
  // a histogram is one parsed entry holding its buckets, its _sum and its _count
  const parsed = [...s.families.values()].reduce((n, f) => n + (f.type === 'HISTOGRAM' ? s.histogram(f.name).buckets.length + 2 : f.metrics.length), 0)
  assert.is(parsed, samples, 'the parser placed every sample line')
})

endpoint('the bundle info gauge carries the served inputs hash, and the process gauges are plausible', async ({ h }) => {
  const s = await scrape(h)
  const manifest = h.service.current().bundle.manifest
  assert.is(s.value('hookgate_bundle_info', { inputs_hash: manifest.inputsHash, compiler_version: manifest.compilerVersion }), 1)
  assert.ok(s.value('process_resident_memory_bytes') > 1024 * 1024)
  const start = s.value('process_start_time_seconds')
  assert.ok(start <= Date.now() / 1000 && start > Date.now() / 1000 - 3600, `start time ${start}`)
  assert.is(s.value('hookgate_backlog_limit_runs'), h.service.current().bundle.config.server.maxPendingRuns ?? 10_000)
  assert.is(s.value('hookgate_backlog_runs'), h.service.engine.backlog)
})

endpoint('a missing token is 401 and a wrong one is 401, each counted as an auth failure', async ({ h }) => {
  const before = await scrape(h)
  assertError(await send(h.origin, '/metrics', { method: 'GET' }), 401, 'unauthorized')
  assertError(await send(h.origin, '/metrics', { method: 'GET', token: WRONG_TOKEN }), 401, 'unauthorized')
  const after = await scrape(h)
  assert.is(after.value('hookgate_auth_failures_total', { status: '401' }) - before.value('hookgate_auth_failures_total', { status: '401' }), 2)
  assert.is(after.value('hookgate_http_requests_total', { route: 'metrics', status: '401' }) - before.value('hookgate_http_requests_total', { route: 'metrics', status: '401' }), 2)
})

endpoint('HEAD and POST are 405 with Allow: GET, and a token in the query string is 400', async ({ h }) => {
  for (const method of ['HEAD', 'POST']) {
    const reply = await send(h.origin, '/metrics', { method, token: TOKEN })
    assert.is(reply.status, 405)
    assert.is(reply.headers.allow, 'GET')
  }
  assertError(await send(h.origin, `/metrics?token=${TOKEN}`, { method: 'GET' }), 400, 'token_in_query')
})

endpoint.run()

// ---------------------------------------------------------------------------------------------

const requests = suite<{ h: Harness }>('hookgate_http_requests_total and its latency histogram')

requests.before(async (ctx) => { ctx.h = await serve(CONFIG, TRANSFORMS) })
requests.after(async (ctx) => { await ctx.h.close() })

requests('two wakes move the wake/200 counter by two', async ({ h }) => {
  const before = await scrape(h)
  for (let i = 0; i < 2; i++) assertOk(await post(h.origin, '/hooks/wake', TOKEN, WAKE), 200, ['ok', 'action', 'runId', 'mode'])
  const after = await scrape(h)
  assert.is(after.value('hookgate_http_requests_total', { route: 'wake', status: '200' }) - before.value('hookgate_http_requests_total', { route: 'wake', status: '200' }), 2)
})

requests('a bad token moves the 401 counter and the auth failure counter by one', async ({ h }) => {
  const before = await scrape(h)
  assertError(await post(h.origin, '/hooks/wake', WRONG_TOKEN, WAKE), 401, 'unauthorized')
  const after = await scrape(h)
  assert.is(after.value('hookgate_http_requests_total', { route: 'unmatched', status: '401' }) - before.value('hookgate_http_requests_total', { route: 'unmatched', status: '401' }), 1)
  assert.is(after.value('hookgate_auth_failures_total', { status: '401' }) - before.value('hookgate_auth_failures_total', { status: '401' }), 1)
  assert.is(after.value('hookgate_auth_failures_total', { status: '429' }), before.value('hookgate_auth_failures_total', { status: '429' }))
})

requests('a mapped request is counted under its mapping id, also when several mappings share its path', async ({ h }) => {
  const before = await scrape(h)
  assertOk(await post(h.origin, '/hooks/deploys', TOKEN, { service: 'api' }), 200, ['ok', 'action', 'runId', 'mode'])
  assertOk(await post(h.origin, '/hooks/ci', TOKEN, { source: 'gitlab' }), 200, ['ok', 'action', 'runId', 'mode'])
  assertError(await post(h.origin, '/hooks/ci', TOKEN, { source: 'jenkins' }), 404, 'no_mapping')
  const after = await scrape(h)
  const delta = (labels: Record<string, string>) => after.value('hookgate_http_requests_total', labels) - before.value('hookgate_http_requests_total', labels)
  assert.is(delta({ route: 'deploys', status: '200' }), 1)
  assert.is(delta({ route: 'ci-gitlab', status: '200' }), 1)
  assert.is(delta({ route: 'ci-github', status: '200' }), 0)
  assert.is(delta({ route: 'unmatched', status: '404' }), 1)
})

requests('the histogram\'s buckets are cumulative and its count equals the requests answered', async ({ h }) => {
  const before = await scrape(h)
  await post(h.origin, '/hooks/wake', TOKEN, WAKE)
  await post(h.origin, '/hooks/nothing-here', TOKEN, {})
  await send(h.origin, '/healthz', { method: 'GET' })
  const after = await scrape(h)
  const hist = after.histogram('hookgate_http_request_duration_seconds')
  assert.is(hist.buckets[hist.buckets.length - 1]![0], Infinity)
  for (let i = 1; i < hist.buckets.length; i++) assert.ok(hist.buckets[i]![1] >= hist.buckets[i - 1]![1], `bucket le=${hist.buckets[i]![0]} is below the one before it`)
  assert.is(hist.buckets[hist.buckets.length - 1]![1], hist.count)
  // the three requests and the first scrape (a scrape is counted once it is answered)
  assert.is(hist.count - before.histogram('hookgate_http_request_duration_seconds').count, 4)
  const answered = after.family('hookgate_http_requests_total').metrics.reduce((n, m) => n + Number(m.value), 0)
  assert.is(hist.count, answered)
  assert.ok(hist.sum > 0)
})

requests('a request path never becomes a label value: 404s and 401s under random names stay "unmatched"', async ({ h }) => {
  const names = Array.from({ length: 4 }, () => `p${randomBytes(8).toString('hex')}`)
  for (const n of names) {
    assertError(await post(h.origin, `/hooks/${n}`, TOKEN, {}), 404, 'no_mapping')
    assertError(await post(h.origin, `/hooks/${n}`, WRONG_TOKEN, {}), 401, 'unauthorized')
    assertError(await post(h.origin, `/${n}`, TOKEN, {}), 404, 'not_found')
    assertError(await send(h.origin, `/hooks/${n}`, { method: 'GET' }), 405, 'method_not_allowed')
  }
  const s = await scrape(h)
  for (const n of names) assert.not.ok(s.text.includes(n), `the scrape holds the request path ${n}`)
  const known = new Set(['wake', 'agent', 'healthz', 'metrics', 'unmatched', ...h.service.current().bundle.manifest.routes.map((r) => r.id)])
  for (const m of s.family('hookgate_http_requests_total').metrics) assert.ok(known.has(m.labels!.route!), `route label "${m.labels!.route}"`)
})

requests.run()

// ---------------------------------------------------------------------------------------------

const lockout = suite<{ h: Harness }>('hookgate_auth_failures_total and the lock-out')

lockout.before(async (ctx) => {
  ctx.h = await serve(CONFIG.replace('limit: 1000, windowSeconds: 60, lockoutSeconds: 1', 'limit: 2, windowSeconds: 60, lockoutSeconds: 60'), TRANSFORMS)
})
lockout.after(async (ctx) => { await ctx.h.close() })

lockout('failed scrapes count toward the lock-out like hooks do: 401, 401, then 429, counted apart', async ({ h }) => {
  const before = await scrape(h)
  assertError(await send(h.origin, '/metrics', { method: 'GET', token: WRONG_TOKEN }), 401, 'unauthorized')
  assertError(await post(h.origin, '/hooks/wake', WRONG_TOKEN, WAKE), 401, 'unauthorized')
  const locked = await send(h.origin, '/metrics', { method: 'GET' })
  assertError(locked, 429, 'too_many_auth_failures')
  assert.ok(Number(locked.headers['retry-after']) > 0)
  assertError(await post(h.origin, '/hooks/wake', WRONG_TOKEN, WAKE), 429, 'too_many_auth_failures')
  // the right token still passes while the address is locked out
  const after = await scrape(h)
  const delta = (name: string, labels: Record<string, string> = {}) => after.value(name, labels) - before.value(name, labels)
  assert.is(delta('hookgate_auth_failures_total', { status: '401' }), 2)
  assert.is(delta('hookgate_auth_failures_total', { status: '429' }), 2)
  assert.is(delta('hookgate_auth_lockouts_total'), 1)
})

lockout.run()

// ---------------------------------------------------------------------------------------------

const effects = suite<{ h: Harness }>('runs, reloads, transforms and journal flushes')

effects.before(async (ctx) => { ctx.h = await serve(CONFIG, TRANSFORMS) })
effects.after(async (ctx) => { await ctx.h.close() })

effects('a finished agent run counts once as queued, running and succeeded', async ({ h }) => {
  const before = await scrape(h)
  const reply = assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'count me', deliver: false }), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  await runReaches(h.stateDir, reply.runId, 'succeeded')
  const after = await scrape(h)
  for (const status of ['queued', 'running', 'succeeded']) {
    assert.is(after.value('hookgate_runs_total', { action: 'agent', status }) - before.value('hookgate_runs_total', { action: 'agent', status }), 1, status)
  }
  assert.is(after.value('hookgate_runs_total', { action: 'agent', status: 'failed' }), before.value('hookgate_runs_total', { action: 'agent', status: 'failed' }))
  // every action and status is there from the start, at 0 if nothing happened
  assert.is(after.family('hookgate_runs_total').metrics.length, 18)
})

effects('a next-heartbeat wake waits as a queued event of its agent', async ({ h }) => {
  const agent = h.service.current().bundle.config.defaultAgentId
  const before = await scrape(h)
  assertOk(await post(h.origin, '/hooks/wake', TOKEN, WAKE), 200, ['ok', 'action', 'runId', 'mode'])
  const after = await scrape(h)
  assert.is(after.value('hookgate_queued_events', { agent }) - before.value('hookgate_queued_events', { agent }), 1)
  assert.is(after.value('hookgate_runs_total', { action: 'wake', status: 'queued' }) - before.value('hookgate_runs_total', { action: 'wake', status: 'queued' }), 1)
})

effects('a transform timeout and a transform that throws are counted for their mapping', async ({ h }) => {
  const before = await scrape(h)
  assertError(await post(h.origin, '/hooks/hang', TOKEN, {}), 500, 'transform_timeout')
  assertError(await post(h.origin, '/hooks/boom', TOKEN, {}), 500, 'transform_failed')
  const after = await scrape(h)
  const delta = (labels: Record<string, string>) => after.value('hookgate_transform_failures_total', labels) - before.value('hookgate_transform_failures_total', labels)
  assert.is(delta({ mapping: 'hang', reason: 'timeout' }), 1)
  assert.is(delta({ mapping: 'boom', reason: 'error' }), 1)
  assert.is(after.value('hookgate_http_requests_total', { route: 'hang', status: '500' }) - before.value('hookgate_http_requests_total', { route: 'hang', status: '500' }), 1)
})

effects('each reload is counted under its outcome: unchanged, refused, reloaded', async ({ h }) => {
  const before = await scrape(h)
  const delta = (s: Scrape, outcome: string) => s.value('hookgate_bundle_reloads_total', { outcome }) - before.value('hookgate_bundle_reloads_total', { outcome })
  assert.is(await h.service.reload(), false)
  writeFileSync(join(h.outDir, BUNDLE_FILE), 'export const manifest = ;\n')
  assert.is(await h.service.reload(), false)
  await recompile(h, CONFIG.replace('deploy {{payload.service}}', 'deployed {{payload.service}}'))
  assert.is(await h.service.reload(), true)
  const after = await scrape(h)
  assert.is(delta(after, 'unchanged'), 1)
  assert.is(delta(after, 'refused'), 1)
  assert.is(delta(after, 'reloaded'), 1)
  assert.is(after.value('hookgate_bundle_info', { inputs_hash: h.service.current().bundle.manifest.inputsHash, compiler_version: h.service.current().bundle.manifest.compilerVersion }), 1)
})

effects.run()

// ---------------------------------------------------------------------------------------------

// A server of its own that does nothing else: no real flush lands between its two scrapes.
const journal = suite<{ h: Harness }>('hookgate_journal_* from the journal\'s flush hook')

journal.before(async (ctx) => { ctx.h = await serve(CONFIG, TRANSFORMS) })
journal.after(async (ctx) => { await ctx.h.close() })

fileStoreOnly(journal)('a journal flush report is counted by journal kind, write and fsync times observed, its path never shown', async ({ h }) => {
  const onFlush = (Journal as unknown as { onFlush?: (e: object) => void }).onFlush
  assert.type(onFlush, 'function', 'serve installs the journal flush hook')
  const secretAgent = `agent-${randomBytes(6).toString('hex')}`
  const before = await scrape(h)
  onFlush!({ path: join(h.stateDir, 'sessions', secretAgent, 'main.jsonl'), writeSeconds: 0.0003, fsyncSeconds: 0.004, bytes: 1200, records: 3, ok: true })
  onFlush!({ path: join(h.stateDir, 'sessions', secretAgent, 'main.jsonl'), writeSeconds: 0.0002, fsyncSeconds: 0, bytes: 900, records: 2, ok: false, error: 'ENOSPC: no space left on device' })
  const after = await scrape(h)
  const delta = (name: string, labels: Record<string, string> = {}) => after.value(name, labels) - before.value(name, labels)
  assert.is(delta('hookgate_journal_flushes_total', { journal: 'session', result: 'ok' }), 1)
  assert.is(delta('hookgate_journal_flushes_total', { journal: 'session', result: 'failed' }), 1)
  assert.is(delta('hookgate_journal_written_bytes_total', { journal: 'session' }), 1200)
  assert.is(delta('hookgate_journal_records_total', { journal: 'session' }), 3)
  const writes = after.histogram('hookgate_journal_write_seconds').count - before.histogram('hookgate_journal_write_seconds').count
  const fsyncs = after.histogram('hookgate_journal_fsync_seconds')
  assert.is(writes, 2)
  // the failed write never reached fdatasync
  assert.is(fsyncs.count - before.histogram('hookgate_journal_fsync_seconds').count, 1)
  assert.not.ok(after.text.includes(secretAgent), 'a journal path reached a label')
  assert.not.ok(after.text.includes('ENOSPC'), 'an error message reached a label')
})

fileStoreOnly(journal)('a real wake moves the runs journal\'s flush counter and the fsync histogram', async ({ h }) => {
  const before = await scrape(h)
  assert.is((await post(h.origin, '/hooks/wake', TOKEN, WAKE)).status, 200)
  const after = await scrape(h)
  assert.ok(after.value('hookgate_journal_flushes_total', { journal: 'runs', result: 'ok' }) > before.value('hookgate_journal_flushes_total', { journal: 'runs', result: 'ok' }))
  assert.ok(after.value('hookgate_journal_records_total', { journal: 'runs' }) > before.value('hookgate_journal_records_total', { journal: 'runs' }))
  assert.ok(after.histogram('hookgate_journal_fsync_seconds').count > before.histogram('hookgate_journal_fsync_seconds').count)
})

journal.run()
