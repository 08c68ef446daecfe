// What the PostgreSQL store keeps, as the file store's compaction keeps it: the newest `keepRuns`
// runs (server.history.keepRuns; unfinished runs always; a request shared by a fan-out's runs as
// long as one of them is kept), the transcripts of those runs, each
// Idempotency-Key for its window, and of each agent's main session the newest SESSION_KEEP_TURNS
// turns with what came after them, plus every event no turn read and the last route (what a runtime
// that gains the session reads), and session-key leases until an hour past their end. Any runtime
// may prune, in batches, now and then; runtimes pruning at once skip each other's rows.
import type { Queryable } from './db.js'

/** Rows deleted per statement: a prune never holds many locks or a long transaction. */
const BATCH = 1000

/** Turns of a main session kept (older turns, and the events they read, are history only). */
export const SESSION_KEEP_TURNS = 1000

export interface Pruned { runs: number; keys: number; sessionRecords: number }

/** One batch of each: returns what was deleted (a full batch means there may be more). */
export async function pruneOnce(q: Queryable, keepRuns: number, keepKeysForMs: number, sessionKeepTurns = SESSION_KEEP_TURNS): Promise<Pruned> {
  const runs = await q.query<{ id: string }>(
    `WITH cutoff AS (
       SELECT created_at, id FROM hookgate_runs WHERE status NOT IN ('queued', 'running')
       ORDER BY created_at DESC, id DESC OFFSET $1 LIMIT 1),
     doomed AS (
       SELECT r.id FROM hookgate_runs r, cutoff c
       WHERE (r.created_at, r.id) <= (c.created_at, c.id) AND r.status NOT IN ('queued', 'running')
       ORDER BY r.created_at
       LIMIT $2
       FOR UPDATE OF r SKIP LOCKED),
     -- A request is stored once for all the runs it started (readReceived in runs.ts): a doomed
     -- run that holds it hands it to a run of the same request that stays, the one with the
     -- lowest id, so that run still replays. The runs name the first holder still: that is how a
     -- reader finds the request, wherever it is now.
     heirs AS (
       SELECT DISTINCT ON (d.id) k.id AS heir, d.received
       FROM hookgate_runs d
       JOIN hookgate_runs k ON k.created_at = d.created_at
         AND (k.id = COALESCE(d.received_in, d.id) OR k.received_in = COALESCE(d.received_in, d.id))
       WHERE d.id IN (SELECT id FROM doomed) AND d.received IS NOT NULL AND k.id NOT IN (SELECT id FROM doomed)
       ORDER BY d.id, k.id),
     handed AS (
       UPDATE hookgate_runs AS k SET received = h.received FROM heirs h WHERE k.id = h.heir RETURNING k.id)
     DELETE FROM hookgate_runs WHERE id IN (SELECT id FROM doomed) RETURNING id`, [keepRuns, BATCH])
  const ids = runs.rows.map((r) => r.id)
  if (ids.length > 0) {
    await q.query("DELETE FROM hookgate_logs WHERE log = 'isolated' AND ref = ANY($1::text[])", [ids])
  }
  const keys = await q.query(
    `DELETE FROM hookgate_idempotency WHERE key IN (
       SELECT key FROM hookgate_idempotency WHERE created_at < now() - $1 * interval '1 millisecond' LIMIT $2 FOR UPDATE SKIP LOCKED)`, [keepKeysForMs, BATCH])
  // By the columns written beside each record (kind, ref, refs): the records are json, which no
  // query looks into (see db.ts).
  const sessions = await q.query(
    `WITH turns AS (
       SELECT log, seq, row_number() OVER (PARTITION BY log ORDER BY seq DESC) AS n
       FROM hookgate_logs WHERE log LIKE '%/main' AND kind = 'turn'),
     cut AS (SELECT log, seq FROM turns WHERE n = $1),
     read AS (
       SELECT DISTINCT l.log, e.id FROM hookgate_logs l JOIN cut c ON c.log = l.log
       CROSS JOIN LATERAL unnest(l.refs) AS e(id)
       WHERE l.kind = 'turn'),
     last_route AS (
       SELECT DISTINCT ON (l.log) l.log, l.seq FROM hookgate_logs l JOIN cut c ON c.log = l.log
       WHERE l.kind = 'route' ORDER BY l.log, l.seq DESC),
     doomed AS (
       SELECT l.log, l.seq FROM hookgate_logs l JOIN cut c ON c.log = l.log
       WHERE l.seq < c.seq
         AND (l.kind <> 'event' OR EXISTS (SELECT 1 FROM read r WHERE r.log = l.log AND r.id = l.ref))
         AND NOT EXISTS (SELECT 1 FROM last_route lr WHERE lr.log = l.log AND lr.seq = l.seq)
       LIMIT $2)
     DELETE FROM hookgate_logs l USING doomed d WHERE l.log = d.log AND l.seq = d.seq`, [sessionKeepTurns, BATCH * 5])
  // a session key's lease whose runtime died and that nobody took since (a key used once)
  await q.query(`DELETE FROM hookgate_key_leases WHERE key IN (
    SELECT key FROM hookgate_key_leases WHERE expires_at < now() - interval '1 hour' AND (waiter_until IS NULL OR waiter_until < now()) LIMIT $1 FOR UPDATE SKIP LOCKED)`, [BATCH])
  return { runs: ids.length, keys: keys.rowCount, sessionRecords: sessions.rowCount }
}
