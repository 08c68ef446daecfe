// The Anthropic Messages API: POST {baseUrl}/v1/messages with x-api-key and anthropic-version;
// system messages become the top-level `system` string, the reply is the text blocks of `content`.
import type { ModelProvider } from './provider.js'
import { apiModelName, joinUrl, malformed, postJson, thinkingLevel, type ProviderSettings, type ThinkingLevel } from './http.js'

export const ANTHROPIC_VERSION = '2023-06-01'
export const DEFAULT_MAX_TOKENS = 1024
/** thinking level → budget_tokens (1024 is the smallest budget the API accepts) */
export const THINKING_BUDGETS: Readonly<Record<ThinkingLevel, number>> = { minimal: 1024, low: 2048, medium: 8192, high: 16384 }

export function createAnthropicProvider(settings: ProviderSettings): ModelProvider {
  const label = `anthropic provider "${settings.id}"`
  // https://api.anthropic.com → …/v1/messages; a base that already ends in /v1 is not doubled
  const url = /\/v1\/*$/.test(settings.baseUrl) ? joinUrl(settings.baseUrl, '/messages') : joinUrl(settings.baseUrl, '/v1/messages')
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json', 'anthropic-version': ANTHROPIC_VERSION }
  if (settings.apiKey !== null) headers['x-api-key'] = settings.apiKey
  const secrets = settings.apiKey !== null ? [settings.apiKey] : []

  return {
    async complete(call) {
      const level = thinkingLevel(call.thinking, label)
      const system = call.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n\n')
      const budget = level === null ? null : THINKING_BUDGETS[level]
      const body = {
        model: apiModelName(call.model, label),
        // max_tokens counts the thinking too, so it stays DEFAULT_MAX_TOKENS above the budget
        max_tokens: budget === null ? DEFAULT_MAX_TOKENS : budget + DEFAULT_MAX_TOKENS,
        ...(system !== '' ? { system } : {}),
        messages: call.messages.filter((m) => m.role !== 'system').map((m) => ({ role: m.role, content: m.content })),
        ...(budget !== null ? { thinking: { type: 'enabled', budget_tokens: budget } } : {}),
      }
      const answer = await postJson({ label, url, headers, body, secrets, timeoutMs: settings.timeoutMs, maxRetries: settings.maxRetries, dispatcher: settings.dispatcher, signal: call.signal })
      return { text: replyText(answer, label) }
    },
  }
}

/** The text blocks of `content`, joined; thinking and other blocks are left out. */
function replyText(answer: unknown, label: string): string {
  const content = (answer as { content?: unknown } | null)?.content
  if (!Array.isArray(content)) throw malformed(label, 'no content[]')
  const texts = content.filter((b) => (b as { type?: unknown })?.type === 'text' && typeof (b as { text?: unknown }).text === 'string').map((b) => (b as { text: string }).text)
  if (texts.length === 0) {
    const stop = (answer as { stop_reason?: unknown }).stop_reason
    throw malformed(label, `no text block in content[]${typeof stop === 'string' ? ` (stop_reason ${stop.slice(0, 40)})` : ''}`)
  }
  return texts.join('')
}
