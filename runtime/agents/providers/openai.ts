// Any OpenAI-compatible chat completions API (OpenAI, OpenRouter, Ollama, vLLM, LM Studio,
// llama.cpp server): POST {baseUrl}/chat/completions, the reply in choices[0].message.content.
import type { ModelProvider } from './provider.js'
import { apiModelName, joinUrl, malformed, postJson, redact, thinkingLevel, type ProviderSettings } from './http.js'
import { ModelError } from './model-error.js'

export function createOpenAIProvider(settings: ProviderSettings): ModelProvider {
  const label = `openai-compatible provider "${settings.id}"`
  const url = joinUrl(settings.baseUrl, '/chat/completions')
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' }
  if (settings.apiKey !== null) headers.authorization = `Bearer ${settings.apiKey}`
  const secrets = settings.apiKey !== null ? [settings.apiKey] : []

  return {
    async complete(call) {
      const effort = thinkingLevel(call.thinking, label)
      const body = {
        model: apiModelName(call.model, label),
        messages: call.messages.map((m) => ({ role: m.role, content: m.content })),
        ...(effort !== null ? { reasoning_effort: effort } : {}),
      }
      const answer = await postJson({ label, url, headers, body, secrets, timeoutMs: settings.timeoutMs, maxRetries: settings.maxRetries, dispatcher: settings.dispatcher, signal: call.signal })
      return { text: replyText(answer, label, secrets) }
    },
  }
}

/** choices[0].message.content: a string, or (some compatible servers) a list of text parts. */
function replyText(answer: unknown, label: string, secrets: string[]): string {
  const choice = (answer as { choices?: unknown } | null)?.choices
  const message = Array.isArray(choice) ? (choice[0] as { message?: { content?: unknown; refusal?: unknown } } | undefined)?.message : undefined
  const content = message?.content
  if (typeof content === 'string') return content
  if (Array.isArray(content) && content.length > 0 && content.every((p) => typeof (p as { text?: unknown })?.text === 'string')) {
    return content.map((p) => (p as { text: string }).text).join('')
  }
  if (typeof message?.refusal === 'string' && message.refusal !== '') throw new ModelError(`${label} refused: ${redact(message.refusal, secrets).slice(0, 200)}`)
  throw malformed(label, 'no choices[0].message.content')
}
