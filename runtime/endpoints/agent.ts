// POST <base>/agent: an isolated agent turn under its own session key. Its payload (the fields a
// mapped agent action has, plus waitForCompletion), the policy it passes (channel, agent, session
// key, model, thinking), and the run to accept: answered 202 once stored, or with the outcome when
// the request waits for it.
import { DEFAULT_MAX_WAIT_SECONDS, type BundleConfig } from '../bundle/format.js'
import { HttpError } from '../http/errors.js'
import { accept, builtinEndpoint, type HookEndpoint, type HookRequest, type MatchedDefinition, type Prepared } from './endpoint.js'
import type { AgentAction } from './mapping.js'
import { asObject, checkModelOverride, checkThinking, field, invalid, mode, resolveAgentId, resolveRequestSessionKey } from './policy.js'

/** An /agent call asks for the same fields a mapped agent action produces. */
export type AgentRequest = Omit<AgentAction, 'kind'>

const THINKING = new Set(['off', 'minimal', 'low', 'medium', 'high'])

const AGENT: MatchedDefinition = { definitionKind: 'hook', id: 'agent', action: 'agent' }

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

/** server.maxWaitSeconds (older bundles carry none: the default). */
export function maxWaitSeconds(config: BundleConfig): number {
  return config.server.maxWaitSeconds ?? DEFAULT_MAX_WAIT_SECONDS
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

/** The turn's one run, in the order the server has always checked: room, payload, channel, agent, key, model, thinking, wait. */
export function prepareAgent(input: HookRequest, source: string): Prepared {
  input.matched = AGENT
  input.refuseWhenFull('agent')
  const config = input.config
  const a = parseAgentRequest(input.payload)
  checkRequestChannel(a.channel, config)
  const agentId = resolveAgentId(a.agentId, config)
  const sessionKey = resolveRequestSessionKey(a.sessionKey, config)
  checkModelOverride(a.model, agentId, config)
  checkThinking(a.thinking, a.model, agentId, config)
  const wait = parseWait(input.payload)
  const waitSeconds = wait === null ? 0 : Math.min(wait, maxWaitSeconds(config))
  return accept(202, [{ kind: 'agent', input: { definitionKind: 'hook', definitionId: 'agent', correlationId: input.correlationId, source, external: true, ...a, agentId, sessionKey } }], false, waitSeconds, a, undefined, true)
}

/** POST <base>/agent (an agent turn is a pending run: a full backlog refuses it before its body is read). */
export function agentEndpoint(config: BundleConfig): HookEndpoint {
  return builtinEndpoint('agent', config, true, prepareAgent)
}
