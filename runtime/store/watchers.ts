// What a run log tells about its rows once a change is durable, the same for every store: the
// subscribers (notifications, metrics) of every change, and those waiting for a run to finish
// (waitForCompletion). Listeners are called in the turn of the change, so they must be cheap, and
// one that throws is ignored: it must never undo or delay a durable change.
import { FINAL_STATUSES, type RunChangeListener, type RunRow } from './store.js'

export class RunWatchers {
  private readonly listeners = new Set<RunChangeListener>()
  private readonly finishing = new Map<string, Set<(row: RunRow | null) => void>>()

  subscribe(listener: RunChangeListener): () => void {
    this.listeners.add(listener)
    return () => { this.listeners.delete(listener) }
  }

  /** A row as it now is, durable: every subscriber hears of it, and a final one ends the waits on it. */
  changed(row: RunRow): void {
    for (const listener of this.listeners) {
      try { listener(row) } catch { /* a listener's fault is its own */ }
    }
    if (this.finishing.size === 0 || !FINAL_STATUSES.has(row.status)) return
    const waiting = this.finishing.get(row.id)
    if (waiting) for (const w of [...waiting]) w(row)
  }

  /** `current` when it is final, else the row once it finishes, or null after `timeoutMs`. */
  whenFinished(id: string, current: RunRow | undefined, timeoutMs: number, closed: boolean): Promise<RunRow | null> {
    if (current && FINAL_STATUSES.has(current.status)) return Promise.resolve(current)
    if (timeoutMs <= 0 || closed) return Promise.resolve(null)
    return new Promise((resolve) => {
      const waiting = this.finishing.get(id) ?? new Set<(row: RunRow | null) => void>()
      this.finishing.set(id, waiting)
      const done = (r: RunRow | null): void => {
        clearTimeout(timer)
        waiting.delete(done)
        if (waiting.size === 0 && this.finishing.get(id) === waiting) this.finishing.delete(id)
        resolve(r)
      }
      const timer = setTimeout(done, timeoutMs, null)
      waiting.add(done)
    })
  }

  /** Whether anyone waits for run `id` to finish. */
  waitedFor(id: string): boolean {
    return this.finishing.has(id)
  }

  /**
   * A run another runtime ran, found final: ends the waits on it, and tells no subscriber (their
   * business is the runs of this runtime).
   */
  finishedElsewhere(row: RunRow): void {
    const waiting = FINAL_STATUSES.has(row.status) ? this.finishing.get(row.id) : undefined
    if (waiting) for (const w of [...waiting]) w(row)
  }

  /** The store closes: every wait ends with null. */
  close(): void {
    for (const waiting of [...this.finishing.values()]) for (const w of [...waiting]) w(null)
  }
}

/**
 * Runs `work` after the write of run `id` in flight, if any, and records it as the run's latest:
 * the writes of one run are applied in the order they were asked for.
 */
export function afterWritesOf<T>(inFlight: Map<string, Promise<unknown>>, id: string, work: () => Promise<T>): Promise<T> {
  const previous = inFlight.get(id)
  const next = previous ? previous.then(work, work) : work()
  trackWrite(inFlight, id, next)
  return next
}

/** Records `p` as run `id`'s latest write until it settles. */
export function trackWrite(inFlight: Map<string, Promise<unknown>>, id: string, p: Promise<unknown>): void {
  inFlight.set(id, p)
  const done = (): void => { if (inFlight.get(id) === p) inFlight.delete(id) }
  p.then(done, done)
}
