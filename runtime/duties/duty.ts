// A background duty: work the runtime does beside the requests (the scheduler, the workflow runner,
// the notifier, resuming runs, a store's loops, sharing the lock-out counts, watching the bundle),
// with one small lifecycle: started once in its place, stopped once in reverse, asked how it is.
// A new duty is a new module implementing this, registered in runtime/serve/duties.ts.

/** How a duty is doing: a sentence when it is not well (for /healthz and /readyz). */
export type DutyHealth = { ok: true } | { ok: false; reason: string }

export interface Duty {
  /** what it is, in words (logs, health) */
  readonly name: string
  /**
   * Begins the duty. Returning nothing means it has begun, and the next duty starts in the same
   * turn of the event loop; a promise (a catch-up that writes) is awaited before the next.
   */
  start(): void | Promise<void>
  /** Ends it; resolves once nothing it started is left running (or its grace has passed). */
  stop(): void | Promise<void>
  health(): DutyHealth
}

/** The health of a duty that has nothing to report: it runs or it does not. */
export const HEALTHY: DutyHealth = { ok: true }
