// The generic webhook channel against a Standard Webhooks receiver: the request it sends, the
// signature the receiver checks, retries that keep the message id, and what a failure says.
import { createHmac } from 'node:crypto'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { BundleChannel } from '../../../runtime/bundle/format.js'
import { verifyStandardWebhook } from '../../../runtime/channels/index.js'
import { startFakeReceiver, type FakeReceiver } from '../../fakes/channels.js'
import { assertNoSecret, bundleChannel, deliveryError, delivery, OTHER_WHSEC, T0, testClock, value, WHSEC, makeChannel } from './helpers.js'

const test = suite('WebhookChannel.deliver')

let receiver: FakeReceiver
let clock: ReturnType<typeof testClock>

test.before.each(async () => {
  clock = testClock()
  receiver = await startFakeReceiver(WHSEC, () => clock.ms)
})
test.after.each(async () => {
  await receiver.close()
})

const signed = (over: Partial<BundleChannel> = {}) =>
  makeChannel(bundleChannel({ id: 'out', type: 'webhook', url: value(receiver.url), secret: value(WHSEC), ...over }), clock)

test('posts the reply as an agent.reply event with the Standard Webhooks headers', async () => {
  const result = await signed().deliver(delivery({ name: 'GitHub', to: 'team-a' }))
  assert.equal(result, { ok: true, attempts: 1, detail: 'webhook 204' })
  assert.is(receiver.requests.length, 1)
  const r = receiver.requests[0]!
  assert.is(r.method, 'POST')
  assert.is(r.url, '/hooks/agent-replies')
  assert.is(r.headers['content-type'], 'application/json')
  assert.is(r.headers['webhook-id'], 'msg_run-1')
  assert.is(r.headers['webhook-timestamp'], String(Math.floor(T0 / 1000)))
  assert.match(String(r.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]{43}=$/)
  assert.is(r.body, JSON.stringify({
    type: 'agent.reply',
    timestamp: '2024-01-02T03:04:05.000Z',
    data: { runId: 'run-1', agentId: 'main', name: 'GitHub', to: 'team-a', text: 'The build is green.', correlationId: 'corr-1' },
  }))
})

test('signs the exact bytes sent, so the receiver verifies them with its own copy of the secret', async () => {
  await signed().deliver(delivery({ text: 'ünïcödé ✓ and "quotes"' }))
  assert.equal(receiver.verifications, [{ ok: true, id: 'msg_run-1', timestamp: Math.floor(T0 / 1000) }])
  // recomputed here from the specification, not with the runtime's signer
  const r = receiver.requests[0]!
  const key = Buffer.from(WHSEC.slice('whsec_'.length), 'base64')
  const expected = createHmac('sha256', key).update(`${r.headers['webhook-id']}.${r.headers['webhook-timestamp']}.${r.body}`).digest('base64')
  assert.is(r.headers['webhook-signature'], `v1,${expected}`)
})

test('sends a signature that fails verification once the body is tampered with', async () => {
  await signed().deliver(delivery())
  const r = receiver.requests[0]!
  const tampered = r.body.replace('green', 'red!!')
  assert.is.not(tampered, r.body)
  const verdict = verifyStandardWebhook(WHSEC, r.headers, tampered, { now: () => clock.ms })
  assert.equal(verdict, { ok: false, reason: 'no v1 signature matches' })
})

test('is rejected by a receiver that holds another secret, and a 401 is not retried', async () => {
  const ch = makeChannel(bundleChannel({ id: 'out', type: 'webhook', url: value(receiver.url), secret: value(OTHER_WHSEC) }), clock)
  const err = await deliveryError(ch.deliver(delivery()))
  assert.is(err.attempts, 1)
  assert.is(err.retryable, false)
  assert.is(err.message, 'webhook channel "out" answered 401 ({"error":"no v1 signature matches"}) after 1 attempt')
  assert.is(receiver.requests.length, 1)
})

test('sends the id and timestamp but no signature when the channel has no secret', async () => {
  const plain = await startFakeReceiver(null)
  try {
    await makeChannel(bundleChannel({ id: 'plain', type: 'webhook', url: value(plain.url) }), clock).deliver(delivery())
    const h = plain.requests[0]!.headers
    assert.is(h['webhook-id'], 'msg_run-1')
    assert.is(h['webhook-timestamp'], String(Math.floor(T0 / 1000)))
    assert.is(h['webhook-signature'], undefined)
  } finally {
    await plain.close()
  }
  // a receiver that checks signatures refuses it
  const err = await deliveryError(makeChannel(bundleChannel({ id: 'plain', type: 'webhook', url: value(receiver.url) }), clock).deliver(delivery()))
  assert.is(err.message, 'webhook channel "plain" answered 401 ({"error":"webhook-signature is missing"}) after 1 attempt')
})

test('makes a webhook-id without dots from any run id', async () => {
  await signed().deliver(delivery({ runId: 'a.b/c d' }))
  assert.is(receiver.requests[0]!.headers['webhook-id'], 'msg_a_b_c_d')
  assert.equal(receiver.verifications[0]!.ok, true)
})

test('retries a 5xx and keeps the same webhook-id and body across attempts, re-signing each', async () => {
  receiver.queue({ status: 503 }, { status: 500 })
  const result = await signed().deliver(delivery())
  assert.equal(result, { ok: true, attempts: 3, detail: 'webhook 204' })
  const reqs = receiver.requests
  assert.is(reqs.length, 3)
  assert.equal(new Set(reqs.map((r) => r.headers['webhook-id'])), new Set(['msg_run-1']))
  assert.equal(new Set(reqs.map((r) => r.body)).size, 1)
  // the test clock moves by each backoff, so each attempt has its own timestamp, and each verifies
  const stamps = reqs.map((r) => Number(r.headers['webhook-timestamp']))
  assert.ok(stamps[0]! <= stamps[1]! && stamps[1]! <= stamps[2]!, `timestamps ${stamps}`)
  for (const r of reqs) assert.ok(verifyStandardWebhook(WHSEC, r.headers, r.body, { now: () => clock.ms }).ok)
  assert.is(clock.waits.length, 2)
  assert.ok(clock.waits[0]! >= 250 && clock.waits[0]! <= 500, `first wait ${clock.waits[0]}`)
  assert.ok(clock.waits[1]! >= 500 && clock.waits[1]! <= 1000, `second wait ${clock.waits[1]}`)
})

test('does not retry a 4xx other than 408 and 429', async () => {
  receiver.queue({ status: 422, body: 'unknown event type' })
  const err = await deliveryError(signed().deliver(delivery()))
  assert.is(err.message, 'webhook channel "out" answered 422 (unknown event type) after 1 attempt')
  assert.is(err.attempts, 1)
  assert.is(err.retryable, false)
  assert.is(receiver.requests.length, 1)
  assert.equal(clock.waits, [])
})

test('retries an attempt that times out', async () => {
  receiver.queue('hang')
  const started = Date.now()
  const result = await signed({ timeoutMs: 600 }).deliver(delivery())
  assert.equal(result, { ok: true, attempts: 2, detail: 'webhook 204' })
  assert.ok(Date.now() - started >= 590, 'the first attempt waited for its timeout')
  assert.is(receiver.requests.length, 2)
})

test('retries when the connection closes without an answer', async () => {
  receiver.queue('close')
  const result = await signed().deliver(delivery())
  assert.is(result.attempts, 2)
})

test('waits as long as Retry-After asks on a 429', async () => {
  receiver.queue({ status: 429, retryAfter: 3 })
  const result = await signed().deliver(delivery())
  assert.is(result.attempts, 2)
  assert.equal(clock.waits, [3000])
})

test('gives up after maxAttempts with a DeliveryError that counts the attempts', async () => {
  receiver.queue({ status: 503 }, { status: 502 }, 'hang')
  const err = await deliveryError(signed({ maxAttempts: 3, timeoutMs: 150 }).deliver(delivery()))
  assert.is(err.name, 'DeliveryError')
  assert.is(err.attempts, 3)
  assert.is(err.retryable, true)
  assert.is(err.message, 'webhook channel "out" timed out (no answer within 150 ms) after 3 attempts')
  assert.is(receiver.requests.length, 3)
})

test('keeps the signing secret and the URL out of every error message', async () => {
  const url = `${receiver.origin}/hooks/private-path-segment?token=query-credential-123`
  const ch = makeChannel(bundleChannel({ id: 'out', type: 'webhook', url: value(url), secret: value(WHSEC), maxAttempts: 1 }), clock)
  receiver.queue({ status: 400, body: `bad request to ${url} signed with ${WHSEC}` })
  const err = await deliveryError(ch.deliver(delivery()))
  assertNoSecret(err.message, [WHSEC, WHSEC.slice(6), 'private-path-segment', 'query-credential-123'])
  assert.is(err.message, 'webhook channel "out" answered 400 (bad request to [redacted] signed with [redacted]) after 1 attempt')
})

test('counts a refused connection as retryable and names it', async () => {
  const closed = await startFakeReceiver(null)
  const url = closed.url
  await closed.close()
  const ch = makeChannel(bundleChannel({ id: 'out', type: 'webhook', url: value(url), maxAttempts: 2 }), clock)
  const err = await deliveryError(ch.deliver(delivery()))
  assert.is(err.message, 'webhook channel "out" could not connect (ECONNREFUSED) after 2 attempts')
  assert.is(err.retryable, true)
  assert.is(clock.waits.length, 1)
})

test('stops waiting between attempts when the signal aborts', async () => {
  receiver.queue({ status: 503 })
  const controller = new AbortController()
  const ch = makeChannel(bundleChannel({ id: 'out', type: 'webhook', url: value(receiver.url) }), {
    ...clock,
    sleep: () => { controller.abort(); return new Promise<void>(() => {}) },
  } as ReturnType<typeof testClock>)
  const err = await deliveryError(ch.deliver(delivery(), controller.signal))
  assert.is(err.message, 'webhook channel "out" was cancelled after 1 attempt')
  assert.is(err.attempts, 1)
  assert.is(receiver.requests.length, 1)
})

test.run()
