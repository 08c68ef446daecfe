// The per-address lock-out after repeated auth failures (AuthLimiter), bounded in memory, and its
// side of a lock-out shared by several runtimes on one store (LockoutCounters): what it counted
// since the last flush goes out, the merged counts come back.
import type { LockoutCounters, LockoutDelta, LockoutFlush, LockoutSettings, MergedLockout } from '../store/store.js'

export interface LimiterSettings extends LockoutSettings { maxTrackedClients: number }

/** shareAt of a client whose share is spent, until the merge it asked for is back */
const MERGING = -1

/** Failures of one client held for a merge at once; past it (a flood) they are answered at once. */
const MAX_HELD_PER_CLIENT = 64
/** Failures held for merges at once, over every client: a bound in memory, whatever the spray. */
const MAX_HELD = 4096

interface ClientState {
  /** this runtime's view: the merged count at the last flush plus the failures counted here since */
  failures: number
  windowStart: number
  lockedUntil: number
  /** failures counted here and not yet sent to the other runtimes */
  unshared: number
  /** the `unshared` count that spends this runtime's share (0: no share; MERGING: spent, merge under way) */
  shareAt: number
}

/**
 * Counts auth failures per client address. The first `limit` failures in a window answer 401, the
 * next ones 429 until the lock-out ends; a correct token clears the count. At most
 * `maxTrackedClients` addresses are remembered: the least recently seen is dropped first.
 *
 * Several runtimes on one store share their counts (LockoutCounters): the store collects what each
 * counted since its last flush and hands back the merged counts, which replace the local ones.
 * Each runtime may count a share of what the merged count has left below the limit (a half of it,
 * divided by the number of runtimes) on its own; when its share is spent it asks for a merge at
 * once, and a failure of that client meanwhile waits for the merge (one database round trip) and
 * is then answered by the merged count, as a runtime alone would answer it (whenMerged). So the
 * runtimes together answer at most about `limit` 401s however fast they are sprayed, and a client
 * that is not sprayed over several runtimes gets the answers it would get from one runtime. Past a
 * bound of held failures (a flood), one is answered at once: 429 with Retry-After 1.
 */
export class AuthLimiter implements LockoutCounters {
  private readonly clients = new Map<string, ClientState>()
  // Shared only (all empty otherwise): clients with unshared failures, clients a correct token
  // cleared since the last flush, and clients whose share is spent (sent first).
  private readonly dirty = new Set<string>()
  private readonly cleared = new Set<string>()
  private readonly urgent = new Set<string>()
  private sharing = false
  private flushSoon: (() => void) | undefined
  /**
   * shareAt of a client new here: its first failure asks what the others counted (and how many
   * runtimes there are now: one that joined since the last merge must not find this one alone)
   */
  private newShareAt = 0
  private hosts = 1
  /** where the read-back of tracked clients goes on from at the next flush */
  private watchCursor: Iterator<string> | undefined
  /** failures waiting for their client's merge (whenMerged), by client */
  private readonly held = new Map<string, Array<() => void>>()
  private heldCount = 0

  constructor(readonly settings: LimiterSettings) {}

  get size(): number {
    return this.clients.size
  }

  /** Seconds until the lock-out ends (1 while a spent share is being merged), or 0 when the client is not locked out. */
  retryAfter(client: string, now: number): number {
    const s = this.clients.get(client)
    if (!s) return 0
    if (s.lockedUntil > now) return Math.max(1, Math.ceil((s.lockedUntil - now) / 1000))
    return s.shareAt === MERGING ? 1 : 0
  }

  /** Seconds until the client's lock-out ends, or 0; a merge under way is no lock-out (a correct credential still passes). */
  lockedFor(client: string, now: number): number {
    const s = this.clients.get(client)
    return s !== undefined && s.lockedUntil > now ? Math.max(1, Math.ceil((s.lockedUntil - now) / 1000)) : 0
  }

  /**
   * While the client's spent share is being merged, a promise that settles when the merge is back
   * (or given up): the failure is then counted against the merged count, as one runtime alone would
   * count it. Undefined when no merge is under way for it, or past the bound of held failures.
   */
  whenMerged(client: string): Promise<void> | undefined {
    const s = this.clients.get(client)
    if (s === undefined || s.shareAt !== MERGING || this.heldCount >= MAX_HELD) return undefined
    let waiting = this.held.get(client)
    if (waiting === undefined) this.held.set(client, (waiting = []))
    if (waiting.length >= MAX_HELD_PER_CLIENT) return undefined
    this.heldCount++
    return new Promise<void>((resolve) => waiting!.push(resolve))
  }

  /** Lets the failures held for a merge go on, for every client whose merge is no longer under way (all: `every`). */
  private releaseHeld(every = false): void {
    if (this.heldCount === 0) return
    for (const [client, waiting] of this.held) {
      if (!every && this.clients.get(client)?.shareAt === MERGING) continue
      this.held.delete(client)
      this.heldCount -= waiting.length
      for (const go of waiting) go()
    }
  }

  /** Records a failure; returns the seconds to wait when this failure (or an earlier one) locked the client out, else 0. */
  fail(client: string, now: number): number {
    // Hot: a 401/429 flood runs through here. A Map update and counters; nothing else per request.
    let s = this.clients.get(client)
    if (s) this.clients.delete(client)
    if (!s || now - s.windowStart >= this.settings.windowMs || (s.lockedUntil !== 0 && s.lockedUntil <= now)) {
      // a new window: failures of the old one not yet sent are dropped with it
      s = { failures: 0, windowStart: now, lockedUntil: 0, unshared: 0, shareAt: this.newShareAt }
    }
    if (s.lockedUntil > now || s.shareAt === MERGING) {
      this.clients.set(client, s)
      return this.retryAfter(client, now)
    }
    s.failures++
    this.clients.set(client, s)
    const unshared = ++s.unshared
    if (unshared === 1 && this.sharing) this.dirty.add(client)
    if (s.failures > this.settings.limit) {
      s.lockedUntil = now + this.settings.lockoutMs
      // the others hear of a lock-out at once, not at the next tick
      if (this.flushSoon) this.spent(client, s)
    } else if (unshared === s.shareAt) this.spent(client, s)
    if (this.clients.size > this.settings.maxTrackedClients) this.trim()
    return s.lockedUntil > now ? this.retryAfter(client, now) : 0
  }

  succeed(client: string): void {
    // Shared, the success clears the merged count too: every runtime forgets the client.
    if (this.clients.delete(client) && this.sharing && this.cleared.size < this.settings.maxTrackedClients) {
      this.dirty.delete(client)
      this.cleared.add(client)
    }
  }

  // ---- LockoutCounters: the background side, never on the request path --------------------------

  attach(flushSoon?: () => void): void {
    this.sharing = true
    this.flushSoon = flushSoon
    this.newShareAt = flushSoon ? 1 : 0
  }

  detach(): void {
    this.sharing = false
    this.flushSoon = undefined
    this.dirty.clear()
    this.cleared.clear()
    this.urgent.clear()
    this.newShareAt = 0
    for (const s of this.clients.values()) s.shareAt = 0
    this.releaseHeld(true)
  }

  collect(max: number): LockoutFlush {
    const deltas: LockoutDelta[] = []
    const states: Array<ClientState | undefined> = []
    const inFlush = new Set<string>()
    const take = (client: string, cleared: boolean): void => {
      if (inFlush.has(client)) return
      const s = this.clients.get(client)
      const failures = s?.unshared ?? 0
      if (failures === 0 && !cleared && s?.shareAt !== MERGING) return
      if (s) s.unshared = 0
      inFlush.add(client)
      deltas.push({ client, failures, cleared })
      states.push(s)
    }
    // a spent share first: that is what another runtime may be about to answer wrongly
    for (const client of this.urgent) {
      if (deltas.length >= max) break
      this.urgent.delete(client)
      take(client, this.cleared.delete(client))
    }
    for (const client of this.cleared) {
      if (deltas.length >= max) break
      this.cleared.delete(client)
      take(client, true)
    }
    for (const client of this.dirty) {
      if (deltas.length >= max) break
      this.dirty.delete(client)
      take(client, false)
    }
    const watched = this.watch(max, inFlush)
    const settle = (): void => {
      for (const s of states) if (s !== undefined && s.shareAt === MERGING) s.shareAt = 0
    }
    return {
      deltas,
      watched,
      done: (merged, hosts, now) => {
        settle()
        this.hosts = Math.max(1, hosts)
        this.newShareAt = this.flushSoon ? 1 : 0
        const byClient = new Map<string, MergedLockout>()
        for (const m of merged) byClient.set(m.client, m)
        for (const d of deltas) this.adopt(d.client, byClient.get(d.client), now)
        for (const client of watched) this.adopt(client, byClient.get(client), now)
        // clients locked out through another runtime, new here or not
        for (const [client, m] of byClient) if (!inFlush.has(client)) this.adopt(client, m, now)
        this.releaseHeld()
      },
      failed: () => {
        // the database is away: each client is this runtime's alone until it is back, no shares
        this.newShareAt = 0
        for (const s of this.clients.values()) s.shareAt = 0
        this.urgent.clear()
        deltas.forEach((d, i) => {
          const s = states[i]
          if (d.cleared) this.cleared.add(d.client)
          // a state replaced meanwhile started a new window: what the old one counted is dropped
          if (s === undefined || this.clients.get(d.client) !== s) return
          s.unshared += d.failures
          if (s.unshared > 0) this.dirty.add(d.client)
        })
        this.releaseHeld(true)
      },
    }
  }

  /** Up to `max` tracked clients not in `inFlush`, taking turns from one flush to the next. */
  private watch(max: number, inFlush: Set<string>): string[] {
    const watched: string[] = []
    let restarted = false
    while (watched.length < max) {
      const next = this.watchCursor?.next()
      if (next === undefined || next.done) {
        if (restarted) break
        restarted = true
        this.watchCursor = this.clients.keys()
        continue
      }
      if (inFlush.has(next.value)) continue
      inFlush.add(next.value)
      watched.push(next.value)
    }
    return watched
  }

  /** Takes the merged count (absent: it has none) with this runtime's failures since the flush on top. */
  private adopt(client: string, m: MergedLockout | undefined, now: number): void {
    // a correct token here since the flush: the next flush clears the merged count
    if (this.cleared.has(client)) return
    let s = this.clients.get(client)
    if (m === undefined || (m.failures === 0 && m.lockedForMs <= 0)) {
      if (s !== undefined && s.unshared === 0) this.clients.delete(client)
      return
    }
    if (s === undefined) {
      // only a lock-out is worth remembering of a client this runtime has not seen
      if (m.lockedForMs <= 0) return
      s = { failures: 0, windowStart: 0, lockedUntil: 0, unshared: 0, shareAt: 0 }
      this.clients.set(client, s)
      if (this.clients.size > this.settings.maxTrackedClients) this.trim()
    }
    s.failures = m.failures + s.unshared
    s.windowStart = now - m.windowAgeMs
    s.lockedUntil = m.lockedForMs > 0 ? now + m.lockedForMs : 0
    if (s.shareAt === MERGING) return // asked for again meanwhile: the next merge sets it
    s.shareAt = this.flushSoon && this.hosts > 1 ? Math.max(1, Math.floor((this.settings.limit - m.failures) / (2 * this.hosts))) : 0
    if (s.shareAt !== 0 && s.unshared >= s.shareAt && s.lockedUntil <= now) this.spent(client, s)
  }

  /** This runtime's share of the client is spent: merge at once, and hold the client until then. */
  private spent(client: string, s: ClientState): void {
    // past the bound (a flood of addresses), a client waits for the next tick, unheld
    if (this.urgent.size >= this.settings.maxTrackedClients) return
    this.urgent.add(client)
    s.shareAt = MERGING
    this.flushSoon?.()
  }

  private trim(): void {
    while (this.clients.size > this.settings.maxTrackedClients) {
      const oldest = this.clients.keys().next().value as string
      this.clients.delete(oldest)
      this.dirty.delete(oldest)
    }
    // a client forgotten while held is no longer merging: its failures go on
    this.releaseHeld()
  }
}
