// What `<stateDir>/runs.jsonl` holds and how it is read back: its records (a `run` creates a row, a
// `status` moves it on, `settled` finishes many alike, `notified` adds a notification), the fold
// that rebuilds every row from them (at open, for `hookgate runs` while a server holds the file
// open, for a compaction), and the blobs beside the file a row may name (a large request, received
// request or step output). Reading never fails on bad content: what is not understood is counted.
import { join } from 'node:path'
import { Journal } from './journal.js'
import { ACTIONS, KINDS, STATUSES, withNote, withStatus } from '../rows.js'
import { FINAL_STATUSES, type ReceivedRequest, type RunHistory, type RunNotification, type RunRow, type RunStatus } from '../store.js'

export const RUNS_FILE = 'runs.jsonl'

export type RunRecord =
  | { type: 'run'; row: RunRow }
  | { type: 'status'; id: string; status: RunStatus; at: string; error?: string; result?: string; attempts?: number; output?: unknown; outputBlob?: { name: string; bytes: number } }
  /** many runs finished alike at once (the wakes one heartbeat turn read): one line, not one per run */
  | { type: 'settled'; ids: string[]; status: RunStatus; at: string; error?: string }
  /** a notification about the run was sent, or given up on */
  | { type: 'notified'; id: string; note: RunNotification }

export type StatusRecord = Extract<RunRecord, { type: 'status' }>

/** Folds records into `rows` (file order); returns how many records were not understood. */
export function fold(records: unknown[], rows: Map<string, RunRow>): number {
  let ignored = 0
  for (const record of records) {
    if (isRunRecord(record)) {
      if (rows.has(record.row.id)) ignored += 1
      else rows.set(record.row.id, Object.freeze(record.row))
    } else if (isStatusRecord(record)) {
      const row = rows.get(record.id)
      if (row) rows.set(record.id, withStatus(row, record))
      else ignored += 1
    } else if (isNotifiedRecord(record)) {
      const row = rows.get(record.id)
      if (row) rows.set(record.id, withNote(row, record.note))
      else ignored += 1
    } else if (isSettledRecord(record)) {
      for (const id of record.ids) {
        const row = typeof id === 'string' ? rows.get(id) : undefined
        if (row) rows.set(id, withStatus(row, record))
      }
    } else {
      ignored += 1
    }
  }
  return ignored
}

/** The history in `stateDir`, newest first, with what was skipped while reading. A missing file is an empty history. */
export function readHistory(stateDir: string): RunHistory {
  const read = Journal.read<unknown>(join(stateDir, RUNS_FILE))
  const rows = new Map<string, RunRow>()
  const ignored = fold(read.records, rows)
  return { rows: newestFirst(rows.values()), torn: read.torn, corrupt: read.corrupt + ignored }
}

/** A row's request, read from its blob when it lives in one (the CLI, replay); undefined when gone. */
export function readRequest(stateDir: string, row: RunRow): unknown {
  if (row.request !== undefined || !row.requestBlob) return row.request
  return readBlobJson(stateDir, row.requestBlob.name)
}

/**
 * A row's received request (what `hookgate runs replay` sends again), from its blob when it lives
 * in one, or from the row `rowOf` finds holding it for the row's fan-out (receivedIn); undefined
 * when not stored or gone.
 */
export function readReceived(stateDir: string, row: RunRow, rowOf?: (id: string) => RunRow | undefined): ReceivedRequest | undefined {
  const holder = row.receivedIn === undefined ? row : rowOf?.(row.receivedIn)
  if (holder === undefined) return undefined
  if (holder.received !== undefined || !holder.receivedBlob) return holder.received
  return readBlobJson(stateDir, holder.receivedBlob.name) as ReceivedRequest | undefined
}

/** A row's step output, read from its blob when it lives in one; undefined when it has none or the blob is gone. */
export function readOutput(stateDir: string, row: RunRow): unknown {
  if (row.output !== undefined || !row.outputBlob) return row.output
  return readBlobJson(stateDir, row.outputBlob.name)
}

function readBlobJson(stateDir: string, name: string): unknown {
  try {
    return JSON.parse(Journal.readBlob(join(stateDir, RUNS_FILE), name).toString('utf8')) as unknown
  } catch {
    return undefined
  }
}

function isRunRecord(value: unknown): value is Extract<RunRecord, { type: 'run' }> {
  if (!isObject(value) || value.type !== 'run' || !isObject(value.row)) return false
  const row = value.row
  return typeof row.id === 'string' && typeof row.definitionId === 'string' && typeof row.correlationId === 'string'
    && typeof row.createdAt === 'string' && typeof row.updatedAt === 'string'
    && KINDS.has(row.definitionKind as string) && ACTIONS.has(row.action as string) && STATUSES.has(row.status as string)
}

function isStatusRecord(value: unknown): value is StatusRecord {
  return isObject(value) && value.type === 'status' && typeof value.id === 'string' && typeof value.at === 'string' && STATUSES.has(value.status as string)
}

function isNotifiedRecord(value: unknown): value is Extract<RunRecord, { type: 'notified' }> {
  if (!isObject(value) || value.type !== 'notified' || typeof value.id !== 'string' || !isObject(value.note)) return false
  const note = value.note
  return typeof note.at === 'string' && STATUSES.has(note.state as string) && typeof note.channel === 'string' && typeof note.ok === 'boolean' && typeof note.attempts === 'number'
}

function isSettledRecord(value: unknown): value is Extract<RunRecord, { type: 'settled' }> {
  return isObject(value) && value.type === 'settled' && Array.isArray(value.ids) && typeof value.at === 'string' && FINAL_STATUSES.has(value.status as RunStatus)
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function newestFirst(rows: Iterable<RunRow>): RunRow[] {
  return [...rows].reverse()
}
