// The model registry built from a bundle's providers: keys resolved once at creation (a missing one
// is a SecretError naming the reference), builtin/echo, unknown providers, and each provider id
// routed to its protocol over real HTTP.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Agent, type Dispatcher } from 'undici'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { BundleProvider } from '../../../runtime/bundle/format.js'
import { ModelError, createModelRegistry, echoProvider } from '../../../runtime/agents/models.js'
import { SecretError } from '../../../runtime/bundle/secrets.js'
import { startFakeAnthropic } from '../../fakes/anthropic.js'
import { startFakeOpenAI } from '../../fakes/openai.js'
import { tempDir } from '../../helpers/paths.js'

const signal = () => new AbortController().signal
const hello = [{ role: 'user' as const, content: 'hello' }]

function openaiProvider(id: string, baseUrl: string, apiKey: BundleProvider['apiKey']): BundleProvider {
  return { id, type: 'openai', baseUrl, apiKey, timeoutMs: 5_000, maxRetries: 0 }
}

const registry = suite('createModelRegistry')

registry('resolves an environment key once, at creation', async () => {
  const fake = await startFakeOpenAI({ apiKey: 'sk-from-env-123456' })
  try {
    process.env.HOOKGATE_TEST_PROVIDER_KEY = 'sk-from-env-123456'
    const models = createModelRegistry([openaiProvider('openai', fake.url, { kind: 'env', name: 'HOOKGATE_TEST_PROVIDER_KEY' })], '/nonexistent')
    delete process.env.HOOKGATE_TEST_PROVIDER_KEY
    const reply = await models.providerFor('openai/gpt-4o-mini').complete({ model: 'openai/gpt-4o-mini', messages: hello, thinking: null, signal: signal() })
    assert.is(reply.text, 'hello')
    assert.is(fake.requests[0]!.headers.authorization, 'Bearer sk-from-env-123456')
    assert.is(fake.requests[0]!.body.model, 'gpt-4o-mini')
  } finally {
    await fake.close()
  }
})

registry('throws a SecretError naming ${NAME} and the provider when an environment key is missing', () => {
  delete process.env.HOOKGATE_TEST_MISSING_KEY
  try {
    createModelRegistry([openaiProvider('openai', 'https://api.openai.com/v1', { kind: 'env', name: 'HOOKGATE_TEST_MISSING_KEY' })], '/nonexistent')
    assert.unreachable('expected a SecretError')
  } catch (err) {
    assert.instance(err, SecretError)
    assert.match((err as Error).message, '${HOOKGATE_TEST_MISSING_KEY}')
    assert.match((err as Error).message, 'provider "openai"')
  }
})

registry('reads a key from a file relative to the config directory', async () => {
  const dir = tempDir('hookgate-providers-')
  writeFileSync(join(dir, 'anthropic.key'), 'sk-ant-from-file\n')
  const fake = await startFakeAnthropic({ apiKey: 'sk-ant-from-file' })
  try {
    const models = createModelRegistry([{ id: 'anthropic', type: 'anthropic', baseUrl: fake.url, apiKey: { kind: 'file', path: 'anthropic.key' }, timeoutMs: 5_000, maxRetries: 0 }], dir)
    const reply = await models.providerFor('anthropic/claude-haiku-4-5').complete({ model: 'anthropic/claude-haiku-4-5', messages: hello, thinking: null, signal: signal() })
    assert.is(reply.text, 'hello')
    assert.is(fake.requests[0]!.headers['x-api-key'], 'sk-ant-from-file')
    assert.is(fake.requests[0]!.body.model, 'claude-haiku-4-5')
  } finally {
    await fake.close()
  }
})

registry('routes each provider id to its own protocol and base URL', async () => {
  const local = await startFakeOpenAI()
  const claude = await startFakeAnthropic()
  try {
    const models = createModelRegistry([
      openaiProvider('local', local.url, null),
      { id: 'claude', type: 'anthropic', baseUrl: claude.url, apiKey: { kind: 'value', value: 'sk-ant-value' }, timeoutMs: 5_000, maxRetries: 0 },
    ], '/nonexistent')
    await models.providerFor('local/llama3.1:8b').complete({ model: 'local/llama3.1:8b', messages: hello, thinking: null, signal: signal() })
    await models.providerFor('claude/claude-sonnet-4-5').complete({ model: 'claude/claude-sonnet-4-5', messages: hello, thinking: 'low', signal: signal() })
    assert.is(local.requests.length, 1)
    assert.is(local.requests[0]!.body.model, 'llama3.1:8b')
    assert.is(local.requests[0]!.headers.authorization, undefined)
    assert.is(claude.requests.length, 1)
    assert.is(claude.requests[0]!.body.model, 'claude-sonnet-4-5')
    assert.equal(claude.requests[0]!.body.thinking, { type: 'enabled', budget_tokens: 2048 })
  } finally {
    await local.close()
    await claude.close()
  }
})

registry('answers builtin/echo offline with the echo provider', async () => {
  const models = createModelRegistry([], '/nonexistent')
  assert.is(models.providerFor('builtin/echo'), echoProvider)
  const reply = await models.providerFor('builtin/echo').complete({ model: 'builtin/echo', messages: hello, thinking: null, signal: signal() })
  assert.is(reply.text, 'echo: hello')
})

registry('throws a ModelError for a provider it does not know', () => {
  const models = createModelRegistry([openaiProvider('local', 'http://127.0.0.1:1/v1', null)], '/nonexistent')
  assert.throws(() => models.providerFor('mystery/model-1'), (e: unknown) => e instanceof ModelError && /no provider "mystery" is configured for model "mystery\/model-1"/.test(e.message))
})

registry('says thinking is supported for configured HTTP providers only', () => {
  const models = createModelRegistry([openaiProvider('local', 'http://127.0.0.1:1/v1', null)], '/nonexistent')
  assert.ok(models.supportsThinking('local/llama3.1:8b'))
  assert.not.ok(models.supportsThinking('builtin/echo'))
  assert.not.ok(models.supportsThinking('mystery/model-1'))
})

registry('sends every request through the dispatcher it was given', async () => {
  const fake = await startFakeOpenAI()
  const seen: string[] = []
  class CountingAgent extends Agent {
    override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      seen.push(`${options.method} ${options.path}`)
      return super.dispatch(options, handler)
    }
  }
  const dispatcher = new CountingAgent()
  try {
    const models = createModelRegistry([openaiProvider('local', fake.url, null)], '/nonexistent', { dispatcher })
    await models.providerFor('local/m').complete({ model: 'local/m', messages: hello, thinking: null, signal: signal() })
    assert.equal(seen, ['POST /v1/chat/completions'])
  } finally {
    await dispatcher.close()
    await fake.close()
  }
})

registry.run()
