// The rejected-request log on PostgreSQL: the stores' common per-minute aggregation
// (runtime/store/refusals.ts) written as records of the `rejects` record log. Not an
// acknowledgement: a write that fails is counted and reported once, never fails a request, and
// is not retried (a refusal flood must not queue up behind an outage). Bounded like the file
// store's two segments: past KEEP_RECORDS the oldest records are deleted.
import { RefusalBuckets, foldRejects, type RefusalOptions } from '../refusals.js'
import type { RejectRecord } from '../store.js'
import type { Db, Queryable } from './db.js'

export const REJECTS_LOG = 'rejects'
/** records kept (a bucket is one to a few records): about what two 4 MiB file segments hold */
export const KEEP_RECORDS = 20_000
/** the bound is enforced every this many writes, not on each */
const TRIM_EVERY = 50

export class PgRejects extends RefusalBuckets {
  protected readonly where = `the database (record log "${REJECTS_LOG}")`
  private writes = 0

  private readonly keep: number

  /** `keepRecords`: the bound, default KEEP_RECORDS (tests set it low) */
  constructor(private readonly db: Db, options: RefusalOptions & { keepRecords?: number } = {}) {
    super(options)
    this.keep = options.keepRecords ?? KEEP_RECORDS
  }

  /** Every record, newest (last seen) first, one per bucket. */
  static async read(db: Queryable): Promise<{ records: RejectRecord[]; torn: number; corrupt: number }> {
    const r = await db.query<{ record: unknown }>('SELECT record FROM hookgate_logs WHERE log = $1 ORDER BY seq', [REJECTS_LOG])
    const folded = foldRejects(r.rows.map((x) => x.record))
    return { records: folded.records, torn: 0, corrupt: folded.corrupt }
  }

  protected async writeRecords(records: RejectRecord[]): Promise<void> {
    await this.db.transaction(async (q) => {
      await q.query(
        `INSERT INTO hookgate_logs (log, record)
         SELECT $1, e.value FROM json_array_elements($2::json) WITH ORDINALITY AS e(value, n) ORDER BY e.n`,
        [REJECTS_LOG, JSON.stringify(records)])
      if (++this.writes % TRIM_EVERY === 0) {
        await q.query(
          `DELETE FROM hookgate_logs WHERE log = $1 AND seq < (
             SELECT seq FROM hookgate_logs WHERE log = $1 ORDER BY seq DESC OFFSET $2 LIMIT 1)`,
          [REJECTS_LOG, this.keep - 1])
      }
    })
  }

  protected async closeSink(): Promise<void> {}
}
