// The OpenAI-compatible provider against a fake chat completions API over real HTTP: the request it
// sends, the reply it reads, and what it does with rate limits, server errors, hangs, aborts,
// malformed answers and a port where nothing listens.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { ModelError, type ChatMessage } from '../../../runtime/agents/models.js'
import type { ProviderSettings } from '../../../runtime/agents/providers/http.js'
import { createOpenAIProvider } from '../../../runtime/agents/providers/openai.js'
import { refusedUrl } from '../../fakes/fake-server.js'
import { startFakeOpenAI, type FakeApi } from '../../fakes/openai.js'
import { rejectionOf, sleep } from '../../helpers/async.js'

const KEY = 'sk-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0'
const USER: ChatMessage[] = [{ role: 'user', content: 'hello there' }]

let fake: FakeApi

function provider(overrides: Partial<ProviderSettings> = {}) {
  return createOpenAIProvider({ id: 'local', baseUrl: fake.url, apiKey: KEY, timeoutMs: 5_000, maxRetries: 2, ...overrides })
}

function call(messages: ChatMessage[] = USER, options: { model?: string; thinking?: string | null; signal?: AbortSignal } = {}) {
  return { model: options.model ?? 'local/llama3.1:8b', messages, thinking: options.thinking ?? null, signal: options.signal ?? new AbortController().signal }
}

const openai = suite('createOpenAIProvider')

openai.before.each(async () => { fake = await startFakeOpenAI({ apiKey: KEY }) })
openai.after.each(async () => { await fake.close() })

openai('returns choices[0].message.content of the answer', async () => {
  fake.queue({ reply: 'General Kenobi.' })
  const reply = await provider().complete(call())
  assert.equal(reply, { text: 'General Kenobi.' })
})

openai('posts exactly the chat completions request: path, Bearer key, JSON, model without the provider prefix', async () => {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'first' },
    { role: 'assistant', content: 'noted' },
    { role: 'user', content: 'second' },
  ]
  const reply = await provider().complete(call(messages))
  assert.is(reply.text, 'second', 'the fake echoes the last user message')
  assert.is(fake.requests.length, 1)
  const req = fake.requests[0]!
  assert.is(req.method, 'POST')
  assert.is(req.path, '/v1/chat/completions')
  assert.is(req.headers.authorization, `Bearer ${KEY}`)
  assert.is(req.headers['content-type'], 'application/json')
  assert.equal(req.body, { model: 'llama3.1:8b', messages })
})

openai('keeps everything after the first slash as the model name', async () => {
  await provider({ id: 'openrouter' }).complete(call(USER, { model: 'openrouter/meta-llama/llama-3.1-8b-instruct' }))
  assert.is(fake.requests[0]!.body.model, 'meta-llama/llama-3.1-8b-instruct')
})

openai('sends no Authorization header when the provider has no key', async () => {
  await fake.close()
  fake = await startFakeOpenAI()
  const reply = await provider({ apiKey: null }).complete(call())
  assert.is(reply.text, 'hello there')
  assert.is(fake.requests[0]!.headers.authorization, undefined)
})

openai('maps thinking levels to reasoning_effort and leaves it out for off and null', async () => {
  for (const level of ['minimal', 'low', 'medium', 'high']) {
    await provider().complete(call(USER, { thinking: level }))
    assert.is(fake.requests.at(-1)!.body.reasoning_effort, level)
  }
  for (const off of ['off', null]) {
    await provider().complete(call(USER, { thinking: off }))
    assert.not.ok('reasoning_effort' in fake.requests.at(-1)!.body, `reasoning_effort sent for thinking ${off}`)
  }
})

openai('refuses a thinking value no provider knows, without a request', async () => {
  const err = await rejectionOf(provider().complete(call(USER, { thinking: 'extreme' })), ModelError)
  assert.match(err.message, 'thinking "extreme"')
  assert.is(fake.requests.length, 0)
})

openai('retries a 429 after the Retry-After it was given, then returns the reply', async () => {
  fake.queue({ status: 429, retryAfter: 1 }, 'ok')
  const reply = await provider().complete(call())
  assert.is(reply.text, 'hello there')
  assert.is(fake.requests.length, 2)
  const gap = fake.requests[1]!.at - fake.requests[0]!.at
  assert.ok(gap >= 950, `the retry came ${gap} ms after the 429, before Retry-After: 1`)
})

openai('retries a 429 with Retry-After: 0 at once', async () => {
  fake.queue({ status: 429, retryAfter: 0 }, 'ok')
  const reply = await provider().complete(call())
  assert.is(reply.text, 'hello there')
  assert.is(fake.requests.length, 2)
  assert.ok(fake.requests[1]!.at - fake.requests[0]!.at < 200)
})

openai('gives up on a 500 after maxRetries retries, naming the status and the attempts', async () => {
  fake.queue({ status: 500 }, { status: 500 }, { status: 500 }, 'ok')
  const err = await rejectionOf(provider({ maxRetries: 2 }).complete(call()), ModelError)
  assert.is(err.message, 'openai-compatible provider "local" answered 500 after 3 attempts: The server had an error while processing your request. Sorry about that!')
  assert.ok(err.retryable)
  assert.is(fake.requests.length, 3)
})

openai('makes one attempt only when maxRetries is 0', async () => {
  fake.queue({ status: 503 }, 'ok')
  const err = await rejectionOf(provider({ maxRetries: 0 }).complete(call()), ModelError)
  assert.is(err.message, 'openai-compatible provider "local" answered 503: The engine is currently overloaded, please try again later')
  assert.is(fake.requests.length, 1)
})

openai('does not retry a 400 and quotes the error message from the body', async () => {
  fake.queue({ status: 400, message: "Invalid 'messages[0].content': string too long." }, 'ok')
  const err = await rejectionOf(provider().complete(call()), ModelError)
  assert.is(err.message, `openai-compatible provider "local" answered 400: Invalid 'messages[0].content': string too long.`)
  assert.not.ok(err.retryable)
  assert.is(fake.requests.length, 1)
})

openai('does not retry a 401 for a wrong key, and the key is not in the message', async () => {
  const wrong = 'sk-wrong-0123456789abcdef0123456789abcdef'
  const err = await rejectionOf(provider({ apiKey: wrong }).complete(call()), ModelError)
  assert.match(err.message, /^openai-compatible provider "local" answered 401: Incorrect API key provided/)
  assert.not.match(err.message, wrong)
  assert.is(fake.requests.length, 1)
})

openai('quotes at most 200 characters of the error message', async () => {
  fake.queue({ status: 422, message: 'x'.repeat(5000) })
  const err = await rejectionOf(provider().complete(call()), ModelError)
  assert.is(err.message, `openai-compatible provider "local" answered 422: ${'x'.repeat(200)}…`)
})

openai('retries an attempt that hangs past timeoutMs, then fails naming the deadline', async () => {
  fake.queue('hang', 'hang', 'ok')
  const started = Date.now()
  const err = await rejectionOf(provider({ timeoutMs: 200, maxRetries: 1 }).complete(call()), ModelError)
  assert.is(err.message, 'openai-compatible provider "local" did not answer within 200 ms after 2 attempts')
  assert.ok(err.retryable)
  assert.is(fake.requests.length, 2)
  assert.ok(Date.now() - started < 2_000)
})

openai('returns the reply of the attempt after one that hung', async () => {
  fake.queue('hang', { reply: 'late but here' })
  const reply = await provider({ timeoutMs: 200 }).complete(call())
  assert.is(reply.text, 'late but here')
  assert.is(fake.requests.length, 2)
})

openai('rejects at once, without a retry, when the turn is aborted mid-request', async () => {
  fake.queue('hang')
  const controller = new AbortController()
  const pending = provider({ timeoutMs: 10_000, maxRetries: 3 }).complete(call(USER, { signal: controller.signal }))
  await sleep(150)
  assert.is(fake.requests.length, 1, 'the request reached the fake')
  const abortedAt = Date.now()
  controller.abort()
  const err = await rejectionOf(pending, ModelError)
  assert.ok(Date.now() - abortedAt < 100, `took ${Date.now() - abortedAt} ms after the abort`)
  assert.match(err.message, 'cancelled')
  assert.not.ok(err.retryable)
  await sleep(400)
  assert.is(fake.requests.length, 1, 'no retry after the abort')
})

openai('rejects at once when the turn is aborted while waiting to retry', async () => {
  fake.queue({ status: 429, retryAfter: 5 })
  const controller = new AbortController()
  const pending = provider().complete(call(USER, { signal: controller.signal }))
  await sleep(150)
  const abortedAt = Date.now()
  controller.abort()
  await rejectionOf(pending, ModelError)
  assert.ok(Date.now() - abortedAt < 100)
  assert.is(fake.requests.length, 1)
})

openai('sends nothing when the turn is already aborted', async () => {
  const controller = new AbortController()
  controller.abort()
  await rejectionOf(provider().complete(call(USER, { signal: controller.signal })), ModelError)
  assert.is(fake.requests.length, 0)
})

openai('reports an answer without choices[0].message.content as malformed, without a retry', async () => {
  fake.queue('malformed', 'ok')
  const err = await rejectionOf(provider().complete(call()), ModelError)
  assert.is(err.message, 'openai-compatible provider "local" returned a malformed answer: no choices[0].message.content')
  assert.is(fake.requests.length, 1)
})

openai('reports a 200 whose body is not JSON as malformed', async () => {
  fake.queue({ raw: '<html>gateway</html>', contentType: 'text/html' })
  const err = await rejectionOf(provider().complete(call()), ModelError)
  assert.is(err.message, 'openai-compatible provider "local" returned a malformed answer: the body is not JSON')
})

openai('refuses an answer larger than 4 MiB', async () => {
  fake.queue({ raw: JSON.stringify({ choices: [{ message: { content: 'x'.repeat(4 * 1024 * 1024) } }] }) })
  const err = await rejectionOf(provider().complete(call()), ModelError)
  assert.is(err.message, 'openai-compatible provider "local" returned an answer larger than 4 MiB')
})

openai('retries a connection closed without an answer', async () => {
  fake.queue('close', 'ok')
  const reply = await provider().complete(call())
  assert.is(reply.text, 'hello there')
  assert.is(fake.requests.length, 2)
})

openai('reports a connection closed on every attempt as dropped', async () => {
  fake.queue('close', 'close')
  const err = await rejectionOf(provider({ maxRetries: 1 }).complete(call()), ModelError)
  assert.match(err.message, /^openai-compatible provider "local" dropped the connection \((UND_ERR_SOCKET|ECONNRESET)\) after 2 attempts$/)
  assert.ok(err.retryable)
})

openai('reports a port where nothing listens as could not be reached, after every attempt', async () => {
  const err = await rejectionOf(provider({ baseUrl: await refusedUrl('/v1'), maxRetries: 2 }).complete(call()), ModelError)
  assert.is(err.message, 'openai-compatible provider "local" could not be reached (ECONNREFUSED) after 3 attempts')
  assert.ok(err.retryable)
})

openai('never puts the API key in an error message, even when the provider echoes it', async () => {
  const messages: string[] = []
  fake.queue({ status: 400, message: `key ${KEY} is not allowed here` })
  messages.push((await rejectionOf(provider().complete(call()), ModelError)).message)
  fake.queue({ status: 500, message: `upstream rejected ${KEY}` }, { status: 500, message: `upstream rejected ${KEY}` })
  messages.push((await rejectionOf(provider({ maxRetries: 1 }).complete(call()), ModelError)).message)
  fake.queue({ raw: `{"choices":[{"message":{"refusal":"I will not repeat ${KEY}","content":null}}]}` })
  messages.push((await rejectionOf(provider().complete(call()), ModelError)).message)
  fake.queue('malformed', 'hang')
  messages.push((await rejectionOf(provider().complete(call()), ModelError)).message)
  messages.push((await rejectionOf(provider({ timeoutMs: 100, maxRetries: 0 }).complete(call()), ModelError)).message)
  messages.push((await rejectionOf(provider({ baseUrl: await refusedUrl('/v1'), maxRetries: 0 }).complete(call()), ModelError)).message)
  for (const m of messages) assert.not.match(m, KEY, m)
  assert.match(messages[0]!, 'key [redacted] is not allowed here')
  assert.match(messages[1]!, 'upstream rejected [redacted]')
  assert.match(messages[2]!, 'refused: I will not repeat [redacted]')
})

openai.run()
