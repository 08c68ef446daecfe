// The HTTP core: admission in the contract's order (path under the base → query token → method →
// auth (a signed route is found first, its body read before its signature is checked) → lock-out →
// 404 → store and backlog), the body (limit, timeout, content type, parse), the route table's entry
// for the path, and the answer; the endpoint's prepare does the rest (payload → policy → mapping →
// action) and answer.ts accepts the runs and answers. It talks to the engine only through the
// Acceptor; every endpoint is an entry of the route table (runtime/endpoints/routes.ts).
//
// Hot path: one Map lookup for the endpoint; no file reads, no YAML, no schema, no eval, and no
// closure or object spread per request here (the request's state is one Exchange). Do not add
// anything here that a request does not need.
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { DirectEndpoint, HookEndpoint } from '../endpoints/endpoint.js'
import { buildRouteTable, type RouteTable } from '../endpoints/routes.js'
import { silentLogger } from '../observe/log.js'
import { answer, answerStored, recover } from './answer.js'
import { authenticate, checkSignature, refuseWhileLockedOut } from './refusals.js'
import { parseBody, readBody } from './body.js'
import { HttpError } from './errors.js'
import { EMPTY, Exchange, NO_PARAMS, type Deps, type HandlerDeps } from './exchange.js'
import { IdempotencyIndex } from './idempotency.js'
import { answerHandshake, deliveryIdOf, deliveryKey, senderPayload } from './signatures.js'

export type { HandlerDeps, RequestLog, Serving } from './exchange.js'

export function createHandler(given: HandlerDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const deps: Deps = { ...given, idempotency: given.idempotency ?? new IdempotencyIndex(86_400_000), logger: given.logger ?? silentLogger }
  // The route table is built once per loaded bundle: here for the first, and for a reloaded one at
  // the first request it serves.
  let builtFor = deps.current()
  let table = buildRouteTable(builtFor.bundle, { metrics: deps.metrics !== undefined })
  return function handle(req: IncomingMessage, res: ServerResponse): void {
    const serving = deps.current()
    if (serving !== builtFor) {
      table = buildRouteTable(serving.bundle, { metrics: deps.metrics !== undefined })
      builtFor = serving
    }
    const ex = new Exchange(req, res, deps, serving)
    // Everything decided before the body is read is decided synchronously: a refusal there is a
    // thrown error caught here, not a rejected promise (under a 401/429 flood, promise rejections
    // and their tracking showed). The token's refusal (the flood case) comes back as a value.
    let admitted: number | HttpError | Promise<HttpError> | undefined
    try {
      admitted = admit(ex, table)
    } catch (err) {
      ex.fail(err)
      return
    }
    if (admitted === undefined) void serveHook(ex)
    else if (typeof admitted === 'number') ex.done(admitted)
    // a failure held until its client's shared lock-out count is merged (runtime/http/lockout.ts)
    else if (admitted instanceof Promise) admitted.then((e) => ex.fail(e), (e) => ex.fail(e))
    else ex.fail(admitted)
  }
}

/** The checks before the body, in the contract's order; a status when the request was answered here, undefined when its body is to be read. */
function admit(ex: Exchange, table: RouteTable): number | HttpError | Promise<HttpError> | undefined {
  const { req, path } = ex
  const base = table.basePath
  const under = path.startsWith(base) && (path.length === base.length || path.charCodeAt(base.length) === 47 /* / */)
  if (!under || table.directUnderBase) {
    const direct = table.direct.get(path)
    if (direct !== undefined && (direct.allow !== undefined || direct.methods.includes(req.method!))) return answerDirect(ex, direct)
    if (!under) throw new HttpError(404, 'not_found', `nothing is served at ${path.slice(0, 200)}`)
  }
  // Before the token is asked for: a disabled config refuses every hook the same way, so the
  // answer reads as "ingress is off", not as a token problem (and counts toward no lock-out).
  if (!ex.config.enabled) throw new HttpError(404, 'hooks_disabled', 'hooks are disabled on this server (hooks.enabled is false)')
  const query = ex.search === '' ? NO_PARAMS : new URLSearchParams(ex.search)
  if (query.has('token')) throw tokenInQuery()
  if (req.method !== 'POST') throw new HttpError(405, 'method_not_allowed', 'only POST is accepted here', ALLOW_POST)
  ex.query = query
  const now = ex.now = Date.now()
  // A signed mapping authenticates by its signature over the body, so its endpoint is found before
  // auth; a bundle without one keeps the plain order (one boolean here, nothing more).
  let endpoint: HookEndpoint | undefined
  const early = table.signed
  if (early) {
    endpoint = table.hooks.get(ex.name = decodeName(path.slice(base.length + 1)))
    if (endpoint?.signedRoute !== undefined) ex.signature = ex.serving.signatures.get(endpoint.signedRoute)
  }
  // A replay (`hookgate runs replay`) is sent with the hook token, also to a signed route: the
  // sender's signature headers were never stored, so the token stands in for them.
  const replayOf = req.headers['x-hookgate-replay-of']
  if (replayOf !== undefined) ex.signature = undefined
  // Auth before a single body byte is read (a signed route: no body byte from a locked-out client).
  const refusal = ex.signature === undefined ? authenticate(req.headers, ex.serving.token, ex.deps.limiter, ex.client, now) : refuseWhileLockedOut(ex.deps.limiter, ex.client, now)
  if (refusal !== undefined) return refusal
  if (replayOf !== undefined) ex.trace = { replayOf: checkReplayOf(replayOf) }
  if (!early) endpoint = table.hooks.get(ex.name = decodeName(path.slice(base.length + 1)))
  if (endpoint === undefined) throw new HttpError(404, 'no_mapping', ex.name === '' ? 'name a hook: POST to a path under the base path' : `no mapping for ${base}/${ex.name.slice(0, 200)}`)
  ex.endpoint = endpoint
  ex.label = endpoint.label
  // The store first; then a name that can only start agent or workflow runs is refused while the
  // backlog is full, before its body is read: under a model outage, reading every refused 256 KiB
  // body was most of what the process did, and most of its garbage.
  ex.refuseWhenFull(endpoint.pendingOnly ? 'agent' : 'wake')
  return undefined
}

/** An endpoint outside the base path: its method, and for one behind the token the query, method and lock-out rules of a hook. */
function answerDirect(ex: Exchange, direct: DirectEndpoint): number | HttpError | Promise<HttpError> {
  ex.label = direct.label
  if (direct.token && ex.search !== '' && new URLSearchParams(ex.search).has('token')) throw tokenInQuery()
  if (!direct.methods.includes(ex.req.method!)) throw new HttpError(405, 'method_not_allowed', `only ${direct.allow} is accepted here`, { allow: direct.allow! })
  if (direct.token) {
    const refusal = authenticate(ex.req.headers, ex.serving.token, ex.deps.limiter, ex.client, Date.now())
    if (refusal !== undefined) return refusal
  }
  return direct.answer(ex.res, ex.deps, ex.serving.bundle.manifest)
}

/** The body, the sender's signature, the parse, a repeat, then the endpoint's prepare and the answer. */
async function serveHook(ex: Exchange): Promise<void> {
  const { req, deps } = ex
  const endpoint = ex.endpoint!
  let idem: Awaited<ReturnType<IdempotencyIndex['begin']>> | undefined
  try {
    const body = ex.body = await readBody(req, endpoint.maxBodyBytes, ex.config.server.bodyTimeoutMs)
    if (deps.logBodies) ex.bodyText = body.subarray(0, 2048).toString('utf8')
    const signature = ex.signature
    // The raw bytes as received, before any parsing.
    const verdict = signature ? await checkSignature(signature, req.headers, body, deps.limiter, ex.client, ex.now) : undefined
    const parsed = parseBody(body, req.headers['content-type'])
    const payload = ex.payload = signature ? senderPayload(signature.spec.scheme, req.headers['content-type'], parsed) : parsed
    ex.correlationId = correlationIdOf(req)
    let key = req.headers['idempotency-key']
    let fingerprintOf = body
    if (signature && verdict) {
      const handshake = answerHandshake(ex.res, signature, req.headers, payload)
      if (handshake) return ex.done(handshake)
      // A repeated delivery is answered as the original, whatever its body: the sender says it is the same.
      const delivery = deliveryIdOf(signature.spec.scheme, verdict, payload)
      if (delivery !== undefined) {
        key = deliveryKey(endpoint.signedRoute!, delivery)
        fingerprintOf = EMPTY
      }
    }
    // Idempotency-Key (or a signed delivery's id): a repeat gets the stored answer and starts nothing.
    idem = typeof key === 'string' ? await deps.idempotency.begin(key, ex.name, fingerprintOf) : undefined
    if (idem?.kind === 'replay') return ex.done(answerStored(ex, idem.response))
    if (idem) ex.idempotency = { key: key as string, fingerprint: idem.fingerprint }
    try {
      let prepared = endpoint.prepare(ex)
      if (prepared instanceof Promise) prepared = await prepared
      ex.done(await answer(ex, prepared))
    } catch (err) {
      ex.done(await recover(ex, err, idem?.kind === 'new' ? idem.fingerprint : undefined))
    }
  } catch (err) {
    ex.fail(err)
  } finally {
    if (idem?.kind === 'new') idem.finish(ex.stored)
  }
}

const ALLOW_POST = { allow: 'POST' }

function tokenInQuery(): HttpError {
  return new HttpError(400, 'token_in_query', 'send the hook token in the Authorization or x-hookgate-token header, never in the URL')
}

/** The name under the base path: percent-decoded, without trailing slashes. */
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

/** `x-hookgate-replay-of: <runId>`: the run a replay repeats, once the hook token passed. */
function checkReplayOf(given: string | string[]): string {
  if (typeof given !== 'string' || !/^[A-Za-z0-9._:-]{1,128}$/.test(given)) throw new HttpError(400, 'invalid_replay_of', 'x-hookgate-replay-of takes one run id')
  return given
}

function correlationIdOf(req: IncomingMessage): string {
  const given = req.headers['x-correlation-id']
  return typeof given === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(given) ? given : randomUUID()
}
