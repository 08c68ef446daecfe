// POST <base>/<name> for the mappings of hooks.yaml (and the Triggers compiled into them): one
// endpoint per name, whose routes the payload chooses among (match.source, then match.when). Its
// prepare builds what the templates see, keeps the request as received (for a replay), chooses the
// route, holds the body to that route's limit, applies it (templates, transform, fan-out) and passes
// each action through the policy into the runs to accept; or says what to record and answer instead
// (filtered, skipped, a failed transform).
//
// Hot path: every mapped request comes through prepareMapped. The context and the kept request are
// built once and shared by every run of the request; no file reads, no eval.
import type { BundleConfig, BundleRoute, RenderContext } from '../bundle/format.js'
import { isJwtValue, isSecretHeader } from '../bundle/template-helpers.js'
import type { Submission } from '../agents/acceptor.js'
import { HttpError } from '../http/errors.js'
import { boundJsonSize, rawJsonPayload, type ReceivedRequest } from '../store/store.js'
import { maxWaitSeconds } from './agent.js'
import { accept, type HookEndpoint, type HookRequest, type Prepared } from './endpoint.js'
import { applyRoute, selectRoute, type HookAction } from './mapping.js'
import { checkModelOverride, checkThinking, resolveAgentId, resolveMappedSessionKey } from './policy.js'

/** From this size on, a JSON body is stored as received (spliced into its run's line); smaller ones are serialised, which costs less than the bytes' copies. */
const RAW_PAYLOAD_MIN_BYTES = 8 * 1024

export class MappedEndpoint implements HookEndpoint {
  readonly kind = 'mapped'
  readonly label: string | undefined
  readonly pendingOnly: boolean
  readonly maxBodyBytes: number
  readonly signedRoute: string | undefined
  /** the envelope's source, e.g. 'hook /hooks/github' */
  readonly source: string

  constructor(readonly name: string, readonly routes: readonly BundleRoute[], config: BundleConfig) {
    // A name several mappings share (by match.source) is labelled once the payload chose one.
    this.label = routes.length === 1 ? routes[0]!.id : undefined
    // A full backlog refuses a name that can only start agent or workflow runs before its body is
    // read (a name shared with a wake is refused once its route is chosen).
    this.pendingOnly = routes.every((r) => r.action !== 'wake')
    // The route is chosen only once the body is parsed: it is read up to the largest limit on the name.
    let limit = 0
    for (const r of routes) limit = Math.max(limit, r.maxBodyBytes ?? config.server.maxBodyBytes)
    this.maxBodyBytes = limit
    const first = routes[0]
    this.signedRoute = first?.signature ? first.id : undefined
    this.source = `hook ${config.basePath}/${name}`
  }

  prepare(input: HookRequest): Promise<Prepared> {
    return prepareMapped(this, input)
  }
}

/** What the mapping's templates, conditions and transform see of the request. */
export function mappingContext(input: HookRequest): RenderContext {
  return { payload: input.payload, headers: headerRecord(input.headers), query: queryRecord(input.query), path: input.name, now: new Date(input.now).toISOString() }
}

export async function prepareMapped(endpoint: MappedEndpoint, input: HookRequest): Promise<Prepared> {
  const config = input.config
  const context = mappingContext(input)
  if (input.keep) keepReceived(input, context)
  const selection = selectRoute(endpoint.routes, context)
  if (selection.kind === 'none') throw new HttpError(404, 'no_mapping', `no mapping for ${config.basePath}/${input.name.slice(0, 200)} matches this payload's source`)
  if (selection.kind === 'too_costly') {
    input.label = selection.route.id
    throw new HttpError(413, 'condition_text_too_long', selection.error)
  }
  if (selection.kind === 'filtered') {
    // Not an error: the sender did nothing wrong, the config chose to let this event go.
    input.label = selection.route.id
    return { kind: 'skip', definition: selection.route, reason: 'filtered' }
  }
  const route = selection.route
  input.matched = route
  input.label = route.id
  // The body was read up to the largest limit on the name; the chosen mapping's own limit rules.
  const limit = route.maxBodyBytes ?? config.server.maxBodyBytes
  if (input.bodyBytes > limit) throw new HttpError(413, 'payload_too_large', `the body is ${input.bodyBytes} bytes; the limit for this mapping is ${limit}`)
  const outcome = await applyRoute(route, context, input.transforms)
  if (outcome.kind === 'error') {
    // The request's own fan-out cannot be accepted (no array, too many elements): the sender's to fix.
    if (outcome.status !== 500) throw new HttpError(outcome.status, outcome.code, outcome.error)
    return { kind: 'failed', definition: route, code: outcome.code, error: outcome.error }
  }
  if (outcome.kind === 'skip') return { kind: 'skip', definition: route, reason: outcome.reason }
  const fanOut = outcome.kind === 'fan-out'
  const actions = fanOut ? outcome.actions : [outcome.action]
  if (route.action !== 'wake') input.refuseWhenFull(route.action)
  // Every policy check before anything is written: one refused element refuses the request.
  const submissions: Submission[] = []
  for (let i = 0; i < actions.length; i++) submissions.push(submissionOf(actions[i]!, route, endpoint.source, outcome.external, fanOut ? outcome.items[i] : undefined, fanOut ? i : -1, context, input))
  const kind = submissions[0]!.kind
  // A wake is done once queued; only agent and workflow runs are waited for.
  const waitSeconds = kind === 'wake' ? 0 : Math.min(route.waitSeconds ?? 0, maxWaitSeconds(config))
  return accept(kind === 'wake' ? 200 : 202, submissions, fanOut, waitSeconds, undefined, actions, outcome.external)
}

/** One action through the policy into its run; `index` is the element's in a fan-out (-1: none). */
function submissionOf(action: HookAction, route: BundleRoute, source: string, external: boolean, item: unknown, index: number, context: RenderContext, input: HookRequest): Submission {
  const config = input.config
  const correlationId = input.correlationId
  const agentId = resolveAgentId(action.agentId, config)
  // field by field: a spread of the origin per request showed in the profile
  if (action.kind === 'wake') return { kind: 'wake', input: { definitionKind: route.definitionKind, definitionId: route.id, correlationId, source, external, agentId, text: action.text, mode: action.mode, name: null } }
  if (action.kind === 'workflow') {
    // Stored with the run to render its steps later: secret headers never reach the disk.
    const stored: RenderContext = { ...context, headers: input.trace?.received?.headers ?? redactHeaders(context.headers), ...(index >= 0 ? { item, index } : {}) }
    return { kind: 'workflow', input: { definitionKind: route.definitionKind, definitionId: route.id, correlationId, source, external, agentId, workflow: action.workflow, name: action.name, context: stored } }
  }
  const sessionKey = resolveMappedSessionKey(action.sessionKey, config)
  checkModelOverride(action.model, agentId, config)
  checkThinking(action.thinking, action.model, agentId, config)
  const { kind: _kind, ...rest } = action
  return { kind: 'agent', input: { definitionKind: route.definitionKind, definitionId: route.id, correlationId, source, external, ...rest, agentId, sessionKey } }
}

/**
 * The request as received, kept with each row it writes so that `hookgate runs replay` can send it
 * again: its path, query, headers (secrets redacted) and payload; a large JSON body as its own bytes.
 */
function keepReceived(input: HookRequest, context: RenderContext): void {
  const url = input.url
  const q = url.indexOf('?')
  const received: ReceivedRequest = { path: q < 0 ? url : url.slice(0, q), query: context.query, headers: redactHeaders(context.headers), payload: input.payload }
  // JSON writes a character of the body as at most 6 (\u0000); headers, path and query as given, plus quoting
  boundJsonSize(received, 6 * (input.bodyBytes + url.length + headerChars(context.headers)) + 256)
  // A large body is stored as the bytes it came in, not serialised again from its parsed value.
  if (input.bodyBytes >= RAW_PAYLOAD_MIN_BYTES) {
    const raw = input.rawJson()
    if (raw !== undefined) rawJsonPayload(received, raw)
  }
  if (input.trace) input.trace.received = received
  else input.trace = { received }
}

function headerRecord(headers: HookRequest['headers']): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  for (const k in headers) {
    const v = (headers as Record<string, string | string[] | undefined>)[k]
    if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v
  }
  return out
}

function queryRecord(params: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  for (const [k, v] of params) out[k] = v
  return out
}

/** The characters of the headers' names and values. */
function headerChars(headers: Record<string, string>): number {
  let n = 0
  for (const k in headers) n += k.length + headers[k]!.length + 6
  return n
}

/** Header names seen, and whether each is a secret: the same few names come with every request. */
const secretNames = new Map<string, boolean>()

/** The headers with every secret one's value replaced: what a stored request keeps. */
function redactHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  for (const k in headers) {
    let secret = secretNames.get(k)
    if (secret === undefined) {
      secret = isSecretHeader(k)
      // bounded: a sender making up header names cannot grow it past this
      if (secretNames.size < 1000) secretNames.set(k, secret)
    }
    // a JWT is a credential under any name: the value is looked at, cheaply (template-helpers.ts)
    out[k] = secret || isJwtValue(headers[k]!) ? '[redacted]' : headers[k]!
  }
  return out
}
