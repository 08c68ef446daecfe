// The PostgreSQL run log's writes as SQL: a batch of new rows (with their Idempotency-Keys) and of
// status changes, each change naming the fence its runtime holds the run under, as the statements
// of one group commit, and which writes the database refused once they ran (a key another run
// holds, a run id taken, a fence lost). The values are written into the text as literals (db.ts).
import { RunStoreError, type RunRow } from '../store.js'
import { isUnavailable, jsonLiteral, literal, textLiteral, type Queryable, type QueryResult } from './db.js'

export type RunWrite =
  /** the rows of one create or createMany: written together or not at all */
  | { kind: 'insert'; rows: readonly RunRow[] }
  | { kind: 'update'; row: RunRow; fence: number }

/**
 * A batch's statements: new rows with their keys in one (the keys first, `ON CONFLICT … DO UPDATE
 * … WHERE` the old one expired; a row only where its key was won or it has none; the ids of the
 * keys won and of the rows written come back), and the status changes in another, each naming
 * its fence. The values are a VALUES list of literals: the json columns are never parsed by a
 * json function here (jsonb_to_recordset refused a \u0000 in any row, failing the whole batch).
 */
export function runStatements(batch: readonly RunWrite[], hostId: string, keepKeysForMs: number): string[] {
  const out: string[] = []
  const inserts: Array<Extract<RunWrite, { kind: 'insert' }>> = []
  const updates: Array<{ row: RunRow; fence: number }> = []
  for (const w of batch) {
    if (w.kind === 'insert') inserts.push(w)
    else updates.push(w)
  }
  if (inserts.length > 0) {
        const keyed = inserts.some((w) => keyOf(w) !== undefined)
    // keyed: each row names its create's key (`grp`), so that the rows of a fan-out whose key
    // another request holds are not written either (one row carries the key and the answer)
    const values = inserts.flatMap((w) => {
      const grp = keyOf(w)?.key
      return w.rows.map((row) => {
        const key = row.idempotency && row.response ? row.idempotency : undefined
        return `(${rowValues(row, hostId, 1)}${keyed ? `, ${textLiteral(key?.key)}, ${textLiteral(key?.fingerprint)}, ${jsonLiteral(key ? row.response : null)}, ${textLiteral(grp)}` : ''})`
      })
    }).join(',\n')
    if (!keyed) {
      // No Idempotency-Key in the batch (the common case): the plain insert, without the CTEs, which
      // cost the database about 0.2 ms more per batch to plan and run.
      out.push(`INSERT INTO hookgate_runs (${RUN_COLUMNS})
       VALUES ${values}
       ON CONFLICT (id) DO NOTHING
       RETURNING 'row' AS kind, id`)
      return updateStatement(updates, out, hostId)
    }
    const cutoff = new Date(Date.now() - (keepKeysForMs)).toISOString()
    out.push(`WITH t (${RUN_COLUMNS}, key, fingerprint, response, grp) AS (VALUES ${values}),
     k AS (
       INSERT INTO hookgate_idempotency (key, fingerprint, run_id, response, created_at)
       SELECT key, fingerprint, id, response, created_at FROM t WHERE key IS NOT NULL
       ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, run_id = excluded.run_id, response = excluded.response, created_at = excluded.created_at
       WHERE hookgate_idempotency.created_at < ${literal(cutoff)}::timestamptz
       RETURNING key, run_id),
     i AS (
       INSERT INTO hookgate_runs (${RUN_COLUMNS})
       SELECT ${RUN_COLUMNS}
       FROM t WHERE grp IS NULL OR grp IN (SELECT key FROM k)
       ON CONFLICT (id) DO NOTHING
       RETURNING id)
     SELECT 'key' AS kind, run_id AS id FROM k UNION ALL SELECT 'row', id FROM i`)
  }
  return updateStatement(updates, out, hostId)
}

/** `out` with the statement for the status changes, each naming its fence, when there are any. */
function updateStatement(updates: ReadonlyArray<{ row: RunRow; fence: number }>, out: string[], hostId: string): string[] {
  if (updates.length > 0) {
    const values = updates.map((w) => {
      const { request: _request, received: _received, ...rest } = w.row
      return `(${literal(w.row.id)}::text, ${literal(w.row.status)}::text, ${literal(w.row.updatedAt)}::timestamptz, ${w.fence}::bigint, ${jsonLiteral(rest)})`
    }).join(',\n')
    out.push(`UPDATE hookgate_runs AS r SET status = t.status, updated_at = t.updated_at, row = t.row
     FROM (VALUES ${values}) AS t(id, status, updated_at, fence, row)
     WHERE r.id = t.id AND r.owner = ${literal(hostId)} AND r.fence = t.fence
     RETURNING r.id`)
  }
  return out
}

/**
 * Which writes were refused: a key another (unexpired) run holds, with that run's fingerprint
 * and answer (a replay, or a 409 for another body); a run id taken; a fence lost.
 */
export async function runOutcome(db: Queryable, batch: readonly RunWrite[], results: readonly QueryResult<Record<string, unknown>>[]): Promise<Map<RunWrite, Error>> {
  const out = new Map<RunWrite, Error>()
  const hasInserts = batch.some((w) => w.kind === 'insert')
  const keysWon = new Set<string>()
  const written = new Set<string>()
  if (hasInserts) {
    for (const r of results[0]!.rows as Array<{ kind: string; id: string }>) (r.kind === 'key' ? keysWon : written).add(r.id)
  }
  const changed = new Set((results[hasInserts ? 1 : 0]?.rows ?? []).map((r) => r.id as string))
  const lost: Array<{ w: RunWrite; key: string; runId: string }> = []
  for (const w of batch) {
    if (w.kind === 'update') {
      if (!changed.has(w.row.id)) out.set(w, new RunStoreError('fenced_out', `run ${w.row.id} is no longer this runtime's: another took it over`))
      continue
    }
    const holder = w.rows.find((row) => row.idempotency && row.response)
    const taken = w.rows.find((row) => !written.has(row.id))
    if (holder && !keysWon.has(holder.id)) lost.push({ w, key: holder.idempotency!.key, runId: holder.id })
    else if (taken) out.set(w, new RunStoreError('duplicate_run', `a run with id ${taken.id} already exists`))
  }
  if (lost.length > 0) {
    // the holders are committed (a concurrent one was waited for): read after this batch's commit.
    // The batch is committed by now: a failure of this read is the lost writes' alone, never a
    // reason to write the batch again.
    let held: QueryResult<{ key: string; fingerprint: string; response: { status: number; body: Record<string, unknown> } }>
    try {
      held = await db.query('SELECT key, fingerprint, response FROM hookgate_idempotency WHERE key = ANY($1::text[])', [lost.map((l) => l.key)])
    } catch (err) {
      const failure = isUnavailable(err) ? new RunStoreError('store_unavailable', `the store cannot write right now: cannot reach the database: ${(err as Error).message}`) : err as Error
      for (const l of lost) out.set(l.w, failure)
      return out
    }
    const byKey = new Map(held.rows.map((r) => [r.key, { fingerprint: r.fingerprint, response: r.response }]))
    for (const l of lost) out.set(l.w, new RunStoreError('duplicate_key', `the Idempotency-Key of run ${l.runId} already started another run`, byKey.get(l.key) ?? { fingerprint: '', response: { status: 409, body: {} } }))
  }
  return out
}

/** The Idempotency-Key a create was made with (its row that keeps the answer), if any. */
function keyOf(w: Extract<RunWrite, { kind: 'insert' }>): { key: string; fingerprint: string } | undefined {
  for (const row of w.rows) if (row.idempotency && row.response) return row.idempotency
  return undefined
}

/** The columns a run's row is written to, in the order rowValues gives them. */
const RUN_COLUMNS = 'id, status, action, definition_kind, definition_id, correlation_id, agent_id, parent_run_id, created_at, updated_at, owner, fence, scheduled_for, received_in, row, request, received'

/**
 * A row as the table holds it, as literals in RUN_COLUMNS' order: the columns queries use, the row
 * without what a listing never reads, and that beside it.
 */
function rowValues(row: RunRow, owner: string, fence: number): string {
  const { request, received, ...rest } = row
  return `${literal(row.id)}::text, ${literal(row.status)}::text, ${literal(row.action)}::text, ${literal(row.definitionKind)}::text, ${literal(row.definitionId)}::text, `
    + `${literal(row.correlationId)}::text, ${textLiteral(row.agentId)}, ${textLiteral(row.parentRunId)}, ${literal(row.createdAt)}::timestamptz, ${literal(row.updatedAt)}::timestamptz, `
    + `${literal(owner)}::text, ${fence}::bigint, ${textLiteral(row.scheduledFor)}, ${textLiteral(row.receivedIn)}, ${jsonLiteral(rest)}, ${jsonLiteral(request)}, ${jsonLiteral(received)}`
}
