// What an operator sees: one JSON log line per request (method, path, status, ms, client, and the
// runId of an accepted call) that never holds the token or the body; and GET /healthz with the
// bundle hash and uptime.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertError, assertOk, head, post, RawClient, send, serve, setTestToken, type Harness, type Reply } from './harness.js'

const TOKEN = setTestToken()
const MARKER = 'BODY-MARKER-5b0c1d9e'
const WRONG_TOKEN = 'wrong-token-a81f2c7d3e'

const CONFIG = `
server:
  bodyTimeoutSeconds: 0.5
  maxBodyBytes: 2048
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: echo
      match: { path: echo }
      action: agent
      messageTemplate: "{{payload}}"
    - id: skip
      match: { path: skip }
      action: agent
      transform: { module: skip.mjs }
    - id: boom
      match: { path: boom }
      action: agent
      transform: { module: boom.mjs }
`

const TRANSFORMS = {
  'transforms/skip.mjs': 'export default () => null\n',
  // The first line a transform throws is logged as it was thrown (issue 23: the operator's own
  // words, to find what failed), so it is the transform's to keep bodies out of it. It carries the
  // headers the transform saw: the token must not be among them.
  'transforms/boom.mjs': 'export default (input) => { throw new Error("failed on " + JSON.stringify(input.headers)) }\n',
}

interface RequestLine { msg: string; method: string; path: string; status: number; ms: number; client: string; runId?: string; code?: string }

function requestLines(h: Harness): RequestLine[] {
  return h.logs.flatMap((l) => {
    try {
      const e = JSON.parse(l) as RequestLine
      return e.msg === 'request' ? [e] : []
    } catch {
      return []
    }
  })
}

// ---------------------------------------------------------------------------------------------

const logs = suite<{ h: Harness; stderr: string[]; restore: () => void }>('request logs')

logs.before(async (ctx) => {
  ctx.h = await serve(CONFIG, TRANSFORMS)
  // the runtime writes some errors to stderr directly: capture those too
  ctx.stderr = []
  const original = process.stderr.write.bind(process.stderr)
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    ctx.stderr.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'))
    return (original as (...a: unknown[]) => boolean)(chunk, ...rest)
  }) as typeof process.stderr.write
  ctx.restore = () => { process.stderr.write = original }
})
logs.after(async (ctx) => {
  ctx.restore()
  await ctx.h.close()
})

logs('an accepted call is one line with method, path, status, ms, client and its runId', async ({ h }) => {
  const before = requestLines(h).length
  const reply = await post(h.origin, '/hooks/wake', TOKEN, { text: 'logged', mode: 'next-heartbeat' })
  const body = assertOk(reply, 200, ['ok', 'action', 'runId', 'mode'])
  const lines = requestLines(h).slice(before)
  assert.is(lines.length, 1)
  const line = lines[0]!
  assert.is(line.method, 'POST')
  assert.is(line.path, '/hooks/wake')
  assert.is(line.status, 200)
  assert.type(line.ms, 'number')
  assert.ok(line.ms >= 0)
  assert.is(line.client, '127.0.0.1')
  assert.is(line.runId, body.runId)
})

logs('every request is exactly one line, refusals included, with the status it got', async ({ h }) => {
  const before = requestLines(h).length
  const replies: Reply[] = [
    await post(h.origin, '/hooks/agent', TOKEN, { message: 'x' }),
    await send(h.origin, '/hooks/agent', { body: { message: 'x' } }),
    await send(h.origin, '/hooks/agent', { method: 'GET' }),
    await post(h.origin, '/hooks/nope', TOKEN, {}),
    await post(h.origin, '/hooks/skip', TOKEN, {}),
    await post(h.origin, '/hooks/boom', TOKEN, {}),
    await send(h.origin, '/healthz', { method: 'GET' }),
  ]
  const lines = requestLines(h).slice(before)
  assert.equal(lines.map((l) => l.status), replies.map((r) => r.status))
  assert.equal(replies.map((r) => r.status), [202, 401, 405, 404, 204, 500, 200])
  assert.is(lines[0]!.runId, replies[0]!.json.runId)
  for (const l of lines.slice(1)) assert.is(l.runId, undefined)
})

logs('secret leak via logs: the token and the request body never appear in any log line', async ({ h, stderr }) => {
  const payload = { text: `hello ${MARKER}`, message: `hello ${MARKER}`, mode: 'next-heartbeat' }
  await post(h.origin, '/hooks/wake', TOKEN, payload)
  await post(h.origin, '/hooks/agent', TOKEN, payload)
  await post(h.origin, '/hooks/echo', TOKEN, payload)
  await send(h.origin, '/hooks/wake', { body: payload, headers: { 'x-hookgate-token': TOKEN } })
  await send(h.origin, '/hooks/wake', { body: payload, token: WRONG_TOKEN })
  await send(h.origin, '/hooks/wake', { body: payload, headers: { 'x-hookgate-token': WRONG_TOKEN } })
  assertError(await send(h.origin, `/hooks/wake?token=${TOKEN}`, { body: payload }), 400, 'token_in_query')
  assertError(await post(h.origin, '/hooks/boom', TOKEN, payload), 500, 'transform_failed')
  assertError(await send(h.origin, '/hooks/wake', { token: TOKEN, body: `{"text":"${MARKER}`, headers: { 'content-type': 'application/json' } }), 400, 'invalid_json')
  assertError(await send(h.origin, '/hooks/wake', { token: TOKEN, body: `text=${MARKER}`, headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type')
  assertError(await send(h.origin, '/hooks/wake', { token: TOKEN, body: { text: MARKER.repeat(200) } }), 413, 'payload_too_large')
  const slow = await RawClient.open(h.port)
  try {
    await slow.write(head('POST', '/hooks/wake', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': '200' }) + `{"text":"${MARKER}`)
    assert.is((await slow.response()).status, 408)
  } finally {
    slow.destroy()
  }
  const everything = [...h.logs, ...stderr]
  assert.ok(everything.length > 0)
  for (const secret of [TOKEN, WRONG_TOKEN, MARKER]) {
    const hit = everything.find((l) => l.includes(secret))
    assert.is(hit, undefined, `a log line contains ${secret === MARKER ? 'the body' : 'a token'}: ${hit}`)
  }
})

logs.run()

// ---------------------------------------------------------------------------------------------

const health = suite<{ h: Harness }>('GET /healthz')

health.before(async (ctx) => { ctx.h = await serve(CONFIG, TRANSFORMS) })
health.after(async (ctx) => { await ctx.h.close() })

health('answers 200 outside the base path, without a token, with the bundle hash and uptime', async ({ h }) => {
  const reply = await send(h.origin, '/healthz', { method: 'GET' })
  assert.is(reply.status, 200, reply.text)
  assert.match(String(reply.headers['content-type']), /^application\/json\b/)
  const manifest = JSON.parse(readFileSync(join(h.outDir, 'manifest.json'), 'utf8')) as { inputsHash: string }
  assert.is(reply.json.ok, true)
  assert.is(reply.json.bundle, manifest.inputsHash)
  assert.type(reply.json.uptimeSeconds, 'number')
  assert.ok(reply.json.uptimeSeconds >= 0)
})

health('does not reveal the token', async ({ h }) => {
  const reply = await send(h.origin, '/healthz', { method: 'GET' })
  assert.not.ok(reply.text.includes(TOKEN))
})

health.run()
