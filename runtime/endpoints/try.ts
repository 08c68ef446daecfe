// The dry run behind `hookgate try` and the operator page's Test button: what the server would
// answer for a payload on a path of a loaded bundle. The name is looked up in the server's route
// table and the request goes through that endpoint's own prepare (parse, policy, mapping, transform
// in its own process), as `serve` runs it; only nothing is accepted, kept or refused for lack of
// room. The answer shows what would be started: the action as the agent would see it, in its envelope.
import { randomUUID } from 'node:crypto'
import type { LoadedBundle } from '../bundle/load.js'
import type { BundleConfig } from '../bundle/format.js'
import { explainFiltered } from '../bundle/conditions.js'
import type { RowExtra } from '../agents/acceptor.js'
import { wrapExternalContent } from '../agents/envelope.js'
import { HttpError } from '../http/errors.js'
import { TransformPool } from '../transforms/pool.js'
import type { HookEndpoint, HookRequest, MatchedDefinition, Prepared } from './endpoint.js'
import { mappingContext, type MappedEndpoint } from './mapped.js'
import type { HookAction, TransformRunner } from './mapping.js'
import { buildRouteTable } from './routes.js'

export interface DryRunAnswer { status: number; body: Record<string, unknown> }

/** A request as a dry run makes it: the payload, headers and query given; no body bytes, nothing kept. */
class DryRequest implements HookRequest {
  readonly now = Date.now()
  readonly correlationId = randomUUID()
  readonly bodyBytes = 0
  readonly keep = false
  readonly url = ''
  readonly query: URLSearchParams
  trace: RowExtra | undefined = undefined
  matched: MatchedDefinition | undefined = undefined
  label: string | undefined = undefined

  constructor(readonly config: BundleConfig, readonly name: string, readonly payload: unknown, readonly headers: Readonly<Record<string, string>>, query: Record<string, string>, readonly transforms: TransformRunner | undefined) {
    this.query = new URLSearchParams(query)
  }

  rawJson(): undefined { return undefined }
  /** a dry run starts nothing, so there is always room */
  refuseWhenFull(): void {}
}

/** `name` is the path under the base path (`github`, `wake`); headers are lower-cased names. */
export async function dryRun(bundle: LoadedBundle, name: string, payload: unknown, request: { headers: Record<string, string>; query: Record<string, string> }): Promise<DryRunAnswer> {
  const config = bundle.config
  const endpoint = buildRouteTable(bundle).hooks.get(name)
  if (endpoint === undefined) return answer(404, { code: 'no_mapping', error: `no mapping for ${config.basePath}/${name.slice(0, 200)}` })
  // The transform runs in its own process here too, as in the server: an endless loop in it is
  // stopped by its timeout instead of hanging this command, and it reaches nothing of this one.
  const pool = endpoint.kind === 'mapped' ? TransformPool.forBundle(bundle, { size: 1 }) : null
  const input = new DryRequest(config, name, payload, request.headers, request.query, pool ? (route, given) => pool.run(route, given) : undefined)
  let prepared: Prepared
  try {
    prepared = await endpoint.prepare(input)
  } catch (err) {
    if (!(err instanceof HttpError)) throw err
    return answer(err.status, { ...shownAs(endpoint, input), code: err.code, error: err.message })
  } finally {
    await pool?.close()
  }
  const source = `hook ${config.basePath}/${name}`
  if (prepared.kind === 'failed') return answer(500, { mapping: prepared.definition.id, code: prepared.code, error: prepared.error })
  if (prepared.kind === 'skip') {
    const mapping = prepared.definition.id
    // As the server answers, plus which comparison of each mapping's match.when failed.
    if (prepared.reason === 'filtered') return answer(204, { mapping, skipped: true, reason: 'filtered', when: explainFiltered((endpoint as MappedEndpoint).routes, mappingContext(input)) })
    return answer(204, { mapping, skipped: true, ...(prepared.reason ? { reason: prepared.reason } : {}) })
  }
  const first = prepared.submissions[0]!
  if (endpoint.kind === 'wake' && first.kind === 'wake') {
    const { agentId, text, mode } = first.input
    return answer(200, { endpoint: 'wake', request: prepared.request, agentId, action: envelop({ kind: 'wake', text, mode, agentId }, source), external: true })
  }
  if (endpoint.kind === 'agent' && first.kind === 'agent') {
    const { agentId, sessionKey } = first.input
    const action: HookAction = { kind: 'agent', ...(prepared.request as Omit<Extract<HookAction, { kind: 'agent' }>, 'kind'>), agentId, sessionKey }
    return answer(202, { endpoint: 'agent', request: prepared.request, agentId, sessionKey, action: envelop(action, source), external: true })
  }
  const shown = (a: HookAction) => (prepared.external ? envelop(a, source) : a)
  const actions = prepared.actions!
  if (!prepared.fanOut) return answer(prepared.status, { mapping: input.label, action: shown(actions[0]!), external: prepared.external })
  // one run per element, each checked as the server checks it
  return answer(prepared.status, { mapping: input.label, actions: actions.map(shown), external: prepared.external })
}

function answer(status: number, body: Record<string, unknown>): DryRunAnswer {
  return { status, body }
}

/** Whose refusal it is: the built-in endpoint's, or the mapping's once one was chosen. */
function shownAs(endpoint: HookEndpoint, input: DryRequest): Record<string, unknown> {
  if (endpoint.kind !== 'mapped') return { endpoint: endpoint.kind }
  return input.label !== undefined ? { mapping: input.label } : {}
}

/** The action as the agent will see it: the text built from external content inside the envelope. */
function envelop(action: HookAction, source: string): HookAction {
  if (action.kind === 'agent') return { ...action, message: wrapExternalContent(action.message, { source }) }
  return { ...action, text: wrapExternalContent(action.text, { source }) }
}
