// One request in hand (an Exchange): what admission found, what the body and the endpoint's prepare
// add, and how the request ends, answered or refused: its log line, its metrics, its note in the
// rejected-request log. It is the HookRequest the endpoint's prepare reads and the state answer.ts
// writes: one object per request, with methods, so the hot path makes no closures. Also the
// handler's inputs (Serving, HandlerDeps) and its log line's shape.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { BundleConfig } from '../bundle/format.js'
import type { LoadedBundle } from '../bundle/load.js'
import type { Acceptor, RowExtra } from '../agents/acceptor.js'
import type { HookEndpoint, HookRequest, MatchedDefinition, ServiceFacts } from '../endpoints/endpoint.js'
import type { TransformRunner } from '../endpoints/mapping.js'
import type { Logger } from '../observe/log.js'
import { countRequest, UNMATCHED } from '../observe/service-metrics.js'
import type { RefusalRecorder } from '../store/store.js'
import type { Answering } from './answer.js'
import { resolveClientAddress, type AddressMatcher, type AuthLimiter, type TokenCheck } from './auth.js'
import { jsonBodyText } from './body.js'
import { HttpError, sendError } from './errors.js'
import type { IdempotencyIndex, StoredResponse } from './idempotency.js'
import type { PreparedSignature } from './signatures.js'

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

export interface HandlerDeps extends ServiceFacts {
  current(): Serving
  limiter: AuthLimiter
  /** where accepted runs go: the engine, seen only through its request-side contract */
  acceptor: Acceptor
  /** Idempotency-Key memory; a handler made without one keeps keys for 24 h in memory only */
  idempotency?: IdempotencyIndex
  log(entry: RequestLog): void
  /** failures the sender is not told the reason of (a transform's, our own) */
  logger?: Logger
  /** a debugging aid: put (the start of) each body into its log line */
  logBodies?: boolean
  /** the rejected-request log: every 4xx refusal is noted (aggregated there, written off the request path) */
  rejects?: RefusalRecorder
}

export type Deps = HandlerDeps & { idempotency: IdempotencyIndex; logger: Logger }

/** Bytes of an unread body drained after a refusal to keep the connection; above it, close. */
const DRAIN_LIMIT = 64 * 1024
/** Read only: a request without a query string shares this one. */
export const NO_PARAMS = new URLSearchParams()
export const EMPTY = Buffer.alloc(0)

/** One request in hand: what admission found, what the endpoint's prepare sets, what the log line and the metrics report. */
export class Exchange implements HookRequest, Answering {
  readonly started = performance.now()
  readonly client: string
  readonly path: string
  /** the query string as sent, without its `?` */
  readonly search: string
  readonly config: BundleConfig
  readonly acceptor: Acceptor
  readonly logger: Logger
  readonly keep = true
  name = ''
  endpoint: HookEndpoint | undefined = undefined
  signature: PreparedSignature | undefined = undefined
  query: URLSearchParams = NO_PARAMS
  now = 0
  body: Buffer = EMPTY
  payload: unknown = undefined
  correlationId = ''
  idempotency: { key: string; fingerprint: string } | undefined = undefined
  trace: RowExtra | undefined = undefined
  matched: MatchedDefinition | undefined = undefined
  label: string | undefined = undefined
  runId: string | undefined = undefined
  accepted = false
  stored: StoredResponse | null = null
  /** with --log-bodies: the start of the body, for the log line */
  bodyText: string | undefined = undefined

  constructor(readonly req: IncomingMessage, readonly res: ServerResponse, readonly deps: Deps, readonly serving: Serving) {
    this.client = resolveClientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for'], serving.trusted)
    const url = req.url ?? '/'
    const q = url.indexOf('?')
    this.path = q < 0 ? url : url.slice(0, q)
    this.search = q < 0 ? '' : url.slice(q + 1)
    this.config = serving.bundle.config
    this.acceptor = deps.acceptor
    this.logger = deps.logger
  }

  get headers() { return this.req.headers }
  get url() { return this.req.url ?? '' }
  get bodyBytes() { return this.body.length }
  get transforms() { return this.serving.transforms ?? undefined }
  rawJson(): Buffer | undefined { return jsonBodyText(this.body, this.req.headers['content-type']) }

  /** Nothing is acknowledged that is not on disk, and accepted runs are bounded: 503 while the acceptor says no. */
  refuseWhenFull(kind: 'wake' | 'agent' | 'workflow'): void {
    const refusal = this.acceptor.refusal(kind)
    if (refusal !== undefined) throw new HttpError(503, refusal.code, refusal.message, { 'retry-after': String(refusal.retryAfterSeconds) })
  }

  done(status: number, code?: string): void {
    const ms = performance.now() - this.started
    countRequest(this.label ?? UNMATCHED, status, ms / 1000)
    // A client locked out for failed logins gets no log line per request: under a flood that
    // would be a disk write per refusal. The rejected-request log counts them per minute, and
    // the metrics count every one.
    if (code === 'too_many_auth_failures') return
    const path = this.path
    const entry: RequestLog = { method: this.req.method ?? '?', path: path.length > 512 ? path.slice(0, 512) : path, status, ms: Math.round(ms * 100) / 100, client: this.client }
    if (this.runId) entry.runId = this.runId
    if (code) entry.code = code
    if (this.bodyText !== undefined) entry.body = this.bodyText
    this.deps.log(entry)
  }

  fail(err: unknown): void {
    const { req, res } = this
    const e = err instanceof HttpError ? err : new HttpError(500, 'internal_error', 'the request could not be handled')
    if (!(err instanceof HttpError)) this.logger.error('request failed', { path: this.path, error: (err as Error)?.message })
    // Refused before the body was read: a small declared body is drained after the answer (Node
    // does that) so the connection stays open; an unknown or large one closes it instead.
    if (!req.complete && !(Number(req.headers['content-length']) <= DRAIN_LIMIT)) res.setHeader('connection', 'close')
    if (!res.headersSent) sendError(res, e)
    // A refusal of the sender (4xx), not our own failure: the rejected-request log keeps why.
    if (e.status < 500) this.deps.rejects?.note(this.client, this.path, e.status, e.code, req.method ?? '?', req.headers, this.bodyText)
    this.done(e.status, e.code)
  }
}
