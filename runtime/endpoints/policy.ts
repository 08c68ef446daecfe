// The routing policy every agent-bound request passes, whichever endpoint it came by: which agent
// (allowedAgentIds, unknown ids → default agent), which session key (a request's own, a mapping's
// rendered one, the default or a fresh one), which model and thinking; and the readers of a request's
// fields the built-in endpoints (wake.ts, agent.ts) parse their payloads with.
import { randomUUID } from 'node:crypto'
import type { BundleConfig, WakeMode } from '../bundle/format.js'
import { HttpError } from '../http/errors.js'

/** A field of the request that is missing, of the wrong type or out of range. */
export function invalid(message: string): HttpError {
  return new HttpError(400, 'invalid_payload', message)
}

/** The payload as the object a built-in endpoint's fields are read from. */
export function asObject(payload: unknown): Record<string, unknown> {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) throw invalid('the body must be a JSON object')
  return payload as Record<string, unknown>
}

/** One field of the given type; null when absent (or a 400 when required). */
export function field<T>(o: Record<string, unknown>, key: string, type: 'string' | 'boolean' | 'number', required: boolean): T | null {
  const v = Object.hasOwn(o, key) ? o[key] : undefined
  if (v === undefined || v === null) {
    if (required) throw invalid(`"${key}" is required`)
    return null
  }
  if (typeof v !== type) throw invalid(`"${key}" must be a ${type}`)
  if (type === 'string' && required && (v as string).trim() === '') throw invalid(`"${key}" must not be empty`)
  return v as T
}

/** A wake mode field: now (the default) or next-heartbeat. */
export function mode(o: Record<string, unknown>, key: string): WakeMode {
  const v = field<string>(o, key, 'string', false)
  if (v === null) return 'now'
  if (v !== 'now' && v !== 'next-heartbeat') throw invalid(`"${key}" must be "now" or "next-heartbeat"`)
  return v
}

/**
 * The agent a request runs on. An explicit id that names no agent resolves to the default agent
 * first (seed rule), then the allowlist is checked: null allows any, [] blocks explicit routing.
 */
export function resolveAgentId(explicit: string | null, config: BundleConfig): string {
  if (explicit === null) return config.defaultAgentId
  const known = config.agents.some((a) => a.id === explicit)
  const resolved = known ? explicit : config.defaultAgentId
  const allowed = config.policy.allowedAgentIds
  if (allowed !== null && !allowed.includes(resolved)) {
    throw new HttpError(400, 'agent_not_allowed', allowed.length === 0 ? 'explicit agentId routing is disabled on this server' : `agent "${resolved}" is not allowed for hooks`)
  }
  return resolved
}

/** The longest session key accepted from anywhere: a request, a rendered template, a transform. */
export const MAX_SESSION_KEY_CHARS = 512

/** A caller-supplied key only when allowed and with an allowed prefix; else the default or a fresh hook:<uuid>. */
export function resolveRequestSessionKey(requested: string | null, config: BundleConfig): string {
  if (requested === null) return config.policy.defaultSessionKey ?? `hook:${randomUUID()}`
  if (!config.policy.allowRequestSessionKey) throw new HttpError(400, 'session_key_not_allowed', 'this server does not accept a sessionKey in the request')
  return checkSessionKey(requested, config)
}

/**
 * The key of a mapped agent action. A key rendered from a template or returned by a transform is
 * chosen by the payload as much as a request's own, so the prefixes and the length limit hold for it
 * too; allowRequestSessionKey does not apply (the mapping's author chose to derive the key). An
 * empty key means none: the default or a fresh hook:<uuid>.
 */
export function resolveMappedSessionKey(key: string | null, config: BundleConfig): string {
  if (key === null || key === '') return config.policy.defaultSessionKey ?? `hook:${randomUUID()}`
  return checkSessionKey(key, config)
}

function checkSessionKey(key: string, config: BundleConfig): string {
  if (key.length > MAX_SESSION_KEY_CHARS) throw new HttpError(400, 'invalid_payload', `"sessionKey" must be at most ${MAX_SESSION_KEY_CHARS} characters`)
  const prefixes = config.policy.allowedSessionKeyPrefixes
  if (prefixes.length > 0 && !prefixes.some((x) => key.startsWith(x))) {
    throw new HttpError(400, 'session_key_not_allowed', `sessionKey must start with one of: ${prefixes.join(', ')}`)
  }
  return key
}

/** thinking needs a model whose provider has a reasoning setting; the built-in model has none. */
export function checkThinking(thinking: string | null, model: string | null, agentId: string, config: BundleConfig): void {
  if (thinking === null || thinking === 'off') return
  const effective = model ?? config.agents.find((a) => a.id === agentId)?.model ?? ''
  if (effective.startsWith('builtin/')) throw new HttpError(400, 'thinking_unsupported', `thinking "${thinking}" is not available for ${effective}, which has no reasoning setting`)
}

/** A per-run model override must be one the agent is already configured with. */
export function checkModelOverride(model: string | null, agentId: string, config: BundleConfig): void {
  if (model === null) return
  const agent = config.agents.find((a) => a.id === agentId)
  const allowed = agent ? [agent.model, ...agent.fallbackModels] : []
  if (!allowed.includes(model)) throw new HttpError(400, 'model_not_allowed', `model "${model}" is not configured for agent "${agentId}"${allowed.length ? ` (configured: ${allowed.join(', ')})` : ''}`)
}
