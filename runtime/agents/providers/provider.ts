// What a model provider is, as the engine calls it: one call (messages, a reasoning level, the
// turn's AbortSignal) and its reply. A leaf module of types, so that the providers beside it and the
// registry that builds them (runtime/agents/models.ts, which re-exports these) never import each other.

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
  /** answers in-process without I/O (builtin/echo): no deadline timer or abort signal is set up for it */
  readonly local?: boolean
}
