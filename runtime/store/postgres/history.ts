// The history on PostgreSQL as the CLIs and the operator page read it: every runtime's runs, newest
// first, and what a replay or a run's page reads beside a row (its request, its received request),
// the record logs and the rejected-request log.
import type { HistoryReader, ReceivedRequest, RejectRecord, RunHistory, RunRow } from '../store.js'
import type { Db } from './db.js'
import { PgRejects } from './rejects.js'
import { readReceived } from './runs.js'

export class PgHistory implements HistoryReader {
  constructor(private readonly db: Db, readonly where: string, private readonly owned = false) {}

  /** The database's write position: it moves with every commit, so it tells that something changed. */
  async version(): Promise<string> {
    return (await this.db.query<{ v: string }>('SELECT pg_current_wal_lsn()::text AS v')).rows[0]!.v
  }

  async read(): Promise<RunHistory> {
    const r = await this.db.query<{ row: RunRow }>('SELECT row FROM hookgate_runs ORDER BY created_at DESC, id DESC')
    return { rows: r.rows.map((x) => x.row), torn: 0, corrupt: 0 }
  }

  async request(row: RunRow): Promise<unknown> {
    if (row.request !== undefined) return row.request
    return (await this.db.query<{ request: unknown }>('SELECT request FROM hookgate_runs WHERE id = $1', [row.id])).rows[0]?.request ?? undefined
  }

  received(row: RunRow): Promise<ReceivedRequest | undefined> {
    return readReceived(this.db, row)
  }

  async output(row: RunRow): Promise<unknown> {
    return row.output
  }

  /**
   * The log's records, oldest first, then the events queued for it that its session's owner has not
   * moved into it yet (sessions.ts): durable, and read by the next turn, so part of what the
   * session holds, as the file store's journal holds an event once queue() resolves.
   */
  async logRecords<R extends object>(name: string): Promise<R[]> {
    const r = await this.db.query<{ record: R }>(
      `SELECT record FROM (
         SELECT record, 0 AS part, seq, NULL::timestamptz AS queued_at FROM hookgate_logs WHERE log = $1
         UNION ALL
         SELECT record, 1, NULL, queued_at FROM hookgate_session_inbox WHERE log = $1) AS r
       ORDER BY part, seq, queued_at`, [name])
    return r.rows.map((x) => x.record)
  }

  rejects(): Promise<{ records: RejectRecord[]; torn: number; corrupt: number }> {
    return PgRejects.read(this.db)
  }

  /** Closes the pool when this reader opened it. */
  async close(): Promise<void> {
    if (this.owned) await this.db.close()
  }
}
