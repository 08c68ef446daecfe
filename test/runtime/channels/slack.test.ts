// The Slack channel against a fake incoming webhook: the request, escaping, retries, and error
// messages that never show the webhook URL (which is the credential).
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { BundleChannel } from '../../../runtime/bundle/format.js'
import { startFakeSlack, type FakeSlack } from '../../fakes/channels.js'
import { assertNoSecret, bundleChannel, deliveryError, delivery, makeChannel, testClock, value } from './helpers.js'

const test = suite('SlackChannel.deliver')

let slack: FakeSlack
let clock: ReturnType<typeof testClock>
const HOOK_PATH = '/services/T0SECRET/B0SECRET/xoxSecretWebhookToken'

test.before.each(async () => {
  clock = testClock()
  slack = await startFakeSlack(HOOK_PATH)
})
test.after.each(async () => {
  await slack.close()
})

const channel = (over: Partial<BundleChannel> = {}) => makeChannel(bundleChannel({ id: 'ops', type: 'slack', url: value(slack.webhookUrl), ...over }), clock)

test('posts { text } as JSON to the webhook URL and counts "ok" as delivered', async () => {
  const result = await channel().deliver(delivery())
  assert.equal(result, { ok: true, attempts: 1, detail: 'slack 200' })
  const r = slack.requests[0]!
  assert.is(r.method, 'POST')
  assert.is(r.url, HOOK_PATH)
  assert.is(r.headers['content-type'], 'application/json')
  assert.is(r.body, '{"text":"The build is green."}')
})

test('puts the name in bold on the first line and sends `to` as the channel', async () => {
  await channel().deliver(delivery({ name: 'GitHub', to: '#deploys' }))
  assert.equal(slack.last!.json, { text: '*GitHub*\nThe build is green.', channel: '#deploys' })
})

test('leaves out a blank `to`', async () => {
  await channel().deliver(delivery({ to: '  ' }))
  assert.equal(slack.last!.json, { text: 'The build is green.' })
})

test('escapes &, < and > so a reply cannot ping @channel', async () => {
  await channel().deliver(delivery({ text: 'ping <!channel> & <@U1>', name: 'a<b' }))
  assert.equal(slack.last!.json.text, '*a&lt;b*\nping &lt;!channel&gt; &amp; &lt;@U1&gt;')
})

test('retries a 5xx and then succeeds', async () => {
  slack.queue({ status: 500 }, { status: 503 })
  const result = await channel().deliver(delivery())
  assert.equal(result, { ok: true, attempts: 3, detail: 'slack 200' })
  assert.is(slack.requests.length, 3)
  assert.equal(new Set(slack.requests.map((r) => r.body)).size, 1)
})

test('does not retry a 4xx, and says what Slack answered', async () => {
  const err = await deliveryError(channel({ url: value(`${slack.origin}/services/T/B/wrong-path-token`) }).deliver(delivery()))
  assert.is(err.message, 'slack channel "ops" answered 404 (no_service) after 1 attempt')
  assert.equal([err.attempts, err.retryable], [1, false])
  assert.is(slack.requests.length, 1)
})

test('answers 400 invalid_payload to an empty text, not retried', async () => {
  const err = await deliveryError(channel().deliver(delivery({ text: '' })))
  assert.is(err.message, 'slack channel "ops" answered 400 (invalid_payload) after 1 attempt')
})

test('does not count a 200 without "ok" as delivered', async () => {
  slack.queue({ status: 200, body: 'maybe' })
  const err = await deliveryError(channel().deliver(delivery()))
  assert.is(err.message, 'slack channel "ops" answered 200 without "ok" (maybe) after 1 attempt')
  assert.is(err.retryable, false)
})

test('retries an attempt that times out', async () => {
  slack.queue('hang')
  const result = await channel({ timeoutMs: 600 }).deliver(delivery())
  assert.is(result.attempts, 2)
})

test('honours Retry-After on a 429', async () => {
  slack.queue({ status: 429, retryAfter: 1, body: 'rate_limited' })
  const result = await channel().deliver(delivery())
  assert.is(result.attempts, 2)
  assert.equal(clock.waits, [1000])
})

test('fails after every attempt fails, counting them', async () => {
  slack.queue('close', { status: 502 }, { status: 503, body: 'service_unavailable' })
  const err = await deliveryError(channel({ maxAttempts: 3 }).deliver(delivery()))
  assert.is(err.message, 'slack channel "ops" answered 503 (service_unavailable) after 3 attempts')
  assert.equal([err.attempts, err.retryable], [3, true])
})

test('never shows the webhook URL or its path in an error, even when the answer echoes it', async () => {
  slack.queue({ status: 403, body: `invalid_token for ${slack.webhookUrl}` })
  const err = await deliveryError(channel().deliver(delivery()))
  assertNoSecret(err.message, [HOOK_PATH, 'T0SECRET', 'B0SECRET', 'xoxSecretWebhookToken', slack.origin])
  assert.is(err.message, 'slack channel "ops" answered 403 (invalid_token for [redacted]) after 1 attempt')
  slack.queue('hang')
  const timedOut = await deliveryError(channel({ timeoutMs: 100, maxAttempts: 1 }).deliver(delivery()))
  assert.is(timedOut.message, 'slack channel "ops" timed out (no answer within 100 ms) after 1 attempt')
  assertNoSecret(timedOut.message, ['xoxSecretWebhookToken', 'T0SECRET'])
})

test.run()
