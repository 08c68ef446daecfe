// Model providers behind one call. The registry is built once from the bundle's providers: every
// API key is resolved at creation (a missing one is a start-up error, not a failed turn), and each
// `provider/model` is answered by the built-in offline model or by the HTTP provider of that id
// (OpenAI-compatible or Anthropic, see ./providers/).
import type { Dispatcher } from 'undici'
import type { BundleProvider } from '../bundle/format.js'
import { SecretError, resolveSecretValue } from '../bundle/secrets.js'
import { createAnthropicProvider } from './providers/anthropic.js'
import type { ProviderSettings } from './providers/http.js'
import { ModelError } from './providers/model-error.js'
import { createOpenAIProvider } from './providers/openai.js'
import type { ModelProvider } from './providers/provider.js'

export { ModelError }
export type { ChatMessage, ModelCall, ModelProvider, ModelReply } from './providers/provider.js'

/** The most `builtin/echo` repeats of its prompt: a real model's reply is bounded too. */
export const ECHO_MAX_CHARS = 4096

/**
 * `builtin/echo`: deterministic, offline; answers with the last user message it was given, cut
 * to ECHO_MAX_CHARS (a reply that repeated a 250 KB prompt whole made records no store wanted).
 */
export const echoProvider: ModelProvider = {
  local: true,
  async complete(call) {
    if (call.signal.aborted) throw new ModelError('the turn was aborted')
    const last = [...call.messages].reverse().find((m) => m.role === 'user')
    const content = last?.content ?? ''
    return { text: content.length <= ECHO_MAX_CHARS ? `echo: ${content}` : `echo: ${content.slice(0, ECHO_MAX_CHARS)}… (${content.length - ECHO_MAX_CHARS} more characters)` }
  },
}

export interface ModelRegistry {
  /** The provider that answers `provider/model`; a ModelError when no such provider is configured. */
  providerFor(model: string): ModelProvider
  /** Whether `thinking` means anything for this model (false for builtin/… and unknown providers). */
  supportsThinking(model: string): boolean
}

export interface ModelRegistryOptions {
  /** the undici dispatcher every HTTP provider uses (tests, proxies); undici's global one when absent */
  dispatcher?: Dispatcher
}

function providerIdOf(model: string): string {
  const slash = model.indexOf('/')
  return slash < 0 ? model : model.slice(0, slash)
}

/**
 * Builds the providers of a bundle. Throws a SecretError naming the reference (never a value) when
 * an API key cannot be resolved, so the caller can refuse to start.
 */
export function createModelRegistry(providers: BundleProvider[], configDir: string, options: ModelRegistryOptions = {}): ModelRegistry {
  const byId = new Map<string, ModelProvider>()
  for (const p of providers) {
    let apiKey: string | null = null
    if (p.apiKey !== null) {
      try {
        apiKey = resolveSecretValue(p.apiKey, configDir)
      } catch (err) {
        if (err instanceof SecretError) throw new SecretError(`provider "${p.id}": ${err.message}`)
        throw err
      }
    }
    const settings: ProviderSettings = { id: p.id, baseUrl: p.baseUrl, apiKey, timeoutMs: p.timeoutMs, maxRetries: p.maxRetries, dispatcher: options.dispatcher }
    if (p.type === 'openai') byId.set(p.id, createOpenAIProvider(settings))
    else if (p.type === 'anthropic') byId.set(p.id, createAnthropicProvider(settings))
    else throw new ModelError(`provider "${p.id}" has type "${String((p as { type: unknown }).type)}", which this runtime cannot call`)
  }
  return {
    providerFor(model) {
      const id = providerIdOf(model)
      if (id === 'builtin') return echoProvider
      const provider = byId.get(id)
      if (!provider) throw new ModelError(`no provider "${id}" is configured for model "${model}"`)
      return provider
    },
    supportsThinking(model) {
      const id = providerIdOf(model)
      return id !== 'builtin' && byId.has(id)
    },
  }
}
