// What the PostgreSQL store keeps, as the file store's compaction keeps it: the newest `keepRuns`
// runs (server.history.keepRuns; unfinished runs always), the transcripts of those runs, and each
// Idempotency-Key for its window. Any runtime may prune, in batches, now and then; runtimes pruning
// at once skip each other's rows.
import type { Queryable } from './db.js'

/** Rows deleted per statement: a prune never holds many locks or a long transaction. */
const BATCH = 1000

export interface Pruned { runs: number; keys: number }

/** One batch of each: returns what was deleted (a full batch means there may be more). */
export async function pruneOnce(q: Queryable, keepRuns: number, keepKeysForMs: number): Promise<Pruned> {
  const runs = await q.query<{ id: string }>(
    `WITH cutoff AS (
       SELECT created_at, id FROM hookgate_runs WHERE status NOT IN ('queued', 'running')
       ORDER BY created_at DESC, id DESC OFFSET $1 LIMIT 1),
     doomed AS (
       SELECT r.id FROM hookgate_runs r, cutoff c
       WHERE (r.created_at, r.id) <= (c.created_at, c.id) AND r.status NOT IN ('queued', 'running')
       ORDER BY r.created_at
       LIMIT $2
       FOR UPDATE OF r SKIP LOCKED)
     DELETE FROM hookgate_runs WHERE id IN (SELECT id FROM doomed) RETURNING id`, [keepRuns, BATCH])
  const ids = runs.rows.map((r) => r.id)
  if (ids.length > 0) {
    await q.query("DELETE FROM hookgate_logs WHERE log = 'isolated' AND record->>'runId' = ANY($1::text[])", [ids])
  }
  const keys = await q.query(
    `DELETE FROM hookgate_idempotency WHERE key IN (
       SELECT key FROM hookgate_idempotency WHERE created_at < now() - $1 * interval '1 millisecond' LIMIT $2 FOR UPDATE SKIP LOCKED)`, [keepKeysForMs, BATCH])
  return { runs: ids.length, keys: keys.rowCount }
}
