// The auth lock-out shared by the runtimes on one database. Each runtime's limiter answers every
// request from memory; here, every FLUSH_MS (and at once when a runtime has spent its share of a
// client's remaining failures, see AuthLimiter), one statement adds this runtime's counts to
// hookgate_auth_failures and reads back the merged counts of the clients it tracks and of every
// client locked out now, which the limiter takes over. A client locked out through one runtime is
// refused by the others within one flush (a second, for a runtime that was idle: it tracked nobody
// and nobody was locked out at its last look); a correct token on one clears the count on all.
//
// Windows and lock-outs run on the database's clock (now()), and are read back as durations: the
// runtimes' clocks need not agree, and one clock decides when a window or a lock-out ends.
//
// While the database cannot be reached, each limiter goes on alone (no request waits on this or
// fails because of it) and keeps its unsent counts in its own bounded map (a count whose window
// ends meanwhile is dropped with it): they are sent once the database is back, so an attacker
// gains nothing from an outage but the lack of merging. One line is logged per outage.
import type { LockoutCounters, MergedLockout } from '../store.js'
import type { Db } from './db.js'

/** how often the counts are merged, by default */
export const FLUSH_MS = 250
/** at most this many clients' counts per statement, and as many read back (a flood from many addresses waits its turn) */
export const MAX_CLIENTS_PER_FLUSH = 1000
/** how often an idle runtime looks for clients locked out elsewhere and for how many runtimes there are */
const IDLE_MS = 1000
/** a merge not answered within this (or four flush intervals) counts as failed */
const MERGE_DEADLINE_MS = 1000
/** this often, counts whose window and lock-out have ended are deleted (a bounded batch) */
const SWEEP_EVERY_MS = 10_000
const SWEEP_BATCH = 1000

export interface LockoutSharingOptions {
  flushMs?: number
  maxClients?: number
  /** false: flush only on the timer, never at once when a share is spent (tests measure the slack so) */
  flushWhenSpent?: boolean
  /** told once per outage, never with a client's token */
  warn?: (message: string) => void
}

// A count continues (is added to) while the client is locked out, or while its window runs and it
// was never locked; otherwise it starts again, as AuthLimiter.fail does. A correct token (cleared)
// starts it again too. Rows are upserted in client order, so that two runtimes' statements lock
// them in the same order and never deadlock.
const CONTINUES = `(NOT (SELECT d.cleared FROM d WHERE d.client = excluded.client)
  AND (f.locked_until > now() OR (f.locked_until IS NULL AND f.window_start > now() - $6 * interval '1 millisecond')))`
const COUNT = `CASE WHEN ${CONTINUES} THEN f.failures + excluded.failures ELSE excluded.failures END`
const LOCKOUT = `now() + $7 * interval '1 millisecond'`
/** a count that still means something: locked out now, or in a window that runs */
const CURRENT = `(locked_until > now() OR (locked_until IS NULL AND window_start > now() - $6 * interval '1 millisecond'))`

const MERGE = `
WITH d AS (SELECT * FROM unnest($1::text[], $2::int[], $3::bool[]) AS d(client, failures, cleared)),
merged AS (
  INSERT INTO hookgate_auth_failures AS f (client, failures, window_start, locked_until)
  SELECT client, failures, now(), CASE WHEN failures > $5 THEN ${LOCKOUT} END FROM d ORDER BY client
  ON CONFLICT (client) DO UPDATE SET
    failures = ${COUNT},
    window_start = CASE WHEN ${CONTINUES} THEN f.window_start ELSE excluded.window_start END,
    locked_until = CASE
      WHEN f.locked_until > now() AND ${CONTINUES} THEN f.locked_until
      WHEN ${COUNT} > $5 THEN ${LOCKOUT}
    END
  RETURNING f.client, f.failures, f.window_start, f.locked_until
),
watched AS (
  SELECT client, failures, window_start, locked_until FROM hookgate_auth_failures
  WHERE client = ANY($4::text[]) AND ${CURRENT}
),
locked AS (
  SELECT client, failures, window_start, locked_until FROM hookgate_auth_failures f
  WHERE locked_until > now() AND NOT EXISTS (SELECT 1 FROM d WHERE d.client = f.client)
  ORDER BY locked_until DESC LIMIT $8
),
answer AS (SELECT * FROM merged UNION ALL SELECT * FROM watched UNION ALL SELECT * FROM locked)
SELECT (SELECT count(*)::int FROM hookgate_hosts WHERE expires_at > now()) AS hosts,
  coalesce(json_agg(json_build_array(client, failures,
    round(extract(epoch FROM now() - window_start) * 1000),
    CASE WHEN locked_until > now() THEN ceil(extract(epoch FROM locked_until - now()) * 1000) ELSE 0 END)), '[]') AS merged
FROM answer`

/** Counts whose window and lock-out have ended; rows another runtime is updating are skipped, not waited for. */
const SWEEP = `
DELETE FROM hookgate_auth_failures WHERE client IN (
  SELECT client FROM hookgate_auth_failures
  WHERE (locked_until IS NULL AND window_start <= now() - $1 * interval '1 millisecond') OR locked_until <= now()
  LIMIT $2 FOR UPDATE SKIP LOCKED)`

export class LockoutSharing {
  private readonly timer: NodeJS.Timeout
  private readonly max: number
  private readonly deadlineMs: number
  private flushing: Promise<void> | null = null
  private following: Promise<void> | null = null
  private stuck: Promise<void> | null = null
  /** the last merge had nothing to send, read back or learn */
  private quiet = false
  private lastMerge = 0
  /** the database could not be reached at the last try (and a line said so) */
  private down = false
  private lastSweep = Date.now()
  private closed = false

  constructor(private readonly db: Db, private readonly counters: LockoutCounters, private readonly options: LockoutSharingOptions = {}) {
    this.max = options.maxClients ?? MAX_CLIENTS_PER_FLUSH
    this.deadlineMs = Math.max(MERGE_DEADLINE_MS, 4 * (options.flushMs ?? FLUSH_MS))
    counters.attach(options.flushWhenSpent === false ? undefined : () => this.soon())
    this.timer = setInterval(() => void this.run(false, true), options.flushMs ?? FLUSH_MS)
    this.timer.unref()
    // at once: how many runtimes share the counts, and who is locked out already
    void this.flush()
  }

  /** Merges now (or right after the flush in progress); resolves when that flush is done. */
  flush(): Promise<void> {
    return this.run(false, false)
  }

  /** Sends what is left and stops; the limiter goes on alone. */
  async close(): Promise<void> {
    if (this.closed) return
    clearInterval(this.timer)
    while (this.following ?? this.flushing) await (this.following ?? this.flushing)
    this.closed = true
    if (!this.down) await this.merge(false)
    this.counters.detach()
  }

  /** A share was spent, on the request path: merge after this turn, unless the database is away (then the timer retries). */
  private soon(): void {
    if (!this.down) void this.run(true, false)
  }

  /**
   * One merge at a time: asked for while one runs, one more follows it, with everything counted
   * meanwhile. `deferred`: after this turn of the event loop; `mayIdle`: a tick, skipped when idle.
   */
  private run(deferred: boolean, mayIdle: boolean): Promise<void> {
    if (this.closed) return Promise.resolve()
    if (this.following) return this.following
    if (this.flushing) {
      this.following = this.flushing.then(() => {
        this.following = null
        return this.run(false, false)
      })
      return this.following
    }
    const merging = deferred ? new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.merge(false)) : this.merge(mayIdle)
    this.flushing = merging.finally(() => { this.flushing = null })
    return this.flushing
  }

  private async merge(mayIdle: boolean): Promise<void> {
    // a merge past its deadline still holds a connection: no other joins it until it ends
    if (this.stuck) return
    const { limit, windowMs, lockoutMs } = this.counters.settings
    const batch = this.counters.collect(this.max)
    // Idle (nothing to send or read back, and nobody locked out anywhere at the last look): a tick
    // every IDLE_MS only. A client new here is merged at its first failure anyway.
    if (mayIdle && batch.deltas.length === 0 && batch.watched.length === 0 && this.quiet && Date.now() - this.lastMerge < IDLE_MS) return
    this.lastMerge = Date.now()
    let hosts: number
    let merged: MergedLockout[]
    let timer: NodeJS.Timeout | undefined
    try {
      const query = this.db.query<{ hosts: number; merged: Array<[string, number, number, number]> }>(MERGE, [
        batch.deltas.map((d) => d.client), batch.deltas.map((d) => d.failures), batch.deltas.map((d) => d.cleared),
        batch.watched, limit, windowMs, lockoutMs, this.max,
      ])
      // A database that does not answer (a host gone from the network) must not hold clients or
      // merges back: past the deadline it counts as away, and a late answer is dropped.
      query.catch(() => {})
      const late = new Promise<never>((_, fail) => {
        timer = setTimeout(() => {
          this.stuck = query.then(() => {}, () => {}).finally(() => { this.stuck = null })
          fail(new Error(`no answer within ${this.deadlineMs} ms`))
        }, this.deadlineMs)
      })
      const r = await Promise.race([query, late])
      hosts = r.rows[0]!.hosts
      merged = r.rows[0]!.merged.map(([client, failures, windowAgeMs, lockedForMs]) => ({ client, failures, windowAgeMs, lockedForMs }))
    } catch (err) {
      batch.failed()
      if (!this.down) {
        this.down = true
        this.options.warn?.(`auth lock-out counts are not shared while the database cannot be reached (each runtime counts alone): ${(err as Error).message}`)
      }
      return
    } finally {
      clearTimeout(timer)
    }
    this.down = false
    this.quiet = merged.length === 0
    batch.done(merged, hosts, Date.now())
    if (Date.now() - this.lastSweep >= SWEEP_EVERY_MS) {
      this.lastSweep = Date.now()
      await this.db.query(SWEEP, [windowMs, SWEEP_BATCH]).catch(() => { /* the next sweep */ })
    }
  }
}
