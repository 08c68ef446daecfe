// The state as the HTTP side, the engine, the scheduler, the admin page and the CLIs see it: the
// run rows and their rules, the logs of the agents' sessions, and what opening a store gives. Two
// stores implement it: the file store (runtime/store/file/, the zero-setup default) and
// PostgreSQL (runtime/store/postgres/, several runtimes on one database). Nothing above the store
// imports either one: `openStore` (runtime/store/open.ts) picks one from the configuration.
//
// A store's promise is the same whichever it is: a write resolves only once it is durable, so a
// request is answered only after its run is on disk (or committed), and memory changes only after.
// Over 400 lines because it is the whole contract between the store and everything above it: the
// rows' types and their rules, the logs, the history reader; each part is short.
import type { IncomingHttpHeaders } from 'node:http'

export type RunStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'timed_out' | 'skipped'
export type DefinitionKind = 'hook' | 'trigger' | 'task'
/** a workflow step's row has its step's action: http, transform and deliver exist only there */
export type RunAction = 'wake' | 'agent' | 'workflow' | 'http' | 'transform' | 'deliver'

export interface RunRow {
  /** the runId given in the HTTP response */
  id: string
  definitionKind: DefinitionKind
  /** mapping id, 'wake', 'agent', trigger or task id */
  definitionId: string
  correlationId: string
  action: RunAction
  status: RunStatus
  createdAt: string
  updatedAt: string
  startedAt?: string
  finishedAt?: string
  agentId?: string
  sessionKey?: string
  name?: string
  /** a human sentence, never a stack: only the first line is kept */
  error?: string
  attempts?: number
  /** a short summary of the output, at most RESULT_MAX_CHARS characters */
  result?: string
  /** what is needed to run the action again after a crash (the rendered action); `hookgate runs` shows it only with --json */
  request?: unknown
  /**
   * A request too large to keep in the history's own lines lives in a blob beside it (written and
   * synced before the record naming it); memory holds it only while the run is unfinished.
   */
  requestBlob?: { name: string; bytes: number }
  /** the Idempotency-Key the run was started with, and a hash of the request it came with */
  idempotency?: { key: string; fingerprint: string }
  /** the answer the client was given, replayed to a repeat with the same Idempotency-Key */
  response?: { status: number; body: Record<string, unknown> }
  /**
   * A mapped request as it arrived, for `hookgate runs replay`: path, query, payload and headers
   * with every secret header `[redacted]`. Kept on disk only (a large one in a blob, like
   * `request`); memory drops it once the run is finished.
   */
  received?: ReceivedRequest
  receivedBlob?: { name: string; bytes: number }
  /**
   * A request is stored once, whatever number of runs it starts: the runs of a fan-out after the
   * first keep no `received` of their own but the id of the run whose row holds it (see
   * storeReceivedOnce in rows.ts). Read it with `received()` of a RunLog or a HistoryReader.
   */
  receivedIn?: string
  /** the run this one replays (`hookgate runs replay`) */
  replayOf?: string
  /** a task's run: the slot it fired for (ISO-8601 UTC); the scheduler finds its last firing by it */
  scheduledFor?: string
  /** a workflow step's row: the workflow's run, and the step's id in it */
  parentRunId?: string
  stepId?: string
  /** a workflow step's output (what later steps read as {{steps.<id>.output}}); a large one is in outputBlob */
  output?: unknown
  outputBlob?: { name: string; bytes: number }
  /** what the notify policy sent about this run (runtime/notify), oldest first, the newest NOTIFICATIONS_MAX kept */
  notifications?: RunNotification[]
}

/** One notification about a run's state, as its channel took it (or did not). */
export interface RunNotification {
  at: string
  /** the run status it told of */
  state: RunStatus
  channel: string
  ok: boolean
  attempts: number
  /** why it was not delivered: a sentence, never a credential */
  error?: string
}

/** What `received` holds: the request a mapping saw, without its secrets. */
export interface ReceivedRequest {
  /** the request path as sent, without the query string, e.g. `/hooks/github` */
  path: string
  query: Record<string, string>
  headers: Record<string, string>
  payload: unknown
}

/** startedAt and finishedAt default to the creation time when the run starts out running or finished */
export type NewRun = Omit<RunRow, 'status' | 'createdAt' | 'updatedAt'> & { status?: RunStatus }
export interface TransitionExtra { error?: string; result?: string; attempts?: number; output?: unknown }

/** What a compaction at open did. */
export interface Compaction { records: number; bytesBefore: number; bytesAfter: number; keptRuns: number; droppedRuns: number }

export const FINAL_STATUSES: ReadonlySet<RunStatus> = new Set<RunStatus>(['succeeded', 'failed', 'timed_out', 'skipped'])

/** Legal moves; `running → queued` re-queues a run interrupted by a crash. Final states have none. */
export const NEXT_STATUSES: Readonly<Record<RunStatus, readonly RunStatus[]>> = {
  queued: ['running', 'skipped', 'failed', 'succeeded'],
  running: ['succeeded', 'failed', 'timed_out', 'queued'],
  succeeded: [],
  failed: [],
  timed_out: [],
  skipped: [],
}

export function isFinalStatus(status: RunStatus): boolean {
  return FINAL_STATUSES.has(status)
}

export class RunStoreError extends Error {
  /**
   * duplicate_key: another run holds this Idempotency-Key; fenced_out: another runtime took the run
   * over; store_unavailable: the database cannot be reached; store_refused: the database refused
   * this write (alone: the other writes of its batch were made)
   */
  readonly code: 'unknown_run' | 'duplicate_run' | 'duplicate_key' | 'illegal_transition' | 'invalid_run' | 'store_closed' | 'store_unavailable' | 'store_refused' | 'fenced_out'
  /** duplicate_key: the run that holds the key, as a replay or a 409 needs it */
  readonly holder: { fingerprint: string; response: { status: number; body: Record<string, unknown> } } | undefined
  constructor(code: RunStoreError['code'], message: string, holder?: RunStoreError['holder']) {
    super(message)
    this.name = 'RunStoreError'
    this.code = code
    this.holder = holder
  }
}

export interface RunHistory {
  /** newest first */
  rows: RunRow[]
  /** a torn last line (a write in progress or cut by a crash) */
  torn: number
  /** lines that were not JSON, or records that were not understood */
  corrupt: number
}

/** A status a run entered, told once it is on disk: the row as it is now. */
export type RunChangeListener = (row: RunRow) => void

/** One durable write of a batch (a flush of a file log, a commit), as the metrics count it. */
export interface FlushEvent { path: string; writeSeconds: number; fsyncSeconds: number; bytes: number; records: number; ok: boolean; error?: string }

/** Whether a store can take writes now; while not, why (and since when), for 503s and /healthz. */
export type StoreHealth = { ok: true } | { ok: false; since: number; reason: string }

// ---- hints the HTTP side attaches to a received request ------------------------------------------

/**
 * The upper bound of a value's JSON length, when the caller knows one (see boundJsonSize). A symbol
 * key: JSON.stringify and Object.keys never see it, and setting it costs a property store (a
 * WeakMap entry per request showed in the profile).
 */
const JSON_SIZE_BOUND = Symbol('jsonSizeBound')

/**
 * Tells the store that `value` serialises to at most `chars` characters (a received request's
 * bound follows from the body's size), so a small one is stored without being measured.
 */
export function boundJsonSize(value: object, chars: number): void {
  (value as { [JSON_SIZE_BOUND]?: number })[JSON_SIZE_BOUND] = chars
}

export function jsonSizeBoundOf(value: object): number | undefined {
  return (value as { [JSON_SIZE_BOUND]?: number })[JSON_SIZE_BOUND]
}

/**
 * The JSON text a received request's payload was parsed from, as bytes on one line (see
 * `jsonBodyText`). A symbol key, like JSON_SIZE_BOUND: a store may write these bytes as they are
 * instead of serialising the payload again.
 */
const RAW_PAYLOAD = Symbol('rawPayload')

/** Notes that `received.payload` was parsed from `json` (valid JSON text without a line break). */
export function rawJsonPayload(received: ReceivedRequest, json: Buffer): void {
  (received as { [RAW_PAYLOAD]?: Buffer })[RAW_PAYLOAD] = json
}

export function rawPayloadOf(received: object): Buffer | undefined {
  return (received as { [RAW_PAYLOAD]?: Buffer })[RAW_PAYLOAD]
}

// ---- the rejected-request log -------------------------------------------------------------------

/** One line of the log: a bucket as it stood when written (the reader keeps the last per id). */
export interface RejectRecord {
  id: string
  /** the first refusal of this bucket (ISO 8601) */
  firstAt: string
  /** the latest refusal counted in `count` */
  lastAt: string
  /** refusals folded into this record: same client, path, status and code within one minute */
  count: number
  method: string
  path: string
  client: string
  status: number
  code: string
  /** the first request's headers, secrets redacted by name, at most MAX_HEADERS */
  headers: Record<string, string>
  /** headers past MAX_HEADERS, left out */
  headersOmitted?: number
  /** only under `serve --log-bodies`: the first 2 KiB of the first request's body, when it was read */
  body?: string
}

/** Where a refused request is noted (4xx before a run): folded per client, path, status and code per minute. */
export interface RefusalRecorder {
  note(client: string, path: string, status: number, code: string, method: string, headers: IncomingHttpHeaders | undefined, body: string | undefined): void
}

// ---- the auth lock-out, shared by the runtimes on one store ----------------------------------------

/** Failures past `limit` within `windowMs` lock a client address out for `lockoutMs`. */
export interface LockoutSettings { limit: number; windowMs: number; lockoutMs: number }

/**
 * A client's failures this runtime counted since its last flush; `cleared`: a correct token came
 * in meanwhile, so the merged count starts again from `failures` (0: no count at all).
 */
export interface LockoutDelta { client: string; failures: number; cleared: boolean }

/**
 * A client's count merged from every runtime. Its times are durations on the store's clock, so
 * runtimes whose clocks disagree still agree on when a window or a lock-out ends.
 */
export interface MergedLockout { client: string; failures: number; windowAgeMs: number; lockedForMs: number }

/** One flush of the counters, as the limiter hands it out: sent once, then `done` or `failed`. */
export interface LockoutFlush {
  readonly deltas: readonly LockoutDelta[]
  /** clients this runtime tracks with nothing new to send: their merged count is read back too */
  readonly watched: readonly string[]
  /**
   * The store merged the deltas. `merged`: the counts of this flush's clients that still have one
   * (a client left out has none), and of clients locked out now; `hosts`: the runtimes sharing
   * the counts; `now`: this runtime's clock when the answer came.
   */
  done(merged: readonly MergedLockout[], hosts: number, now: number): void
  /** The store was not reached: the deltas are counted again, to go with the next flush. */
  failed(): void
}

/** The auth limiter's side of a lock-out shared by several runtimes (AuthLimiter implements it). */
export interface LockoutCounters {
  readonly settings: LockoutSettings
  /**
   * From now on the limiter keeps what a flush sends. With `flushSoon`, it also counts shares: it
   * calls `flushSoon` (on the request path: schedule, do not work) when a client's failures here
   * spend this runtime's share of what the merged count has left below the limit.
   */
  attach(flushSoon?: () => void): void
  /** back to counting alone */
  detach(): void
  /** the deltas since the last flush, at most `max` clients, and at most `max` clients to read back */
  collect(max: number): LockoutFlush
}

// ---- what a store offers -----------------------------------------------------------------------

/**
 * The runs this runtime accepts and runs. Writes resolve once durable, and a row in memory changes
 * only then; reads are of the rows this runtime holds (every unfinished run it owns and its recent
 * finished ones), synchronous, because the request path and the engine read them on every run.
 */
export interface RunLog {
  /** a new run, durable before it resolves; a second row with the same id is `duplicate_run` */
  create(run: NewRun): Promise<RunRow>
  /** several new runs with one durable write (a fan-out request) */
  createMany(runs: readonly NewRun[]): Promise<RunRow[]>
  transition(id: string, status: RunStatus, extra?: TransitionExtra): Promise<RunRow>
  /** many runs finished alike (the wakes one turn read) with one write */
  settle(ids: readonly string[], status: RunStatus, extra?: { error?: string }): Promise<void>
  recordNotification(id: string, note: RunNotification): Promise<void>
  /** the row once it is final, or null after `timeoutMs` */
  whenFinished(id: string, timeoutMs: number): Promise<RunRow | null>
  /** told of every status a run enters once it is durable; returns the unsubscribe */
  subscribe(listener: RunChangeListener): () => void
  get(id: string): RunRow | undefined
  /** newest first */
  list(options?: { limit?: number }): RunRow[]
  /** a workflow's step rows, oldest first */
  children(parentRunId: string): RunRow[]
  /** runs left queued or running, oldest first (what a start resumes) */
  unfinished(): RunRow[]
  /** a step's output, read from wherever the store keeps a large one */
  output(row: RunRow): unknown
  /**
   * The request a run was received with, read from wherever the store keeps it (the row, a blob,
   * the row of the run that holds it for its whole fan-out); undefined when none was stored or a
   * compaction dropped it. For a resume: the request path never reads it.
   */
  received(row: RunRow): Promise<ReceivedRequest | undefined>
  /** forget the oldest finished rows past the memory bound (the store keeps them) */
  trim(): void
  /** several runtimes on one store: forget a run accepted here for another runtime to run (it claims it) */
  release?(id: string): void
  readonly health: StoreHealth
  /** what opening it compacted, if anything */
  readonly compaction: Compaction | null
  close(): Promise<void>
}

/** An append-only log of records (an agent's main session, the isolated transcripts): durable before append resolves. */
export interface RecordLog<R> {
  append(...records: R[]): Promise<void>
  readonly health: StoreHealth
  close(): Promise<void>
}

/** A record log as opened: what it held, and the log to append to. */
export interface OpenedLog<R> { records: R[]; log: RecordLog<R> }

/**
 * What a runtime that owns an agent's main session is told (the engine): the session is one
 * runtime's at a time, and only its owner queues events for a turn, runs turns and settles wakes.
 */
export interface SessionHandler<R extends object> {
  /** this runtime owns the session now: its log as it stands, and its queued wakes, claimed */
  gained(agentId: string, records: R[], wakes: RunRow[]): void
  /** events and wakes queued by any runtime since; `now`: one of them asks for a turn at once */
  pulled(agentId: string, records: R[], wakes: RunRow[], now: boolean): void
  /** another runtime holds the session now (this one's lease ran out): forget what was queued */
  lost(agentId: string): void
  /** the agent's last delivery route changed, told by whichever runtime delivered (channel: last) */
  routed(agentId: string, route: { channel: string; to: string | null }): void
}

/** The record log an agent's main session is kept in, in either store. */
export function sessionLogName(agentId: string): string {
  return `${encodeURIComponent(agentId)}/main`
}

/**
 * Agents' main sessions shared by several runtimes: a lease per agent, fenced, so that one runtime
 * at a time reads its events and commits its turns. Absent on a store only one runtime uses.
 */
export interface SessionOwnership<R extends object = object> {
  /** the agents this runtime competes for (a reload changes them), and who hears of it */
  serve(agentIds: readonly string[], handler: SessionHandler<R>): void
  owns(agentId: string): boolean
  /** an event for the session, wherever its owner is; durable before it resolves */
  queue(agentId: string, record: R & { id: string }, now: boolean): Promise<void>
  /** a turn's record, committed only while this runtime holds the session; `fenced_out` otherwise */
  commitTurn(agentId: string, record: R): Promise<void>
  /** the agent's last delivery route, for every runtime (channel: last) */
  setRoute(agentId: string, route: { channel: string; to: string | null }): Promise<void>
  close(): Promise<void>
}

/**
 * Isolated turns under one session key, one at a time across the runtimes sharing a store (one
 * runtime alone orders them in memory). Absent on a store only one runtime uses.
 */
export interface SessionKeyLocks {
  /**
   * Runs `task` (run `runId`'s turn) once this runtime holds `sessionKey`, and lets it go after;
   * held while this runtime lives (a lease it renews): a runtime that dies gives it up within its
   * lease. Rejects `store_closed` when the store closes first.
   */
  hold<T>(sessionKey: string, runId: string, task: () => Promise<T>): Promise<T>
}

/** Runs another runtime left unfinished, claimed by this one, with their transcript records. */
export type TakeoverListener = (runs: RunRow[], transcripts: object[]) => void

/**
 * A loop a store runs in the background, as the runtime's supervisor starts and stops it: the
 * shape of a duty (runtime/duties/duty.ts), which the store does not import. start() is done when
 * it returns; stop() resolves once the loop's last round has ended.
 */
export interface StoreDuty {
  readonly name: string
  start(): void
  stop(): Promise<void>
  health(): { ok: true } | { ok: false; reason: string }
}

/**
 * The background loops a store needs beside it, by what each is for, so that the runtime starts
 * each in its place among its other duties (runtime/serve/duties.ts) and stops them before it
 * closes the store. A store opened without a supervisor (a tool, a test) runs them itself.
 */
export interface StoreDuties {
  /** deletes the history past its bounds, now and then */
  retention?: StoreDuty
  /** holds and renews the leases of the main sessions this runtime serves, and pulls what others queued */
  sessionOwnership?: StoreDuty
  /** takes over a dead runtime's unfinished runs (onTakeover's listener resumes them) and ends wakes nobody will read */
  takeoverSweep?: StoreDuty
}

/** One state: the runs and the record logs beside them. */
export interface Store {
  readonly kind: 'file' | 'postgres'
  readonly runs: RunLog
  /** several runtimes on one store: who owns each agent's main session */
  readonly sessions?: SessionOwnership
  /** several runtimes on one store: one isolated turn per session key at a time across them */
  readonly sessionKeys?: SessionKeyLocks
  /** several runtimes on one store: told of the runs this one takes over from a dead one, to resume them */
  onTakeover?(listener: TakeoverListener): void
  /** its background loops, for the runtime's supervisor to start and stop; absent: it has none */
  readonly duties?: StoreDuties
  /** several runtimes on one store: per task id, the latest slot any of them fired (the scheduler's catch-up) */
  lastFiredSlots?(): Promise<Map<string, number>>
  /**
   * Opens the record log `name` (`isolated`, `<agent>/main`) with what it holds. `keep`, when the
   * log has grown past its bound, is what it is rewritten to: the records a later start still needs.
   */
  openLog<R extends object>(name: string, keep?: (records: R[]) => R[]): OpenedLog<R>
  /** the rejected-request log; `warn` hears of a write that failed (it never fails a request) */
  openRejects(warn: (error: string) => void): RefusalRecorder
  /**
   * Merges the auth lock-out counts of every runtime on this store, in the background: the
   * request path only counts in memory. Absent: the store has one runtime, nothing to share.
   */
  shareLockout?(counters: LockoutCounters): { close(): Promise<void> }
  close(): Promise<void>
}

/**
 * The history as the CLIs and the operator page read it, while a runtime may be writing it. Every
 * read is a promise: the file store reads its files, PostgreSQL queries.
 */
export interface HistoryReader {
  /** where it is, for messages: a file, or a database (never with its password) */
  readonly where: string
  /** changes whenever the history does: a cheap check before reading it all again */
  version(): Promise<string>
  /** every row, newest first, and what could not be read */
  read(): Promise<RunHistory>
  request(row: RunRow): Promise<unknown>
  received(row: RunRow): Promise<ReceivedRequest | undefined>
  output(row: RunRow): Promise<unknown>
  /** the records of a record log (openLog's name), oldest first */
  logRecords<R extends object>(name: string): Promise<R[]>
  /** the rejected-request log, the last record per bucket */
  rejects(): Promise<{ records: RejectRecord[]; torn: number; corrupt: number }>
  close(): Promise<void>
}
