// Record logs on PostgreSQL (an agent's main session, the isolated transcripts): one table, rows
// keyed by the log's name and a sequence, in append order. Appends are group-committed; while the
// database is out of reach they wait for it (a turn's record is not dropped because it restarted).
import type { RecordLog, StoreHealth } from '../store.js'
import { RunStoreError } from '../store.js'
import { jsonLiteral, literal, storableText, textArrayLiteral, textLiteral, type Db, type Queryable } from './db.js'
import { PgWriter, type Lane } from './group-commit.js'

export class PgRecordLog<R extends object> implements RecordLog<R> {
  private readonly writes: PgWriter
  /** every append waits out an outage: a turn's record is not dropped because the database restarted */
  private readonly lane: Lane<readonly R[]> = {
    statements: (batch) => [insertStatement(this.name, batch.flat() as object[])],
    outcome: () => new Map(),
    retry: () => true,
  }
  private closed = false

  /** `writer`: the store's group commit, shared with its other writes (its own when not given) */
  constructor(db: Db, readonly name: string, writer?: PgWriter) {
    this.writes = writer ?? new PgWriter(db)
  }

  /** The log's records, oldest first. */
  static async read<R>(db: Queryable, name: string): Promise<R[]> {
    const r = await db.query<{ record: R }>('SELECT record FROM hookgate_logs WHERE log = $1 ORDER BY seq', [name])
    return r.rows.map((x) => x.record)
  }

  append(...records: R[]): Promise<void> {
    if (this.closed) return Promise.reject(new RunStoreError('store_closed', `the log ${this.name} is closed`))
    if (records.length === 0) return Promise.resolve()
    return this.writes.add(this.lane, records)
  }

  get health(): StoreHealth {
    return this.writes.health
  }

  async close(): Promise<void> {
    this.closed = true
    await this.writes.close()
  }
}

/** The statement appending `records` to `name` in their order (its values in the text, for a batch). */
function insertStatement(name: string, records: readonly object[]): string {
  const values = records.map((record, n) => {
    const keys = recordKeys(name, record)
    return `(${n}, ${jsonLiteral(record)}, ${textLiteral(keys.kind)}, ${textLiteral(keys.ref)}, ${keys.refs ? textArrayLiteral(keys.refs) : 'NULL::text[]'})`
  })
  return `INSERT INTO hookgate_logs (log, record, kind, ref, refs)
     SELECT ${literal(name)}, record, kind, ref, refs FROM (VALUES ${values.join(',\n')}) AS v(n, record, kind, ref, refs) ORDER BY n`
}

/**
 * What queries select a record by, written beside it (nothing reads inside the json record, see
 * db.ts): its type; its reference (an isolated record's run, which takeover and pruning look for,
 * or a session record's id); a turn's events (pruning keeps the events no turn read). The runtime
 * makes these ids; a value that could not be a text column (a NUL, a lone surrogate) is left out.
 */
export function recordKeys(log: string, record: object): { kind: string | null; ref: string | null; refs: string[] | null } {
  const r = record as { type?: unknown; runId?: unknown; id?: unknown; events?: unknown }
  const kind = plainText(r.type)
  return {
    kind,
    ref: plainText(log === 'isolated' ? r.runId : r.id),
    refs: kind === 'turn' && Array.isArray(r.events) ? r.events.map(plainText).filter((x): x is string => x !== null) : null,
  }
}

function plainText(v: unknown): string | null {
  return typeof v === 'string' && storableText(v) === v ? v : null
}
