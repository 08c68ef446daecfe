// Group commit on PostgreSQL, for every table the store writes: the writes that arrive while a
// commit is in flight wait, and go together in the next one (one transaction, a multi-row
// statement per kind). While the database cannot be reached, `health` says why; each write says
// whether it waits for the database to come back (`retry`) or is refused at once.
//
// No write's failure fails another write of its batch: a batch the database refuses (for any
// reason but being out of reach) is split in halves, each committed on its own, until the writes
// it refuses are alone; only those fail, the others commit (a poisoned write among n costs about
// 2·log2(n) more commits).
import { RunStoreError, type StoreHealth } from '../store.js'
import { isUnavailable, storableText, type Db, type QueryResult } from './db.js'

const RETRY_FIRST_MS = 50
const RETRY_MAX_MS = 2000

export interface Pending<W> { write: W; resolve(): void; reject(err: Error): void }

export class GroupCommit<W> {
  private queue: Pending<W>[] = []
  /** parts of a batch the database refused, each to be committed on its own, in order */
  private readonly split: Pending<W>[][] = []
  private flushing: Promise<void> | null = null
  private trouble: { since: number; reason: string } | null = null
  private closing = false

  /**
   * `commit` writes a batch in one transaction and returns, per write, the error that refuses it
   * (a conflict, a lost fence), if any; `retry` says which writes wait out an outage.
   */
  constructor(
    private readonly commit: (batch: readonly W[]) => Promise<Map<W, Error>>,
    private readonly retry: (write: W) => boolean,
    /** told of a write refused because the database went away during its commit (it may have landed) */
    private readonly inDoubt?: (write: W) => void,
  ) {}

  get health(): StoreHealth {
    return this.trouble ? { ok: false, since: this.trouble.since, reason: this.trouble.reason } : { ok: true }
  }

  /** Why a new write would be refused now (the database is out of reach), or undefined. */
  get refusal(): RunStoreError | undefined {
    return this.trouble ? new RunStoreError('store_unavailable', `the store cannot write right now: ${this.trouble.reason}`) : undefined
  }

  /** Resolves once `write` is committed; rejects with what refused it. */
  add(write: W): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ write, resolve, reject })
      this.schedule()
    })
  }

  /** Waits for everything queued; from now on an outage refuses what waits instead of retrying it. */
  async close(): Promise<void> {
    this.closing = true
    while (this.flushing || this.queue.length > 0 || this.split.length > 0) {
      if (this.flushing) await this.flushing
      else this.schedule()
    }
  }

  private schedule(): void {
    if (this.flushing || (this.queue.length === 0 && this.split.length === 0)) return
    this.flushing = this.loop().finally(() => {
      this.flushing = null
      // a write added after the loop saw an empty queue, but before this ran, found it still
      // flushing and did not start another: start it now, or it would wait forever
      this.schedule()
    })
  }

  private async loop(): Promise<void> {
    let delay = RETRY_FIRST_MS
    // While the database is out of reach and nothing waits to be retried, an empty commit is tried
    // on the same schedule: without it a runtime that refuses new runs (and so queues nothing) would
    // never find out that the database is back, and refuse them for ever.
    let probe = false
    while (this.queue.length > 0 || this.split.length > 0 || probe) {
      probe = false
      // the halves of a refused batch first, each alone; else everything queued meanwhile
      let batch = this.split.shift()
      if (!batch) {
        batch = this.queue
        this.queue = []
      }
      let refused: Map<W, Error>
      try {
        refused = await this.commit(batch.map((p) => p.write))
        this.trouble = null
        delay = RETRY_FIRST_MS
      } catch (err) {
        if (!isUnavailable(err)) {
          // A statement the database refused: nothing of the batch was written. One write alone is
          // the one it refuses; more are split until they are.
          if (batch.length === 1) {
            batch[0]!.reject(new RunStoreError('store_refused', `the database refused the write: ${storableText(err instanceof Error ? err.message : String(err))}`))
          } else if (batch.length > 1) {
            const half = Math.ceil(batch.length / 2)
            this.split.unshift(batch.slice(0, half), batch.slice(half))
          }
          continue
        }
        this.trouble ??= { since: Date.now(), reason: `cannot reach the database: ${(err as Error).message}` }
        const waiting: Pending<W>[] = []
        for (const p of batch) {
          if (this.closing || !this.retry(p.write)) {
            // the commit may have landed before the connection dropped: the caller is told it did
            // not, and whoever wrote it hears that the write is in doubt
            this.inDoubt?.(p.write)
            p.reject(this.refusal!)
          } else waiting.push(p)
        }
        // what waits for the database goes together again once it is back (split or not)
        for (const part of this.split.splice(0)) waiting.push(...part)
        if (this.closing && waiting.length === 0) continue
        this.queue = waiting.concat(this.queue)
        probe = true
        await new Promise((r) => setTimeout(r, delay))
        delay = Math.min(delay * 2, RETRY_MAX_MS)
        continue
      }
      for (const p of batch) {
        const err = refused.get(p.write)
        if (err) p.reject(err)
        else p.resolve()
      }
    }
  }
}

/** One kind of write (run rows, a record log, the session inbox), as a batch of it is written. */
export interface Lane<W> {
  /** the statements that write `writes`, their values written into the text (db.ts `literal`) */
  statements(writes: readonly W[]): string[]
  /** from those statements' results, the writes refused and why */
  outcome(writes: readonly W[], results: readonly QueryResult<Record<string, unknown>>[]): Map<W, Error> | Promise<Map<W, Error>>
  /** whether a write waits out an outage (true) or is refused at once */
  retry(write: W): boolean
  /** a write refused because the database went away during its commit, which may have landed */
  inDoubt?(write: W): void
  /**
   * A statement for every batch, also one that writes nothing of this lane (the probe after an
   * outage), and what to do once the batch has committed; undefined when there is nothing to add.
   */
  before?(): { sql: string; then(): void } | undefined
}

interface Laned { lane: Lane<unknown>; write: unknown }

/**
 * Every write of a store in one group commit: what arrives while a commit is in flight goes into
 * the next one together, whatever its kind, so an agent run's accept, status changes, transcript
 * record and session event share one commit (one WAL flush) with the others of the moment.
 *
 * A batch is one multi-statement query, which PostgreSQL runs as one transaction: one round trip
 * to the database instead of one per statement plus BEGIN and COMMIT. On a busy runtime each round
 * trip waits for a turn of the event loop behind the requests being answered, so that is what the
 * time between commits was made of (one runtime took 50 % more agent calls a second with it).
 */
export class PgWriter {
  private readonly group: GroupCommit<Laned>
  /** lanes with a `before` step, asked on every batch */
  private readonly preparers = new Set<Lane<unknown>>()

  constructor(private readonly db: Db) {
    this.group = new GroupCommit<Laned>((batch) => this.commit(batch), (w) => w.lane.retry(w.write), (w) => w.lane.inDoubt?.(w.write))
  }

  private async commit(batch: readonly Laned[]): Promise<Map<Laned, Error>> {
    const sql: string[] = []
    const after: Array<() => void> = []
    for (const lane of this.preparers) {
      const step = lane.before!()
      if (step) { sql.push(step.sql); after.push(step.then) }
    }
    const skip = sql.length
    // lanes in the order their first write arrived; each lane's writes in their order
    const byLane = new Map<Lane<unknown>, unknown[]>()
    for (const w of batch) {
      const list = byLane.get(w.lane)
      if (list) list.push(w.write)
      else byLane.set(w.lane, [w.write])
    }
    const parts: Array<{ lane: Lane<unknown>; writes: unknown[]; from: number; count: number }> = []
    for (const [lane, writes] of byLane) {
      const statements = lane.statements(writes)
      parts.push({ lane, writes, from: sql.length - skip, count: statements.length })
      sql.push(...statements)
    }
    // an empty batch (the probe) still asks the database something
    const results = sql.length === 0 ? await this.db.script('SELECT 1') : (await this.db.script(sql.join(';\n'))).slice(skip)
    for (const then of after) then()
    const refused = new Map<Laned, Error>()
    const laned = new Map<unknown, Laned>(batch.map((w) => [w.write, w]))
    for (const part of parts) {
      const errors = await part.lane.outcome(part.writes, results.slice(part.from, part.from + part.count))
      for (const [write, err] of errors) refused.set(laned.get(write)!, err)
    }
    return refused
  }

  get health(): StoreHealth {
    return this.group.health
  }

  get refusal(): RunStoreError | undefined {
    return this.group.refusal
  }

  add<W>(lane: Lane<W>, write: W): Promise<void> {
    if (lane.before) this.preparers.add(lane as Lane<unknown>)
    return this.group.add({ lane: lane as Lane<unknown>, write })
  }

  /** Waits for everything queued (the store closes it once every user of it has stopped). */
  close(): Promise<void> {
    return this.group.close()
  }
}
