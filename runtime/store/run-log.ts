// The run log every store gives the engine, written once above a thin driver per backend: the rows
// this runtime holds in memory (every unfinished run and its recent finished ones), built and moved
// by the rules of rows.ts, their order of writes, who hears of a durable change (subscribers,
// `whenFinished`, the metrics), what is forgotten past the memory bound, and what a failed or
// refused write does to a row. A driver (file/runs.ts: the journal; postgres/runs.ts: group commit
// under fences) only makes writes durable and reads back what memory does not keep.
//
// The promise of every store: a write resolves only once durable, and a row in memory changes only
// then. A status change the backend refused (`store_refused`: not one it could not be reached for)
// is handled here, alike for any backend: an acknowledged run is never stranded, it ends failed
// instead, saying why, and the caller still hears the refusal. A backend shared by several runtimes
// may also answer `fenced_out` (another runtime took the run over): its driver drops the run here
// (drop()), and nothing writes it again.
// Over 400 lines because it is every store's one copy of these rules: split, the rules about one
// row would sit in several files.
import { isoNow } from '../observe/clock.js'
import { buildRow, checkStatus, cleanExtra, cleanNote, movableRow, notPlainJson, storeReceivedOnce, withNote, withStatus, withoutReceived, withoutRequest, type StatusChange } from './rows.js'
import {
  FINAL_STATUSES, NEXT_STATUSES, RunStoreError,
  type Compaction, type NewRun, type ReceivedRequest, type RunAction, type RunChangeListener, type RunLog, type RunNotification, type RunRow, type RunStatus, type StoreHealth, type TransitionExtra,
} from './store.js'
import { RunWatchers, afterWritesOf } from './watchers.js'

/** Finished rows kept in memory unless a store is told otherwise (the store keeps more). */
export const DEFAULT_RETAIN_FINISHED = 10_000

/** A row and the row a change makes of it, as a settle writes them. */
export interface RowChange { row: RunRow; next: RunRow }

/**
 * What a backend does under the run log: make each write durable, and read back what memory does
 * not keep. Every write resolves once durable and rejects with a RunStoreError (or the backend's
 * own error) when it was not made.
 */
export interface RunDriver {
  readonly health: StoreHealth
  /** what opening the backend compacted, if anything */
  readonly compaction: Compaction | null
  /** why a new run would be refused now (the backend cannot be reached), if it would */
  readonly refusal?: RunStoreError | undefined
  /** one new run (a request's), durable before it resolves */
  insertOne(row: RunRow): Promise<void>
  /** several new runs, written together or not at all */
  insertMany(rows: readonly RunRow[]): Promise<void>
  /** where a step's output goes (`change.output`, or a blob `change.outputBlob`), before the change is written */
  placeOutput(id: string, change: StatusChange, output: unknown): void
  /** a status change of `row` (`next`: the row after it) */
  update(row: RunRow, next: RunRow, change: StatusChange): Promise<void>
  /** several runs finished alike; per run, the error that refused its change, if any */
  settle(changes: readonly RowChange[], change: StatusChange): Promise<ReadonlyArray<Error | undefined>>
  /** a notification about run `id`; `row` and `next` when memory holds the run */
  note(id: string, note: RunNotification, row: RunRow | undefined, next: RunRow | undefined): Promise<void>
  output(row: RunRow): unknown
  received(row: RunRow): Promise<ReceivedRequest | undefined>
  /** a run finished (its last status is durable) */
  finished?(row: RunRow): void
  /** memory let go of a run (trimmed, released, taken over): what the driver keeps of it goes too */
  forgot?(id: string): void
  /** someone waits for a run that memory does not hold (another runtime may be running it) */
  absent?(id: string): void
  /** closes the backend; `drain` resolves once every write of the run log has settled */
  close(drain: () => Promise<void>): Promise<void>
}

export interface RunMirrorOptions {
  /** finished rows kept in memory, default 10,000 */
  retainFinished?: number
  /** the clock for timestamps (tests) */
  now?: () => Date
}

/** The run log above a driver: see the header. */
export class RunMirror implements RunLog {
  /**
   * Told of every status a run enters once it is durable, on any store (the metrics count them):
   * process-wide, as the metrics are. Keep it cheap.
   */
  static onDurable: ((action: RunAction, status: RunStatus) => void) | undefined

  /** insertion order is creation order, so reversed it is newest first */
  private readonly rows = new Map<string, RunRow>()
  /** finished rows in `rows` (the ones trim() may forget) */
  private finishedRows = 0
  private readonly retainFinished: number
  /** per run, the last write in flight: the writes of one run are made one after another */
  private readonly inFlight = new Map<string, Promise<unknown>>()
  /** subscribers and whenFinished's waiters */
  private readonly watchers = new RunWatchers()
  private closing: Promise<void> | null = null
  /** the time as ISO text: the shared per-millisecond clock, or the test clock when one is given */
  private readonly isoNow: () => string

  constructor(protected readonly driver: RunDriver, options: RunMirrorOptions = {}, initial?: Iterable<RunRow>) {
    this.retainFinished = options.retainFinished ?? DEFAULT_RETAIN_FINISHED
    const now = options.now
    this.isoNow = now ? () => now().toISOString() : isoNow
    // as opened: nothing trimmed yet (a start reads the whole history first: keys, task slots)
    if (initial) {
      for (const row of initial) {
        this.rows.set(row.id, row)
        if (FINAL_STATUSES.has(row.status)) this.finishedRows++
      }
    }
  }

  get health(): StoreHealth {
    return this.driver.health
  }

  get compaction(): Compaction | null {
    return this.driver.compaction
  }

  // ---- new runs -------------------------------------------------------------------------------

  /** Records a new run; resolves with the row once it is durable. The request path: no closure or copy more here. */
  create(input: NewRun): Promise<RunRow> {
    let row: RunRow
    try {
      row = this.newRow(input, this.isoNow(), undefined)
    } catch (err) {
      return Promise.reject(err)
    }
    // A new id has no write before it to wait for: the hot path skips serialise's chaining.
    const id = row.id
    const written: Promise<RunRow> = this.driver.insertOne(row).then(() => {
      if (this.inFlight.get(id) === written) this.inFlight.delete(id)
      return this.created(row)
    }, (err: unknown) => {
      if (this.inFlight.get(id) === written) this.inFlight.delete(id)
      throw err
    })
    this.inFlight.set(id, written)
    return written
  }

  /** Records several new runs with one durable write (a fan-out request); resolves with the rows, in order. */
  createMany(inputs: readonly NewRun[]): Promise<RunRow[]> {
    let rows: RunRow[]
    try {
      // one time for all: a fan-out's runs are created together (a store finds their shared request by it)
      const at = this.isoNow()
      const ids = new Set<string>()
      rows = storeReceivedOnce(inputs.map((input) => this.newRow(input, at, ids)))
    } catch (err) {
      return Promise.reject(err)
    }
    const release = (): void => { for (const row of rows) if (this.inFlight.get(row.id) === written) this.inFlight.delete(row.id) }
    const written: Promise<RunRow[]> = this.driver.insertMany(rows).then(() => {
      release()
      return rows.map((row) => this.created(row))
    }, (err: unknown) => {
      release()
      throw err
    })
    for (const row of rows) this.inFlight.set(row.id, written)
    return written
  }

  /** A new run's row, checked: the store open and able to write, the id not taken. */
  private newRow(input: NewRun, at: string, batch: Set<string> | undefined): RunRow {
    if (this.closing) throw new RunStoreError('store_closed', 'the run store is closed')
    // While the backend cannot be reached nothing new is accepted: never an acknowledgement that is not durable.
    const refusal = this.driver.refusal
    if (refusal) throw refusal
    const row = buildRow(input, at)
    if (this.rows.has(row.id) || this.inFlight.has(row.id) || batch?.has(row.id)) throw new RunStoreError('duplicate_run', `a run with id ${row.id} already exists`)
    batch?.add(row.id)
    return row
  }

  /** A new row is durable: memory keeps it (without its received request) and everyone hears of it. */
  private created(row: RunRow): RunRow {
    // Only a replay or a resume reads `received`, from the store: a pending run holding the request
    // it was received with (payload, and the body's bytes beside it) held twice its body for nothing.
    const kept = row.received === undefined ? row : withoutReceived(row)
    // a row already here was claimed by this runtime before this answer came (a wake, by the
    // owner of its session): the claim's row stands
    if (!this.rows.has(row.id)) {
      this.rows.set(row.id, kept)
      if (FINAL_STATUSES.has(row.status)) this.countFinished(1)
    }
    RunMirror.onDurable?.(row.action, row.status)
    this.watchers.changed(kept)
    return kept
  }

  // ---- changes --------------------------------------------------------------------------------

  /** Moves a run to `status`; resolves with the new row once the change is durable. Illegal moves reject. */
  transition(id: string, status: RunStatus, extra: TransitionExtra = {}): Promise<RunRow> {
    if (this.closing) return Promise.reject(new RunStoreError('store_closed', 'the run store is closed'))
    const invalid = checkStatus(status)
    if (invalid) return Promise.reject(invalid)
    return this.serialise(id, async () => {
      const row = movableRow(id, this.rows.get(id), status)
      const change: StatusChange = { status, at: this.isoNow(), ...cleanExtra(extra) }
      if (extra.output !== undefined) {
        const problem = notPlainJson(extra.output, 0)
        if (problem) throw new RunStoreError('invalid_run', `the output of run ${id} cannot be stored as JSON: ${problem}`)
        this.driver.placeOutput(id, change, extra.output)
      }
      const next = withStatus(row, change)
      try {
        await this.driver.update(row, next, change)
      } catch (err) {
        await this.refused(row, next.status, err)
        throw err
      }
      this.applied(row, next)
      return next
    })
  }

  /**
   * Finishes many runs alike with one write (the wakes one turn read). Runs unknown or already
   * finished are left as they are; a run with a write in flight is moved by its own transition
   * after that write (left alone if that finished it). Resolves once every change is durable.
   */
  async settle(ids: readonly string[], status: RunStatus, extra: { error?: string } = {}): Promise<void> {
    if (this.closing) throw new RunStoreError('store_closed', 'the run store is closed')
    if (!FINAL_STATUSES.has(status)) throw new RunStoreError('invalid_run', `settle takes a final status, not "${String(status)}"`)
    const movable: RunRow[] = []
    const later: Promise<unknown>[] = []
    for (const id of ids) {
      const pending = this.inFlight.get(id)
      if (pending) {
        const after = (): Promise<unknown> | undefined => {
          const r = this.rows.get(id)
          if (!r || !NEXT_STATUSES[r.status].includes(status)) return undefined
          return this.transition(id, status, extra).catch((err) => {
            if (!(err instanceof RunStoreError && (err.code === 'illegal_transition' || err.code === 'unknown_run' || err.code === 'fenced_out'))) throw err
          })
        }
        later.push(pending.then(after, after))
        continue
      }
      const row = this.rows.get(id)
      if (row && NEXT_STATUSES[row.status].includes(status)) movable.push(row)
    }
    if (movable.length > 0) {
      const change: StatusChange = { status, at: this.isoNow(), ...cleanExtra(extra) }
      const now: RowChange[] = movable.map((row) => ({ row, next: withStatus(row, change, true) }))
      const written = this.driver.settle(now, change).then(async (errors) => {
        let failure: unknown
        for (let i = 0; i < now.length; i++) {
          const { row, next } = now[i]!
          const err = errors[i]
          if (err === undefined) { this.applied(row, next); continue }
          await this.refused(row, status, err)
          // a run another runtime took over is that runtime's to settle
          if (!(err instanceof RunStoreError && err.code === 'fenced_out')) failure ??= err
        }
        if (failure !== undefined) throw failure
      })
      for (const { row } of now) this.inFlight.set(row.id, written)
      const done = (): void => { for (const { row } of now) if (this.inFlight.get(row.id) === written) this.inFlight.delete(row.id) }
      written.then(done, done)
      later.push(written)
    }
    await Promise.all(later)
  }

  /**
   * Adds a notification to a run's row; resolves once it is durable. Written in the run's order of
   * writes, so it never races a status change.
   */
  recordNotification(id: string, note: RunNotification): Promise<void> {
    if (this.closing) return Promise.reject(new RunStoreError('store_closed', 'the run store is closed'))
    return this.serialise(id, async () => {
      const clean = cleanNote(note)
      const row = this.rows.get(id)
      await this.driver.note(id, clean, row, row && withNote(row, clean))
      const current = this.rows.get(id)
      if (current) this.rows.set(id, withNote(current, clean))
    })
  }

  /** Memory after a durable status change: the row as it now is, and who hears of it. */
  private applied(row: RunRow, next: RunRow): void {
    const final = FINAL_STATUSES.has(next.status)
    // A finished run is never run again: its request stays in the store, not in memory.
    this.rows.set(row.id, final ? withoutRequest(next) : next)
    RunMirror.onDurable?.(row.action, next.status)
    if (final) {
      this.driver.finished?.(row)
      this.countFinished(1)
    }
    this.watchers.changed(next)
  }

  /** A status change of `row` was not made: refused by the store, the run ends failed instead (see the header). */
  private async refused(row: RunRow, wanted: RunStatus, err: unknown): Promise<void> {
    if (err instanceof RunStoreError && err.code === 'store_refused') await this.failInstead(row, wanted, err)
  }

  /**
   * Ends `row` failed because the store refused its change to `wanted`: the row as it was, with the
   * status and a reason that can be stored; should even that be refused (the row itself is what it
   * refuses), the row's bare identity with them.
   */
  private async failInstead(row: RunRow, wanted: RunStatus, cause: Error): Promise<void> {
    const change: StatusChange = { status: 'failed', at: this.isoNow(), ...cleanExtra({ error: `could not record the run's change to ${wanted}: ${cause.message}` }) }
    const { definitionKind, definitionId, correlationId, action, createdAt, agentId, parentRunId, stepId, scheduledFor } = row
    const bare: RunRow = { id: row.id, definitionKind, definitionId, correlationId, action, status: row.status, createdAt, updatedAt: row.updatedAt }
    for (const [key, value] of Object.entries({ agentId, parentRunId, stepId, scheduledFor })) if (value !== undefined) (bare as unknown as Record<string, unknown>)[key] = value
    for (const base of [row, bare]) {
      const failed = withStatus(base, change)
      try {
        await this.driver.update(row, failed, change)
      } catch (err) {
        if (err instanceof RunStoreError && err.code === 'store_refused') continue
        return
      }
      this.applied(row, failed)
      return
    }
  }

  // ---- reading --------------------------------------------------------------------------------

  /**
   * Resolves with the run's row once its final status is durable, or with null after `timeoutMs`
   * (or when the store closes). Waiting never touches the run: it goes on either way.
   */
  whenFinished(id: string, timeoutMs: number): Promise<RunRow | null> {
    const row = this.rows.get(id)
    const wait = this.watchers.whenFinished(id, row, timeoutMs, this.closing !== null)
    if (row === undefined && !this.inFlight.has(id) && timeoutMs > 0 && !this.closing) this.driver.absent?.(id)
    return wait
  }

  /**
   * Calls `listener` with the row each time a run is created or changes status, once durable.
   * Returns the function that stops it. A listener that throws is ignored.
   */
  subscribe(listener: RunChangeListener): () => void {
    return this.watchers.subscribe(listener)
  }

  get(id: string): RunRow | undefined {
    return this.rows.get(id)
  }

  /** Newest first; `limit` caps the count. */
  list(options: { limit?: number } = {}): RunRow[] {
    const all = [...this.rows.values()].reverse()
    const limit = options.limit
    if (limit === undefined) return all
    if (!Number.isInteger(limit) || limit < 0) throw new RunStoreError('invalid_run', `limit must be a whole number of at least 0, not ${limit}`)
    return all.slice(0, limit)
  }

  /** The step rows of a workflow run, oldest first (a resumed workflow reads which steps finished). */
  children(parentRunId: string): RunRow[] {
    const out: RunRow[] = []
    for (const row of this.rows.values()) if (row.parentRunId === parentRunId) out.push(row)
    return out
  }

  /** Runs left queued or running, oldest first (the order to resume them in). */
  unfinished(): RunRow[] {
    const out: RunRow[] = []
    for (const row of this.rows.values()) if (!FINAL_STATUSES.has(row.status)) out.push(row)
    return out
  }

  /** A step's output, read from wherever the store keeps a large one. */
  output(row: RunRow): unknown {
    return this.driver.output(row)
  }

  /** A run's received request: its own, or the one the run holding it for its fan-out keeps. */
  received(row: RunRow): Promise<ReceivedRequest | undefined> {
    return this.driver.received(row)
  }

  // ---- memory ---------------------------------------------------------------------------------

  /**
   * Forgets the oldest finished runs beyond `retainFinished` (the store keeps them, where `hookgate
   * runs` reads them); runs that are not finished are always kept.
   */
  trim(): void {
    for (const [id, row] of this.rows) {
      if (this.finishedRows <= this.retainFinished) break
      if (FINAL_STATUSES.has(row.status) && !this.inFlight.has(id)) {
        this.rows.delete(id)
        this.finishedRows--
        this.driver.forgot?.(id)
      }
    }
  }

  /** Counts newly finished rows; trims once 256 past the bound, so the walk is paid rarely. */
  private countFinished(n: number): void {
    this.finishedRows += n
    if (this.finishedRows >= this.retainFinished + 256) this.trim()
  }

  // For the store's own use (a backend's runs claimed from or left to another runtime); not RunLog.

  /** Holds `row` as it is (a run claimed from another runtime, or read with one). */
  put(row: RunRow): void {
    const before = this.rows.get(row.id)
    this.rows.set(row.id, row)
    const delta = (FINAL_STATUSES.has(row.status) ? 1 : 0) - (before && FINAL_STATUSES.has(before.status) ? 1 : 0)
    if (delta !== 0) this.countFinished(delta)
  }

  /** Forgets run `id` (another runtime runs it now); a wait for it goes on, told by the driver (absent). */
  drop(id: string): void {
    const row = this.rows.get(id)
    if (!row) return
    this.rows.delete(id)
    if (FINAL_STATUSES.has(row.status)) this.finishedRows--
    this.driver.forgot?.(id)
    if (this.watchers.waitedFor(id)) this.driver.absent?.(id)
  }

  /** The rows held, oldest first. */
  held(): IterableIterator<RunRow> {
    return this.rows.values()
  }

  /** Whether a write of run `id` is in flight. */
  writing(id: string): boolean {
    return this.inFlight.has(id)
  }

  /** Whether anyone waits for run `id` to finish. */
  waitedFor(id: string): boolean {
    return this.watchers.waitedFor(id)
  }

  /** A run another runtime ran, found final: ends the waits on it (subscribers are not told). */
  finishedElsewhere(row: RunRow): void {
    this.watchers.finishedElsewhere(row)
  }

  /** Whether close() was called. */
  get closed(): boolean {
    return this.closing !== null
  }

  /** Waits for the writes in flight, then closes the driver. Safe to call more than once. */
  close(): Promise<void> {
    this.closing ??= this.driver.close(async () => {
      while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()])
    }).finally(() => this.watchers.close())
    return this.closing
  }

  /** Chains `work` after the previous write for the same run, so each one sees the durable state before it. */
  private serialise<T>(id: string, work: () => Promise<T>): Promise<T> {
    return afterWritesOf(this.inFlight, id, work)
  }
}
