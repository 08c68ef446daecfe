// The PostgreSQL store: several runtimes on one database. Opening it connects (a pool of at most
// ten connections), brings the schema up to date under the migration lock, and registers this
// runtime in hookgate_hosts, renewed while it runs (a row whose lease ran out marks a runtime the
// others may take runs over from). Record logs are read once at open, as the file store reads its
// files, and written through group commit.
//
// Still single-host in what it promises for sessions: one runtime per database owns each agent's
// main session log (leases and takeover come next).
import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import type { LockoutCounters, OpenedLog, RefusalRecorder, Store } from '../store.js'
import { openPool } from './client.js'
import type { Db } from './db.js'
import { PgHistory } from './history.js'
import { LockoutSharing } from './lockout.js'
import { PgRecordLog } from './logs.js'
import { migrate } from './migrate.js'
import { PgRejects, REJECTS_LOG } from './rejects.js'
import { PgRunLog } from './runs.js'

/** A runtime whose row was not renewed for this long is dead to the others, default 15 s. */
export const DEFAULT_HOST_TTL_MS = 15_000
/** A record log longer than this is rewritten at open to what its owner keeps. */
export const LOG_COMPACT_ABOVE_RECORDS = 20_000

export interface PgStoreOptions {
  hostTtlMs?: number
  keepKeysForMs?: number
  retainFinished?: number
  /** the size past which a record log is rewritten at open (tests set it low) */
  logCompactAboveRecords?: number
  /** a connection the server dropped while idle, and other things worth a log line */
  warn?: (message: string) => void
}

export class PgStore implements Store {
  readonly kind = 'postgres'
  readonly runs: PgRunLog
  private readonly logs = new Set<{ close(): Promise<void> }>()
  private rejects: PgRejects | undefined
  private readonly renewal: NodeJS.Timeout

  private constructor(readonly db: Db, readonly hostId: string, private readonly preloaded: Map<string, object[]>, private readonly options: PgStoreOptions) {
    this.runs = new PgRunLog(db, { hostId, ...(options.keepKeysForMs !== undefined ? { keepKeysForMs: options.keepKeysForMs } : {}), ...(options.retainFinished !== undefined ? { retainFinished: options.retainFinished } : {}) })
    const ttl = options.hostTtlMs ?? DEFAULT_HOST_TTL_MS
    this.renewal = setInterval(() => {
      db.query("UPDATE hookgate_hosts SET expires_at = now() + $2 * interval '1 millisecond' WHERE id = $1", [hostId, ttl])
        .catch((err: Error) => options.warn?.(`could not renew this runtime's lease: ${err.message}`))
    }, Math.max(100, Math.floor(ttl / 3)))
    this.renewal.unref()
  }

  static async open(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
    const db = await openPool(url, { ...(options.warn ? { warn: options.warn } : {}) })
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

  openLog<R extends object>(name: string, keep?: (records: R[]) => R[]): OpenedLog<R> {
    const records = (this.preloaded.get(name) ?? []) as R[]
    this.preloaded.delete(name)
    // A long log is rewritten to what its owner keeps before anything more is appended to it.
    const rewrite = keep && records.length > (this.options.logCompactAboveRecords ?? LOG_COMPACT_ABOVE_RECORDS)
      ? PgRecordLog.rewrite(this.db, name, keep(records))
      : undefined
    // its failure reaches the first append; nobody else waits on it
    rewrite?.catch(() => {})
    const log = new PgRecordLog<R>(this.db, name, rewrite)
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
    clearInterval(this.renewal)
    await this.rejects?.close()
    for (const log of this.logs) await log.close()
    await this.runs.close()
    // a runtime that stops cleanly leaves no lease for the others to wait out
    await this.db.query('DELETE FROM hookgate_hosts WHERE id = $1', [this.hostId]).catch(() => {})
    await this.db.close()
  }
}
