// POST <base>/wake: one system event for an agent's main session. Its payload ({ text, mode?,
// agentId? }), the agent it goes to (under the same allowlist as /agent; a sessionKey is refused,
// the main session being its target), and the run to accept: answered 200 once queued.
//
// Hot path: every wake comes through prepareWake. Nothing here but the parse, the policy and the one
// submission (field by field: an object spread here showed in the profile).
import type { BundleConfig, WakeMode } from '../bundle/format.js'
import { HttpError } from '../http/errors.js'
import { accept, builtinEndpoint, type HookEndpoint, type HookRequest, type MatchedDefinition, type Prepared } from './endpoint.js'
import { asObject, field, mode, resolveAgentId } from './policy.js'

export interface WakeRequest { text: string; mode: WakeMode; agentId: string | null; sessionKey: string | null }

const WAKE: MatchedDefinition = { definitionKind: 'hook', id: 'wake', action: 'wake' }

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

/** The wake's one run; the parsed request is what a dry run shows. */
export function prepareWake(input: HookRequest, source: string): Prepared {
  input.matched = WAKE
  const w = parseWakeRequest(input.payload)
  const agentId = resolveWakeAgent(w, input.config)
  return accept(200, [{ kind: 'wake', input: { definitionKind: 'hook', definitionId: 'wake', correlationId: input.correlationId, source, external: true, agentId, text: w.text, mode: w.mode, name: null } }], false, 0, w, undefined, true)
}

/** POST <base>/wake. */
export function wakeEndpoint(config: BundleConfig): HookEndpoint {
  return builtinEndpoint('wake', config, false, prepareWake)
}
