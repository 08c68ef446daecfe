// The Discord channel against a fake webhook: ?wait=true, mentions disabled, the 2000-character
// limit, retries, and error messages without the webhook token.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { BundleChannel } from '../../../runtime/bundle/format.js'
import { startFakeDiscord, type FakeDiscord } from '../../fakes/channels.js'
import { assertNoSecret, bundleChannel, deliveryError, delivery, makeChannel, testClock, value } from './helpers.js'

const test = suite('DiscordChannel.deliver')

let discord: FakeDiscord
let clock: ReturnType<typeof testClock>
const TOKEN = 'dWebhookTokenThatIsSecret_123'

test.before.each(async () => {
  clock = testClock()
  discord = await startFakeDiscord('987654321', TOKEN)
})
test.after.each(async () => {
  await discord.close()
})

const channel = (over: Partial<BundleChannel> = {}) => makeChannel(bundleChannel({ id: 'chat', type: 'discord', url: value(discord.webhookUrl), ...over }), clock)

test('posts { content, allowed_mentions } with ?wait=true and reports the message id', async () => {
  const result = await channel().deliver(delivery())
  assert.equal(result, { ok: true, attempts: 1, detail: 'discord message 1000' })
  const r = discord.requests[0]!
  assert.is(r.method, 'POST')
  assert.is(r.url, `/api/webhooks/987654321/${TOKEN}?wait=true`)
  assert.is(r.headers['content-type'], 'application/json')
  assert.is(r.body, '{"content":"The build is green.","allowed_mentions":{"parse":[]}}')
})

test('disables every mention, so a reply with @everyone pings nobody', async () => {
  await channel().deliver(delivery({ text: '@everyone @here <@123> <@&456>' }))
  assert.equal(discord.last!.json, { content: '@everyone @here <@123> <@&456>', allowed_mentions: { parse: [] } })
})

test('keeps a query the URL already has (a thread) and adds wait=true once', async () => {
  await channel({ url: value(`${discord.webhookUrl}?thread_id=77&wait=false`) }).deliver(delivery())
  const q = discord.last!.query
  assert.is(q.get('thread_id'), '77')
  assert.equal(q.getAll('wait'), ['true'])
})

test('puts the name in bold on the first line', async () => {
  await channel().deliver(delivery({ name: 'Sentry' }))
  assert.is(discord.last!.json.content, '**Sentry**\nThe build is green.')
})

test('cuts content to 2000 characters and says so with a trailing …', async () => {
  const result = await channel().deliver(delivery({ text: 'x'.repeat(5000) }))
  assert.ok(result.ok)
  const content: string = discord.last!.json.content
  assert.is(content.length, 2000)
  assert.ok(content.endsWith('x…'))
  const exact = 'y'.repeat(2000)
  await channel().deliver(delivery({ text: exact }))
  assert.is(discord.last!.json.content, exact)
})

test('counts a 204 (a webhook that does not wait) as delivered', async () => {
  discord.queue({ status: 204 })
  const result = await channel().deliver(delivery())
  assert.equal(result, { ok: true, attempts: 1, detail: 'discord 204' })
})

test('retries a 5xx and then succeeds', async () => {
  discord.queue({ status: 502 })
  const result = await channel().deliver(delivery())
  assert.is(result.attempts, 2)
  assert.is(discord.requests.length, 2)
})

test('honours Retry-After on a 429, or the retry_after Discord puts in the body', async () => {
  discord.queue({ status: 429, retryAfter: 2, body: '{"message":"You are being rate limited.","retry_after":9.5}', contentType: 'application/json' })
  discord.queue({ status: 429, body: '{"message":"You are being rate limited.","retry_after":0.25}', contentType: 'application/json' })
  const result = await channel().deliver(delivery())
  assert.is(result.attempts, 3)
  assert.equal(clock.waits, [2000, 250])
})

test('does not retry a 4xx and quotes Discord\'s message', async () => {
  const err = await deliveryError(channel({ url: value(`${discord.origin}/api/webhooks/987654321/wrong-token-value`) }).deliver(delivery()))
  assert.is(err.message, 'discord channel "chat" answered 404 (Unknown Webhook) after 1 attempt')
  assert.equal([err.attempts, err.retryable], [1, false])
  assert.is(discord.requests.length, 1)
})

test('retries an attempt that times out or loses its connection', async () => {
  discord.queue('hang', 'close')
  const result = await channel({ timeoutMs: 600 }).deliver(delivery())
  assert.is(result.attempts, 3)
})

test('fails with the attempt count when every attempt fails', async () => {
  discord.queue({ status: 500 }, { status: 500 })
  const err = await deliveryError(channel({ maxAttempts: 2 }).deliver(delivery()))
  assert.is(err.message, 'discord channel "chat" answered 500 (scripted 500) after 2 attempts')
  assert.equal([err.attempts, err.retryable], [2, true])
})

test('never shows the webhook token or path in an error', async () => {
  discord.queue({ status: 400, body: JSON.stringify({ message: `bad webhook ${discord.webhookUrl}` }), contentType: 'application/json' })
  const err = await deliveryError(channel().deliver(delivery()))
  assertNoSecret(err.message, [TOKEN, '/api/webhooks/987654321'])
  assert.is(err.message, 'discord channel "chat" answered 400 (bad webhook [redacted]) after 1 attempt')
})

test.run()
