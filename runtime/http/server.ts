// The HTTP core: one handler that runs the contract's checks in order (path → query token →
// method → auth → route → body → content type → payload → policy → mapping → action) and answers
// with the contract's status and JSON body.
//
// Hot path: one Map lookup for the route; no file reads, no YAML, no schema, no eval. Do not add
// anything here that a request does not need.
//
// Over 400 lines: the order of checks (signed routes, replays, disabled ingress) and the dispatch
// (fan-out, waiting, idempotent answers) must be read together to see that every path answers once
// and writes its row; the pieces that stand alone (auth, body, signatures, requests) have their files.
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { DEFAULT_MAX_PENDING_BYTES, DEFAULT_MAX_WAIT_SECONDS, type BundleConfig, type BundleRoute, type RenderContext } from '../bundle/format.js'
import type { LoadedBundle } from '../bundle/load.js'
import type { Engine, Origin, RowExtra, RunOutcome, Submission } from '../agents/engine.js'
import { IdempotencyIndex, type StoredResponse } from './idempotency.js'
import { applyMapping, selectRoute, type TransformRunner } from '../endpoints/mapping.js'
import { isJwtValue, isSecretHeader } from '../bundle/template-helpers.js'
import { HttpError, sendError, sendJson } from './errors.js'
import { AddressMatcher, AuthLimiter, presentedToken, resolveClientAddress, type TokenCheck } from './auth.js'
import { jsonBodyText, parseBody, readBody } from './body.js'
import { deliveryIdOf, deliveryKey, senderPayload, slackChallenge, verifySender, type PreparedSignature } from './signatures.js'
import { checkModelOverride, checkRequestChannel, checkThinking, parseAgentRequest, parseWait, parseWakeRequest, resolveAgentId, resolveMappedSessionKey, resolveRequestSessionKey, resolveWakeAgent } from '../endpoints/requests.js'
import { RunStoreError, boundJsonSize, rawJsonPayload, type RefusalRecorder } from '../store/store.js'

/** From this size on, a JSON body is stored as received (spliced into its run's line); smaller ones are serialised, which costs less than the bytes' copies. */
const RAW_PAYLOAD_MIN_BYTES = 8 * 1024
import { authMetrics, countRequest, countTransformFailure, EXPOSITION_CONTENT_TYPE, UNMATCHED } from '../observe/service-metrics.js'
import type { Logger } from '../observe/log.js'

/** Everything a request needs, swapped as one object on reload. */
export interface Serving {
  bundle: LoadedBundle
  token: TokenCheck
  trusted: AddressMatcher
  /** runs transforms in sandboxed child processes; null when the bundle has none */
  transforms: TransformRunner | null
  /** the signed routes' keys by route id, resolved at load (empty when no route is signed) */
  signatures: ReadonlyMap<string, PreparedSignature>
}

export interface RequestLog {
  method: string
  path: string
  status: number
  ms: number
  client: string
  runId?: string
  code?: string
  /** only with serve --log-bodies: the first 2 KiB of the body */
  body?: string
}

export interface HandlerDeps {
  current(): Serving
  limiter: AuthLimiter
  engine: Engine
  /** Idempotency-Key memory; a handler made without one keeps keys for 24 h in memory only */
  idempotency?: IdempotencyIndex
  startedAt: number
  log(entry: RequestLog): void
  /** a debugging aid: put (the start of) each body into its log line */
  logBodies?: boolean
  /** why the service cannot do its work now (empty when healthy): /healthz answers 503 with them */
  degraded?(): string[]
  /** the text GET /metrics answers with; without it /metrics is not served */
  metrics?: () => string
  /** the rejected-request log: every 4xx refusal is noted (aggregated there, written off the request path) */
  rejects?: RefusalRecorder
  /** where a failure of the handler itself is logged (never a stack or a secret); none: dropped */
  logger?: Logger
}

/** Bytes of an unread body drained after a refusal to keep the connection; above it, close. */
const DRAIN_LIMIT = 64 * 1024

/** What the handler learns along the way and the log line and the metrics report. */
interface RequestNotes {
  runId?: string
  body?: string
  /** the definition a request matched (a built-in or a mapping): a failure after it still gets a row */
  matched?: { definitionKind: 'hook' | 'trigger'; definitionId: string; correlationId: string; action: 'wake' | 'agent' | 'workflow' }
  /** the metrics' route label: a mapping id or a built-in's name, never the request's path */
  route?: string
  /** what every row this request writes carries: the received request (mapped), the run it replays */
  trace?: RowExtra
}

export function createHandler(given: HandlerDeps) {
  const deps: Required<Pick<HandlerDeps, 'idempotency'>> & HandlerDeps = { ...given, idempotency: given.idempotency ?? new IdempotencyIndex(86_400_000) }
  return function handle(req: IncomingMessage, res: ServerResponse): void {
    const started = performance.now()
    const serving = deps.current()
    const client = resolveClientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for'], serving.trusted)
    const rawUrl = req.url ?? '/'
    const q = rawUrl.indexOf('?')
    const path = q < 0 ? rawUrl : rawUrl.slice(0, q)
    const notes: RequestNotes = {}
    const done = (status: number, code?: string) => {
      const ms = performance.now() - started
      countRequest(notes.route ?? UNMATCHED, status, ms / 1000)
      // A client locked out for failed logins gets no log line per request: under a flood that
      // would be a disk write per refusal. The rejected-request log counts them per minute, and
      // the metrics count every one.
      if (code === 'too_many_auth_failures') return
      const entry: RequestLog = { method: req.method ?? '?', path: path.length > 512 ? path.slice(0, 512) : path, status, ms: Math.round(ms * 100) / 100, client }
      if (notes.runId) entry.runId = notes.runId
      if (code) entry.code = code
      if (notes.body !== undefined) entry.body = notes.body
      deps.log(entry)
    }
    const fail = (err: unknown) => {
      const e = err instanceof HttpError ? err : new HttpError(500, 'internal_error', 'the request could not be handled')
      if (!(err instanceof HttpError)) deps.logger?.error('request failed', { path, error: (err as Error)?.message })
      // Refused before the body was read: a small declared body is drained after the answer (Node
      // does that) so the connection stays open; an unknown or large one closes it instead.
      if (!req.complete && !(Number(req.headers['content-length']) <= DRAIN_LIMIT)) res.setHeader('connection', 'close')
      if (!res.headersSent) sendError(res, e)
      // A refusal of the sender (4xx), not our own failure: the rejected-request log keeps why.
      if (e.status < 500) deps.rejects?.note(client, path, e.status, e.code, req.method ?? '?', req.headers, notes.body)
      done(e.status, e.code)
    }
    // Everything decided before the body is read (the path, the method, the token, the lock-out,
    // the route) is decided synchronously: a refusal there is a thrown error caught here, not a
    // rejected promise (under a 401/429 flood, promise rejections and their tracking showed).
    // The token's refusal (the flood case) comes back as a value; the rarer ones are thrown.
    let admitted: Admitted | number | HttpError | Promise<HttpError>
    try {
      admitted = admit(req, res, serving, deps, client, path, q < 0 ? '' : rawUrl.slice(q + 1), notes)
    } catch (err) {
      fail(err)
      return
    }
    if (admitted instanceof HttpError) {
      fail(admitted)
      return
    }
    if (admitted instanceof Promise) {
      // a failure held until its client's shared lock-out count is merged (runtime/http/lockout.ts)
      admitted.then(fail, fail)
      return
    }
    if (typeof admitted === 'number') {
      done(admitted)
      return
    }
    handleRequest(req, res, serving, deps, client, admitted, notes)
      .then((status) => { if (status) done(status) }, fail)
  }
}

/** What admission found out about a request whose body is to be read. */
interface Admitted {
  params: URLSearchParams
  now: number
  name: string
  routes: readonly BundleRoute[] | undefined
  signature: PreparedSignature | undefined
}

/** The checks before the body, in the contract's order; a number when the request was answered here (healthz, metrics). */
function admit(req: IncomingMessage, res: ServerResponse, serving: Serving, deps: HandlerDeps & { idempotency: IdempotencyIndex }, client: string, path: string, query: string, notes: RequestNotes): Admitted | number | HttpError | Promise<HttpError> {
  const { bundle } = serving
  const config = bundle.config
  const base = config.basePath

  if (path === '/healthz' && (req.method === 'GET' || req.method === 'HEAD')) {
    notes.route = 'healthz'
    const reasons = deps.degraded?.() ?? []
    const facts = { bundle: bundle.manifest.inputsHash, compilerVersion: bundle.manifest.compilerVersion, routes: bundle.manifest.routes.length, uptimeSeconds: Math.round((Date.now() - deps.startedAt) / 1000) }
    if (reasons.length > 0) {
      sendJson(res, 503, { ok: false, status: 'degraded', reasons, ...facts }, { 'retry-after': '5' })
      return 503
    }
    sendJson(res, 200, { ok: true, status: 'ok', ...facts })
    return 200
  }
  if (path === '/metrics' && deps.metrics) return serveMetrics(req, res, serving, deps, client, query, notes)
  if (path !== base && !path.startsWith(base + '/')) throw new HttpError(404, 'not_found', `nothing is served at ${path.slice(0, 200)}`)
  // Before the token is asked for: a disabled config refuses every hook the same way, so the
  // answer reads as "ingress is off", not as a token problem (and counts toward no lock-out).
  if (!config.enabled) throw new HttpError(404, 'hooks_disabled', 'hooks are disabled on this server (hooks.enabled is false)')
  const params = query === '' ? NO_PARAMS : new URLSearchParams(query)
  if (params.has('token')) throw new HttpError(400, 'token_in_query', 'send the hook token in the Authorization or x-hookgate-token header, never in the URL')
  if (req.method !== 'POST') throw new HttpError(405, 'method_not_allowed', 'only POST is accepted here', { allow: 'POST' })

  const now = Date.now()
  // A signed mapping authenticates by its signature over the body, so its route is found before
  // auth; a bundle without one keeps the plain order (one boolean here, nothing more).
  let name: string | undefined
  let signature: PreparedSignature | undefined
  if (bundle.signed) {
    name = decodeName(path.slice(base.length + 1))
    const only = bundle.routeTable.get(name)?.[0]
    if (only?.signature) signature = serving.signatures.get(only.id)
  }
  // A replay (`hookgate runs replay`) is sent with the hook token, also to a signed route: the
  // sender's signature headers were never stored, so the token stands in for them.
  const replayOf = req.headers['x-hookgate-replay-of']
  if (replayOf !== undefined) signature = undefined
  // Auth before a single body byte is read (a signed route: no body byte from a locked-out client).
  const refusal = signature === undefined ? authenticate(req, serving, deps.limiter, client, now) : refuseWhileLockedOut(deps.limiter, client, now)
  if (refusal !== undefined) return refusal
  if (replayOf !== undefined) notes.trace = { replayOf: checkReplayOf(replayOf) }

  name ??= decodeName(path.slice(base.length + 1))
  const routes = name === 'wake' || name === 'agent' ? undefined : bundle.routeTable.get(name)
  if (name === '' || (name !== 'wake' && name !== 'agent' && !routes)) throw new HttpError(404, 'no_mapping', name === '' ? 'name a hook: POST to a path under the base path' : `no mapping for ${base}/${name.slice(0, 200)}`)
  // A name several mappings share (by match.source) is labelled once the payload chose one.
  notes.route = routes ? (routes.length === 1 ? routes[0]!.id : undefined) : name
  // Nothing is acknowledged that is not on disk: while the store cannot write, refuse at once.
  const store = deps.engine.storeHealth()
  if (!store.ok) throw new HttpError(503, 'store_unavailable', 'the run store cannot write right now; try again shortly', { 'retry-after': '5' })
  // A full backlog refuses a name that can only start agent or workflow runs before its body is
  // read: under a model outage, reading every refused 256 KiB body was most of what the process
  // did, and most of its garbage. (A name shared with a wake is refused once its route is chosen.)
  if (name === 'agent' || (routes !== undefined && routes.every(startsPendingRun))) refuseWhenBacklogged(deps.engine, config)
  return { params, now, name, routes, signature }
}

async function handleRequest(req: IncomingMessage, res: ServerResponse, serving: Serving, deps: HandlerDeps & { idempotency: IdempotencyIndex }, client: string, admitted: Admitted, notes: RequestNotes): Promise<number | void> {
  const setRunId = (id: string) => { notes.runId = id }
  const { params, now, name, routes, signature } = admitted
  const config = serving.bundle.config
  const base = config.basePath
  const limit = routes ? maxBodyBytes(routes, config.server.maxBodyBytes) : config.server.maxBodyBytes
  const body = await readBody(req, limit, config.server.bodyTimeoutMs)
  if (deps.logBodies) notes.body = body.subarray(0, 2048).toString('utf8')
  // The raw bytes as received, before any parsing.
  const verdict = signature ? await checkSignature(signature, req, body, deps.limiter, client, now) : undefined
  const parsed = parseBody(body, req.headers['content-type'])
  const payload = signature ? senderPayload(signature.spec.scheme, req.headers['content-type'], parsed) : parsed
  const correlationId = correlationIdOf(req)
  const source = `hook ${base}/${name}`

  let key = req.headers['idempotency-key']
  let fingerprintOf = body
  if (signature && verdict) {
    const handshake = answerHandshake(res, signature, req, payload)
    if (handshake) return handshake
    // A repeated delivery is answered as the original, whatever its body: the sender says it is the same.
    const delivery = deliveryIdOf(signature.spec.scheme, verdict, payload)
    if (delivery !== undefined) {
      key = deliveryKey(routes![0]!.id, delivery)
      fingerprintOf = EMPTY
    }
  }
  // Idempotency-Key (or a signed delivery's id): a repeat gets the stored answer and starts nothing.
  const idem = typeof key === 'string' ? await deps.idempotency.begin(key, name, fingerprintOf) : undefined
  if (idem?.kind === 'replay') {
    sendJson(res, idem.response.status, idem.response.body, { 'idempotent-replayed': 'true' })
    if (typeof idem.response.body.runId === 'string') setRunId(idem.response.body.runId)
    return idem.response.status
  }
  let stored: StoredResponse | null = null
  try {
    /** The run row carries its id, the key and the answer, so a replay survives a restart. */
    const answer = (status: number, body: (runId: string) => Record<string, unknown>): Reply => {
      // answerMany for one run, built directly: every wake and mapped request comes through here.
      const id = randomUUID()
      notes.runId = id
      const response = { status, body: { ok: true, ...body(id) } }
      const reply: Reply = {
        id,
        send() {
          setRunId(id)
          stored = response
          sendJson(res, status, response.body)
          return status
        },
        sendOutcome(outcome) {
          setRunId(id)
          stored = response
          sendJson(res, 200, { ...response.body, ...outcome })
          return 200
        },
      }
      const trace = notes.trace
      if (trace !== undefined) copyTrace(trace, reply)
      if (idem) { reply.response = response; reply.idempotency = { key: key as string, fingerprint: idem.fingerprint } }
      return reply
    }
    /**
     * Several runs, one answer: the first row keeps it (and the key) for a replay. A request that
     * waited and saw its runs finish is answered 200 with the outcome, but a replay of it gets the
     * acceptance answer stored with the run: replays never wait.
     */
    const answerMany = (status: number, count: number, body: (runIds: string[]) => Record<string, unknown>): ManyReply => {
      const ids = Array.from({ length: count }, () => randomUUID())
      notes.runId = ids[0]
      const response = { status, body: { ok: true, ...body(ids) } }
      // every run of the request keeps how it was received (for a replay) and what it replays
      const extras: RowExtra[] = ids.map((id) => ({ ...notes.trace, id }))
      // only a run started with an Idempotency-Key keeps its answer, to replay it after a restart
      if (idem) Object.assign(extras[0]!, { response, idempotency: { key: key as string, fingerprint: idem.fingerprint } })
      return {
        ids,
        extras,
        send() {
          setRunId(ids[0]!)
          stored = response
          sendJson(res, status, response.body)
          return status
        },
        sendOutcome(outcome) {
          setRunId(ids[0]!)
          stored = response
          sendJson(res, 200, { ...response.body, ...outcome })
          return 200
        },
      }
    }
    try {
      return await dispatch(req, res, serving, deps, name, payload, body, params, now, correlationId, source, { one: answer, many: answerMany }, notes)
    } catch (err) {
      // A shared store (PostgreSQL): another runtime holds this Idempotency-Key. The same request
      // gets that run's answer, as a repeat to this runtime would; another body is a 409.
      if (err instanceof RunStoreError && err.code === 'duplicate_key' && idem?.kind === 'new' && err.holder) {
        if (err.holder.fingerprint !== idem.fingerprint) throw new HttpError(409, 'idempotency_key_reused', 'this Idempotency-Key was already used with a different request')
        stored = err.holder.response
        sendJson(res, stored.status, stored.body, { 'idempotent-replayed': 'true' })
        if (typeof stored.body.runId === 'string') setRunId(stored.body.runId)
        return stored.status
      }
      // The store could not take the run (a database that went away meanwhile): not accepted, try again.
      if (err instanceof RunStoreError && err.code === 'store_unavailable') throw new HttpError(503, 'store_unavailable', 'the run store cannot write right now; try again shortly', { 'retry-after': '5' })
      // A matching request that failed unexpectedly (a 500) still leaves its row, unless its run was written.
      const m = notes.matched
      if (m && !(err instanceof HttpError) && !(notes.runId && deps.engine.runs.get(notes.runId))) {
        await deps.engine.recordOutcome(m, m.action, 'failed', `the request could not be handled: ${(err as Error)?.message ?? String(err)}`, undefined, notes.trace).catch(() => {})
      }
      throw err
    }
  } finally {
    if (idem?.kind === 'new') idem.finish(stored)
  }
}

/** What every row of a request carries (notes.trace): how it was received, what it replays. */
function copyTrace(trace: RowExtra, into: RowExtra): void {
  if (trace.received !== undefined) into.received = trace.received
  if (trace.replayOf !== undefined) into.replayOf = trace.replayOf
}

/** The answer to a request that started runs: sent once they are on disk (`sendOutcome`: 200 once they finished). */
interface ManyReply { ids: string[]; extras: RowExtra[]; send(): number; sendOutcome(outcome: Record<string, unknown>): number }
type Reply = RowExtra & Pick<ManyReply, 'send' | 'sendOutcome'>
interface Answer {
  one(status: number, body: (runId: string) => Record<string, unknown>): Reply
  many(status: number, count: number, body: (runIds: string[]) => Record<string, unknown>): ManyReply
}

/** payload validation → policy → mapping/transform → action, once the body is in. */
async function dispatch(req: IncomingMessage, res: ServerResponse, serving: Serving, deps: HandlerDeps, name: string, payload: unknown, body: Buffer, params: URLSearchParams, now: number, correlationId: string, source: string, answer: Answer, notes: RequestNotes): Promise<number> {
  const bodyBytes = body.length
  const config = serving.bundle.config
  if (name === 'wake' || name === 'agent') notes.matched = { definitionKind: 'hook', definitionId: name, correlationId, action: name }
  if (name === 'wake') {
    const w = parseWakeRequest(payload)
    const agentId = resolveWakeAgent(w, config)
    const reply = answer.one(200, (runId) => ({ action: 'wake', runId, mode: w.mode }))
    await deps.engine.submitWake({ definitionKind: 'hook', definitionId: 'wake', correlationId, source, external: true, agentId, text: w.text, mode: w.mode, name: null }, reply)
    return reply.send()
  }
  if (name === 'agent') {
    refuseWhenBacklogged(deps.engine, config)
    const a = parseAgentRequest(payload)
    checkRequestChannel(a.channel, config)
    const agentId = resolveAgentId(a.agentId, config)
    const sessionKey = resolveRequestSessionKey(a.sessionKey, config)
    checkModelOverride(a.model, agentId, config)
    checkThinking(a.thinking, a.model, agentId, config)
    const waitSeconds = waitSecondsOf(parseWait(payload), config)
    const reply = answer.one(202, (runId) => ({ action: 'agent', runId, correlationId, sessionKey }))
    reply.awaited = waitSeconds > 0
    await deps.engine.submitAgent({ definitionKind: 'hook', definitionId: 'agent', correlationId, source, external: true, ...a, agentId, sessionKey }, reply)
    return waitForRuns(deps.engine, [reply.id!], waitSeconds, reply)
  }

  const context = { payload, headers: headerRecord(req), query: queryRecord(params), path: name, now: new Date(now).toISOString() }
  // Kept with each row this request writes, so `hookgate runs replay` can send it again.
  const url = req.url ?? ''
  const q = url.indexOf('?')
  const received = { path: q < 0 ? url : url.slice(0, q), query: context.query, headers: redactHeaders(context.headers), payload }
  // JSON writes a character of the body as at most 6 (\u0000); headers, path and query as given, plus quoting
  boundJsonSize(received, 6 * (bodyBytes + url.length + headerChars(context.headers)) + 256)
  // A large body is stored as the bytes it came in, not serialised again from its parsed value.
  if (bodyBytes >= RAW_PAYLOAD_MIN_BYTES) {
    const raw = jsonBodyText(body, req.headers['content-type'])
    if (raw !== undefined) rawJsonPayload(received, raw)
  }
  if (notes.trace) notes.trace.received = received
  else notes.trace = { received }
  const selection = selectRoute(serving.bundle.routeTable.get(name) ?? [], context)
  if (selection.kind === 'none') throw new HttpError(404, 'no_mapping', `no mapping for ${config.basePath}/${name.slice(0, 200)} matches this payload's source`)
  if (selection.kind === 'too_costly') {
    notes.route = selection.route.id
    throw new HttpError(413, 'condition_text_too_long', selection.error)
  }
  if (selection.kind === 'filtered') {
    // Not an error: the sender did nothing wrong, the config chose to let this event go.
    const first = selection.route
    notes.route = first.id
    await deps.engine.recordOutcome({ definitionKind: first.definitionKind, definitionId: first.id, correlationId }, first.action, 'skipped', undefined, 'filtered', notes.trace)
    res.writeHead(204).end()
    return 204
  }
  const chosen = selection.route
  // The body was read up to the largest limit on the name; the chosen mapping's own limit rules.
  notes.matched = { definitionKind: chosen.definitionKind, definitionId: chosen.id, correlationId, action: chosen.action }
  notes.route = chosen.id
  const limit = chosen.maxBodyBytes ?? config.server.maxBodyBytes
  if (bodyBytes > limit) throw new HttpError(413, 'payload_too_large', `the body is ${bodyBytes} bytes; the limit for this mapping is ${limit}`)
  const outcome = await applyMapping([chosen], context, serving.transforms ?? undefined)
  if (outcome.kind === 'no-match' || outcome.kind === 'filtered') throw new HttpError(404, 'no_mapping', `no mapping for ${config.basePath}/${name.slice(0, 200)} matches this payload's source`)
  const matched = { definitionKind: chosen.definitionKind, definitionId: chosen.id, correlationId }
  if (outcome.kind === 'error') {
    // The request's own fan-out cannot be accepted (no array, too many elements): the sender's to fix.
    if (outcome.status !== 500) throw new HttpError(outcome.status, outcome.code, outcome.error)
    deps.logger?.error(outcome.error, { mapping: outcome.route.id, code: outcome.code })
    countTransformFailure(outcome.route.id, outcome.code)
    await deps.engine.recordOutcome(matched, chosen.action, 'failed', outcome.error, undefined, notes.trace)
    throw new HttpError(500, outcome.code, outcome.code === 'transform_timeout' ? 'the mapping transform timed out' : 'the mapping transform failed')
  }
  if (outcome.kind === 'skip') {
    await deps.engine.recordOutcome(matched, chosen.action, 'skipped', undefined, outcome.reason, notes.trace)
    res.writeHead(204).end()
    return 204
  }
  const route = outcome.route
  const origin: Origin = { definitionKind: route.definitionKind, definitionId: route.id, correlationId, source, external: outcome.external }
  const fanOut = outcome.kind === 'fan-out'
  const actions = fanOut ? outcome.actions : [outcome.action]
  if (route.action !== 'wake') refuseWhenBacklogged(deps.engine, config)
  // Every policy check before anything is written: one refused element refuses the request.
  const submissions: Submission[] = actions.map((action, i) => {
    const agentId = resolveAgentId(action.agentId, config)
    // field by field: a spread of origin per request showed in the profile
    if (action.kind === 'wake') return { kind: 'wake', input: { definitionKind: origin.definitionKind, definitionId: origin.definitionId, correlationId, source, external: origin.external, agentId, text: action.text, mode: action.mode, name: null } }
    if (action.kind === 'workflow') {
      // Stored with the run to render its steps later: secret headers never reach the disk.
      const stored: RenderContext = { ...context, headers: notes.trace?.received?.headers ?? redactHeaders(context.headers), ...(fanOut ? { item: outcome.items[i], index: i } : {}) }
      return { kind: 'workflow', input: { ...origin, agentId, workflow: action.workflow, name: action.name, context: stored } }
    }
    const sessionKey = resolveMappedSessionKey(action.sessionKey, config)
    checkModelOverride(action.model, agentId, config)
    checkThinking(action.thinking, action.model, agentId, config)
    const { kind: _kind, ...rest } = action
    return { kind: 'agent', input: { ...origin, ...rest, agentId, sessionKey } }
  })
  const kind = submissions[0]!.kind
  const status = kind === 'wake' ? 200 : 202
  const describe = (s: Submission, runId: string): Record<string, unknown> => {
    if (s.kind === 'wake') return { action: 'wake', runId, mode: s.input.mode }
    if (s.kind === 'workflow') return { action: 'workflow', runId, correlationId }
    return { action: 'agent', runId, correlationId, sessionKey: s.input.sessionKey }
  }
  // A wake is done once queued; only agent and workflow runs are waited for.
  const waitSeconds = kind === 'wake' ? 0 : Math.min(route.waitSeconds ?? 0, maxWaitSeconds(config))
  if (!fanOut) {
    const reply = answer.one(status, (runId) => describe(submissions[0]!, runId))
    reply.awaited = waitSeconds > 0
    await deps.engine.submit(submissions[0]!, reply)
    return waitForRuns(deps.engine, [reply.id!], waitSeconds, reply)
  }
  // Fan-out: one run per element, all written with one journal append before the answer.
  const reply = answer.many(status, submissions.length, (runIds) => {
    const first = describe(submissions[0]!, runIds[0]!)
    const sessionKeys = kind === 'agent' ? { sessionKeys: submissions.map((s) => (s.kind === 'agent' ? s.input.sessionKey : '')) } : {}
    return { ...first, runIds, ...sessionKeys }
  })
  await deps.engine.submitMany(submissions, reply.extras.map((e) => ({ ...e, awaited: waitSeconds > 0 })))
  return waitForRuns(deps.engine, reply.ids, waitSeconds, reply)
}

/** server.maxWaitSeconds (older bundles carry none: the default). */
function maxWaitSeconds(config: BundleConfig): number {
  return config.server.maxWaitSeconds ?? DEFAULT_MAX_WAIT_SECONDS
}

/** How long an /agent request asked to wait, bounded by the server's maximum; 0: answer at once. */
function waitSecondsOf(wait: number | null, config: BundleConfig): number {
  return wait === null ? 0 : Math.min(wait, maxWaitSeconds(config))
}

/**
 * waitForCompletion: holds the answer until every run is durably final (200 with the outcome) or
 * the wait is over (the usual acceptance answer). The runs go on either way; a client that hangs
 * up meanwhile cancels nothing.
 */
async function waitForRuns(engine: Engine, runIds: string[], waitSeconds: number, reply: Pick<ManyReply, 'send' | 'sendOutcome'>): Promise<number> {
  if (waitSeconds <= 0) return reply.send()
  const outcomes = await Promise.all(runIds.map((id) => engine.whenFinished(id, waitSeconds * 1000)))
  if (outcomes.some((o) => o === null)) return reply.send()
  const shown = outcomes.map((o) => describeOutcome(o!))
  return reply.sendOutcome(shown.length === 1 ? shown[0]! : { runs: shown })
}

/** What a waited-for run's answer says of it: its final status, and its reply, result, delivery or error. */
function describeOutcome(o: RunOutcome): Record<string, unknown> {
  const out: Record<string, unknown> = { runId: o.row.id, status: o.row.status }
  if (o.reply !== undefined) out.reply = o.reply
  else if (o.row.result !== undefined) out.result = o.row.result
  if (o.delivery !== undefined) out.delivery = o.delivery
  if (o.row.error !== undefined) out.error = o.row.error
  return out
}

/**
 * The hook token, checked in constant time; a wrong or missing one counts toward its client
 * address's lock-out: 401, then 429 with Retry-After while locked out. The refusal is returned,
 * not thrown: V8 tiers a function up only when it returns or loops, so a path that always ends in
 * a throw (a flood of wrong tokens) stayed in the interpreter and cost twice what it does now.
 */
function authenticate(req: IncomingMessage, serving: Serving, limiter: AuthLimiter, client: string, now: number): HttpError | Promise<HttpError> | undefined {
  if (serving.token.matches(presentedToken(req.headers))) {
    limiter.succeed(client)
    return undefined
  }
  // Several runtimes share the count: while this client's is being merged, the failure waits for
  // it and is then answered as one runtime alone would answer it.
  const held = limiter.whenMerged(client)
  if (held !== undefined) return held.then(() => refuseFailure(limiter, client, Date.now()))
  return refuseFailure(limiter, client, now)
}

/** A wrong or missing token: counted toward its client's lock-out; 401, or 429 once locked out. */
function refuseFailure(limiter: AuthLimiter, client: string, now: number): HttpError {
  const already = limiter.retryAfter(client, now)
  const locked = already || limiter.fail(client, now)
  if (locked) {
    if (!already) authMetrics.lockoutStarted.inc()
    authMetrics.lockedOut.inc()
    return lockedOut(locked)
  }
  authMetrics.unauthorized.inc()
  return new HttpError(401, 'unauthorized', 'a valid hook token is required (Authorization: Bearer <token> or x-hookgate-token)')
}

function lockedOut(seconds: number): HttpError {
  return new HttpError(429, 'too_many_auth_failures', `too many failed attempts from this address; try again in ${seconds} s`, { 'retry-after': String(seconds) })
}

/** A signed route: a client locked out by earlier failures gets 429 before any body byte is read. */
function refuseWhileLockedOut(limiter: AuthLimiter, client: string, now: number): HttpError | undefined {
  // a merge under way is no lock-out: a correctly signed request still passes
  const locked = limiter.lockedFor(client, now)
  if (locked === 0) return undefined
  authMetrics.lockedOut.inc()
  return lockedOut(locked)
}

/** The sender's signature over the raw body; a failure counts toward the same lock-out as a wrong token. */
async function checkSignature(signature: PreparedSignature, req: IncomingMessage, body: Buffer, limiter: AuthLimiter, client: string, now: number): Promise<{ deliveryId: string | undefined }> {
  const verdict = verifySender(signature, req.headers, body, now)
  if (verdict.ok) {
    limiter.succeed(client)
    return verdict
  }
  // as a wrong token: while the client's shared count is being merged, the failure waits for it
  const held = limiter.whenMerged(client)
  if (held !== undefined) await held
  const locked = limiter.fail(client, held === undefined ? now : Date.now())
  if (locked) {
    authMetrics.lockoutStarted.inc()
    authMetrics.lockedOut.inc()
    throw lockedOut(locked)
  }
  authMetrics.unauthorized.inc()
  throw new HttpError(401, 'signature_invalid', `the sender signature does not verify: ${verdict.reason}`)
}

/**
 * Provider handshakes that start no run, answered once the signature checked: Slack's
 * url_verification gets its challenge back as JSON, GitHub's ping gets 200 (unless answerPing is off).
 */
function answerHandshake(res: ServerResponse, signature: PreparedSignature, req: IncomingMessage, payload: unknown): number | undefined {
  const scheme = signature.spec.scheme
  if (scheme === 'slack') {
    const challenge = slackChallenge(payload)
    if (challenge === undefined) return undefined
    if (challenge === '') throw new HttpError(400, 'invalid_challenge', 'a url_verification request needs a challenge string of at most 1024 characters')
    sendJson(res, 200, { challenge })
    return 200
  }
  if (scheme === 'github' && signature.spec.answerPing && req.headers['x-github-event'] === 'ping') {
    sendJson(res, 200, { ok: true, ping: true })
    return 200
  }
  return undefined
}

const EMPTY = Buffer.alloc(0)

/**
 * GET /metrics: the Prometheus text format, behind the hook token (a scraper sends it as a
 * Bearer token), with the same query, method and lock-out rules as a hook.
 */
function serveMetrics(req: IncomingMessage, res: ServerResponse, serving: Serving, deps: HandlerDeps, client: string, query: string, notes: RequestNotes): number | Promise<HttpError> {
  notes.route = 'metrics'
  if (query !== '' && new URLSearchParams(query).has('token')) throw new HttpError(400, 'token_in_query', 'send the hook token in the Authorization or x-hookgate-token header, never in the URL')
  if (req.method !== 'GET') throw new HttpError(405, 'method_not_allowed', 'only GET is accepted here', { allow: 'GET' })
  const refusal = authenticate(req, serving, deps.limiter, client, Date.now())
  if (refusal instanceof Promise) return refusal
  if (refusal !== undefined) throw refusal
  const text = deps.metrics!()
  res.writeHead(200, { 'content-type': EXPOSITION_CONTENT_TYPE, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' })
  res.end(text)
  return 200
}

/**
 * Backpressure: accepted runs are kept in memory until they finish, so past a bound new ones must
 * wait: a bound on how many (server.maxPendingRuns) and on what they hold (server.maxPendingBytes).
 */
function refuseWhenBacklogged(engine: Engine, config: BundleConfig): void {
  if (engine.backlog >= config.server.maxPendingRuns) {
    throw new HttpError(503, 'too_many_pending_runs', `${engine.backlog} accepted runs are still waiting to run; try again shortly`, { 'retry-after': '5' })
  }
  if (engine.backlogBytes >= maxPendingBytes(config)) {
    throw new HttpError(503, 'too_many_pending_runs', `the accepted runs still waiting to run hold ${mib(engine.backlogBytes)} MiB of requests; try again shortly`, { 'retry-after': '5' })
  }
}

function startsPendingRun(route: BundleRoute): boolean {
  return route.action !== 'wake'
}

/** server.maxPendingBytes (older bundles carry none: the default). */
export function maxPendingBytes(config: BundleConfig): number {
  return config.server.maxPendingBytes ?? DEFAULT_MAX_PENDING_BYTES
}

function mib(bytes: number): string {
  return (bytes / 1048576).toFixed(1)
}

/** Read only: a request without a query string shares this one. */
const NO_PARAMS = new URLSearchParams()

function decodeName(raw: string): string {
  let name = raw
  if (raw.includes('%')) {
    try {
      name = decodeURIComponent(raw)
    } catch {
      throw new HttpError(404, 'no_mapping', 'the path is not valid percent-encoding')
    }
  }
  return name.endsWith('/') ? name.replace(/\/+$/, '') : name
}

/** The largest limit among the routes on a name: the route is chosen only once the body is parsed. */
function maxBodyBytes(routes: readonly BundleRoute[], fallback: number): number {
  let limit = 0
  for (const r of routes) limit = Math.max(limit, r.maxBodyBytes ?? fallback)
  return limit
}

/** `x-hookgate-replay-of: <runId>`: the run a replay repeats, once the hook token passed. */
function checkReplayOf(given: string | string[]): string {
  if (typeof given !== 'string' || !/^[A-Za-z0-9._:-]{1,128}$/.test(given)) throw new HttpError(400, 'invalid_replay_of', 'x-hookgate-replay-of takes one run id')
  return given
}

function correlationIdOf(req: IncomingMessage): string {
  const given = req.headers['x-correlation-id']
  return typeof given === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(given) ? given : randomUUID()
}

function headerRecord(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  const headers = req.headers
  for (const k in headers) {
    const v = headers[k]
    if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v
  }
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

function queryRecord(params: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  for (const [k, v] of params) out[k] = v
  return out
}
