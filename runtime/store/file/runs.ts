// The file store's run log: the run log of every store (../run-log.ts: the rows in memory, their
// rules, watchers, trim) over a driver that keeps them durably in `<stateDir>/runs.jsonl` on the
// group-commit journal. The file is an event log (run-records.ts); folding it rebuilds every row,
// which is how a restarted process finds the runs it must resume, and how `hookgate runs` reads the
// history while a server holds the file open. It is compacted at open once it grows past
// `compactAboveBytes` (compact.ts), so neither the disk nor the start-up fold grows without bound.
//
// A large request, received request or step output lives in a blob beside the file, written and
// synced no later than the record naming it; memory reads a blob back only for a resume.
import { join } from 'node:path'
import { Journal, type JournalOptions, type JournalStats } from './journal.js'
import { compactIfLarge, BLOB_FIELDS, DEFAULT_COMPACT_ABOVE_BYTES, DEFAULT_KEEP_REQUEST_BYTES } from './compact.js'
import { RUNS_FILE, fold, readHistory, readOutput, readReceived, readRequest, type RunRecord, type StatusRecord } from './run-records.js'
import { DEFAULT_RETAIN_FINISHED, RunMirror, type RowChange, type RunDriver } from '../run-log.js'
import { OUTPUT_INLINE_MAX_CHARS, withoutReceived, withoutRequest, type StatusChange } from '../rows.js'
import {
  FINAL_STATUSES, jsonSizeBoundOf, rawPayloadOf,
  type Compaction, type ReceivedRequest, type RunHistory, type RunNotification, type RunRow, type StoreHealth,
} from '../store.js'

export { RUNS_FILE } from './run-records.js'
export { DEFAULT_COMPACT_ABOVE_BYTES, DEFAULT_KEEP_REQUEST_BYTES } from './compact.js'
export { DEFAULT_KEEP_HISTORY } from '../rows.js'
export { DEFAULT_RETAIN_FINISHED } from '../run-log.js'

export interface RunStoreOptions extends JournalOptions {
  /** the clock for timestamps (tests) */
  now?: () => Date
  /** finished runs kept in memory (the file keeps more: see keepHistory), default 10,000 */
  retainFinished?: number
  /** at open, a runs.jsonl larger than this is compacted, default 64 MiB */
  compactAboveBytes?: number
  /** finished runs a compaction keeps (the newest), default 50,000; unfinished runs are always kept */
  keepHistory?: number
  /** a compaction also keeps finished runs started with an Idempotency-Key this recently (ms), default 24 h */
  keepKeysForMs?: number
  /** a compaction keeps finished runs' request blobs up to this many bytes, newest first, default 32 MiB */
  keepRequestBytes?: number
}

/**
 * A request whose JSON is longer than this is kept in a blob, not in the run's line. A blob costs
 * a file, a hash of its bytes and an fdatasync of its own per request; inline, a large request is
 * one more piece of the batch's one write and one fdatasync.
 */
export const REQUEST_INLINE_MAX_CHARS = 448 * 1024

/** The file store's run log: `<stateDir>/runs.jsonl` under the run log of every store. */
export class RunStore extends RunMirror {
  readonly stateDir: string
  readonly path: string
  /** what open() found wrong with the file, for the server to log: a torn tail it cut off, lines or records it skipped */
  readonly recovery: { repairedBytes: number; unreadable: number }
  private readonly journal: Journal<RunRecord>

  private constructor(driver: FileRunDriver, options: RunStoreOptions, rows: Iterable<RunRow>) {
    super(driver, options, rows)
    this.stateDir = driver.stateDir
    this.path = driver.journal.path
    this.journal = driver.journal
    this.recovery = driver.recovery
  }

  /** Opens (creating if needed) the run history in `stateDir` and folds it into memory. Sync: start-up only. */
  static open(stateDir: string, options: RunStoreOptions = {}): RunStore {
    // Before the journal holds the file open: a long history is rewritten to the runs worth keeping.
    const compaction = compactIfLarge(join(stateDir, RUNS_FILE), options)
    const journal = Journal.open<RunRecord>(join(stateDir, RUNS_FILE), options)
    const driver = new FileRunDriver(stateDir, journal, compaction)
    const rows = driver.load()
    return new RunStore(driver, { ...options, retainFinished: options.retainFinished ?? DEFAULT_RETAIN_FINISHED }, rows)
  }

  /** The history journal's counters (appends, flushes, fsyncs): what a write cost, for metrics and tests. */
  get journalStats(): Readonly<JournalStats> {
    return this.journal.stats
  }

  /** Read-only fold of `<stateDir>/runs.jsonl` (for `hookgate runs` while a server holds it open); newest first. */
  static readRows(stateDir: string): RunRow[] {
    return readHistory(stateDir).rows
  }

  /** readRows plus what was skipped while reading. A missing file is an empty history. */
  static readHistory(stateDir: string): RunHistory {
    return readHistory(stateDir)
  }

  static readRequest(stateDir: string, row: RunRow): unknown {
    return readRequest(stateDir, row)
  }

  static readReceived(stateDir: string, row: RunRow, rowOf?: (id: string) => RunRow | undefined): ReceivedRequest | undefined {
    return readReceived(stateDir, row, rowOf)
  }

  static readOutput(stateDir: string, row: RunRow): unknown {
    return readOutput(stateDir, row)
  }
}

/** The journal under the file store's run log. */
class FileRunDriver implements RunDriver {
  readonly recovery = { repairedBytes: 0, unreadable: 0 }
  /**
   * The received requests of the runs open() found unfinished, by the id of the run whose row holds
   * each (a fan-out's runs share one), with how many of those runs are still unfinished: a resume
   * reads them (received()), and each is dropped once its last run finishes. Rows in memory keep
   * none, so memory holds one copy per request, not one per run.
   */
  private readonly heldRequests = new Map<string, { request: Pick<RunRow, 'received' | 'receivedBlob'>; runs: number }>()

  constructor(readonly stateDir: string, readonly journal: Journal<RunRecord>, readonly compaction: Compaction | null) {}

  /** The rows as memory starts with them: the file folded, finished runs without their request, unfinished ones with it. */
  load(): RunRow[] {
    const read = Journal.read<unknown>(this.journal.path)
    const rows = new Map<string, RunRow>()
    let ignored = fold(read.records, rows)
    for (const row of rows.values()) {
      if (FINAL_STATUSES.has(row.status)) continue
      const holder = rows.get(row.receivedIn ?? row.id)
      if (!holder || (holder.received === undefined && !holder.receivedBlob)) continue
      const held = this.heldRequests.get(holder.id)
      if (held) held.runs++
      else this.heldRequests.set(holder.id, { request: { ...(holder.received !== undefined ? { received: holder.received } : {}), ...(holder.receivedBlob ? { receivedBlob: holder.receivedBlob } : {}) }, runs: 1 })
    }
    const out: RunRow[] = []
    for (const row of rows.values()) {
      if (FINAL_STATUSES.has(row.status)) { out.push(withoutRequest(row)); continue }
      // An unfinished run is run again: its request comes back from its blob.
      let next = row.received === undefined ? row : withoutReceived(row)
      if (row.requestBlob && row.request === undefined) {
        try {
          next = Object.freeze({ ...next, request: JSON.parse(Journal.readBlob(this.journal.path, row.requestBlob.name).toString('utf8')) as unknown })
        } catch {
          ignored++ // the resume sees no request and fails the run with a reason
        }
      }
      out.push(next)
    }
    this.recovery.repairedBytes = this.journal.repairedBytes
    this.recovery.unreadable = read.corrupt + read.torn + ignored
    return out
  }

  get health(): StoreHealth {
    return this.journal.health
  }

  /**
   * A new row's line. A received request that carries the bytes its payload was parsed from is
   * written with those bytes spliced in (as the row's last field), not serialised again.
   */
  insertOne(row: RunRow): Promise<void> {
    const disk = this.diskRow(row)
    const pieces = disk.received === undefined ? undefined : receivedPieces(disk.received)
    if (pieces === undefined) return this.journal.append({ type: 'run', row: disk })
    const rest: RunRow = { ...disk }
    delete rest.received
    const head = JSON.stringify({ type: 'run', row: rest })
    return this.journal.appendLine([head.slice(0, -2) + ',"received":', ...pieces, '}}'])
  }

  /** Several rows with ONE journal append (one write, one fdatasync). */
  insertMany(rows: readonly RunRow[]): Promise<void> {
    return this.journal.append(...rows.map((row): RunRecord => ({ type: 'run', row: this.diskRow(row) })))
  }

  /** The row as its line holds it: a large request (or received request) goes into a blob queued ahead of the line. */
  private diskRow(row: RunRow): RunRow {
    let out = row
    for (const [field, blobField] of BLOB_FIELDS) {
      const value = out[field]
      if (value === undefined || typeof value !== 'object' || value === null) continue
      const pieces = field === 'received' ? receivedPieces(value) : undefined
      if (pieces !== undefined) {
        // its bytes as received: inline (insertOne splices them in), or into a blob as they are
        if (piecesLength(pieces) <= REQUEST_INLINE_MAX_CHARS) continue
        const bytes = Buffer.concat(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p)))
        const copy: RunRow = { ...out, [blobField]: { name: this.journal.attach(bytes), bytes: bytes.length } }
        delete copy[field]
        out = copy
        continue
      }
      // A value known to be small is not stringified twice (here to measure, then to write).
      const bound = jsonSizeBoundOf(value) ?? flatJsonBound(value)
      if (bound !== undefined && bound <= REQUEST_INLINE_MAX_CHARS) continue
      const json = JSON.stringify(value)
      if (json.length <= REQUEST_INLINE_MAX_CHARS) continue
      const bytes = Buffer.from(json, 'utf8')
      const name = this.journal.attach(bytes)
      const copy: RunRow = { ...out, [blobField]: { name, bytes: bytes.length } }
      delete copy[field]
      out = copy
    }
    return out
  }

  /** A step's output goes on its status line, or past OUTPUT_INLINE_MAX_CHARS into a blob queued ahead of the line. */
  placeOutput(_id: string, change: StatusChange, output: unknown): void {
    const json = JSON.stringify(output)
    if (json.length <= OUTPUT_INLINE_MAX_CHARS) { change.output = output; return }
    const bytes = Buffer.from(json, 'utf8')
    change.outputBlob = { name: this.journal.attach(bytes), bytes: bytes.length }
  }

  update(row: RunRow, _next: RunRow, change: StatusChange): Promise<void> {
    const record: StatusRecord = { type: 'status', id: row.id, ...change }
    return this.journal.append(record)
  }

  /** Many runs finished alike: one `settled` line, not one per run. */
  async settle(changes: readonly RowChange[], change: StatusChange): Promise<ReadonlyArray<Error | undefined>> {
    const record: RunRecord = { type: 'settled', ids: changes.map((c) => c.row.id), status: change.status, at: change.at, ...(change.error !== undefined ? { error: change.error } : {}) }
    await this.journal.append(record)
    return []
  }

  /** Written whether or not memory holds the run: the file keeps every run's notifications. */
  note(id: string, note: RunNotification): Promise<void> {
    return this.journal.append({ type: 'notified', id, note })
  }

  /** A row's output, read from its blob when it lives in one; undefined when it has none or the blob is gone. */
  output(row: RunRow): unknown {
    return readOutput(this.stateDir, row)
  }

  async received(row: RunRow): Promise<ReceivedRequest | undefined> {
    const held = this.heldRequests.get(row.receivedIn ?? row.id)
    if (held) return readReceived(this.stateDir, held.request as RunRow)
    if (row.receivedIn === undefined && (row.received !== undefined || row.receivedBlob)) return readReceived(this.stateDir, row)
    // memory keeps no inline request (a run accepted by this process): the file has it
    const rows = new Map<string, RunRow>()
    fold(Journal.read<unknown>(this.journal.path).records, rows)
    return readReceived(this.stateDir, rows.get(row.id) ?? row, (id) => rows.get(id))
  }

  /** A run finished: the request open() held for it is dropped once no unfinished run of it is left. */
  finished(row: RunRow): void {
    if (this.heldRequests.size === 0) return
    const key = row.receivedIn ?? row.id
    const held = this.heldRequests.get(key)
    if (held && --held.runs === 0) this.heldRequests.delete(key)
  }

  async close(drain: () => Promise<void>): Promise<void> {
    await drain()
    await this.journal.close()
  }
}

/**
 * An upper bound of the JSON length of an object whose values are all strings, numbers, booleans
 * or null (an agent run's request, a wake's event), found by one walk without building the text;
 * undefined for anything nested (it is measured by stringifying).
 */
function flatJsonBound(value: object): number | undefined {
  if (Array.isArray(value)) return undefined
  let n = 2
  const record = value as Record<string, unknown>
  for (const k in record) {
    const v = record[k]
    if (typeof v === 'string') n += 6 * (k.length + v.length) + 4
    else if (typeof v === 'number' || typeof v === 'boolean' || v === null) n += 6 * k.length + 28
    else if (v !== undefined) return undefined
  }
  return n
}

/** A received request's JSON as pieces (its other fields serialised, its payload's bytes as received), or undefined without those bytes. */
function receivedPieces(received: unknown): [string, Buffer, string] | undefined {
  const raw = received === undefined ? undefined : rawPayloadOf(received as object)
  if (raw === undefined) return undefined
  const { path, query, headers } = received as ReceivedRequest
  const head = JSON.stringify({ path, query, headers })
  return [head.slice(0, -1) + ',"payload":', raw, '}']
}

function piecesLength(pieces: readonly (string | Buffer)[]): number {
  let n = 0
  for (const p of pieces) n += typeof p === 'string' ? Buffer.byteLength(p, 'utf8') : p.length
  return n
}

// The contract's row types and rules, for the file store's own tests and tools.
export { FINAL_STATUSES, RunStoreError, boundJsonSize, isFinalStatus, rawJsonPayload } from '../store.js'
export { ERROR_MAX_CHARS, NOTIFICATIONS_MAX, RESULT_MAX_CHARS } from '../rows.js'
export type { Compaction, DefinitionKind, NewRun, ReceivedRequest, RunAction, RunChangeListener, RunHistory, RunNotification, RunRow, RunStatus, TransitionExtra } from '../store.js'
