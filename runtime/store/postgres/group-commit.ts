// Group commit on PostgreSQL, for every table the store writes: the writes that arrive while a
// commit is in flight wait, and go together in the next one (one transaction, a multi-row
// statement per kind). While the database cannot be reached, `health` says why; each write says
// whether it waits for the database to come back (`retry`) or is refused at once.
import { RunStoreError, type StoreHealth } from '../store.js'
import { isUnavailable, type Db, type Queryable } from './db.js'

const RETRY_FIRST_MS = 50
const RETRY_MAX_MS = 2000

export interface Pending<W> { write: W; resolve(): void; reject(err: Error): void }

export class GroupCommit<W> {
  private queue: Pending<W>[] = []
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
    while (this.flushing || this.queue.length > 0) {
      if (this.flushing) await this.flushing
      else this.schedule()
    }
  }

  private schedule(): void {
    if (this.flushing || this.queue.length === 0) return
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
    while (this.queue.length > 0 || probe) {
      probe = false
      const batch = this.queue
      this.queue = []
      let refused: Map<W, Error>
      try {
        refused = await this.commit(batch.map((p) => p.write))
        this.trouble = null
        delay = RETRY_FIRST_MS
      } catch (err) {
        if (!isUnavailable(err)) {
          // a statement the database refused: every write of the batch fails with it
          const failure = err instanceof Error ? err : new Error(String(err))
          for (const p of batch) p.reject(failure)
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

/** One kind of write (run rows, a record log, the session inbox): how a batch of it is written inside a transaction. */
export interface Lane<W> {
  /** writes `writes` with `q` (inside the batch's transaction); returns the writes refused, and why */
  commit(q: Queryable, writes: readonly W[]): Promise<Map<W, Error>>
  /** whether a write waits out an outage (true) or is refused at once */
  retry(write: W): boolean
  /** a write refused because the database went away during its commit, which may have landed */
  inDoubt?(write: W): void
  /**
   * Run at the start of every transaction, also one that writes nothing of this lane (the probe
   * after an outage); what it returns is called once that transaction has committed.
   */
  before?(q: Queryable): Promise<(() => void) | undefined>
}

interface Laned { lane: Lane<unknown>; write: unknown }

/**
 * Every write of a store in one group commit: what arrives while a transaction is in flight goes
 * into the next one together, whatever its kind, so an agent run's accept, status changes,
 * transcript record and session event share one commit (one WAL flush) with the others of the
 * moment instead of each kind committing on its own.
 */
export class PgWriter {
  private readonly group: GroupCommit<Laned>

  /** lanes with a `before` step, run in every transaction */
  private readonly preparers = new Set<Lane<unknown>>()

  constructor(db: Db) {
    this.group = new GroupCommit<Laned>(async (batch) => {
      const committed: Array<() => void> = []
      const refused = await db.transaction((q) => this.commitIn(q, batch, committed))
      for (const then of committed) then()
      return refused
    }, (w) => w.lane.retry(w.write), (w) => w.lane.inDoubt?.(w.write))
  }

  private async commitIn(q: Queryable, batch: readonly Laned[], committed: Array<() => void>): Promise<Map<Laned, Error>> {
    for (const lane of this.preparers) {
      const then = await lane.before!(q)
      if (then) committed.push(then)
    }
    const refused = new Map<Laned, Error>()
    // lanes in the order their first write arrived; each lane's writes in their order
    const byLane = new Map<Lane<unknown>, Laned[]>()
    for (const w of batch) {
      const list = byLane.get(w.lane)
      if (list) list.push(w)
      else byLane.set(w.lane, [w])
    }
    for (const [lane, writes] of byLane) {
      const errors = await lane.commit(q, writes.map((w) => w.write))
      if (errors.size === 0) continue
      for (const w of writes) {
        const err = errors.get(w.write)
        if (err) refused.set(w, err)
      }
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
