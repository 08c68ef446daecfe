// Group commit on PostgreSQL, for every table the store writes: the writes that arrive while a
// commit is in flight wait, and go together in the next one (one transaction, a multi-row
// statement per kind). While the database cannot be reached, `health` says why; each write says
// whether it waits for the database to come back (`retry`) or is refused at once.
import { RunStoreError, type StoreHealth } from '../store.js'
import { isUnavailable } from './db.js'

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
    this.flushing = this.loop().finally(() => { this.flushing = null })
  }

  private async loop(): Promise<void> {
    let delay = RETRY_FIRST_MS
    while (this.queue.length > 0) {
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
          if (this.closing || !this.retry(p.write)) p.reject(this.refusal!)
          else waiting.push(p)
        }
        if (waiting.length === 0) continue
        this.queue = waiting.concat(this.queue)
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
