// The run log on PostgreSQL: the run log of every store (../run-log.ts: the rows this runtime holds
// in memory, read synchronously on the request path, their rules, watchers, trim) over a driver
// that commits its writes, and what several runtimes on one database add to it: runs claimed from
// another runtime (adopt), runs left to another (release), and waits for a run another runtime runs.
//
// Group commit, as the file journal does it: the writes that arrive while a commit is in flight
// wait, and go together in the next transaction, as one multi-row statement per kind (run-writes.ts):
// - new rows, with their Idempotency-Keys: a key has one run across every runtime (a concurrent
//   duplicate waits on the unique key for the first one's commit, then loses: `duplicate_key`), and
//   a task slot's derived id one row (`duplicate_run`);
// - status changes, each naming the fence this runtime holds the run under: a runtime that lost
//   the run to another (it was paused past its lease) changes nothing (`fenced_out`), and forgets it.
// While the database cannot be reached, new runs are refused (`store_unavailable`, never an
// acknowledgement) and status changes wait and are tried again; `health` says why meanwhile.
import { DEFAULT_KEY_WINDOW_MS, isWakeRun, type StatusChange } from '../rows.js'
import { DEFAULT_RETAIN_FINISHED, RunMirror, type RowChange, type RunDriver } from '../run-log.js'
import { RunStoreError, type ReceivedRequest, type RunNotification, type RunRow, type StoreHealth } from '../store.js'
import { literal, textArrayLiteral, type Db, type Queryable } from './db.js'
import { PgWriter, type Lane } from './group-commit.js'
import { runOutcome, runStatements, type RunWrite } from './run-writes.js'

export { DEFAULT_RETAIN_FINISHED } from '../run-log.js'
/** How often a run waited for here and run by another runtime is looked for in the database. */
export const REMOTE_POLL_MS = 250

export interface PgRunLogOptions {
  /** this runtime's id: the owner of the runs it accepts */
  hostId: string
  /** how long an Idempotency-Key holds, default 24 h */
  keepKeysForMs?: number
  /** finished rows kept in memory, default 10,000 */
  retainFinished?: number
  /** the clock for timestamps (tests) */
  now?: () => Date
}

export class PgRunLog extends RunMirror {
  protected declare readonly driver: PgRunDriver
  /** wakes accepted here and released (release), with when: until their session's owner claims them */
  private readonly released = new Map<string, number>()

  /** `writer`: the store's group commit, shared with its other writes (its own when not given) */
  constructor(db: Db, options: PgRunLogOptions, writer?: PgWriter) {
    const driver = new PgRunDriver(db, options, writer ?? new PgWriter(db))
    super(driver, { retainFinished: options.retainFinished ?? DEFAULT_RETAIN_FINISHED, ...(options.now ? { now: options.now } : {}) })
    driver.mirror = this
  }

  get hostId(): string {
    return this.driver.hostId
  }

  /**
   * Runs this runtime has just claimed from another (a dead runtime's, or a session's wakes), under
   * the fence the claim gave them; `related` are rows that come with them only to be read (a taken
   * workflow's finished steps). Returns the claimed runs memory did not hold yet.
   */
  adopt(claimed: readonly { row: RunRow; fence: number }[], related: readonly RunRow[] = []): RunRow[] {
    const out: RunRow[] = []
    for (const { row, fence } of claimed) {
      this.driver.fences.set(row.id, fence)
      if (!this.get(row.id)) out.push(row)
      this.put(row)
    }
    for (const row of related) if (!this.get(row.id)) this.put(row)
    return out
  }

  /** The queued wakes of `agentIds` this runtime holds (queued for a turn, or being settled). */
  queuedWakes(agentIds: readonly string[]): string[] {
    const out: string[] = []
    for (const row of this.held()) {
      if (isWakeRun(row) && row.status === 'queued' && row.agentId !== undefined && agentIds.includes(row.agentId)) out.push(row.id)
    }
    return out
  }

  /**
   * Forgets a run this runtime accepted for another to run (a wake whose session another runtime
   * owns): that runtime claims it from the database, and nothing here writes it again.
   */
  release(id: string): void {
    const row = this.get(id)
    // a run claimed here since it was accepted (its fence moved on) is this runtime's to run
    if (!row || this.writing(id) || this.driver.fenceOf(id) > 1) return
    this.drop(id)
    if (isWakeRun(row)) this.released.set(id, Date.now())
  }

  /**
   * Wakes this runtime accepted and released (it did not count itself their session's owner)
   * within the last `withinMs`, the older ones forgotten. The owner claims others' wakes; these
   * are still this runtime's in the table, and it may own their session after all (its own view
   * of its lease ran out early on a busy machine while the lease held): its pulls claim them too.
   */
  releasedWakes(withinMs: number): string[] {
    const since = Date.now() - withinMs
    for (const [id, at] of this.released) {
      if (at >= since) break
      this.released.delete(id)
    }
    return [...this.released.keys()]
  }

  /** Released wakes that were claimed (by this runtime or another): nothing left to look for. */
  forgetReleased(ids: readonly string[]): void {
    for (const id of ids) this.released.delete(id)
  }
}

/** Commits under fences, in the store's group commit. */
class PgRunDriver implements RunDriver {
  readonly compaction = null
  /** the run log above, set once it is built */
  mirror!: PgRunLog
  /** the fence this runtime holds each of its runs under, where not 1 (a new run's) */
  readonly fences = new Map<string, number>()
  /** new runs are refused while the database is out of reach; status changes wait for it */
  private readonly lane: Lane<RunWrite>
  /**
   * New runs whose commit may have landed although the caller was told it did not (the database
   * went away between COMMIT and its answer). Such a row would hold its Idempotency-Key (a retry
   * is answered with its runId) and be owned by this live runtime, which does not run it: so at
   * the next commit each one that exists is given up (owner '') and the sweep resumes it, like a
   * dead runtime's run.
   */
  private readonly inDoubt = new Set<string>()
  /** runs waited for here that another runtime runs (whenFinished), and the timer that looks for them */
  private readonly elsewhere = new Set<string>()
  private pollElsewhere: NodeJS.Timeout | undefined
  private closing = false

  constructor(private readonly db: Db, private readonly options: PgRunLogOptions, private readonly writes: PgWriter) {
    const keepKeysForMs = options.keepKeysForMs ?? DEFAULT_KEY_WINDOW_MS
    this.lane = {
      statements: (batch) => runStatements(batch, options.hostId, keepKeysForMs),
      outcome: (batch, results) => runOutcome(db, batch, results),
      retry: (w) => w.kind === 'update',
      inDoubt: (w) => { if (w.kind === 'insert') for (const row of w.rows) this.inDoubt.add(row.id) },
      before: () => this.releaseInDoubt(),
    }
  }

  get hostId(): string {
    return this.options.hostId
  }

  get health(): StoreHealth {
    return this.writes.health
  }

  get refusal(): RunStoreError | undefined {
    return this.writes.refusal
  }

  fenceOf(id: string): number {
    return this.fences.get(id) ?? 1
  }

  insertOne(row: RunRow): Promise<void> {
    return this.writes.add(this.lane, { kind: 'insert', rows: [row] })
  }

  insertMany(rows: readonly RunRow[]): Promise<void> {
    return this.writes.add(this.lane, { kind: 'insert', rows })
  }

  /** The database keeps a step's output in its row, whatever its size. */
  placeOutput(_id: string, change: StatusChange, output: unknown): void {
    change.output = output
  }

  /** The row after the change, committed only while this runtime holds the run under the fence it knows. */
  async update(row: RunRow, next: RunRow): Promise<void> {
    const fence = this.fenceOf(row.id)
    try {
      await this.writes.add(this.lane, { kind: 'update', row: next, fence })
    } catch (err) {
      // Another runtime took the run over (this one was paused or cut off past its lease): it is
      // that runtime's now, and nothing here may write it again (unless this runtime claimed it
      // back meanwhile, under a new fence).
      if (err instanceof RunStoreError && err.code === 'fenced_out' && this.fenceOf(row.id) === fence) this.mirror.drop(row.id)
      throw err
    }
  }

  /** Each run's change is one more row of the next commit's update: one statement for all of them. */
  settle(changes: readonly RowChange[]): Promise<ReadonlyArray<Error | undefined>> {
    return Promise.all(changes.map(({ row, next }) => this.update(row, next).then(() => undefined, (err: Error) => err)))
  }

  /** A run memory no longer holds is not this runtime's to write. */
  async note(_id: string, _note: RunNotification, row: RunRow | undefined, next: RunRow | undefined): Promise<void> {
    if (row && next) await this.update(row, next)
  }

  /** The database keeps a step's output in its row, whatever its size. */
  output(row: RunRow): unknown {
    return row.output
  }

  received(row: RunRow): Promise<ReceivedRequest | undefined> {
    return readReceived(this.db, row)
  }

  forgot(id: string): void {
    this.fences.delete(id)
  }

  /**
   * A run this runtime does not hold (a wake whose session another runtime owns, a run another took
   * over) is looked for in the database every REMOTE_POLL_MS while someone waits for it, so a wait
   * has the same answer on every runtime.
   */
  absent(id: string): void {
    this.elsewhere.add(id)
    this.pollElsewhere ??= setTimeout(() => void this.lookElsewhere(), REMOTE_POLL_MS).unref()
  }

  private async lookElsewhere(): Promise<void> {
    for (const id of this.elsewhere) if (!this.mirror.waitedFor(id) || this.mirror.get(id)) this.elsewhere.delete(id)
    if (this.elsewhere.size > 0 && !this.closing) {
      try {
        const r = await this.db.query<{ row: RunRow }>(`SELECT row FROM hookgate_runs WHERE id = ANY($1::text[]) AND status NOT IN ('queued', 'running')`, [[...this.elsewhere]])
        for (const { row } of r.rows) {
          this.elsewhere.delete(row.id)
          this.mirror.finishedElsewhere(row)
        }
      } catch { /* the database is away: the next look */ }
    }
    this.pollElsewhere = this.elsewhere.size > 0 && !this.closing ? setTimeout(() => void this.lookElsewhere(), REMOTE_POLL_MS).unref() : undefined
  }

  private releaseInDoubt(): { sql: string; then(): void } | undefined {
    if (this.inDoubt.size === 0) return undefined
    const ids = [...this.inDoubt]
    return {
      sql: `UPDATE hookgate_runs SET owner = '' WHERE id = ANY(${textArrayLiteral(ids)}) AND owner = ${literal(this.options.hostId)} AND fence = 1`,
      then: () => { for (const id of ids) this.inDoubt.delete(id) },
    }
  }

  /** From now on an outage refuses what waits instead of retrying it; then the run log's writes settle. */
  async close(drain: () => Promise<void>): Promise<void> {
    this.closing = true
    if (this.pollElsewhere) clearTimeout(this.pollElsewhere)
    const closed = this.writes.close()
    await drain()
    await closed
  }
}

/**
 * A run's received request. A fan-out's runs share one, kept in the `received` column of one of
 * them: the first run's (the others name it in their row's `receivedIn`), or, once a prune deleted
 * that run, of a run of the same request it handed the request to (retention.ts). So the request
 * is the one a run of the same request (created in the same commit, so at the same created_at)
 * holds.
 */
export async function readReceived(q: Queryable, row: RunRow): Promise<ReceivedRequest | undefined> {
  if (row.received !== undefined) return row.received
  const r = await q.query<{ received: ReceivedRequest }>(
    `SELECT received FROM hookgate_runs
     WHERE created_at = $1::timestamptz AND (id = $2 OR received_in = $2) AND received IS NOT NULL
     LIMIT 1`, [row.createdAt, row.receivedIn ?? row.id])
  return r.rows[0]?.received ?? undefined
}
