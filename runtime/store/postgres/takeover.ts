// Taking runs over from another runtime. Each run has an owner (the runtime that runs it) and a
// fence, bumped by every claim, so that the runtime that lost a run can no longer write it (its
// updates name the old fence and change nothing). Two kinds of claim:
// - a dead runtime's unfinished runs (its row in hookgate_hosts expired, or it stopped and removed
//   it), claimed by whichever live runtime sweeps first, a workflow with its steps, `FOR UPDATE SKIP
//   LOCKED` so that runtimes sweeping at once split the work instead of waiting on each other;
// - the queued wakes of an agent whose main session this runtime owns, accepted by any runtime
//   (see sessions.ts);
// - the queued wakes of an agent no live runtime serves (no runtime has held its session for a
//   grace), which no session owner will ever read: the runtime that claims them ends them failed.
// A wake is a wake run (rows.ts isWakeRun), never a workflow's wake step: that row is its workflow's,
// claimed with it like any other step. A session owner that claimed it as a wake (gaining the
// session while the step's row was queued, before its runner moved it to running) fenced the runner
// out of its own step, and the workflow, answered 202, never went on.
import type { RunRow } from '../store.js'
import type { Queryable } from './db.js'

/** The rows that are wake runs (rows.ts isWakeRun), in SQL: not a workflow's wake step. */
const WAKE_RUN = "action = 'wake' AND parent_run_id IS NULL"

export interface Claimed { row: RunRow; fence: number }

interface DbRun { id: string; fence: string; row: Omit<RunRow, 'request' | 'received'>; request: unknown }

/** The row as the runtime holds it: the stored row with its request beside it. */
export function runFromDb(r: { row: Omit<RunRow, 'request' | 'received'>; request: unknown }): RunRow {
  return r.request === null || r.request === undefined ? r.row as RunRow : { ...r.row, request: r.request } as RunRow
}

/**
 * Claims up to `limit` unfinished runs (not wake runs: the session's owner takes those) whose owner is
 * no live runtime, each workflow with its unfinished steps; returns them under their new fence,
 * the claimed workflows' finished steps, and the transcript records of the claimed runs.
 */
export async function claimOrphans(q: Queryable, hostId: string, limit: number): Promise<{ claimed: Claimed[]; related: RunRow[]; isolated: object[] }> {
  // The claim names the owner and fence each root was selected with: a root another runtime claimed
  // between this statement's snapshot and its lock has a new fence by then, and is left alone.
  // (The re-check PostgreSQL makes of a row updated meanwhile does not re-run the NOT EXISTS
  // above it, so without this both runtimes claimed the same rows, one after the other.) A
  // workflow's steps are claimed with their root, only when the root was.
  const r = await q.query<DbRun>(
    `WITH roots AS (
       SELECT id, owner, fence FROM hookgate_runs r
       WHERE status IN ('queued', 'running') AND NOT (${WAKE_RUN}) AND owner <> $1
         AND NOT EXISTS (SELECT 1 FROM hookgate_hosts h WHERE h.id = r.owner AND h.expires_at > now())
         AND (parent_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM hookgate_runs p WHERE p.id = r.parent_run_id AND p.status IN ('queued', 'running')))
       ORDER BY created_at
       LIMIT $2
       FOR UPDATE SKIP LOCKED),
     claimed AS (
       UPDATE hookgate_runs AS r SET owner = $1, fence = r.fence + 1
       FROM roots WHERE r.id = roots.id AND r.owner = roots.owner AND r.fence = roots.fence
       RETURNING r.id, r.fence, r.row, r.request, roots.owner AS was),
     steps AS (
       UPDATE hookgate_runs AS r SET owner = $1, fence = r.fence + 1
       FROM claimed WHERE r.parent_run_id = claimed.id AND r.owner = claimed.was AND r.status IN ('queued', 'running')
       RETURNING r.id, r.fence, r.row, r.request)
     SELECT id, fence::text AS fence, row, request FROM claimed
     UNION ALL
     SELECT id, fence::text AS fence, row, request FROM steps`, [hostId, limit])
  if (r.rows.length === 0) return { claimed: [], related: [], isolated: [] }
  const claimed = r.rows.map((x) => ({ row: runFromDb(x), fence: Number(x.fence) }))
  const ids = claimed.map((c) => c.row.id)
  const workflows = claimed.filter((c) => c.row.action === 'workflow').map((c) => c.row.id)
  const related = workflows.length === 0 ? [] : (await q.query<DbRun>(
    `SELECT id, fence::text AS fence, row, request FROM hookgate_runs
     WHERE parent_run_id = ANY($1::text[]) AND status NOT IN ('queued', 'running')`, [workflows])).rows.map(runFromDb)
  const isolated = (await q.query<{ record: object }>(
    "SELECT record FROM hookgate_logs WHERE log = 'isolated' AND ref = ANY($1::text[]) ORDER BY seq", [ids])).rows.map((x) => x.record)
  return { claimed, related, isolated }
}

/**
 * Claims the queued wakes of `agentIds` that another runtime holds, oldest first; with `own`, this
 * runtime's as well (when it has just gained a session, wakes it accepted while another owned it),
 * but not those in `except` (the ones it holds already).
 */
export async function claimWakes(q: Queryable, hostId: string, agentIds: readonly string[], own = false, except: readonly string[] = []): Promise<Claimed[]> {
  if (agentIds.length === 0) return []
  const r = await q.query<DbRun>(
    `UPDATE hookgate_runs AS r SET owner = $1, fence = r.fence + 1
     WHERE ${WAKE_RUN} AND r.status = 'queued' AND r.agent_id = ANY($2::text[]) AND ($3 OR r.owner <> $1) AND NOT (r.id = ANY($4::text[]))
     RETURNING r.id, r.fence::text AS fence, r.row, r.request`, [hostId, agentIds, own, except])
  return r.rows
    .sort((a, b) => (a.row.createdAt < b.row.createdAt ? -1 : a.row.createdAt > b.row.createdAt ? 1 : 0))
    .map((x) => ({ row: runFromDb(x), fence: Number(x.fence) }))
}

/**
 * Claims the wakes of `ids` (this runtime's, released when it accepted them) that are still queued
 * and this runtime's, of `agentIds` (whose sessions it owns now).
 */
export async function claimReleased(q: Queryable, hostId: string, agentIds: readonly string[], ids: readonly string[]): Promise<Claimed[]> {
  if (agentIds.length === 0 || ids.length === 0) return []
  const r = await q.query<DbRun>(
    `UPDATE hookgate_runs AS r SET fence = r.fence + 1
     WHERE r.id = ANY($3::text[]) AND ${WAKE_RUN} AND r.status = 'queued' AND r.owner = $1 AND r.agent_id = ANY($2::text[])
     RETURNING r.id, r.fence::text AS fence, r.row, r.request`, [hostId, agentIds, ids])
  return r.rows
    .sort((a, b) => (a.row.createdAt < b.row.createdAt ? -1 : a.row.createdAt > b.row.createdAt ? 1 : 0))
    .map((x) => ({ row: runFromDb(x), fence: Number(x.fence) }))
}

/**
 * Claims up to `limit` queued wakes that no runtime will read: their agent's session has had no
 * live owner for `graceMs` (its lease ran out, or was let go, that long ago, or it never had one),
 * they are older than that, and their agent is not one this runtime serves (it is about to own
 * that session, and reads them then). The claim names the owner and fence each was selected with,
 * as claimOrphans does.
 */
export async function claimStrandedWakes(q: Queryable, hostId: string, served: readonly string[], graceMs: number, limit: number): Promise<Claimed[]> {
  const r = await q.query<DbRun>(
    `WITH stranded AS (
       SELECT id, owner, fence FROM hookgate_runs w
       WHERE ${WAKE_RUN} AND status = 'queued' AND created_at < now() - $3 * interval '1 millisecond'
         AND NOT (coalesce(agent_id, '') = ANY($2::text[]))
         AND NOT EXISTS (SELECT 1 FROM hookgate_session_leases l WHERE l.agent_id = w.agent_id AND l.expires_at > now() - $3 * interval '1 millisecond')
       ORDER BY created_at
       LIMIT $4
       FOR UPDATE SKIP LOCKED)
     UPDATE hookgate_runs AS r SET owner = $1, fence = r.fence + 1
     FROM stranded WHERE r.id = stranded.id AND r.owner = stranded.owner AND r.fence = stranded.fence
     RETURNING r.id, r.fence::text AS fence, r.row, r.request`, [hostId, served, graceMs, limit])
  return r.rows.map((x) => ({ row: runFromDb(x), fence: Number(x.fence) }))
}
