// Retry and backoff, written once for everything that calls out and tries again: the model
// providers (runtime/agents/providers/http.ts), the delivery channels (runtime/channels/attempts.ts)
// and the Gmail helper (gmail/google.ts, gmail/sync.ts). Each brings its own numbers (attempts, base,
// cap, the longest wait it holds) and its own words for a failure; the schedule (exponential,
// capped, jittered), the reading of Retry-After, the wait an AbortSignal ends early and the loop's
// decisions (stop, wait how long, try again) are here.
import { setTimeout as delay } from 'node:timers/promises'

/** An exponential schedule: base·2^(retry-1), at most `capMs`. */
export interface Backoff { baseMs: number; capMs: number }

/** The wait before retry number `retry` (1-based): base·2^(retry-1) capped, then jittered into [½, 1] of it. */
export function backoffDelay(backoff: Backoff, retry: number, random: () => number = Math.random): number {
  const ceiling = Math.min(backoff.capMs, backoff.baseMs * 2 ** Math.max(0, retry - 1))
  return Math.round(ceiling / 2 + random() * (ceiling / 2))
}

/** Retry-After (delta-seconds, whole or fractional, or an HTTP date) in milliseconds from `nowMs`; null when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number = Date.now()): number | null {
  const raw = (Array.isArray(value) ? value[0] : value)?.trim()
  if (!raw) return null
  if (/^\d+(\.\d+)?$/.test(raw)) return Math.round(Number(raw) * 1000)
  // an HTTP date names its day and month in words; Date.parse alone would take '-3' for a year
  const at = /[A-Za-z]{3}/.test(raw) ? Date.parse(raw) : NaN
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs)
}

/**
 * Waits `ms` (with `sleep` when given: a test's clock), ending early when `signal` aborts; false
 * when it did. The real timer is cleared on abort, so nothing is left pending.
 */
export async function pause(ms: number, signal?: AbortSignal, sleep?: (ms: number) => Promise<void>): Promise<boolean> {
  if (signal?.aborted) return false
  if (!sleep) {
    try {
      await delay(ms, undefined, signal ? { signal } : undefined)
      return true
    } catch {
      return false
    }
  }
  if (!signal) {
    await sleep(ms)
    return true
  }
  let onAbort!: () => void
  const aborted = new Promise<false>((resolve) => { onAbort = () => resolve(false); signal.addEventListener('abort', onAbort, { once: true }) })
  try {
    return await Promise.race([sleep(ms).then(() => true as const), aborted])
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
}

/**
 * What one attempt came to: its value, or a failure, whether another attempt may fix it, and the
 * wait the other side asked for (Retry-After), if any. An attempt that throws ends the loop at once.
 */
export type Tried<T, F> =
  | { ok: true; value: T }
  | { ok: false; failure: F; retryable: boolean; retryAfterMs?: number | null }

export interface RetryPlan<F> {
  /** attempts in all, the first included (at least one is made) */
  attempts: number
  backoff: Backoff
  /** the longest single wait: a longer one is cut to it (see refuseLongerWait) */
  maxWaitMs?: number
  /** ends the waits and the loop: `cancelled` says with what */
  signal?: AbortSignal
  /** the wait itself (tests hand a clock); a real timer when absent */
  sleep?: (ms: number) => Promise<void>
  random?: () => number
  /** the error the loop ends with after `attempts` attempts: the last failure, final or the last one allowed */
  fail(failure: F, attempts: number): Error
  /** the error the loop ends with when `signal` aborts, after `attempts` attempts (0: before the first) */
  cancelled(attempts: number): Error
  /** a Retry-After past maxWaitMs ends the loop with this error instead of being cut to it */
  refuseLongerWait?(failure: F, attempts: number, askedMs: number): Error
  /** told before each wait (a log line) */
  waiting?(failure: F, attempt: number, waitMs: number): void
}

/**
 * Runs `attempt` (numbered from 1) until it succeeds, fails for good, the attempts run out or the
 * signal aborts; between attempts waits the Retry-After asked for, else the backoff.
 */
export async function retry<T, F>(plan: RetryPlan<F>, attempt: (n: number) => Promise<Tried<T, F>>): Promise<T> {
  const max = Math.max(1, Math.floor(plan.attempts))
  for (let n = 1; ; n++) {
    if (plan.signal?.aborted) throw plan.cancelled(n - 1)
    const tried = await attempt(n)
    if (tried.ok) return tried.value
    if (plan.signal?.aborted) throw plan.cancelled(n)
    if (!tried.retryable || n >= max) throw plan.fail(tried.failure, n)
    let wait = backoffDelay(plan.backoff, n, plan.random)
    const asked = tried.retryAfterMs
    if (asked !== undefined && asked !== null) {
      if (plan.maxWaitMs !== undefined && asked > plan.maxWaitMs && plan.refuseLongerWait) throw plan.refuseLongerWait(tried.failure, n, asked)
      wait = asked
    }
    if (plan.maxWaitMs !== undefined) wait = Math.min(wait, plan.maxWaitMs)
    plan.waiting?.(tried.failure, n, wait)
    if (!(await pause(wait, plan.signal, plan.sleep))) throw plan.cancelled(n)
  }
}
