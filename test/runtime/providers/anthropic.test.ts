// The Anthropic provider against a fake Messages API over real HTTP: headers, the body (system
// lifted to the top level, thinking budgets), the reply's text blocks, retries and failures.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { ModelError, type ChatMessage } from '../../../runtime/agents/models.js'
import { createAnthropicProvider } from '../../../runtime/agents/providers/anthropic.js'
import type { ProviderSettings } from '../../../runtime/agents/providers/http.js'
import { startFakeAnthropic, type FakeApi } from '../../fakes/anthropic.js'
import { refusedUrl } from '../../fakes/fake-server.js'
import { rejectionOf, sleep } from '../../helpers/async.js'

const KEY = 'sk-ant-api03-test-0a1b2c3d4e5f60718293a4b5c6d7e8f9'
const USER: ChatMessage[] = [{ role: 'user', content: 'hello there' }]

let fake: FakeApi

function provider(overrides: Partial<ProviderSettings> = {}) {
  return createAnthropicProvider({ id: 'claude', baseUrl: fake.url, apiKey: KEY, timeoutMs: 5_000, maxRetries: 2, ...overrides })
}

function call(messages: ChatMessage[] = USER, options: { model?: string; thinking?: string | null; signal?: AbortSignal } = {}) {
  return { model: options.model ?? 'claude/claude-sonnet-4-5', messages, thinking: options.thinking ?? null, signal: options.signal ?? new AbortController().signal }
}

const anthropic = suite('createAnthropicProvider')

anthropic.before.each(async () => { fake = await startFakeAnthropic({ apiKey: KEY }) })
anthropic.after.each(async () => { await fake.close() })

anthropic('posts exactly the Messages request: path, x-api-key, anthropic-version, JSON, model without the prefix', async () => {
  const reply = await provider().complete(call())
  assert.equal(reply, { text: 'hello there' })
  assert.is(fake.requests.length, 1)
  const req = fake.requests[0]!
  assert.is(req.method, 'POST')
  assert.is(req.path, '/v1/messages')
  assert.is(req.headers['x-api-key'], KEY)
  assert.is(req.headers['anthropic-version'], '2023-06-01')
  assert.is(req.headers['content-type'], 'application/json')
  assert.is(req.headers.authorization, undefined)
  assert.equal(req.body, { model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [{ role: 'user', content: 'hello there' }] })
})

anthropic('moves system messages to the top-level system string and keeps the turns in order', async () => {
  await provider().complete(call([
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'first' },
    { role: 'assistant', content: 'ok' },
    { role: 'system', content: 'Answer in French.' },
    { role: 'user', content: 'second' },
  ]))
  const body = fake.requests[0]!.body
  assert.is(body.system, 'You are terse.\n\nAnswer in French.')
  assert.equal(body.messages, [
    { role: 'user', content: 'first' },
    { role: 'assistant', content: 'ok' },
    { role: 'user', content: 'second' },
  ])
})

anthropic('leaves system out when there is no system message', async () => {
  await provider().complete(call())
  assert.not.ok('system' in fake.requests[0]!.body)
})

anthropic('joins the text blocks of content and skips the others', async () => {
  fake.queue({ raw: JSON.stringify({ id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5', content: [{ type: 'thinking', thinking: 'hmm', signature: 'sig' }, { type: 'text', text: 'Hello, ' }, { type: 'text', text: 'world.' }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 3, output_tokens: 4 } }) })
  const reply = await provider().complete(call())
  assert.is(reply.text, 'Hello, world.')
})

anthropic('sends no x-api-key when the provider has no key', async () => {
  await fake.close()
  fake = await startFakeAnthropic()
  await provider({ apiKey: null }).complete(call())
  assert.is(fake.requests[0]!.headers['x-api-key'], undefined)
  assert.is(fake.requests[0]!.headers['anthropic-version'], '2023-06-01')
})

anthropic('maps thinking levels to budget_tokens with max_tokens above the budget, and leaves thinking out for off and null', async () => {
  const budgets: Record<string, number> = { minimal: 1024, low: 2048, medium: 8192, high: 16384 }
  for (const [level, budget] of Object.entries(budgets)) {
    const reply = await provider().complete(call(USER, { thinking: level }))
    assert.is(reply.text, 'hello there', 'the thinking block is not part of the reply')
    const body = fake.requests.at(-1)!.body
    assert.equal(body.thinking, { type: 'enabled', budget_tokens: budget })
    assert.is(body.max_tokens, budget + 1024)
  }
  for (const off of ['off', null]) {
    await provider().complete(call(USER, { thinking: off }))
    const body = fake.requests.at(-1)!.body
    assert.not.ok('thinking' in body)
    assert.is(body.max_tokens, 1024)
  }
})

anthropic('does not double /v1 when the base URL already ends with it', async () => {
  await provider({ baseUrl: `${fake.url}/v1/` }).complete(call())
  assert.is(fake.requests[0]!.path, '/v1/messages')
})

anthropic('retries a 529 overloaded and a 429, then returns the reply', async () => {
  fake.queue({ status: 529 }, { status: 429, retryAfter: 0 }, { reply: 'finally' })
  const reply = await provider().complete(call())
  assert.is(reply.text, 'finally')
  assert.is(fake.requests.length, 3)
})

anthropic('gives up on 500s after maxRetries retries, quoting the error message', async () => {
  fake.queue({ status: 500 }, { status: 500 }, { status: 500 })
  const err = await rejectionOf(provider({ maxRetries: 2 }).complete(call()), ModelError)
  assert.is(err.message, 'anthropic provider "claude" answered 500 after 3 attempts: Internal server error')
  assert.is(fake.requests.length, 3)
})

anthropic('does not retry a 401, and the key is not in the message', async () => {
  const wrong = 'sk-ant-api03-wrong-ffffffffffffffffffffffff'
  const err = await rejectionOf(provider({ apiKey: wrong }).complete(call()), ModelError)
  assert.is(err.message, 'anthropic provider "claude" answered 401: invalid x-api-key')
  assert.is(fake.requests.length, 1)
})

anthropic('does not retry a 400 and quotes the message, with the key redacted', async () => {
  fake.queue({ status: 400, message: `messages.0.content: bad input near ${KEY}` })
  const err = await rejectionOf(provider().complete(call()), ModelError)
  assert.is(err.message, 'anthropic provider "claude" answered 400: messages.0.content: bad input near [redacted]')
  assert.is(fake.requests.length, 1)
})

anthropic('reports an answer without content[] as malformed', async () => {
  fake.queue('malformed', 'ok')
  const err = await rejectionOf(provider().complete(call()), ModelError)
  assert.is(err.message, 'anthropic provider "claude" returned a malformed answer: no content[]')
  assert.is(fake.requests.length, 1)
})

anthropic('reports an answer with no text block as malformed, naming the stop reason', async () => {
  fake.queue({ raw: JSON.stringify({ id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [{ type: 'thinking', thinking: 'long thoughts', signature: 's' }], stop_reason: 'max_tokens', stop_sequence: null, usage: { input_tokens: 1, output_tokens: 2048 } }) })
  const err = await rejectionOf(provider().complete(call()), ModelError)
  assert.is(err.message, 'anthropic provider "claude" returned a malformed answer: no text block in content[] (stop_reason max_tokens)')
})

anthropic('retries an attempt that hangs past timeoutMs, then fails', async () => {
  fake.queue('hang', 'hang')
  const err = await rejectionOf(provider({ timeoutMs: 200, maxRetries: 1 }).complete(call()), ModelError)
  assert.is(err.message, 'anthropic provider "claude" did not answer within 200 ms after 2 attempts')
  assert.is(fake.requests.length, 2)
})

anthropic('rejects at once, without a retry, when the turn is aborted mid-request', async () => {
  fake.queue('hang')
  const controller = new AbortController()
  const pending = provider({ timeoutMs: 10_000 }).complete(call(USER, { signal: controller.signal }))
  await sleep(150)
  const abortedAt = Date.now()
  controller.abort()
  await rejectionOf(pending, ModelError)
  assert.ok(Date.now() - abortedAt < 100)
  await sleep(300)
  assert.is(fake.requests.length, 1)
})

anthropic('reports a port where nothing listens as could not be reached, after every attempt', async () => {
  const err = await rejectionOf(provider({ baseUrl: await refusedUrl(), maxRetries: 1 }).complete(call()), ModelError)
  assert.is(err.message, 'anthropic provider "claude" could not be reached (ECONNREFUSED) after 2 attempts')
  assert.not.match(err.message, KEY)
})

anthropic.run()
