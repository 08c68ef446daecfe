// Backpressure: accepted agent and workflow runs wait in memory until they finish, so past
// server.maxPendingRuns new ones are refused with 503 and Retry-After instead of growing without
// bound; wakes are bounded by the session queue instead and still answer. And past
// server.maxPendingBytes too: a count alone was no bound when each run holds a large request
// (10,000 pending runs of 255 KiB held 5.5 GiB during a model outage before the first 503).
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI } from '../../fakes/openai.js'
import { RawClient, assertError, assertRawError, compileProject, head, post, runReaches, send, serveProject, setTestToken, until } from '../http/harness.js'

const token = setTestToken()
const model = await startFakeOpenAI()
model.setDefault({ delayMs: 800 })
const h = await serveProject(await compileProject(`
server: { concurrency: 1, maxPendingRuns: 2 }
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
providers:
  - { id: slow, type: openai, baseUrl: ${model.url}, maxRetries: 0 }
agents:
  - { id: main, model: slow/m, heartbeat: { every: "off" } }
`))

const pressure = suite('server.maxPendingRuns')

pressure('past the bound an agent call is refused with 503 and Retry-After, and accepted again once runs finish', async () => {
  const call = () => post(h.origin, '/hooks/agent', token, { message: 'work', deliver: false, wakeMode: 'next-heartbeat' })
  const first = await call()
  const second = await call()
  assert.is(first.status, 202)
  assert.is(second.status, 202)
  const third = await call()
  assertError(third, 503, 'too_many_pending_runs')
  assert.is(third.headers['retry-after'], '5')
  const wake = await post(h.origin, '/hooks/wake', token, { text: 'still answered', mode: 'next-heartbeat' })
  assert.is(wake.status, 200)
  await runReaches(h.stateDir, second.json.runId, 'succeeded', 5000)
  assert.is((await call()).status, 202)
})

pressure.after(async () => {
  await h.close()
})
pressure.run()

const bytes = suite('server.maxPendingBytes')

/** The gauges of GET /metrics whose names start with hookgate_backlog, by name. */
async function backlogGauges(origin: string): Promise<Record<string, number>> {
  const text = (await send(origin, '/metrics', { method: 'GET', token })).text
  const out: Record<string, number> = {}
  for (const m of text.matchAll(/^(hookgate_backlog_\w+) (\S+)$/gm)) out[m[1]!] = Number(m[2])
  return out
}

bytes('a model outage with large bodies: past the byte bound agent calls get 503 with Retry-After, long before the count bound, and are accepted again once the model is back', async () => {
  const LIMIT = 2 * 1024 * 1024
  // The model does not answer until the outage ends.
  let end!: () => void
  const outage = new Promise<void>((resolve) => { end = resolve })
  model.setDefault({ after: outage })
  const server = await serveProject(await compileProject(`
server: { concurrency: 1, maxPendingRuns: 10000, maxPendingBytes: ${LIMIT} }
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
providers:
  - { id: down, type: openai, baseUrl: ${model.url}, maxRetries: 0, timeoutSeconds: 60 }
agents:
  - { id: main, model: down/m, heartbeat: { every: "off" } }
`))
  try {
    const message = 'x'.repeat(250 * 1024)
    const call = () => post(server.origin, '/hooks/agent', token, { message, deliver: false, wakeMode: 'next-heartbeat' })
    let accepted = 0
    let refusal: Awaited<ReturnType<typeof call>> | undefined
    // bounded: without a byte bound all 40 would be accepted (the count bound is 10,000)
    for (let i = 0; i < 40 && refusal === undefined; i++) {
      const r = await call()
      if (r.status === 202) accepted++
      else refusal = r
    }
    assert.ok(refusal, `all of ${accepted} calls of 250 KiB were accepted past a byte bound of 2 MiB`)
    assertError(refusal!, 503, 'too_many_pending_runs')
    assert.is(refusal!.headers['retry-after'], '5')
    // each pending call holds its 250 KiB message: 2 MiB is full after about eight
    assert.ok(accepted >= 6 && accepted <= 9, `${accepted} calls accepted before the 503`)
    const gauges = await backlogGauges(server.origin)
    assert.is(gauges.hookgate_backlog_runs, accepted)
    assert.is(gauges.hookgate_backlog_limit_bytes, LIMIT)
    assert.ok(gauges.hookgate_backlog_bytes! >= LIMIT && gauges.hookgate_backlog_bytes! <= LIMIT + 300 * 1024, `backlog of ${gauges.hookgate_backlog_bytes} bytes`)
    const health = await send(server.origin, '/healthz', { method: 'GET' })
    assert.is(health.status, 503)
    assert.match(health.json.reasons.join(' '), 'server.maxPendingBytes')
    // Refused before a body byte is read: a sender that has sent only its head gets the 503 at
    // once (the server has the body timeout, 10 s, to wait for it otherwise).
    const raw = await RawClient.open(server.port)
    try {
      await raw.write(head('POST', '/hooks/agent', { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': String(250 * 1024) }))
      assertRawError(await raw.response(5000), 503, 'too_many_pending_runs')
    } finally {
      raw.destroy()
    }
    // wakes are bounded by their session queue, not by this: still answered
    assert.is((await post(server.origin, '/hooks/wake', token, { text: 'still answered', mode: 'next-heartbeat' })).status, 200)

    end()
    await until('the backlog to drain', async () => ((await backlogGauges(server.origin)).hookgate_backlog_bytes === 0 ? true : undefined), 10_000)
    assert.is((await send(server.origin, '/healthz', { method: 'GET' })).status, 200)
    assert.is((await call()).status, 202)
  } finally {
    end()
    await server.close()
  }
})

bytes.after(async () => {
  await model.close()
})
bytes.run()
