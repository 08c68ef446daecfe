// The per-address lock-out after repeated auth failures (AuthLimiter), bounded in memory.

export interface LimiterSettings { limit: number; windowMs: number; lockoutMs: number; maxTrackedClients: number }

interface ClientState { failures: number; windowStart: number; lockedUntil: number }

/**
 * Counts auth failures per client address. The first `limit` failures in a window answer 401, the
 * next ones 429 until the lock-out ends; a correct token clears the count. At most
 * `maxTrackedClients` addresses are remembered: the least recently seen is dropped first.
 */
export class AuthLimiter {
  private readonly clients = new Map<string, ClientState>()

  constructor(private readonly settings: LimiterSettings) {}

  get size(): number {
    return this.clients.size
  }

  /** Seconds until the lock-out ends, or 0 when the client is not locked out. */
  retryAfter(client: string, now: number): number {
    const s = this.clients.get(client)
    if (!s || s.lockedUntil <= now) return 0
    return Math.max(1, Math.ceil((s.lockedUntil - now) / 1000))
  }

  /** Records a failure; returns the seconds to wait when this failure (or an earlier one) locked the client out, else 0. */
  fail(client: string, now: number): number {
    let s = this.clients.get(client)
    if (s) this.clients.delete(client)
    if (!s || now - s.windowStart >= this.settings.windowMs || (s.lockedUntil !== 0 && s.lockedUntil <= now)) {
      s = { failures: 0, windowStart: now, lockedUntil: 0 }
    }
    if (s.lockedUntil > now) {
      this.clients.set(client, s)
      return this.retryAfter(client, now)
    }
    s.failures++
    if (s.failures > this.settings.limit) s.lockedUntil = now + this.settings.lockoutMs
    this.clients.set(client, s)
    while (this.clients.size > this.settings.maxTrackedClients) {
      this.clients.delete(this.clients.keys().next().value as string)
    }
    return s.lockedUntil > now ? this.retryAfter(client, now) : 0
  }

  succeed(client: string): void {
    this.clients.delete(client)
  }
}
