// The two built-in endpoints' payloads (/wake, /agent) and the routing policy every agent-bound
// request passes: which agent (allowedAgentIds, unknown ids → default agent) and which session key.
import { randomUUID } from 'node:crypto'
import type { BundleConfig, WakeMode } from '../bundle/format.js'
import { HttpError } from '../http/errors.js'
import type { AgentAction } from './mapping.js'

export interface WakeRequest { text: string; mode: WakeMode; agentId: string | null; sessionKey: string | null }

/** An /agent call asks for the same fields a mapped agent action produces. */
export type AgentRequest = Omit<AgentAction, 'kind'>

const THINKING = new Set(['off', 'minimal', 'low', 'medium', 'high'])

function invalid(message: string): HttpError {
  return new HttpError(400, 'invalid_payload', message)
}

function asObject(payload: unknown): Record<string, unknown> {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) throw invalid('the body must be a JSON object')
  return payload as Record<string, unknown>
}

function field<T>(o: Record<string, unknown>, key: string, type: 'string' | 'boolean' | 'number', required: boolean): T | null {
  const v = Object.hasOwn(o, key) ? o[key] : undefined
  if (v === undefined || v === null) {
    if (required) throw invalid(`"${key}" is required`)
    return null
  }
  if (typeof v !== type) throw invalid(`"${key}" must be a ${type}`)
  if (type === 'string' && required && (v as string).trim() === '') throw invalid(`"${key}" must not be empty`)
  return v as T
}

function mode(o: Record<string, unknown>, key: string): WakeMode {
  const v = field<string>(o, key, 'string', false)
  if (v === null) return 'now'
  if (v !== 'now' && v !== 'next-heartbeat') throw invalid(`"${key}" must be "now" or "next-heartbeat"`)
  return v
}

export function parseWakeRequest(payload: unknown): WakeRequest {
  const o = asObject(payload)
  return {
    text: field<string>(o, 'text', 'string', true)!,
    mode: mode(o, 'mode'),
    agentId: field<string>(o, 'agentId', 'string', false),
    sessionKey: field<string>(o, 'sessionKey', 'string', false),
  }
}

/**
 * The agent a /wake goes to: agentId under the same policy as /agent (its main session is woken).
 * A wake's target is always that main session, so a sessionKey is refused rather than ignored.
 */
export function resolveWakeAgent(w: WakeRequest, config: BundleConfig): string {
  const agentId = resolveAgentId(w.agentId, config)
  if (w.sessionKey !== null) throw new HttpError(400, 'session_key_not_allowed', 'a wake goes to the main session of its agent and takes no sessionKey; use /agent for a turn under its own key')
  return agentId
}

/**
 * An /agent request's waitForCompletion and waitTimeoutSeconds: the seconds it asks to wait
 * (unbounded here: the server caps it), or null when it does not ask.
 */
export function parseWait(payload: unknown): number | null {
  const o = asObject(payload)
  if (field<boolean>(o, 'waitForCompletion', 'boolean', false) !== true) return null
  const seconds = field<number>(o, 'waitTimeoutSeconds', 'number', false)
  if (seconds !== null && !(seconds > 0 && seconds <= 3600)) throw invalid('"waitTimeoutSeconds" must be a number of seconds above 0 and at most 3600')
  return seconds ?? Infinity
}

export function parseAgentRequest(payload: unknown): AgentRequest {
  const o = asObject(payload)
  const timeoutSeconds = field<number>(o, 'timeoutSeconds', 'number', false)
  if (timeoutSeconds !== null && !(timeoutSeconds > 0 && timeoutSeconds <= 86400)) throw invalid('"timeoutSeconds" must be a number of seconds above 0 and at most 86400')
  const thinking = field<string>(o, 'thinking', 'string', false)
  if (thinking !== null && !THINKING.has(thinking)) throw invalid(`"thinking" must be one of ${[...THINKING].join(', ')}`)
  return {
    message: field<string>(o, 'message', 'string', true)!,
    name: field<string>(o, 'name', 'string', false),
    agentId: field<string>(o, 'agentId', 'string', false),
    sessionKey: field<string>(o, 'sessionKey', 'string', false),
    wakeMode: mode(o, 'wakeMode'),
    deliver: field<boolean>(o, 'deliver', 'boolean', false) ?? true,
    channel: field<string>(o, 'channel', 'string', false) ?? 'last',
    to: field<string>(o, 'to', 'string', false),
    model: field<string>(o, 'model', 'string', false),
    thinking,
    timeoutSeconds,
  }
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

/**
 * An /agent request's channel is one the config declares, or `last`: the channels are known at
 * load, so a name that is none of them is refused at admission rather than accepted and failed later.
 */
export function checkRequestChannel(channel: string, config: BundleConfig): void {
  if (channel === 'last' || config.channels.some((c) => c.id === channel)) return
  const known = config.channels.map((c) => c.id)
  throw new HttpError(400, 'unknown_channel', `channel "${channel.slice(0, 100)}" is not configured (${known.length > 0 ? `configured: ${known.join(', ')}, or last` : 'none is: only last'})`)
}

/** A per-run model override must be one the agent is already configured with. */
export function checkModelOverride(model: string | null, agentId: string, config: BundleConfig): void {
  if (model === null) return
  const agent = config.agents.find((a) => a.id === agentId)
  const allowed = agent ? [agent.model, ...agent.fallbackModels] : []
  if (!allowed.includes(model)) throw new HttpError(400, 'model_not_allowed', `model "${model}" is not configured for agent "${agentId}"${allowed.length ? ` (configured: ${allowed.join(', ')})` : ''}`)
}
