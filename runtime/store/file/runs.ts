// Run history: one row per accepted request (and per trigger or task run), kept durably in
// `<stateDir>/runs.jsonl` on top of the group-commit journal. The file is an event log: a `run`
// record creates a row, a `status` record moves it on; folding the file rebuilds every row, which
// is how a restarted process finds the runs it must resume and how `hookgate runs` reads the
// history while a server holds the file open.
//
// Memory holds exactly what is on disk: a row changes in memory only after its record is
// durable. Memory keeps every unfinished run and the newest `retainFinished` finished ones; the
// file keeps more, and is compacted at open once it grows past `compactAboveBytes` (see
// compactIfLarge), so neither the disk nor the start-up fold grows without bound.
//
// Over 400 lines: the row shape, its legal transitions, the fold that rebuilds it and the compaction
// that rewrites it must agree on every field, so they live together.
import { join } from 'node:path'
import { Journal, type JournalOptions, type JournalStats } from './journal.js'
import { isoNow } from '../../observe/clock.js'
import { RunWatchers, afterWritesOf } from '../watchers.js'
import { ACTIONS, DEFAULT_KEEP_HISTORY, DEFAULT_KEY_WINDOW_MS, KINDS, OUTPUT_INLINE_MAX_CHARS, STATUSES, buildRow, checkStatus, movableRow, cleanExtra, cleanNote, notPlainJson, storeReceivedOnce, withNote, withStatus, withoutReceived, withoutRequest } from '../rows.js'
import {
  FINAL_STATUSES, NEXT_STATUSES, RunStoreError, jsonSizeBoundOf, rawPayloadOf,
  type Compaction, type NewRun, type ReceivedRequest, type RunAction, type RunChangeListener, type RunHistory, type RunLog,
  type RunNotification, type RunRow, type RunStatus, type TransitionExtra,
} from '../store.js'

export const RUNS_FILE = 'runs.jsonl'

export type RunRecord =
  | { type: 'run'; row: RunRow }
  | { type: 'status'; id: string; status: RunStatus; at: string; error?: string; result?: string; attempts?: number; output?: unknown; outputBlob?: { name: string; bytes: number } }
  /** many runs finished alike at once (the wakes one heartbeat turn read): one line, not one per run */
  | { type: 'settled'; ids: string[]; status: RunStatus; at: string; error?: string }
  /** a notification about the run was sent, or given up on */
  | { type: 'notified'; id: string; note: RunNotification }

type StatusRecord = Extract<RunRecord, { type: 'status' }>

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

export const DEFAULT_COMPACT_ABOVE_BYTES = 64 * 1024 * 1024
export { DEFAULT_KEEP_HISTORY } from '../rows.js'

export const DEFAULT_RETAIN_FINISHED = 10_000

/**
 * A request whose JSON is longer than this is kept in a blob, not in the run's line. A blob costs
 * a file, a hash of its bytes and an fdatasync of its own per request; inline, a large request is
 * one more piece of the batch's one write and one fdatasync.
 */
export const REQUEST_INLINE_MAX_CHARS = 448 * 1024


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
/** A compaction keeps the request blobs of finished runs up to this many bytes, newest first. */
export const DEFAULT_KEEP_REQUEST_BYTES = 32 * 1024 * 1024

const FINAL = FINAL_STATUSES
const NEXT = NEXT_STATUSES

/** The file store's run log: `<stateDir>/runs.jsonl` on the group-commit journal. */
export class RunStore implements RunLog {
  /** Told of every status a run enters, once it is on disk (the metrics count them); keep it cheap. */
  static onDurable?: (action: RunAction, status: RunStatus) => void
  readonly stateDir: string
  readonly path: string
  /** what open() found wrong with the file, for the server to log: a torn tail it cut off, lines or records it skipped */
  readonly recovery: { repairedBytes: number; unreadable: number } = { repairedBytes: 0, unreadable: 0 }
  /** set when open() compacted the file */
  compaction: Compaction | null = null
  private readonly journal: Journal<RunRecord>
  /** the time as ISO text: the shared per-millisecond clock, or the test clock when one is given */
  private readonly isoNow: () => string
  /** insertion order is creation order, so reversed it is newest first */
  private readonly rows = new Map<string, RunRow>()
  private retainFinished = DEFAULT_RETAIN_FINISHED
  /** finished rows in `rows` (the ones trim() may forget) */
  private finished = 0
  /** per run, the last write in flight: writes for one run are applied one after another */
  private readonly inFlight = new Map<string, Promise<unknown>>()
  private closing: Promise<void> | null = null
  /** subscribers and whenFinished's waiters */
  private readonly watchers = new RunWatchers()
  /**
   * The received requests of the runs open() found unfinished, by the id of the run whose row holds
   * each (a fan-out's runs share one), with how many of those runs are still unfinished: a resume
   * reads them (received()), and each is dropped once its last run finishes. Rows in memory keep
   * none, so memory holds one copy per request, not one per run.
   */
  private readonly heldRequests = new Map<string, { request: Pick<RunRow, 'received' | 'receivedBlob'>; runs: number }>()

  private constructor(stateDir: string, journal: Journal<RunRecord>, now: (() => Date) | undefined) {
    this.stateDir = stateDir
    this.path = journal.path
    this.journal = journal
    this.isoNow = now ? () => now().toISOString() : isoNow
  }

  /** Opens (creating if needed) the run history in `stateDir` and folds it into memory. Sync: start-up only. */
  static open(stateDir: string, options: RunStoreOptions = {}): RunStore {
    // Before the journal holds the file open: a long history is rewritten to the runs worth keeping.
    const compaction = compactIfLarge(join(stateDir, RUNS_FILE), options)
    const journal = Journal.open<RunRecord>(join(stateDir, RUNS_FILE), options)
    const store = new RunStore(stateDir, journal, options.now)
    store.compaction = compaction
    store.retainFinished = options.retainFinished ?? DEFAULT_RETAIN_FINISHED
    const read = Journal.read<unknown>(journal.path)
    let ignored = fold(read.records, store.rows)
    for (const row of store.rows.values()) {
      if (FINAL.has(row.status)) continue
      const holder = store.rows.get(row.receivedIn ?? row.id)
      if (!holder || (holder.received === undefined && !holder.receivedBlob)) continue
      const held = store.heldRequests.get(holder.id)
      if (held) held.runs++
      else store.heldRequests.set(holder.id, { request: { ...(holder.received !== undefined ? { received: holder.received } : {}), ...(holder.receivedBlob ? { receivedBlob: holder.receivedBlob } : {}) }, runs: 1 })
    }
    for (const [id, row] of store.rows) {
      if (!FINAL.has(row.status)) {
        // An unfinished run is run again: its request comes back from its blob.
        let next = row.received === undefined ? row : withoutReceived(row)
        if (row.requestBlob && row.request === undefined) {
          try {
            next = Object.freeze({ ...next, request: JSON.parse(Journal.readBlob(journal.path, row.requestBlob.name).toString('utf8')) as unknown })
          } catch {
            ignored++ // the resume sees no request and fails the run with a reason
          }
        }
        if (next !== row) store.rows.set(id, next)
        continue
      }
      store.rows.set(id, withoutRequest(row))
      store.finished++
    }
    store.recovery.repairedBytes = journal.repairedBytes
    store.recovery.unreadable = read.corrupt + read.torn + ignored
    return store
  }

  /** Records a new run; resolves with the row once it is on disk. */
  create(input: NewRun): Promise<RunRow> {
    let row: RunRow
    try {
      if (this.closing) throw new RunStoreError('store_closed', 'the run store is closed')
      row = buildRow(input, this.isoNow())
      if (this.rows.has(row.id) || this.inFlight.has(row.id)) throw new RunStoreError('duplicate_run', `a run with id ${row.id} already exists`)
    } catch (err) {
      return Promise.reject(err)
    }
    // A new id has no write before it to wait for: the hot path skips serialise's chaining.
    const id = row.id
    const written: Promise<RunRow> = this.appendRow(row).then(() => {
      // Only a replay or a resume reads `received`, and they read the file. The caller gets the
      // row as memory keeps it too: a pending run holding the request it was received with
      // (payload, and the body's bytes beside it) held twice its body for nothing.
      const kept = row.received === undefined ? row : withoutReceived(row)
      this.rows.set(id, kept)
      if (this.inFlight.get(id) === written) this.inFlight.delete(id)
      if (FINAL.has(row.status)) this.countFinished(1)
      RunStore.onDurable?.(row.action, row.status)
      this.watchers.changed(kept)
      return kept
    }, (err: unknown) => {
      if (this.inFlight.get(id) === written) this.inFlight.delete(id)
      throw err
    })
    this.inFlight.set(id, written)
    return written
  }

  /**
   * Records several new runs with ONE journal append (one write, one fdatasync): the runs a fan-out
   * request starts are accepted together. Resolves with the rows, in order, once all are on disk.
   */
  createMany(inputs: readonly NewRun[]): Promise<RunRow[]> {
    let rows: RunRow[]
    try {
      if (this.closing) throw new RunStoreError('store_closed', 'the run store is closed')
      const ids = new Set<string>()
      rows = storeReceivedOnce(inputs.map((input) => {
        const row = buildRow(input, this.isoNow())
        if (this.rows.has(row.id) || this.inFlight.has(row.id) || ids.has(row.id)) throw new RunStoreError('duplicate_run', `a run with id ${row.id} already exists`)
        ids.add(row.id)
        return row
      }))
    } catch (err) {
      return Promise.reject(err)
    }
    const records: RunRecord[] = rows.map((row) => ({ type: 'run', row: this.diskRow(row) }))
    const release = (): void => { for (const row of rows) if (this.inFlight.get(row.id) === written) this.inFlight.delete(row.id) }
    const written: Promise<RunRow[]> = this.journal.append(...records).then(() => {
      let finished = 0
      const kept = rows.map((row) => (row.received === undefined ? row : withoutReceived(row)))
      for (const row of kept) {
        this.rows.set(row.id, row)
        if (FINAL.has(row.status)) finished++
        RunStore.onDurable?.(row.action, row.status)
        this.watchers.changed(row)
      }
      release()
      this.countFinished(finished)
      return kept
    }, (err: unknown) => {
      release()
      throw err
    })
    for (const row of rows) this.inFlight.set(row.id, written)
    return written
  }

  /**
   * Resolves with the run's row once its final status is on disk, or with null after `timeoutMs`
   * (or when the store closes). Waiting never touches the run: it goes on either way.
   */
  whenFinished(id: string, timeoutMs: number): Promise<RunRow | null> {
    return this.watchers.whenFinished(id, this.rows.get(id), timeoutMs, this.closing !== null)
  }

  /**
   * A new row's line. A received request that carries the bytes its payload was parsed from is
   * written with those bytes spliced in (as the row's last field), not serialised again.
   */
  private appendRow(row: RunRow): Promise<void> {
    const disk = this.diskRow(row)
    const pieces = disk.received === undefined ? undefined : receivedPieces(disk.received)
    if (pieces === undefined) return this.journal.append({ type: 'run', row: disk })
    const rest: RunRow = { ...disk }
    delete rest.received
    const head = JSON.stringify({ type: 'run', row: rest })
    return this.journal.appendLine([head.slice(0, -2) + ',"received":', ...pieces, '}}'])
  }

  /** The row as its line holds it: a large request (or received request) goes into a blob queued ahead of the line. */
  private diskRow(row: RunRow): RunRow {
    let out = row
    for (const [field, blobField] of BLOB_FIELDS) {
      const value = out[field]
      if (value === undefined || typeof value !== 'object' || value === null) continue
      const pieces = field === 'received' ? receivedPieces(value) : undefined
      if (pieces !== undefined) {
        // its bytes as received: inline (appendRow splices them in), or into a blob as they are
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
  private attachOutput(record: StatusRecord, output: unknown): void {
    const problem = notPlainJson(output, 0)
    if (problem) throw new RunStoreError('invalid_run', `the output of run ${record.id} cannot be stored as JSON: ${problem}`)
    const json = JSON.stringify(output)
    if (json.length <= OUTPUT_INLINE_MAX_CHARS) { record.output = output; return }
    const bytes = Buffer.from(json, 'utf8')
    record.outputBlob = { name: this.journal.attach(bytes), bytes: bytes.length }
  }

  /** A row's output, read from its blob when it lives in one; undefined when it has none or the blob is gone. */
  output(row: RunRow): unknown {
    return RunStore.readOutput(this.stateDir, row)
  }

  /** A run's received request: its own, or the one the run holding it for its fan-out keeps. */
  async received(row: RunRow): Promise<ReceivedRequest | undefined> {
    const held = this.heldRequests.get(row.receivedIn ?? row.id)
    if (held) return RunStore.readReceived(this.stateDir, held.request as RunRow)
    if (row.receivedIn === undefined && (row.received !== undefined || row.receivedBlob)) return RunStore.readReceived(this.stateDir, row)
    // memory keeps no inline request (a run accepted by this process): the file has it
    const rows = new Map<string, RunRow>()
    fold(Journal.read<unknown>(this.path).records, rows)
    return RunStore.readReceived(this.stateDir, rows.get(row.id) ?? row, (id) => rows.get(id))
  }

  /** A run finished: the request open() held for it is dropped once no unfinished run of it is left. */
  private releaseHeld(row: RunRow): void {
    if (this.heldRequests.size === 0) return
    const key = row.receivedIn ?? row.id
    const held = this.heldRequests.get(key)
    if (held && --held.runs === 0) this.heldRequests.delete(key)
  }

  static readOutput(stateDir: string, row: RunRow): unknown {
    if (row.output !== undefined || !row.outputBlob) return row.output
    try {
      return JSON.parse(Journal.readBlob(join(stateDir, RUNS_FILE), row.outputBlob.name).toString('utf8')) as unknown
    } catch {
      return undefined
    }
  }

  /** The step rows of a workflow run, oldest first (a resumed workflow reads which steps finished). */
  children(parentRunId: string): RunRow[] {
    const out: RunRow[] = []
    for (const row of this.rows.values()) if (row.parentRunId === parentRunId) out.push(row)
    return out
  }

  /** The history journal's counters (appends, flushes, fsyncs): what a write cost, for metrics and tests. */
  get journalStats(): Readonly<JournalStats> {
    return this.journal.stats
  }

  /** Whether the history can be written now; while not, why (a full disk is retried by itself). */
  get health(): { ok: true } | { ok: false; since: number; reason: string } {
    return this.journal.health
  }

  /**
   * Finishes many runs alike with one record (the wakes one heartbeat turn read). Runs that are
   * unknown or already finished are left as they are; a run with a write in flight is moved by its
   * own transition after that write. Resolves once every change is on disk.
   */
  async settle(ids: readonly string[], status: RunStatus, extra: { error?: string } = {}): Promise<void> {
    if (this.closing) throw new RunStoreError('store_closed', 'the run store is closed')
    if (!FINAL.has(status)) throw new RunStoreError('invalid_run', `settle takes a final status, not "${String(status)}"`)
    const now: string[] = []
    const later: Promise<unknown>[] = []
    for (const id of ids) {
      const row = this.rows.get(id)
      const pending = this.inFlight.get(id)
      if (pending) {
        // after that write, on its own: left alone if it finished the run meanwhile
        const after = (): Promise<unknown> | undefined => {
          const r = this.rows.get(id)
          if (r && NEXT[r.status].includes(status)) return this.transition(id, status, extra).catch((err) => { if (!(err instanceof RunStoreError && err.code === 'illegal_transition')) throw err })
          return undefined
        }
        later.push(pending.then(after, after))
      } else if (row && NEXT[row.status].includes(status)) {
        now.push(id)
      }
    }
    if (now.length > 0) {
      const record: Extract<RunRecord, { type: 'settled' }> = { type: 'settled', ids: now, status, at: this.isoNow(), ...cleanExtra(extra) }
      const written = this.journal.append(record).then(() => {
        let n = 0
        for (const id of now) {
          const row = this.rows.get(id)
          if (row) { const next = withStatus(row, record, true); this.rows.set(id, next); this.releaseHeld(row); n++; RunStore.onDurable?.(row.action, status); this.watchers.changed(next) }
        }
        this.countFinished(n)
      })
      for (const id of now) this.inFlight.set(id, written)
      const done = (): void => { for (const id of now) if (this.inFlight.get(id) === written) this.inFlight.delete(id) }
      written.then(done, done)
      later.push(written)
    }
    await Promise.all(later)
  }

  /** Moves a run to `status`; resolves with the new row once the change is on disk. Illegal moves reject. */
  transition(id: string, status: RunStatus, extra: TransitionExtra = {}): Promise<RunRow> {
    if (this.closing) return Promise.reject(new RunStoreError('store_closed', 'the run store is closed'))
    const invalid = checkStatus(status)
    if (invalid) return Promise.reject(invalid)
    return this.serialise(id, async () => {
      const row = movableRow(id, this.rows.get(id), status)
      const record: StatusRecord = { type: 'status', id, status, at: this.isoNow(), ...cleanExtra(extra) }
      if (extra.output !== undefined) this.attachOutput(record, extra.output)
      await this.journal.append(record)
      const next = withStatus(row, record)
      RunStore.onDurable?.(row.action, status)
      // A finished run is never run again: its request stays on disk, not in memory.
      if (FINAL.has(status)) {
        this.rows.set(id, withoutRequest(next))
        this.releaseHeld(row)
        this.countFinished(1)
      } else {
        this.rows.set(id, next)
      }
      this.watchers.changed(next)
      return next
    })
  }

  /**
   * Calls `listener` with the row each time a run is created or changes status, after the record
   * is on disk. Returns the function that stops it. A listener that throws is ignored: it must
   * never undo or delay a durable change.
   */
  subscribe(listener: RunChangeListener): () => void {
    return this.watchers.subscribe(listener)
  }

  /**
   * Adds a notification to a run's row; resolves once it is on disk. Written in the run's order of
   * writes, so it never races a status change; a run no longer in memory gets the record on disk only.
   */
  recordNotification(id: string, note: RunNotification): Promise<void> {
    if (this.closing) return Promise.reject(new RunStoreError('store_closed', 'the run store is closed'))
    return this.serialise(id, async () => {
      const record: Extract<RunRecord, { type: 'notified' }> = { type: 'notified', id, note: cleanNote(note) }
      await this.journal.append(record)
      const row = this.rows.get(id)
      if (row) this.rows.set(id, withNote(row, record.note))
    })
  }

  /**
   * Forgets the oldest finished runs beyond `retainFinished` (they stay in the file, where
   * `hookgate runs` reads them); runs that are not finished are always kept.
   */
  trim(): void {
    for (const [id, row] of this.rows) {
      if (this.finished <= this.retainFinished) break
      if (FINAL.has(row.status) && !this.inFlight.has(id)) {
        this.rows.delete(id)
        this.finished--
      }
    }
  }

  /** Counts newly finished rows; trims once 256 past the bound, so the walk is paid rarely. */
  private countFinished(n: number): void {
    this.finished += n
    if (this.finished >= this.retainFinished + 256) this.trim()
  }

  get(id: string): RunRow | undefined {
    return this.rows.get(id)
  }

  /** Newest first; `limit` caps the count. */
  list(options: { limit?: number } = {}): RunRow[] {
    return newestFirst(this.rows.values(), options.limit)
  }

  /** Runs that were queued or running when the process stopped, oldest first (the order to resume them in). */
  unfinished(): RunRow[] {
    const out: RunRow[] = []
    for (const row of this.rows.values()) if (!FINAL.has(row.status)) out.push(row)
    return out
  }

  /** Waits for writes in flight, then closes the file. Safe to call more than once. */
  close(): Promise<void> {
    if (!this.closing) {
      this.closing = (async () => {
        while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()])
        this.watchers.close()
        await this.journal.close()
      })()
    }
    return this.closing
  }

  /** Read-only fold of `<stateDir>/runs.jsonl` (for `hookgate runs` while a server holds it open); newest first. */
  static readRows(stateDir: string): RunRow[] {
    return RunStore.readHistory(stateDir).rows
  }

  /** A row's request, read from its blob when it lives in one (the CLI, replay); undefined when gone. */
  static readRequest(stateDir: string, row: RunRow): unknown {
    if (row.request !== undefined || !row.requestBlob) return row.request
    return readBlobJson(stateDir, row.requestBlob.name)
  }

  /**
   * A row's received request (what `hookgate runs replay` sends again), from its blob when it lives
   * in one, or from the row `rowOf` finds holding it for the row's fan-out (receivedIn); undefined
   * when not stored or gone.
   */
  static readReceived(stateDir: string, row: RunRow, rowOf?: (id: string) => RunRow | undefined): ReceivedRequest | undefined {
    const holder = row.receivedIn === undefined ? row : rowOf?.(row.receivedIn)
    if (holder === undefined) return undefined
    if (holder.received !== undefined || !holder.receivedBlob) return holder.received
    return readBlobJson(stateDir, holder.receivedBlob.name) as ReceivedRequest | undefined
  }

  /** readRows plus what was skipped while reading. A missing file is an empty history. */
  static readHistory(stateDir: string): RunHistory {
    const read = Journal.read<unknown>(join(stateDir, RUNS_FILE))
    const rows = new Map<string, RunRow>()
    const ignored = fold(read.records, rows)
    return { rows: newestFirst(rows.values()), torn: read.torn, corrupt: read.corrupt + ignored }
  }

  /** Chains `work` after the previous write for the same run, so each one sees the durable state before it. */
  private serialise<T>(id: string, work: () => Promise<T>): Promise<T> {
    return afterWritesOf(this.inFlight, id, work)
  }


}

const BLOB_FIELDS = [['request', 'requestBlob'], ['received', 'receivedBlob']] as const

/**
 * Rewrites runs.jsonl when it has grown past `compactAboveBytes`: one `run` record per kept row, in
 * creation order, holding the row as the history folds it. Kept: every unfinished run (with its
 * request, to resume it), the newest `keepHistory` finished runs, and finished runs started with an
 * Idempotency-Key within `keepKeysForMs` (so a retry still gets its first answer). Journal.rewrite
 * replaces the file whole or not at all. Returns null when the file is small enough (or missing);
 * a failure leaves the old file.
 */
function compactIfLarge(path: string, options: RunStoreOptions): Compaction | null {
  const bytesBefore = Journal.diskBytes(path)
  if (bytesBefore === 0 || bytesBefore <= (options.compactAboveBytes ?? DEFAULT_COMPACT_ABOVE_BYTES)) return null
  const read = Journal.read<unknown>(path)
  const rows = new Map<string, RunRow>()
  fold(read.records, rows)
  const keepHistory = options.keepHistory ?? DEFAULT_KEEP_HISTORY
  const keysSince = (options.now ?? (() => new Date()))().getTime() - (options.keepKeysForMs ?? DEFAULT_KEY_WINDOW_MS)
  let finishedLeft = 0
  for (const row of rows.values()) if (FINAL.has(row.status)) finishedLeft++
  const kept: RunRow[] = []
  for (const row of rows.values()) {
    if (FINAL.has(row.status)) {
      // the oldest finished runs go first, unless their Idempotency-Key may still be retried
      const recentKey = row.idempotency !== undefined && Date.parse(row.createdAt) >= keysSince
      if (finishedLeft-- > keepHistory && !recentKey) continue
    }
    kept.push(row)
  }
  const needed = keepSharedRequests(kept, rows)
  // Request blobs (and received-request blobs): every unfinished run's, and finished runs' newest
  // first within one byte budget. A request a fan-out's runs share counts once, where it is kept,
  // and as unfinished while any of its runs is.
  let requestBytesLeft = options.keepRequestBytes ?? DEFAULT_KEEP_REQUEST_BYTES
  const blobsKept = new Set<string>()
  for (let i = kept.length - 1; i >= 0; i--) {
    // a kept step's output is kept whole: a resumed workflow reads it instead of running the step again
    const outputBlob = kept[i]!.outputBlob
    if (outputBlob) blobsKept.add(outputBlob.name)
    const done = FINAL.has(kept[i]!.status) && !needed.has(kept[i]!.id)
    // A received request small enough to sit in its line counts against the same budget: without
    // that, every kept run (up to keepRuns) kept one of up to REQUEST_INLINE_MAX_CHARS.
    if (kept[i]!.received !== undefined && done) {
      requestBytesLeft -= JSON.stringify(kept[i]!.received).length
      if (requestBytesLeft < 0) kept[i] = withoutReceived(kept[i]!)
    }
    for (const [, blobField] of BLOB_FIELDS) {
      const row = kept[i]!
      const blob = row[blobField]
      if (!blob) continue
      if (done) {
        if (blobsKept.has(blob.name)) continue
        requestBytesLeft -= blob.bytes
        if (requestBytesLeft < 0) {
          const rest: RunRow = { ...row }
          delete rest[blobField]
          kept[i] = rest
          continue
        }
      }
      blobsKept.add(blob.name)
    }
  }
  // a run whose fan-out's request went over the budget says it has none, as its holder does
  const keptById = new Map(kept.map((row, i) => [row.id, i]))
  for (let i = 0; i < kept.length; i++) {
    const ref = kept[i]!.receivedIn
    if (ref === undefined) continue
    const holder = kept[keptById.get(ref) ?? -1]
    if (holder === undefined || (holder.received === undefined && !holder.receivedBlob)) {
      const { receivedIn: _ref, ...rest } = kept[i]!
      kept[i] = rest
    }
  }
  let bytesAfter: number
  try {
    Journal.rewrite(path, (function* () { for (const row of kept) yield { type: 'run', row } })(), options)
    Journal.sweepBlobs(path, blobsKept)
    bytesAfter = Journal.diskBytes(path)
  } catch {
    return null // the old file stays as it was
  }
  return { records: read.records.length, bytesBefore, bytesAfter, keptRuns: kept.length, droppedRuns: rows.size - kept.length }
}


/**
 * A request stored once for a fan-out (receivedIn) outlives the run that held it: when that run is
 * not kept, the oldest kept run of the same request takes the request over and the other kept ones
 * name it instead. Rewrites `kept` in place; returns the ids of the runs holding a request that an
 * unfinished run names (kept whatever the budget, as an unfinished run's own request is).
 */
function keepSharedRequests(kept: RunRow[], folded: ReadonlyMap<string, RunRow>): Set<string> {
  const keptIds = new Set(kept.map((row) => row.id))
  const heirs = new Map<string, string>()
  const needed = new Set<string>()
  for (let i = 0; i < kept.length; i++) {
    const row = kept[i]!
    const ref = row.receivedIn
    if (ref === undefined) continue
    if (keptIds.has(ref)) continue
    const heir = heirs.get(ref)
    const { receivedIn: _ref, ...rest } = row
    if (heir !== undefined) {
      ;(rest as RunRow).receivedIn = heir
    } else {
      const holder = folded.get(ref)
      if (holder?.received !== undefined) rest.received = holder.received
      else if (holder?.receivedBlob) rest.receivedBlob = holder.receivedBlob
      else { kept[i] = Object.freeze(rest); continue } // gone already: nothing to name
      heirs.set(ref, row.id)
    }
    kept[i] = Object.freeze(rest)
  }
  for (const row of kept) if (row.receivedIn !== undefined && !FINAL.has(row.status)) needed.add(row.receivedIn)
  return needed
}

function readBlobJson(stateDir: string, name: string): unknown {
  try {
    return JSON.parse(Journal.readBlob(join(stateDir, RUNS_FILE), name).toString('utf8')) as unknown
  } catch {
    return undefined
  }
}

/** Why `v` would not come back the same from JSON (undefined when it would), checked to a depth. */
/** Folds records into `rows` (file order); returns how many records were not understood. */
function fold(records: unknown[], rows: Map<string, RunRow>): number {
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

/** The row after `record`; `dropRequest`: without its request (a finished run in memory), in the same copy. */
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
  return isObject(value) && value.type === 'settled' && Array.isArray(value.ids) && typeof value.at === 'string' && FINAL.has(value.status as RunStatus)
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function newestFirst(rows: Iterable<RunRow>, limit?: number): RunRow[] {
  const all = [...rows].reverse()
  if (limit === undefined) return all
  if (!Number.isInteger(limit) || limit < 0) throw new RunStoreError('invalid_run', `limit must be a whole number of at least 0, not ${limit}`)
  return all.slice(0, limit)
}

// The contract's row types and rules, for the file store's own tests and tools.
export { FINAL_STATUSES, RunStoreError, boundJsonSize, isFinalStatus, rawJsonPayload } from '../store.js'
export { ERROR_MAX_CHARS, NOTIFICATIONS_MAX, RESULT_MAX_CHARS } from '../rows.js'
export type { Compaction, DefinitionKind, NewRun, ReceivedRequest, RunAction, RunChangeListener, RunHistory, RunNotification, RunRow, RunStatus, TransitionExtra } from '../store.js'
