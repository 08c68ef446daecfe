// Transforms through the real server, as a hostile or careless transform would behave: what it can
// read (process.env, secret headers), what it can cost (memory, a huge answer, a process stuck in
// a synchronous wait), and where its code runs (never in the server's process). What a transform
// can reach of the server itself is transform-sandbox.test.ts.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertError, assertOk, post, rowOf, serve, setTestToken, type Harness } from './harness.js'

const TOKEN = setTestToken()
const AGENT_KEYS = ['ok', 'action', 'runId', 'correlationId', 'sessionKey']

// Set before the server starts: the transform processes get the listed names when they start.
process.env.SHOP_DOMAIN = 'shop.example'
process.env.PROVIDER_API_KEY = 'sk-never-for-transforms'
// where the tally transform reports each call it runs (the pipeline test counts them): a transform
// may not write files, but it may call out
const ran: number[] = []
const tallyServer = createServer((req, res) => {
  let body = ''
  req.setEncoding('utf8').on('data', (d: string) => { body += d }).on('end', () => {
    ran.push(Number(body))
    res.end()
  })
})
await new Promise<void>((resolve) => tallyServer.listen(0, '127.0.0.1', resolve))
process.env.TALLY_URL = `http://127.0.0.1:${(tallyServer.address() as AddressInfo).port}/`

const CONFIG = `
server:
  transformMemoryMiB: 32
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: env-listed
      match: { path: env-listed }
      action: agent
      messageTemplate: env
      transform: { module: probe.mjs, export: env, env: [SHOP_DOMAIN] }
    - id: env-none
      match: { path: env-none }
      action: agent
      messageTemplate: env
      transform: { module: probe.mjs, export: env }
    - id: headers
      match: { path: headers }
      action: agent
      messageTemplate: headers
      transform: { module: probe.mjs, export: headers }
    - id: hungry
      match: { path: hungry }
      action: agent
      messageTemplate: hungry
      transform: { module: probe.mjs, export: hungry, timeoutMs: 20000 }
    - id: huge
      match: { path: huge }
      action: agent
      messageTemplate: huge
      transform: { module: probe.mjs, export: huge }
    - id: blocked
      match: { path: blocked }
      action: agent
      messageTemplate: blocked
      transform: { module: probe.mjs, export: blocked, timeoutMs: 100 }
    - id: slow
      match: { path: slow }
      action: agent
      messageTemplate: slow
      transform: { module: probe.mjs, export: slow, timeoutMs: 5000 }
    - id: tally
      match: { path: tally }
      action: agent
      messageTemplate: tally
      transform: { module: tally.mjs, env: [TALLY_URL], timeoutMs: 1000 }
`

// Each call reports its number before it answers; "spin" never answers (a synchronous loop).
const TALLY = `
import { request } from 'node:http'
export default async function tally({ payload }) {
  await new Promise((resolve, reject) => {
    const req = request(process.env.TALLY_URL, { method: 'POST', agent: false }, (res) => res.resume().on('end', resolve))
    req.on('error', reject)
    req.end(String(payload.n))
  })
  if (payload.spin) for (;;) {}
  return { name: 'call ' + payload.n }
}
`

const PROBE = `
// top-level code: where it runs is what the main-thread test looks at
globalThis.hookgateTransformLoadedHere = true

export function env() {
  return { name: JSON.stringify(Object.entries(process.env)) }
}
export function headers({ headers }) {
  return { name: JSON.stringify(headers) }
}
export function hungry() {
  const hoard = []
  for (;;) hoard.push(new Array(1e5).fill(hoard.length))
}
export function huge() {
  return { message: 'x'.repeat(2 * 1024 * 1024) }
}
export function blocked() {
  // a synchronous wait: nothing in its process answers until it is over (or the process is killed)
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1200)
  return {}
}
export async function slow() {
  await new Promise((r) => setTimeout(r, 2000))
  return { name: 'slow done' }
}
`

async function nameOf(h: Harness, path: string, headers: Record<string, string> = {}): Promise<string | null | undefined> {
  const body = assertOk(await post(h.origin, path, TOKEN, {}, headers), 202, AGENT_KEYS)
  return (await rowOf(h.stateDir, body.runId))?.name
}

const isolation = suite<{ h: Harness }>('transforms are isolated from the server')

isolation.before(async (ctx) => { ctx.h = await serve(CONFIG, { 'transforms/probe.mjs': PROBE, 'transforms/tally.mjs': TALLY }) })
isolation.after(async (ctx) => {
  await ctx.h.close()
  tallyServer.close()
})

isolation('a transform reading process.env sees only the names its mapping lists, not the hook token or provider keys', async ({ h }) => {
  assert.equal(JSON.parse((await nameOf(h, '/hooks/env-listed'))!), [['SHOP_DOMAIN', 'shop.example']])
  assert.equal(JSON.parse((await nameOf(h, '/hooks/env-none'))!), [], 'a mapping that lists nothing gets an empty environment')
})

isolation('Authorization and signature headers reach a transform redacted, as {{headers}} shows them', async ({ h }) => {
  const seen = JSON.parse((await nameOf(h, '/hooks/headers', { 'x-hub-signature-256': 'sha256=abc123', 'x-hookgate-token': TOKEN, 'x-github-event': 'push' }))!)
  assert.is(seen.authorization, '[redacted]')
  assert.is(seen['x-hub-signature-256'], '[redacted]')
  assert.is(seen['x-hookgate-token'], '[redacted]')
  assert.is(seen['x-github-event'], 'push', 'other headers arrive as sent')
})

isolation('a memory-hungry transform fails its request with 500 transform_failed and the server keeps serving transforms', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/hungry', TOKEN, {}), 500, 'transform_failed')
  assertError(await post(h.origin, '/hooks/hungry', TOKEN, {}), 500, 'transform_failed')
  assert.equal(JSON.parse((await nameOf(h, '/hooks/env-none'))!), [])
  assert.ok(process.memoryUsage().rss < 1024 * 1024 * 1024, 'the server itself did not take the transform\'s memory')
})

isolation('a transform returning 2 MiB is 500 transform_invalid_output', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/huge', TOKEN, {}), 500, 'transform_invalid_output')
})

isolation('a transform process timed out while blocked does not fail the next, unrelated request', async ({ h }) => {
  // Both slots of the pool time out while blocked; the slow calls then start on fresh processes
  // in those slots and are still running when the old processes' close events arrive.
  // Regression: pool.ts failed the slot's current call on any worker's exit.
  const timedOut = await Promise.all([post(h.origin, '/hooks/blocked', TOKEN, {}), post(h.origin, '/hooks/blocked', TOKEN, {})])
  for (const r of timedOut) assertError(r, 500, 'transform_timeout')
  const next = await Promise.all([nameOf(h, '/hooks/slow'), nameOf(h, '/hooks/slow')])
  assert.equal(next, ['slow done', 'slow done'])
})

isolation('calls queued on a process behind one that times out run once each, on a fresh process; only the stuck one fails', async ({ h }) => {
  // Several calls go to each process at once and run there in order. Two calls that spin forever
  // (one per process, so both pipelines hold one) with 24 ordinary calls behind them: the spinning
  // ones are 500 transform_timeout, every other call answers with its own result, and none ran twice.
  const calls = Array.from({ length: 26 }, (_, n) => post(h.origin, '/hooks/tally', TOKEN, n < 2 ? { n, spin: true } : { n }))
  const answers = await Promise.all(calls)
  for (const r of answers.slice(0, 2)) assertError(r, 500, 'transform_timeout')
  for (let n = 2; n < answers.length; n++) {
    const body = assertOk(answers[n]!, 202, AGENT_KEYS)
    assert.is((await rowOf(h.stateDir, body.runId))?.name, `call ${n}`)
  }
  assert.equal([...ran].sort((a, b) => a - b), Array.from({ length: 26 }, (_, n) => n), 'each call ran exactly once')
})

isolation('transform top-level code does not run in the server\'s process', async ({ h }) => {
  assert.type(await nameOf(h, '/hooks/env-none'), 'string')
  assert.is((globalThis as Record<string, unknown>).hookgateTransformLoadedHere, undefined, 'the transform module was evaluated on the server\'s thread')
})

isolation.run()
