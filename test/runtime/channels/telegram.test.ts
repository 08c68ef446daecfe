// The Telegram channel against a fake Bot API: sendMessage, `to` over chatId, the 4096 limit,
// answers that are not ok, retries, and error messages without the bot token.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { BundleChannel } from '../../../runtime/bundle/format.js'
import { startFakeTelegram, type FakeTelegram } from '../../fakes/channels.js'
import { assertNoSecret, bundleChannel, deliveryError, delivery, makeChannel, testClock, value } from './helpers.js'

const test = suite('TelegramChannel.deliver')

const TOKEN = '7654321:AAHsecretBotTokenPart-xyz'
let tg: FakeTelegram
let clock: ReturnType<typeof testClock>

test.before.each(async () => {
  clock = testClock()
  tg = await startFakeTelegram(TOKEN, ['1001', '-100200'])
})
test.after.each(async () => {
  await tg.close()
})

const channel = (over: Partial<BundleChannel> = {}) =>
  makeChannel(bundleChannel({ id: 'tg', type: 'telegram', botToken: value(TOKEN), chatId: '1001', apiBaseUrl: tg.apiBaseUrl, ...over }), clock)

test('posts { chat_id, text } to /bot<token>/sendMessage and reports the message id', async () => {
  const result = await channel().deliver(delivery())
  assert.equal(result, { ok: true, attempts: 1, detail: 'telegram message 42' })
  const r = tg.requests[0]!
  assert.is(r.method, 'POST')
  assert.is(r.url, `/bot${TOKEN}/sendMessage`)
  assert.is(r.headers['content-type'], 'application/json')
  assert.is(r.body, '{"chat_id":"1001","text":"The build is green."}')
})

test('sends to `to` when the route sets one, over the channel\'s chatId', async () => {
  await channel().deliver(delivery({ to: '-100200' }))
  assert.is(tg.last!.json.chat_id, '-100200')
})

test('falls back to chatId when `to` is blank', async () => {
  await channel().deliver(delivery({ to: '' }))
  assert.is(tg.last!.json.chat_id, '1001')
})

test('fails without a request, not retryable, when there is no chat id at all', async () => {
  const err = await deliveryError(channel({ chatId: null }).deliver(delivery()))
  assert.is(err.message, 'telegram channel "tg" has no chat to send to: set chatId on the channel or a "to" on the route')
  assert.equal([err.attempts, err.retryable], [0, false])
  assert.is(tg.requests.length, 0)
})

test('puts the name on the first line, as plain text', async () => {
  await channel().deliver(delivery({ name: 'Grafana' }))
  assert.is(tg.last!.json.text, 'Grafana\nThe build is green.')
  assert.is(tg.last!.json.parse_mode, undefined)
})

test('cuts text to 4096 characters with a trailing …', async () => {
  const result = await channel().deliver(delivery({ text: 'z'.repeat(10_000) }))
  assert.ok(result.ok)
  const text: string = tg.last!.json.text
  assert.is(text.length, 4096)
  assert.ok(text.endsWith('z…'))
})

test('does not retry "chat not found" and quotes the description', async () => {
  const err = await deliveryError(channel({ chatId: '555' }).deliver(delivery()))
  assert.is(err.message, 'telegram channel "tg" answered 400 (Bad Request: chat not found) after 1 attempt')
  assert.equal([err.attempts, err.retryable], [1, false])
  assert.is(tg.requests.length, 1)
})

test('does not retry a wrong token, and never shows the token', async () => {
  const wrong = '1111111:AAHwrongTokenValue'
  const err = await deliveryError(channel({ botToken: value(wrong) }).deliver(delivery()))
  assert.is(err.message, 'telegram channel "tg" answered 401 (Unauthorized) after 1 attempt')
  assertNoSecret(err.message, [wrong, 'AAHwrongTokenValue'])
})

test('retries a 5xx and then succeeds', async () => {
  tg.queue({ status: 502 }, { status: 500, body: '{"ok":false,"error_code":500,"description":"Internal Server Error"}', contentType: 'application/json' })
  const result = await channel().deliver(delivery())
  assert.equal(result, { ok: true, attempts: 3, detail: 'telegram message 42' })
})

test('waits the retry_after of a 429 (header first, then parameters.retry_after)', async () => {
  tg.queue({ status: 429, body: '{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 4","parameters":{"retry_after":4}}', contentType: 'application/json' })
  tg.queue({ status: 429, retryAfter: 1, body: '{"ok":false,"error_code":429,"parameters":{"retry_after":9}}', contentType: 'application/json' })
  const result = await channel().deliver(delivery())
  assert.is(result.attempts, 3)
  assert.equal(clock.waits, [4000, 1000])
})

test('does not count a 200 without ok: true as delivered', async () => {
  tg.queue({ status: 200, body: '{"ok":false,"description":"odd"}', contentType: 'application/json' })
  const err = await deliveryError(channel().deliver(delivery()))
  assert.is(err.message, 'telegram channel "tg" answered 200 without "ok": true (odd) after 1 attempt')
})

test('retries a timeout, and fails with the attempt count when all time out', async () => {
  tg.queue('hang')
  assert.is((await channel({ timeoutMs: 600 }).deliver(delivery())).attempts, 2)
  tg.queue('hang', 'hang')
  const err = await deliveryError(channel({ timeoutMs: 100, maxAttempts: 2 }).deliver(delivery()))
  assert.is(err.message, 'telegram channel "tg" timed out (no answer within 100 ms) after 2 attempts')
  assert.equal([err.attempts, err.retryable], [2, true])
})

test('never shows the bot token, even when an answer echoes the URL', async () => {
  tg.queue({ status: 400, body: JSON.stringify({ ok: false, error_code: 400, description: `Bad Request: /bot${TOKEN}/sendMessage` }), contentType: 'application/json' })
  const err = await deliveryError(channel().deliver(delivery()))
  assertNoSecret(err.message, [TOKEN, 'AAHsecretBotTokenPart'])
  assert.is(err.message, 'telegram channel "tg" answered 400 (Bad Request: /bot[redacted]/sendMessage) after 1 attempt')
})

test.run()
