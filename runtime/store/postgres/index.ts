// The PostgreSQL store: several runtimes on one database. Opening it connects (a pool of at most
// ten connections), brings the schema up to date under the migration lock, and registers this
// runtime in hookgate_hosts, renewed while it runs. Record logs are read once at open and written
// through group commit.
//
// Several runtimes share it:
// - a runtime whose row in hookgate_hosts expired (or that stopped and removed it) is dead to the
//   others: every SWEEP they claim its unfinished runs (takeover.ts) and resume them, so a dead
//   runtime's runs go on within hostTtl + sweep;
// - a queued wake of an agent that no runtime has served for STRANDED_WAKE_TTLS × hostTtl (a minute
//   by default) is claimed by the next sweep and ends failed, saying so: no turn will ever read it;
// - each agent's main session has one owner at a time (sessions.ts), and each session key one
//   isolated turn at a time (key-leases.ts);
// - a run's Idempotency-Key and a task slot's run id are unique across all of them (runs.ts).
import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import type { LockoutCounters, OpenedLog, RefusalRecorder, Store, StoreDuties, StoreDuty, TakeoverListener } from '../store.js'
import { openPool } from './client.js'
import type { Db } from './db.js'
import { PgHistory } from './history.js'
import { PgKeyLeases } from './key-leases.js'
import { LockoutSharing } from './lockout.js'
import { PgRecordLog } from './logs.js'
import { migrate } from './migrate.js'
import { PgRejects, REJECTS_LOG } from './rejects.js'
import { PgRunLog } from './runs.js'
import { PgWriter } from './group-commit.js'
import { PgSessions } from './sessions.js'
import { claimOrphans, claimStrandedWakes } from './takeover.js'
import { pruneOnce, type Pruned } from './retention.js'
import { DEFAULT_KEEP_HISTORY, DEFAULT_KEY_WINDOW_MS } from '../rows.js'

/** A runtime whose row was not renewed for this long is dead to the others, default 15 s. */
export const DEFAULT_HOST_TTL_MS = 15_000
/** How often a runtime looks for a dead runtime's runs to take over, default 5 s. */
export const DEFAULT_SWEEP_MS = 5_000
/**
 * A queued wake whose agent's session has had no live owner for this many host leases (and is as
 * old) is given up: no runtime serves its agent. Longer than a restart, so that a runtime replaced
 * by a new one with the same agents is not taken for gone.
 */
export const STRANDED_WAKE_TTLS = 4
/** Runs claimed per statement of a sweep (a sweep claims until none are left). */
const SWEEP_BATCH = 200
/** How often a runtime prunes the history past server.history.keepRuns (and keys past their window). */
const PRUNE_EVERY_MS = 60_000

export interface PgStoreOptions {
  hostTtlMs?: number
  /** how often to look for a dead runtime's runs (server.store.sweepSeconds), default 5 s */
  sweepMs?: number
  keepKeysForMs?: number
  /** finished runs kept, newest first (server.history.keepRuns), default 50,000 */
  keepRuns?: number
  /** turns of each main session kept by a prune (tests set it low), default SESSION_KEEP_TURNS */
  sessionKeepTurns?: number
  retainFinished?: number
  /** the pool's size, default 10 (server.store.maxConnections) */
  maxConnections?: number
  /** a connection the server dropped while idle, and other things worth a log line */
  warn?: (message: string) => void
  /**
   * true: the background loops (`duties`: the prune, the session leases, the takeover sweep) wait
   * for whoever opened the store to start them (the runtime's supervisor); otherwise they start
   * with the store, for tools and tests that open it alone. The host lease is renewed from open
   * to close either way: a runtime that is alive never looks dead to the others.
   */
  supervised?: boolean
}

export class PgStore implements Store {
  readonly kind = 'postgres'
  readonly runs: PgRunLog
  private readonly logs = new Set<{ close(): Promise<void> }>()
  private rejects: PgRejects | undefined
  readonly sessions: PgSessions
  readonly sessionKeys: PgKeyLeases
  /** one group commit for every write of this runtime: a moment's accepts, status changes, records and events share a transaction */
  private readonly writer: PgWriter
  private readonly renewal: NodeJS.Timeout
  readonly duties: Required<StoreDuties>
  private pruning: Promise<Pruned> | undefined
  private takeover: TakeoverListener | undefined
  private sweeping: Promise<void> | undefined
  /**
   * Since when this runtime's own lease has been renewed without a break (undefined: the last
   * renewal failed). After an outage of the database every runtime's lease may have run out
   * meanwhile; sweeping before the others had the time to renew theirs would take live runtimes'
   * runs, so a sweep waits until this runtime's own renewals have held for half a lease.
   */
  private renewedSince: number | undefined = -Infinity
  private renewalWarned = false
  private closed = false

  private constructor(readonly db: Db, readonly hostId: string, private readonly preloaded: Map<string, object[]>, private readonly options: PgStoreOptions) {
    this.writer = new PgWriter(db)
    this.runs = new PgRunLog(db, { hostId, ...(options.keepKeysForMs !== undefined ? { keepKeysForMs: options.keepKeysForMs } : {}), ...(options.retainFinished !== undefined ? { retainFinished: options.retainFinished } : {}) }, this.writer)
    const ttl = options.hostTtlMs ?? DEFAULT_HOST_TTL_MS
    this.sessions = new PgSessions(db, hostId, this.runs, { ttlMs: ttl, ...(options.warn ? { warn: options.warn } : {}) }, this.writer)
    this.sessionKeys = new PgKeyLeases(db, hostId, ttl, this.writer, options.warn)
    this.renewal = setInterval(() => void this.renew(ttl), Math.max(100, Math.floor(ttl / 3)))
    this.renewal.unref()
    this.duties = {
      retention: everyDuty('retention', PRUNE_EVERY_MS, () => this.prune().then(() => {}), (err) => {
        if (!this.closed) options.warn?.(`could not prune the run history: ${err.message}`)
      }),
      sessionOwnership: {
        name: 'session ownership',
        start: () => this.sessions.start(),
        stop: () => this.sessions.stop(),
        health: () => { const h = this.sessions.health; return h.ok ? h : { ok: false, reason: h.reason } },
      },
      // sweeping failures are told by sweep() itself
      takeoverSweep: everyDuty('takeover sweep', options.sweepMs ?? DEFAULT_SWEEP_MS, () => {
        if (this.renewedSince !== undefined && Date.now() - this.renewedSince >= ttl / 2) return this.sweep()
        return Promise.resolve()
      }, () => {}),
    }
    if (!options.supervised) for (const duty of Object.values(this.duties)) duty.start()
  }

  /** Deletes finished runs past keepRuns and keys past their window, a batch at a time; returns how many. */
  prune(): Promise<Pruned> {
    this.pruning ??= (async () => {
      const total: Pruned = { runs: 0, keys: 0, sessionRecords: 0 }
      for (;;) {
        const once = await pruneOnce(this.db, this.options.keepRuns ?? DEFAULT_KEEP_HISTORY, this.options.keepKeysForMs ?? DEFAULT_KEY_WINDOW_MS, this.options.sessionKeepTurns)
        total.runs += once.runs
        total.keys += once.keys
        total.sessionRecords += once.sessionRecords
        if ((once.runs < 1000 && once.keys < 1000 && once.sessionRecords < 5000) || this.closed) return total
      }
    })().finally(() => { this.pruning = undefined })
    return this.pruning
  }

  async lastFiredSlots(): Promise<Map<string, number>> {
    const r = await this.db.query<{ id: string; at: string }>(
      `SELECT definition_id AS id, max(scheduled_for) AS at FROM hookgate_runs
       WHERE definition_kind = 'task' AND scheduled_for IS NOT NULL GROUP BY definition_id`)
    return new Map(r.rows.map((x) => [x.id, Date.parse(x.at)] as [string, number]).filter(([, at]) => Number.isFinite(at)))
  }

  onTakeover(listener: TakeoverListener): void {
    this.takeover = listener
  }

  /** Renews this runtime's row (written again if it is gone: a database restored from a backup). */
  private async renew(ttl: number): Promise<void> {
    try {
      await this.db.query(
        `INSERT INTO hookgate_hosts (id, started_at, expires_at) VALUES ($1, now(), now() + $2 * interval '1 millisecond')
         ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at`, [this.hostId, ttl])
      this.renewedSince ??= Date.now()
      this.renewalWarned = false
    } catch (err) {
      this.renewedSince = undefined
      if (!this.renewalWarned && !this.closed) this.options.warn?.(`could not renew this runtime's lease: ${(err as Error).message}`)
      this.renewalWarned = true
    }
  }

  /**
   * Claims dead runtimes' unfinished runs, a batch at a time, and hands them to the listener; then
   * ends the queued wakes of agents no runtime serves.
   */
  sweep(): Promise<void> {
    if (this.sweeping || this.closed || !this.takeover) return this.sweeping ?? Promise.resolve()
    this.sweeping = (async () => {
      for (;;) {
        const taken = await this.db.transaction((q) => claimOrphans(q, this.hostId, SWEEP_BATCH))
        if (taken.claimed.length === 0) break
        const rows = this.runs.adopt(taken.claimed, taken.related)
        this.options.warn?.(`took over ${taken.claimed.length} unfinished run(s) of a runtime that stopped renewing its lease`)
        this.takeover?.(rows, taken.isolated)
        if (taken.claimed.length < SWEEP_BATCH) break
      }
      await this.endStrandedWakes()
    })().catch((err: Error) => {
      if (!this.closed) this.options.warn?.(`could not look for runs to take over: ${err.message}`)
    }).finally(() => { this.sweeping = undefined })
    return this.sweeping
  }

  /** The queued wakes no runtime will read (takeover.ts claimStrandedWakes), ended failed. */
  private async endStrandedWakes(): Promise<void> {
    const graceMs = STRANDED_WAKE_TTLS * (this.options.hostTtlMs ?? DEFAULT_HOST_TTL_MS)
    for (;;) {
      const claimed = await this.db.transaction((q) => claimStrandedWakes(q, this.hostId, this.sessions.served, graceMs, SWEEP_BATCH))
      if (claimed.length === 0) return
      this.runs.adopt(claimed)
      const agents = [...new Set(claimed.map((c) => c.row.agentId ?? '?'))]
      this.options.warn?.(`ended ${claimed.length} queued wake(s) failed: no runtime has served agent(s) ${agents.join(', ')} for ${graceMs / 1000} s`)
      await Promise.all(claimed.map((c) => this.runs.transition(c.row.id, 'failed', {
        error: `no runtime serves agent "${c.row.agentId ?? '?'}": no turn of its main session read this wake within ${graceMs / 1000} s`,
      }).catch(() => { /* another runtime took it meanwhile, or the store closes: the next sweep */ })))
      if (claimed.length < SWEEP_BATCH) return
    }
  }

  static async open(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
    const db = await openPool(url, { ...(options.maxConnections !== undefined ? { max: options.maxConnections } : {}), ...(options.warn ? { warn: options.warn } : {}) })
    try {
      await migrate(db)
      const hostId = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`
      await db.query("INSERT INTO hookgate_hosts (id, started_at, expires_at) VALUES ($1, now(), now() + $2 * interval '1 millisecond')", [hostId, options.hostTtlMs ?? DEFAULT_HOST_TTL_MS])
      const preloaded = new Map<string, object[]>()
      const r = await db.query<{ log: string; record: object }>('SELECT log, record FROM hookgate_logs WHERE log <> $1 ORDER BY seq', [REJECTS_LOG])
      for (const { log, record } of r.rows) {
        const list = preloaded.get(log) ?? []
        list.push(record)
        preloaded.set(log, list)
      }
      return new PgStore(db, hostId, preloaded, options)
    } catch (err) {
      await db.close().catch(() => {})
      throw err
    }
  }

  /**
   * The log's records as they were at open. `keep` is not applied: several runtimes append to one
   * log (the transcripts, a session whose owner changes), and a rewrite by one would delete what
   * another appended meanwhile, with a `keep` that knows only this runtime's runs.
   */
  openLog<R extends object>(name: string): OpenedLog<R> {
    const records = (this.preloaded.get(name) ?? []) as R[]
    this.preloaded.delete(name)
    const log = new PgRecordLog<R>(this.db, name, this.writer)
    this.logs.add(log)
    return { records, log }
  }

  openRejects(warn: (error: string) => void): RefusalRecorder {
    this.rejects ??= new PgRejects(this.db, { warn })
    return this.rejects
  }

  shareLockout(counters: LockoutCounters): { close(): Promise<void> } {
    const sharing = new LockoutSharing(this.db, counters, { ...(this.options.warn ? { warn: this.options.warn } : {}) })
    this.logs.add(sharing)
    return sharing
  }

  /** The history, read through this store's pool. */
  history(where: string): PgHistory {
    return new PgHistory(this.db, where)
  }

  async close(): Promise<void> {
    this.closed = true
    clearInterval(this.renewal)
    for (const duty of Object.values(this.duties)) await duty.stop()
    await this.sweeping
    await this.pruning?.catch(() => {})
    await this.sessions.close()
    await this.sessionKeys.close()
    await this.rejects?.close()
    for (const log of this.logs) await log.close()
    await this.runs.close()
    await this.writer.close()
    // a runtime that stops cleanly leaves no lease for the others to wait out
    await this.db.query('DELETE FROM hookgate_hosts WHERE id = $1', [this.hostId]).catch(() => {})
    await this.db.close()
  }
}

/**
 * A round every `everyMs` as a duty: one round at a time (a slow one is not stacked on), the
 * last round's failure told to `failed` and kept for health until a round succeeds.
 */
function everyDuty(name: string, everyMs: number, round: () => Promise<void>, failed: (err: Error) => void): StoreDuty {
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> | undefined
  let lastError: string | undefined
  return {
    name,
    start() {
      if (timer) return
      timer = setInterval(() => {
        running ??= round().then(() => { lastError = undefined }, (err: Error) => { lastError = err.message; failed(err) }).finally(() => { running = undefined })
      }, everyMs)
      timer.unref()
    },
    async stop() {
      clearInterval(timer)
      timer = undefined
      await running
    },
    health: () => (lastError === undefined ? { ok: true } : { ok: false, reason: `${name}: ${lastError}` }),
  }
}
