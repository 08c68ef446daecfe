// The pieces of the shared HTTP layer that need no server: the backoff schedule, Retry-After,
// the quoted error detail, redaction and the model name sent to the API.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { ModelError } from '../../../runtime/agents/models.js'
import { apiModelName, backoffDelay, errorDetail, joinUrl, parseRetryAfter, redact } from '../../../runtime/agents/providers/http.js'

const backoff = suite('backoffDelay')

backoff('doubles from 250 ms and jitters each wait into the upper half of its step', () => {
  assert.equal([1, 2, 3, 4].map((n) => backoffDelay(n, () => 1)), [250, 500, 1000, 2000])
  assert.equal([1, 2, 3, 4].map((n) => backoffDelay(n, () => 0)), [125, 250, 500, 1000])
  for (let i = 0; i < 50; i++) {
    const d = backoffDelay(2)
    assert.ok(d >= 250 && d <= 500, `${d}`)
  }
})

backoff('never waits longer than 8 s', () => {
  assert.is(backoffDelay(6, () => 1), 8000)
  assert.is(backoffDelay(30, () => 1), 8000)
  assert.is(backoffDelay(30, () => 0), 4000)
})

backoff.run()

const retryAfter = suite('parseRetryAfter')

retryAfter('reads delta-seconds, whole or fractional', () => {
  assert.is(parseRetryAfter('0'), 0)
  assert.is(parseRetryAfter('2'), 2000)
  assert.is(parseRetryAfter(' 1.5 '), 1500)
  assert.is(parseRetryAfter(['3', '9']), 3000)
})

retryAfter('reads an HTTP date as the time left until it', () => {
  const now = Date.parse('2025-01-01T00:00:00Z')
  assert.is(parseRetryAfter('Wed, 01 Jan 2025 00:00:05 GMT', now), 5000)
  assert.is(parseRetryAfter('Tue, 31 Dec 2024 23:59:00 GMT', now), 0)
})

retryAfter('returns null when the header is absent or unreadable', () => {
  assert.is(parseRetryAfter(undefined), null)
  assert.is(parseRetryAfter(''), null)
  assert.is(parseRetryAfter('soon'), null)
  assert.is(parseRetryAfter('-1'), null)
})

retryAfter.run()

const detail = suite('errorDetail')

detail('quotes error.message of OpenAI and Anthropic error bodies', () => {
  assert.is(errorDetail('{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}', []), 'Rate limit reached')
  assert.is(errorDetail('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', []), 'Overloaded')
})

detail('quotes a string error, a message or a detail field (Ollama, vLLM, proxies)', () => {
  assert.is(errorDetail('{"error":"model \\"llama3\\" not found, try pulling it first"}', []), 'model "llama3" not found, try pulling it first')
  assert.is(errorDetail('{"message":"Bad gateway"}', []), 'Bad gateway')
  assert.is(errorDetail('{"detail":"Not Found"}', []), 'Not Found')
})

detail('quotes the raw text on one line when the body is not JSON', () => {
  assert.is(errorDetail('<html>\n  <body>502 Bad Gateway</body>\n</html>\n', []), '<html> <body>502 Bad Gateway</body> </html>')
  assert.is(errorDetail('', []), '')
})

detail('redacts secrets before cutting to 200 characters, so no part of a key survives', () => {
  const key = 'sk-abcdefghijklmnopqrstuvwxyz'
  const text = `${'a'.repeat(190)}${key}`
  const out = errorDetail(JSON.stringify({ error: { message: text } }), [key])
  assert.not.match(out, 'sk-abc')
  assert.is(out, `${'a'.repeat(190)}[redacted]`)
  assert.is(errorDetail('y'.repeat(300), []).length, 201)
})

detail.run()

const redaction = suite('redact')

redaction('replaces every occurrence of every secret and ignores empty ones', () => {
  assert.is(redact('a KEY b KEY c OTHER', ['KEY', 'OTHER', '']), 'a [redacted] b [redacted] c [redacted]')
  assert.is(redact('nothing here', []), 'nothing here')
})

redaction.run()

const modelName = suite('apiModelName')

modelName('keeps what follows the first slash', () => {
  assert.is(apiModelName('openai/gpt-4o-mini', 'p'), 'gpt-4o-mini')
  assert.is(apiModelName('local/llama3.1:8b', 'p'), 'llama3.1:8b')
  assert.is(apiModelName('openrouter/anthropic/claude-3.5-sonnet', 'p'), 'anthropic/claude-3.5-sonnet')
})

modelName('throws a ModelError for a model that is not provider/model', () => {
  for (const bad of ['gpt-4o', '/gpt-4o', 'openai/']) assert.throws(() => apiModelName(bad, 'p'), (e: unknown) => e instanceof ModelError)
})

modelName.run()

const join = suite('joinUrl')

join('joins without doubling slashes', () => {
  assert.is(joinUrl('http://127.0.0.1:11434/v1', '/chat/completions'), 'http://127.0.0.1:11434/v1/chat/completions')
  assert.is(joinUrl('http://127.0.0.1:11434/v1//', '/chat/completions'), 'http://127.0.0.1:11434/v1/chat/completions')
})

join.run()
