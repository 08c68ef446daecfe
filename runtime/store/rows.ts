// The rules of a run row that every store keeps alike: how a new row is checked and built, what a
// status change or a notification does to it, and the limits of its free-text fields. The file
// store folds its records with these, the PostgreSQL store writes the rows they give.
import { FINAL_STATUSES, NEXT_STATUSES, RunStoreError, type DefinitionKind, type NewRun, type RunAction, type RunNotification, type RunRow, type RunStatus, type TransitionExtra } from './store.js'

export const RESULT_MAX_CHARS = 500
/** An output whose JSON is longer than this is kept apart from the row (the file store: in a blob). */
export const OUTPUT_INLINE_MAX_CHARS = 16 * 1024
/** A row keeps this many notifications, the newest (a `state` policy sends a handful per run). */
export const NOTIFICATIONS_MAX = 20
export const ERROR_MAX_CHARS = 1000

export const STATUSES: ReadonlySet<string> = new Set<RunStatus>(['queued', 'running', 'succeeded', 'failed', 'timed_out', 'skipped'])
export const KINDS: ReadonlySet<string> = new Set<DefinitionKind>(['hook', 'trigger', 'task'])
export const ACTIONS: ReadonlySet<string> = new Set<RunAction>(['wake', 'agent', 'workflow', 'http', 'transform', 'deliver'])
const OPTIONAL_STRINGS = ['agentId', 'sessionKey', 'name', 'replayOf', 'scheduledFor', 'parentRunId', 'stepId'] as const
const DATA_FIELDS = ['request', 'idempotency', 'response', 'requestBlob', 'received', 'receivedBlob', 'output', 'outputBlob'] as const
const ID_FIELDS = ['id', 'definitionId', 'correlationId'] as const

/**
 * Whether `row` is a wake run: a wake accepted for an agent's main session, which that session's
 * turn reads and settles. A workflow's wake step has action wake too, but it is not one: it is its
 * workflow's row, moved by the workflow's runner alone (the step queues its event itself), and a
 * session that took it for a wake would take it from under the runner.
 */
export function isWakeRun(row: Pick<RunRow, 'action' | 'parentRunId'>): boolean {
  return row.action === 'wake' && row.parentRunId === undefined
}

/**
 * A new run's row as every store keeps it, created at `at`: checked field by field (ids, kind,
 * action, status, the optional strings, plain JSON in the data fields) in the documented order.
 */
export function buildRow(input: NewRun, at: string): RunRow {
  if (input === null || typeof input !== 'object') throw new RunStoreError('invalid_run', 'a run needs an object')
  for (const key of ID_FIELDS) {
    if (typeof input[key] !== 'string' || input[key] === '') throw new RunStoreError('invalid_run', `a run needs a non-empty string ${key}`)
  }
  if (!KINDS.has(input.definitionKind)) throw new RunStoreError('invalid_run', `unknown definitionKind "${String(input.definitionKind)}" (hook, trigger or task)`)
  if (!ACTIONS.has(input.action)) throw new RunStoreError('invalid_run', `unknown action "${String(input.action)}" (wake, agent or workflow)`)
  const status = input.status ?? 'queued'
  if (!STATUSES.has(status)) throw new RunStoreError('invalid_run', `unknown run status "${String(status)}"`)
  // Field by field, in the documented order: no spread copies on the hot path.
  const row: RunRow = { id: input.id, definitionKind: input.definitionKind, definitionId: input.definitionId, correlationId: input.correlationId, action: input.action, status, createdAt: at, updatedAt: at }
  if (status !== 'queued') row.startedAt = input.startedAt ?? at
  if (FINAL_STATUSES.has(status)) row.finishedAt = input.finishedAt ?? at
  for (const key of OPTIONAL_STRINGS) {
    const v = input[key]
    if (v === undefined) continue
    if (typeof v !== 'string') throw new RunStoreError('invalid_run', `run ${input.id}: ${key} must be a string`)
    row[key] = v
  }
  if (input.error !== undefined || input.result !== undefined || input.attempts !== undefined) {
    const extra = cleanExtra(input)
    if (extra.error !== undefined) row.error = extra.error
    if (extra.result !== undefined) row.result = extra.result
    if (extra.attempts !== undefined) row.attempts = extra.attempts
  }
  // What is in memory must equal what a restart folds back from the file: the data-carrying
  // fields hold plain JSON, checked here without a copy (a JSON round trip showed in the profile).
  for (const key of DATA_FIELDS) {
    const v = input[key]
    if (v === undefined) continue
    // A received request is the client's payload as parsed (1e999999 is Infinity): memory never
    // holds it, so what JSON makes of it on disk (null) is all anyone reads; it is not refused.
    const problem = key === 'received' ? undefined : notPlainJson(v, 0)
    if (problem) throw new RunStoreError('invalid_run', `run ${input.id} cannot be stored as JSON: ${problem}`)
    ;(row as unknown as Record<string, unknown>)[key] = v
  }
  return Object.freeze(row)
}

/**
 * One request, stored once: the rows of a fan-out share one received request (the same object), and
 * copied into each row it cost a copy per element (a 245 KiB request fanned out to 200 runs
 * appended 48 MiB). The first row that carries it keeps it; every later row carrying that same
 * request names the first one (`receivedIn`) instead. Both stores write what this gives, and keep
 * the request while any row names it (compaction, retention).
 */
export function storeReceivedOnce(rows: RunRow[]): RunRow[] {
  let holder: RunRow | undefined
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    if (row.received === undefined) continue
    if (holder === undefined) { holder = row; continue }
    if (row.received !== holder.received) continue
    const { received: _received, ...rest } = row
    rest.receivedIn = holder.id
    rows[i] = Object.freeze(rest)
  }
  return rows
}

/** A status change as a store records it: the status, when, and what came with it. */
export interface StatusChange { status: RunStatus; at: string; error?: string; result?: string; attempts?: number; output?: unknown; outputBlob?: { name: string; bytes: number } }

/** The row after a status change; `dropRequest` leaves out what only a resume or replay reads. */
export function withStatus(row: RunRow, record: StatusChange, dropRequest = false): RunRow {
  // one copy either way (a delete would slow every later read of the row)
  const { request, received, ...rest } = row
  const next: RunRow = rest
  if (request !== undefined && !dropRequest) next.request = request
  if (received !== undefined && !dropRequest) next.received = received
  next.status = record.status
  next.updatedAt = record.at
  if (record.status === 'running') next.startedAt = record.at
  if (FINAL_STATUSES.has(record.status)) next.finishedAt = record.at
  if (record.error !== undefined) next.error = record.error
  if (record.result !== undefined) next.result = record.result
  if (record.attempts !== undefined) next.attempts = record.attempts
  if (record.output !== undefined) next.output = record.output
  if (record.outputBlob !== undefined) next.outputBlob = record.outputBlob
  return Object.freeze(next)
}


/** The row with one more notification, the oldest dropped past NOTIFICATIONS_MAX. */
export function withNote(row: RunRow, note: RunNotification): RunRow {
  const notes = [...(row.notifications ?? []), note]
  return Object.freeze({ ...row, notifications: notes.length > NOTIFICATIONS_MAX ? notes.slice(-NOTIFICATIONS_MAX) : notes })
}

/** A notification in its documented shape: its error one clipped line. */
export function cleanNote(note: RunNotification): RunNotification {
  const out: RunNotification = { at: note.at, state: note.state, channel: note.channel, ok: note.ok, attempts: Math.max(0, Math.floor(note.attempts)) }
  if (note.error !== undefined) out.error = clip(firstLine(String(note.error)), ERROR_MAX_CHARS)
  return out
}


/** Keeps error, result and attempts in their documented shape. */
export function cleanExtra(extra: TransitionExtra): TransitionExtra {
  const out: TransitionExtra = {}
  if (extra.error !== undefined) out.error = clip(firstLine(String(extra.error)), ERROR_MAX_CHARS)
  if (extra.result !== undefined) out.result = clip(String(extra.result), RESULT_MAX_CHARS)
  if (extra.attempts !== undefined) {
    if (!Number.isInteger(extra.attempts) || extra.attempts < 0) throw new RunStoreError('invalid_run', `attempts must be a whole number, not ${extra.attempts}`)
    out.attempts = extra.attempts
  }
  return out
}

function firstLine(text: string): string {
  const line = text.trim().split(/\r?\n|\r/, 1)[0]!
  return line.trim()
}

/** Cuts to at most `max` characters (code points), marking the cut with an ellipsis. */
function clip(text: string, max: number): string {
  if (text.length <= max) return text
  const chars = Array.from(text.slice(0, max + 1))
  return chars.length <= max ? chars.join('') : chars.slice(0, max - 1).join('') + '…'
}


export function notPlainJson(v: unknown, depth: number): string | undefined {
  if (depth > 32) return 'it is nested too deeply'
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return undefined
  if (typeof v === 'number') return Number.isFinite(v) ? undefined : `${v} is not a JSON number`
  if (Array.isArray(v)) {
    for (const x of v) { const p = notPlainJson(x, depth + 1); if (p) return p }
    return undefined
  }
  if (typeof v === 'object') {
    const proto = Object.getPrototypeOf(v)
    if (proto !== Object.prototype && proto !== null) return `a ${(v as object).constructor?.name ?? 'class'} instance is not plain data`
    for (const x of Object.values(v as object)) {
      if (x === undefined) continue // dropped by JSON, read back as absent: the same to every reader
      const p = notPlainJson(x, depth + 1)
      if (p) return p
    }
    return undefined
  }
  return `a ${typeof v} is not JSON`
}


/** The row a status change applies to: `row` (the run as this runtime holds it), when `status` is a legal next one. */
export function movableRow(id: string, row: RunRow | undefined, status: RunStatus): RunRow {
  if (!row) throw new RunStoreError('unknown_run', `no run with id ${id}`)
  if (!NEXT_STATUSES[row.status].includes(status)) {
    throw new RunStoreError('illegal_transition', FINAL_STATUSES.has(row.status)
      ? `run ${id} already finished as ${row.status} and cannot become ${status}`
      : `run ${id} cannot go from ${row.status} to ${status}`)
  }
  return row
}

/** A status given to transition() that is none of the six: refused before anything is queued. */
export function checkStatus(status: RunStatus): RunStoreError | undefined {
  return STATUSES.has(status) ? undefined : new RunStoreError('invalid_run', `unknown run status "${String(status)}"`)
}

/** The row as memory keeps a finished run: without what only a resume or a replay reads from the store. */
export function withoutRequest(row: RunRow): RunRow {
  if (row.request === undefined && row.received === undefined) return row
  const { request: _request, received: _received, ...rest } = row
  return Object.freeze(rest)
}

export function withoutReceived(row: RunRow): RunRow {
  const { received: _received, ...rest } = row
  return Object.freeze(rest)
}

/** Finished runs a store keeps, newest first, unless server.history.keepRuns says otherwise (unfinished ones always). */
export const DEFAULT_KEEP_HISTORY = 50_000
/** How long an Idempotency-Key holds unless server.idempotencyWindowSeconds says otherwise: 24 h. */
export const DEFAULT_KEY_WINDOW_MS = 86_400_000
