// The dry run behind `hookgate try` and the operator page's Test button: what the server would
// answer for a payload on a path of a loaded bundle, through the functions the server calls
// (mapping, transform in its process, session-key policy, envelope), without starting anything.
import type { LoadedBundle } from '../bundle/load.js'
import { applyMapping, type HookAction } from './mapping.js'
import { wrapExternalContent } from '../agents/envelope.js'
import { HttpError } from '../http/errors.js'
import { checkModelOverride, checkThinking, parseAgentRequest, parseWakeRequest, resolveAgentId, resolveMappedSessionKey, resolveRequestSessionKey, resolveWakeAgent } from './requests.js'
import type { BundleConfig } from '../bundle/format.js'
import { TransformPool } from '../transforms/pool.js'
import { explainFiltered } from '../bundle/conditions.js'

export interface DryRunAnswer { status: number; body: Record<string, unknown> }

const answer = (status: number, body: Record<string, unknown>): DryRunAnswer => ({ status, body })

/** `name` is the path under the base path (`github`, `wake`); headers are lower-cased names. */
export async function dryRun(bundle: LoadedBundle, name: string, payload: unknown, request: { headers: Record<string, string>; query: Record<string, string> }): Promise<DryRunAnswer> {
  const { headers, query } = request
  if (name === 'wake' || name === 'agent') return tryBuiltin(name, payload, bundle.config)
  // The transform runs in its own process here too, as in the server: an endless loop in it is
  // stopped by its timeout instead of hanging this command, and it reaches nothing of this one.
  const pool = TransformPool.forBundle(bundle, { size: 1 })
  let outcome
  const context = { payload, headers, query, path: name, now: new Date().toISOString() }
  try {
    outcome = await applyMapping(bundle.routeTable.get(name), context, pool ? (route, input) => pool.run(route, input) : undefined)
  } finally {
    await pool?.close()
  }
  switch (outcome.kind) {
    case 'no-match':
      return answer(404, { code: 'no_mapping', error: `no mapping matches ${bundle.config.basePath}/${name}` })
    case 'skip':
      return answer(204, { mapping: outcome.route.id, skipped: true, ...(outcome.reason ? { reason: outcome.reason } : {}) })
    case 'filtered':
      // As the server answers, plus which comparison of each mapping's match.when failed.
      return answer(204, { mapping: outcome.route.id, skipped: true, reason: 'filtered', when: explainFiltered(bundle.routeTable.get(name) ?? [], context) })
    case 'error':
      return answer(outcome.status, { mapping: outcome.route.id, code: outcome.code, error: outcome.error })
    case 'action': {
      // the server holds a mapped key to the session-key policy; so does the dry run
      if (outcome.action.kind === 'agent') {
        try {
          resolveMappedSessionKey(outcome.action.sessionKey, bundle.config)
        } catch (err) {
          if (!(err instanceof HttpError)) throw err
          return answer(err.status, { mapping: outcome.route.id, code: err.code, error: err.message })
        }
      }
      const status = outcome.action.kind === 'wake' ? 200 : 202
      const source = `hook ${bundle.config.basePath}/${name}`
      return answer(status, { mapping: outcome.route.id, action: outcome.external ? envelop(outcome.action, source) : outcome.action, external: outcome.external })
    }
    case 'fan-out': {
      // one run per element, each checked as the server checks it
      for (const action of outcome.actions) {
        if (action.kind !== 'agent') continue
        try {
          resolveMappedSessionKey(action.sessionKey, bundle.config)
        } catch (err) {
          if (!(err instanceof HttpError)) throw err
          return answer(err.status, { mapping: outcome.route.id, code: err.code, error: err.message })
        }
      }
      const status = outcome.route.action === 'wake' ? 200 : 202
      const source = `hook ${bundle.config.basePath}/${name}`
      return answer(status, { mapping: outcome.route.id, actions: outcome.actions.map((a) => (outcome.external ? envelop(a, source) : a)), external: outcome.external })
    }
  }
}

/**
 * What POST /wake or /agent would answer for the payload, through the very functions the server
 * calls, in its order: the parsed request, the resolved agent (and session key), and the action
 * as the agent would see it; or the 400 the server would give.
 */
function tryBuiltin(name: 'wake' | 'agent', payload: unknown, config: BundleConfig): { status: number; body: Record<string, unknown> } {
  const source = `hook ${config.basePath}/${name}`
  try {
    if (name === 'wake') {
      const request = parseWakeRequest(payload)
      const agentId = resolveWakeAgent(request, config)
      const action: HookAction = { kind: 'wake', text: request.text, mode: request.mode, agentId }
      return { status: 200, body: { endpoint: 'wake', request, agentId, action: envelop(action, source), external: true } }
    }
    const request = parseAgentRequest(payload)
    const agentId = resolveAgentId(request.agentId, config)
    const sessionKey = resolveRequestSessionKey(request.sessionKey, config)
    checkModelOverride(request.model, agentId, config)
    checkThinking(request.thinking, request.model, agentId, config)
    const action: HookAction = { kind: 'agent', ...request, agentId, sessionKey }
    return { status: 202, body: { endpoint: 'agent', request, agentId, sessionKey, action: envelop(action, source), external: true } }
  } catch (err) {
    if (!(err instanceof HttpError)) throw err
    return { status: err.status, body: { endpoint: name, code: err.code, error: err.message } }
  }
}

/** The action as the agent will see it: the text built from external content inside the envelope. */
function envelop(action: HookAction, source: string): HookAction {
  if (action.kind === 'agent') return { ...action, message: wrapExternalContent(action.message, { source }) }
  return { ...action, text: wrapExternalContent(action.text, { source }) }
}
