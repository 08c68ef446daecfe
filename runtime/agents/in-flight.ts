// The engine's work under way: every turn, workflow and settle it starts in the background is
// tracked here, so that a stop can wait for them (drain, up to a grace; what is left is resumed at
// the next start) and a failure of one reaches the log, not an unhandled rejection. It also knows
// whether the engine is closing (nothing new starts then, and failures are expected), and ends a
// run a refused write cut short, so that no acknowledged run is stranded.
import type { Logger } from '../observe/log.js'
import { RunStoreError, isFinalStatus, type RunLog } from '../store/store.js'

export class InFlight {
  private readonly tracked = new Set<Promise<unknown>>()
  /** the promises behind `tracked`, so one is tracked once however often it is handed over */
  private readonly watched = new Set<Promise<unknown>>()
  /** set by the engine's close: nothing new starts, and what fails now is the close's doing */
  closed = false

  constructor(private readonly runs: RunLog, private readonly log: Logger) {}

  track(p: Promise<unknown>): void {
    // A coalesced heartbeat hands every wake the same promise: watch it once.
    if (this.watched.has(p)) return
    this.watched.add(p)
    const tracked = p.catch((err: Error) => {
      if (!this.closed) this.log.error('background run failed', { error: err.message })
    }).finally(() => { this.tracked.delete(tracked); this.watched.delete(p) })
    this.tracked.add(tracked)
  }

  get size(): number {
    return this.tracked.size
  }

  /** Waits for the work under way up to `graceMs`; true when none is left. */
  async drain(graceMs: number): Promise<boolean> {
    const deadline = Date.now() + graceMs
    while (this.tracked.size > 0 && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([Promise.all([...this.tracked]), new Promise((r) => { timer = setTimeout(r, Math.max(1, deadline - Date.now())) })])
      clearTimeout(timer)
    }
    return this.tracked.size === 0
  }

  /**
   * An acknowledged run is never stranded: a turn or workflow cut short because the store refused
   * one of its writes (a transcript record, a summary: `store_refused`, only ever alone) ends
   * failed, saying why, its unfinished steps with it. Anything else (the store closing, another
   * runtime taking the run over) leaves it to whoever resumes it. Rethrows `err` for the log.
   */
  async endRefused(runId: string, err: unknown): Promise<never> {
    if (err instanceof RunStoreError && err.code === 'store_refused' && !this.closed) {
      const error = `interrupted: ${err.message}`
      for (const step of this.runs.children(runId)) if (!isFinalStatus(step.status)) await this.runs.transition(step.id, 'failed', { error }).catch(() => {})
      const row = this.runs.get(runId)
      if (row && !isFinalStatus(row.status)) await this.runs.transition(runId, 'failed', { error }).catch(() => {})
    }
    throw err
  }
}
