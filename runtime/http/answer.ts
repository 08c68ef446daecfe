// The answer to a request its endpoint prepared: the runs accepted with one durable write and then
// answered (200 for a wake, 202 for agent and workflow runs; with waitForCompletion, 200 with their
// outcome once they are final), or the row recorded and the answer given when nothing starts (a
// skip, a filtered event, a failed transform). The answer stays here: the acceptor is handed plain
// row fields (the run ids, the request kept for a replay, the answer kept for an Idempotency-Key).
//
// Hot path: every accepted request comes through acceptRuns. Its answer body is built once, field by
// field; no closure, no spread, nothing the acceptor does not keep.
import { randomUUID } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import type { Acceptor, RowExtra, RunOutcome } from '../agents/acceptor.js'
import type { Accept, MatchedDefinition, Prepared } from '../endpoints/endpoint.js'
import type { Logger } from '../observe/log.js'
import { countTransformFailure } from '../observe/service-metrics.js'
import { RunStoreError } from '../store/store.js'
import { HttpError, sendJson } from './errors.js'
import type { StoredResponse } from './idempotency.js'

/** What answering needs of the request in hand (the HTTP core's exchange). */
export interface Answering {
  readonly res: ServerResponse
  readonly acceptor: Acceptor
  readonly logger: Logger
  readonly correlationId: string
  /** what every row of the request carries: how it was received, what it replays */
  readonly trace: RowExtra | undefined
  /** the definition the request matched, once known: a failure after it still gets a row */
  readonly matched: MatchedDefinition | undefined
  /** the request's Idempotency-Key (or signed delivery id): the first row keeps it with the answer */
  readonly idempotency: { key: string; fingerprint: string } | undefined
  /** the first run's id, for the log line */
  runId: string | undefined
  /** the runs are on disk */
  accepted: boolean
  /** the answer sent, kept for a repeat of the Idempotency-Key */
  stored: StoredResponse | null
}

export function answer(ex: Answering, prepared: Prepared): Promise<number> {
  if (prepared.kind === 'accept') return acceptRuns(ex, prepared)
  if (prepared.kind === 'skip') return recordSkip(ex, prepared.definition, prepared.reason)
  return recordFailure(ex, prepared)
}

/**
 * Every run of the request with one durable write, then the answer. The run row carries its id,
 * the key and the answer, so a replay survives a restart; of several runs, the first row keeps them.
 */
async function acceptRuns(ex: Answering, p: Accept): Promise<number> {
  const n = p.submissions.length
  const ids: string[] = []
  for (let i = 0; i < n; i++) ids.push(randomUUID())
  ex.runId = ids[0]
  const response: StoredResponse = { status: p.status, body: acceptedBody(p, ids) }
  const awaited = p.waitSeconds > 0
  const trace = ex.trace
  const extras: RowExtra[] = []
  for (let i = 0; i < n; i++) {
    // every run of the request keeps how it was received (for a replay) and what it replays
    const extra: RowExtra = { id: ids[i]! }
    if (trace !== undefined) {
      if (trace.received !== undefined) extra.received = trace.received
      if (trace.replayOf !== undefined) extra.replayOf = trace.replayOf
    }
    // a run a request waits for keeps its whole reply for the answer
    if (awaited) extra.awaited = true
    extras.push(extra)
  }
  // only a run started with an Idempotency-Key keeps its answer, to replay it after a restart
  if (ex.idempotency !== undefined) {
    extras[0]!.response = response
    extras[0]!.idempotency = ex.idempotency
  }
  await ex.acceptor.accept(p.submissions, extras)
  ex.accepted = true
  if (!awaited) return send(ex, response)
  return waitForRuns(ex, ids, p.waitSeconds, response)
}

/** { ok, action, runId, … } of the first run; a fan-out adds every run id (and an agent fan-out each session key). */
function acceptedBody(p: Accept, ids: string[]): Record<string, unknown> {
  const first = p.submissions[0]!
  const runId = ids[0]
  const body: Record<string, unknown> = first.kind === 'wake'
    ? { ok: true, action: 'wake', runId, mode: first.input.mode }
    : first.kind === 'workflow'
      ? { ok: true, action: 'workflow', runId, correlationId: first.input.correlationId }
      : { ok: true, action: 'agent', runId, correlationId: first.input.correlationId, sessionKey: first.input.sessionKey }
  if (!p.fanOut) return body
  body.runIds = ids
  if (first.kind === 'agent') body.sessionKeys = p.submissions.map((s) => (s.kind === 'agent' ? s.input.sessionKey : ''))
  return body
}

function send(ex: Answering, response: StoredResponse): number {
  ex.stored = response
  sendJson(ex.res, response.status, response.body)
  return response.status
}

/**
 * waitForCompletion: holds the answer until every run is durably final (200 with the outcome) or
 * the wait is over (the usual acceptance answer). The runs go on either way; a client that hangs
 * up meanwhile cancels nothing. A replay of the request gets the acceptance answer stored with the
 * run: replays never wait.
 */
async function waitForRuns(ex: Answering, runIds: string[], waitSeconds: number, response: StoredResponse): Promise<number> {
  const outcomes = await Promise.all(runIds.map((id) => ex.acceptor.whenFinished(id, waitSeconds * 1000)))
  if (outcomes.some((o) => o === null)) return send(ex, response)
  const shown = outcomes.map((o) => describeOutcome(o!))
  ex.stored = response
  sendJson(ex.res, 200, { ...response.body, ...(shown.length === 1 ? shown[0]! : { runs: shown }) })
  return 200
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

/** Nothing to start (a transform's null, an empty fan-out, a match.when that let it go): the row says why; 204. */
async function recordSkip(ex: Answering, d: Extract<Prepared, { kind: 'skip' }>['definition'], reason: string | undefined): Promise<number> {
  await ex.acceptor.record({ definitionKind: d.definitionKind, definitionId: d.id, correlationId: ex.correlationId }, d.action, 'skipped', undefined, reason, ex.trace)
  ex.res.writeHead(204).end()
  return 204
}

/** A failed transform: the reason goes to the log and the run's row; the sender gets a sentence without it. */
async function recordFailure(ex: Answering, p: Extract<Prepared, { kind: 'failed' }>): Promise<never> {
  const d = p.definition
  ex.logger.error(p.error, { mapping: d.id, code: p.code })
  countTransformFailure(d.id, p.code)
  await ex.acceptor.record({ definitionKind: d.definitionKind, definitionId: d.id, correlationId: ex.correlationId }, d.action, 'failed', p.error, undefined, ex.trace)
  throw new HttpError(500, p.code, p.code === 'transform_timeout' ? 'the mapping transform timed out' : 'the mapping transform failed')
}

const REPLAYED = { 'idempotent-replayed': 'true' }

/** A repeat of an Idempotency-Key (or of a signed delivery): the stored answer, starting nothing. */
export function answerStored(ex: Answering, response: StoredResponse): number {
  sendJson(ex.res, response.status, response.body, REPLAYED)
  if (typeof response.body.runId === 'string') ex.runId = response.body.runId
  return response.status
}

/** A request that failed once its endpoint had it: answered as a repeat, refused, or failed with its row. */
export async function recover(ex: Answering, err: unknown, fingerprint: string | undefined): Promise<number> {
  if (err instanceof RunStoreError) {
    // A shared store (PostgreSQL): another runtime holds this Idempotency-Key. The same request
    // gets that run's answer, as a repeat to this runtime would; another body is a 409.
    if (err.code === 'duplicate_key' && fingerprint !== undefined && err.holder) {
      if (err.holder.fingerprint !== fingerprint) throw new HttpError(409, 'idempotency_key_reused', 'this Idempotency-Key was already used with a different request')
      ex.stored = err.holder.response
      return answerStored(ex, err.holder.response)
    }
    // The store could not take the run (a database that went away meanwhile): not accepted, try again.
    if (err.code === 'store_unavailable') throw new HttpError(503, 'store_unavailable', 'the run store cannot write right now; try again shortly', { 'retry-after': '5' })
  }
  // A matching request that failed unexpectedly (a 500) still leaves its row, unless its runs were written.
  const m = ex.matched
  if (m && !(err instanceof HttpError) && !ex.accepted) {
    await ex.acceptor.record({ definitionKind: m.definitionKind, definitionId: m.id, correlationId: ex.correlationId }, m.action, 'failed', `the request could not be handled: ${(err as Error)?.message ?? String(err)}`, undefined, ex.trace).catch(() => {})
  }
  throw err
}
