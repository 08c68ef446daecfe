// Model providers behind one call. This file has the built-in offline model; the HTTP providers
// (OpenAI-compatible, Anthropic) plug in through the same ModelProvider shape.

export interface ChatMessage { role: 'system' | 'user' | 'assistant'; content: string }

export interface ModelCall {
  /** provider/model */
  model: string
  messages: ChatMessage[]
  thinking: string | null
  signal: AbortSignal
}

export interface ModelReply { text: string }

export interface ModelProvider {
  complete(call: ModelCall): Promise<ModelReply>
}

export class ModelError extends Error {
  constructor(message: string, readonly retryable = false) {
    super(message)
  }
}

/** `builtin/echo`: deterministic, offline; answers with the last user message it was given. */
export const echoProvider: ModelProvider = {
  async complete(call) {
    if (call.signal.aborted) throw new ModelError('the turn was aborted')
    const last = [...call.messages].reverse().find((m) => m.role === 'user')
    return { text: `echo: ${last?.content ?? ''}` }
  },
}

export function providerFor(model: string): ModelProvider {
  const [provider] = model.split('/', 1)
  if (provider === 'builtin') return echoProvider
  throw new ModelError(`no provider "${provider}" is available in this runtime for model "${model}"`)
}
