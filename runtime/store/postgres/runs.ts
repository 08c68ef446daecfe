// The run log on PostgreSQL. As on the file store, a write resolves only once it is committed and
// memory changes only then; this runtime keeps in memory the rows of the runs it owns (every
// unfinished one and its recent finished ones), and reads them synchronously on the request path.
//
// Group commit, as the file journal does it: the writes that arrive while a commit is in flight
// wait, and go together in the next transaction, as one multi-row statement per kind:
// - new rows, with their Idempotency-Keys: the keys first, `ON CONFLICT … DO UPDATE … WHERE` the
//   old one has expired, so a key has one run across every runtime (a concurrent duplicate waits
//   on the unique key for the first one's commit, then loses: `duplicate_key`); then the rows,
//   `ON CONFLICT (id) DO NOTHING` (a task slot's derived id already taken: `duplicate_run`);
// - status changes, each naming the fence this runtime holds the run under: a runtime that lost
//   the run to another (it was paused past its lease) changes nothing (`fenced_out`).
// While the database cannot be reached, new runs are refused (`store_unavailable`, never an
// acknowledgement) and status changes wait and are tried again; `health` says why meanwhile.
import { isoNow } from '../../observe/clock.js'
import { DEFAULT_KEY_WINDOW_MS, buildRow, checkStatus, cleanExtra, movableRow, storeReceivedOnce, withoutReceived, withoutRequest, cleanNote, notPlainJson, withNote, withStatus, type StatusChange } from '../rows.js'
import {
  FINAL_STATUSES, RunStoreError,
  type NewRun, type ReceivedRequest, type RunChangeListener, type RunLog, type RunNotification, type RunRow, type RunStatus, type StoreHealth, type TransitionExtra,
} from '../store.js'
import { RunWatchers, afterWritesOf, trackWrite } from '../watchers.js'
import { isUnavailable, jsonLiteral, literal, textArrayLiteral, textLiteral, type Db, type Queryable, type QueryResult } from './db.js'
import { PgWriter, type Lane } from './group-commit.js'

export const DEFAULT_RETAIN_FINISHED = 10_000
/** How often a run waited for here and run by another runtime is looked for in the database. */
export const REMOTE_POLL_MS = 250

export interface PgRunLogOptions {
  /** this runtime's id: the owner of the runs it accepts */
  hostId: string
  /** how long an Idempotency-Key holds, default 24 h */
  keepKeysForMs?: number
  /** finished rows kept in memory, default 10,000 */
  retainFinished?: number
  /** the clock for timestamps (tests) */
  now?: () => Date
}

type Write =
  /** the rows of one create or createMany: written together or not at all */
  | { kind: 'insert'; rows: readonly RunRow[] }
  | { kind: 'update'; row: RunRow; fence: number }

export class PgRunLog implements RunLog {
  readonly compaction = null
  private readonly rows = new Map<string, RunRow>()
  /** the fence this runtime holds each of its runs under */
  private readonly fences = new Map<string, number>()
  /** per run, the last write in flight: writes for one run are applied one after another */
  private readonly inFlight = new Map<string, Promise<unknown>>()
  private readonly watchers = new RunWatchers()
  /** new runs are refused while the database is out of reach; status changes wait for it */
  private readonly lane: Lane<Write> = {
    statements: (batch) => this.statements(batch),
    outcome: (batch, results) => this.outcome(batch, results),
    retry: (w) => w.kind === 'update',
    inDoubt: (w) => { if (w.kind === 'insert') for (const row of w.rows) this.inDoubt.add(row.id) },
    before: () => this.releaseInDoubt(),
  }
  /**
   * New runs whose commit may have landed although the caller was told it did not (the database
   * went away between COMMIT and its answer). Such a row would hold its Idempotency-Key (a retry
   * is answered with its runId) and be owned by this live runtime, which does not run it: so at
   * the next commit each one that exists is given up (owner '') and the sweep resumes it, like a
   * dead runtime's run.
   */
  private readonly inDoubt = new Set<string>()
  private readonly writes: PgWriter
  /** wakes accepted here and released (release), with when: until their session's owner claims them */
  private readonly released = new Map<string, number>()
  /** runs waited for here that another runtime runs (whenFinished), and the timer that looks for them */
  private readonly elsewhere = new Set<string>()
  private pollElsewhere: NodeJS.Timeout | undefined
  private closing = false
  private finished = 0
  private readonly isoNow: () => string

  /** `writer`: the store's group commit, shared with its other writes (its own when not given) */
  constructor(private readonly db: Db, private readonly options: PgRunLogOptions, writer?: PgWriter) {
    this.writes = writer ?? new PgWriter(db)
    this.isoNow = options.now ? () => options.now!().toISOString() : isoNow
  }

  get hostId(): string {
    return this.options.hostId
  }

  create(input: NewRun): Promise<RunRow> {
    return this.createMany([input]).then((rows) => rows[0]!)
  }

  createMany(inputs: readonly NewRun[]): Promise<RunRow[]> {
    let rows: RunRow[]
    try {
      if (this.closing) throw new RunStoreError('store_closed', 'the run store is closed')
      // While the database cannot be reached nothing new is accepted: never an acknowledgement
      // that is not committed.
      const refusal = this.writes.refusal
      if (refusal) throw refusal
      const at = this.isoNow()
      const ids = new Set<string>()
      rows = storeReceivedOnce(inputs.map((input) => {
        const row = buildRow(input, at)
        if (this.rows.has(row.id) || this.inFlight.has(row.id) || ids.has(row.id)) throw new RunStoreError('duplicate_run', `a run with id ${row.id} already exists`)
        ids.add(row.id)
        return row
      }))
    } catch (err) {
      return Promise.reject(err)
    }
    const written = this.writes.add(this.lane, { kind: 'insert', rows })
    const done = written.then(() => {
      let finished = 0
      // as memory keeps them, without the received request (which a pending run must not hold)
      const kept = rows.map((row) => (row.received === undefined ? row : withoutReceived(row)))
      for (const row of kept) {
        // claimed (a wake, by the owner of its session: this runtime) before this answer came: the
        // claim's fence and row stand
        if (!this.fences.has(row.id)) {
          this.fences.set(row.id, 1)
          this.remember(row)
        }
        if (FINAL_STATUSES.has(row.status)) finished++
        this.watchers.changed(row)
      }
      this.countFinished(finished)
      return kept
    })
    for (const row of rows) this.track(row.id, done)
    return done
  }

  transition(id: string, status: RunStatus, extra: TransitionExtra = {}): Promise<RunRow> {
    if (this.closing) return Promise.reject(new RunStoreError('store_closed', 'the run store is closed'))
    const invalid = checkStatus(status)
    if (invalid) return Promise.reject(invalid)
    return this.serialise(id, async () => {
      const row = movableRow(id, this.rows.get(id), status)
      const change: StatusChange = { status, at: this.isoNow(), ...cleanExtra(extra) }
      if (extra.output !== undefined) {
        const problem = notPlainJson(extra.output, 0)
        if (problem) throw new RunStoreError('invalid_run', `the output of run ${id} cannot be stored as JSON: ${problem}`)
        change.output = extra.output
      }
      return this.commitChange(row, withStatus(row, change))
    })
  }

  async settle(ids: readonly string[], status: RunStatus, extra: { error?: string } = {}): Promise<void> {
    if (this.closing) throw new RunStoreError('store_closed', 'the run store is closed')
    if (!FINAL_STATUSES.has(status)) throw new RunStoreError('invalid_run', `settle takes a final status, not "${String(status)}"`)
    // One statement for all of them: each is one more row of the next commit's update. A run
    // that finished meanwhile is left alone, and so is one another runtime took over (it settles it).
    await Promise.all(ids.map((id) => this.transition(id, status, extra).catch((err) => {
      if (!(err instanceof RunStoreError && (err.code === 'illegal_transition' || err.code === 'unknown_run' || err.code === 'fenced_out'))) throw err
    })))
  }

  recordNotification(id: string, note: RunNotification): Promise<void> {
    if (this.closing) return Promise.reject(new RunStoreError('store_closed', 'the run store is closed'))
    return this.serialise(id, async () => {
      const row = this.rows.get(id)
      if (!row) return
      await this.commitChange(row, withNote(row, cleanNote(note)), false)
    })
  }

  /**
   * The row once it is final, whichever runtime runs it: a run this runtime does not hold (a wake
   * whose session another runtime owns, a run another took over) is looked for in the database
   * every REMOTE_POLL_MS while someone waits for it, so a wait has the same answer on every runtime.
   */
  whenFinished(id: string, timeoutMs: number): Promise<RunRow | null> {
    const row = this.rows.get(id)
    const wait = this.watchers.whenFinished(id, row, timeoutMs, this.closing)
    if (row === undefined && !this.inFlight.has(id) && timeoutMs > 0 && !this.closing) this.watchElsewhere(id)
    return wait
  }

  subscribe(listener: RunChangeListener): () => void {
    return this.watchers.subscribe(listener)
  }

  get(id: string): RunRow | undefined {
    return this.rows.get(id)
  }

  list(options: { limit?: number } = {}): RunRow[] {
    const all = [...this.rows.values()].reverse()
    return options.limit === undefined ? all : all.slice(0, options.limit)
  }

  children(parentRunId: string): RunRow[] {
    const out: RunRow[] = []
    for (const row of this.rows.values()) if (row.parentRunId === parentRunId) out.push(row)
    return out
  }

  unfinished(): RunRow[] {
    const out: RunRow[] = []
    for (const row of this.rows.values()) if (!FINAL_STATUSES.has(row.status)) out.push(row)
    return out
  }

  /** The database keeps a step's output in its row, whatever its size. */
  output(row: RunRow): unknown {
    return row.output
  }

  received(row: RunRow): Promise<ReceivedRequest | undefined> {
    return readReceived(this.db, row)
  }

  trim(): void {
    const retain = this.options.retainFinished ?? DEFAULT_RETAIN_FINISHED
    for (const [id, row] of this.rows) {
      if (this.finished <= retain) break
      if (FINAL_STATUSES.has(row.status) && !this.inFlight.has(id)) {
        this.rows.delete(id)
        this.fences.delete(id)
        this.finished--
      }
    }
  }

  /**
   * Runs this runtime has just claimed from another (a dead runtime's, or a session's wakes), under
   * the fence the claim gave them; `related` are rows that come with them only to be read (a taken
   * workflow's finished steps). A row already here is left as it is.
   */
  adopt(claimed: readonly { row: RunRow; fence: number }[], related: readonly RunRow[] = []): RunRow[] {
    const out: RunRow[] = []
    for (const { row, fence } of claimed) {
      this.fences.set(row.id, fence)
      if (!this.rows.has(row.id)) out.push(row)
      this.rows.set(row.id, row)
    }
    for (const row of related) {
      if (this.rows.has(row.id)) continue
      this.rows.set(row.id, row)
      if (FINAL_STATUSES.has(row.status)) this.countFinished(1)
    }
    return out
  }

  /** The queued wakes of `agentIds` this runtime holds (queued for a turn, or being settled). */
  queuedWakes(agentIds: readonly string[]): string[] {
    const out: string[] = []
    for (const row of this.rows.values()) {
      if (row.action === 'wake' && row.status === 'queued' && row.agentId !== undefined && agentIds.includes(row.agentId)) out.push(row.id)
    }
    return out
  }

  /**
   * Forgets a run this runtime accepted for another to run (a wake whose session another runtime
   * owns): that runtime claims it from the database, and nothing here writes it again.
   */
  release(id: string): void {
    const row = this.rows.get(id)
    // a run claimed here since it was accepted (its fence moved on) is this runtime's to run
    if (!row || this.inFlight.has(id) || (this.fences.get(id) ?? 1) > 1) return
    this.rows.delete(id)
    this.fences.delete(id)
    if (row.action === 'wake') this.released.set(id, Date.now())
    if (this.watchers.waitedFor(id)) this.watchElsewhere(id)
  }

  /**
   * Wakes this runtime accepted and released (it did not count itself their session's owner)
   * within the last `withinMs`, the older ones forgotten. The owner claims others' wakes; these
   * are still this runtime's in the table, and it may own their session after all (its own view
   * of its lease ran out early on a busy machine while the lease held): its pulls claim them too.
   */
  releasedWakes(withinMs: number): string[] {
    const since = Date.now() - withinMs
    for (const [id, at] of this.released) {
      if (at >= since) break
      this.released.delete(id)
    }
    return [...this.released.keys()]
  }

  /** Released wakes that were claimed (by this runtime or another): nothing left to look for. */
  forgetReleased(ids: readonly string[]): void {
    for (const id of ids) this.released.delete(id)
  }

  get health(): StoreHealth {
    return this.writes.health
  }

  /** Looks for run `id` in the database (with every other run waited for elsewhere) until it is final or nobody waits. */
  private watchElsewhere(id: string): void {
    this.elsewhere.add(id)
    this.pollElsewhere ??= setTimeout(() => void this.lookElsewhere(), REMOTE_POLL_MS).unref()
  }

  private async lookElsewhere(): Promise<void> {
    for (const id of this.elsewhere) if (!this.watchers.waitedFor(id) || this.rows.has(id)) this.elsewhere.delete(id)
    if (this.elsewhere.size > 0 && !this.closing) {
      try {
        const r = await this.db.query<{ row: RunRow }>(`SELECT row FROM hookgate_runs WHERE id = ANY($1::text[]) AND status NOT IN ('queued', 'running')`, [[...this.elsewhere]])
        for (const { row } of r.rows) {
          this.elsewhere.delete(row.id)
          this.watchers.finishedElsewhere(row)
        }
      } catch { /* the database is away: the next look */ }
    }
    this.pollElsewhere = this.elsewhere.size > 0 && !this.closing ? setTimeout(() => void this.lookElsewhere(), REMOTE_POLL_MS).unref() : undefined
  }

  async close(): Promise<void> {
    this.closing = true
    if (this.pollElsewhere) clearTimeout(this.pollElsewhere)
    await this.writes.close()
    this.watchers.close()
  }

  // ---- writing ----------------------------------------------------------------------------------

  /** A status change (or a note) of a run this runtime owns, committed under its fence. */
  private async commitChange(row: RunRow, next: RunRow, statusChanged = true): Promise<RunRow> {
    const fence = this.fences.get(row.id) ?? 1
    try {
      await this.writes.add(this.lane, { kind: 'update', row: next, fence })
    } catch (err) {
      // Another runtime took the run over (this one was paused or cut off past its lease): it is
      // that runtime's now, and nothing here may write it again.
      if (err instanceof RunStoreError && err.code === 'fenced_out' && this.fences.get(row.id) === fence) {
        this.rows.delete(row.id)
        this.fences.delete(row.id)
        if (this.watchers.waitedFor(row.id)) this.watchElsewhere(row.id)
      }
      // An acknowledged run is never stranded: a status change the database refused (not one it
      // could not be asked: those wait for it) ends the run failed instead, saying why, and the
      // caller still hears that its change was not made.
      if (statusChanged && err instanceof RunStoreError && err.code === 'store_refused') await this.failInstead(row, next.status, fence, err)
      throw err
    }
    this.applied(row.id, next, statusChanged)
    return next
  }

  /**
   * Ends `row` failed because the database refused its change to `wanted`: the row as it was, with
   * the status and a reason that can be stored; should even that be refused (the row itself is
   * what it refuses), the row's bare identity with them.
   */
  private async failInstead(row: RunRow, wanted: RunStatus, fence: number, cause: Error): Promise<void> {
    const change: StatusChange = { status: 'failed', at: this.isoNow(), ...cleanExtra({ error: `could not record the run's change to ${wanted}: ${cause.message}` }) }
    const { definitionKind, definitionId, correlationId, action, createdAt, agentId, parentRunId, stepId, scheduledFor } = row
    const bare: RunRow = { id: row.id, definitionKind, definitionId, correlationId, action, status: row.status, createdAt, updatedAt: row.updatedAt }
    for (const [key, value] of Object.entries({ agentId, parentRunId, stepId, scheduledFor })) if (value !== undefined) (bare as unknown as Record<string, unknown>)[key] = value
    for (const base of [row, bare]) {
      const failed = withStatus(base, change)
      try {
        await this.writes.add(this.lane, { kind: 'update', row: failed, fence })
      } catch (err) {
        if (err instanceof RunStoreError && err.code === 'store_refused') continue
        return
      }
      this.applied(row.id, failed, true)
      return
    }
  }

  /** Memory after a committed change: the row as it now is, and who hears of it. */
  private applied(id: string, next: RunRow, statusChanged: boolean): void {
    // A finished run is never run again: its request stays in the database, not in memory.
    const kept = FINAL_STATUSES.has(next.status) ? withoutRequest(next) : next
    this.rows.set(id, kept)
    if (statusChanged) {
      if (FINAL_STATUSES.has(next.status)) this.countFinished(1)
      this.watchers.changed(next)
    }
  }

  private releaseInDoubt(): { sql: string; then(): void } | undefined {
    if (this.inDoubt.size === 0) return undefined
    const ids = [...this.inDoubt]
    return {
      sql: `UPDATE hookgate_runs SET owner = '' WHERE id = ANY(${textArrayLiteral(ids)}) AND owner = ${literal(this.options.hostId)} AND fence = 1`,
      then: () => { for (const id of ids) this.inDoubt.delete(id) },
    }
  }

  /**
   * A batch's statements: new rows with their keys in one (the keys first, `ON CONFLICT … DO UPDATE
   * … WHERE` the old one expired; a row only where its key was won or it has none; the ids of the
   * keys won and of the rows written come back), and the status changes in another, each naming
   * its fence. The values are a VALUES list of literals: the json columns are never parsed by a
   * json function here (jsonb_to_recordset refused a \u0000 in any row, failing the whole batch).
   */
  private statements(batch: readonly Write[]): string[] {
    const out: string[] = []
    const inserts: Array<Extract<Write, { kind: 'insert' }>> = []
    const updates: Array<{ row: RunRow; fence: number }> = []
    for (const w of batch) {
      if (w.kind === 'insert') inserts.push(w)
      else updates.push(w)
    }
    if (inserts.length > 0) {
      const host = this.options.hostId
      const keyed = inserts.some((w) => keyOf(w) !== undefined)
      // keyed: each row names its create's key (`grp`), so that the rows of a fan-out whose key
      // another request holds are not written either (one row carries the key and the answer)
      const values = inserts.flatMap((w) => {
        const grp = keyOf(w)?.key
        return w.rows.map((row) => {
          const key = row.idempotency && row.response ? row.idempotency : undefined
          return `(${rowValues(row, host, 1)}${keyed ? `, ${textLiteral(key?.key)}, ${textLiteral(key?.fingerprint)}, ${jsonLiteral(key ? row.response : null)}, ${textLiteral(grp)}` : ''})`
        })
      }).join(',\n')
      if (!keyed) {
        // No Idempotency-Key in the batch (the common case): the plain insert, without the CTEs, which
        // cost the database about 0.2 ms more per batch to plan and run.
        out.push(`INSERT INTO hookgate_runs (${RUN_COLUMNS})
         VALUES ${values}
         ON CONFLICT (id) DO NOTHING
         RETURNING 'row' AS kind, id`)
        return this.updateStatement(updates, out)
      }
      const cutoff = new Date(Date.now() - (this.options.keepKeysForMs ?? DEFAULT_KEY_WINDOW_MS)).toISOString()
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
    return this.updateStatement(updates, out)
  }

  /** `out` with the statement for the status changes, each naming its fence, when there are any. */
  private updateStatement(updates: ReadonlyArray<{ row: RunRow; fence: number }>, out: string[]): string[] {
    if (updates.length > 0) {
      const values = updates.map((w) => {
        const { request: _request, received: _received, ...rest } = w.row
        return `(${literal(w.row.id)}::text, ${literal(w.row.status)}::text, ${literal(w.row.updatedAt)}::timestamptz, ${w.fence}::bigint, ${jsonLiteral(rest)})`
      }).join(',\n')
      out.push(`UPDATE hookgate_runs AS r SET status = t.status, updated_at = t.updated_at, row = t.row
       FROM (VALUES ${values}) AS t(id, status, updated_at, fence, row)
       WHERE r.id = t.id AND r.owner = ${literal(this.options.hostId)} AND r.fence = t.fence
       RETURNING r.id`)
    }
    return out
  }

  /**
   * Which writes were refused: a key another (unexpired) run holds, with that run's fingerprint
   * and answer (a replay, or a 409 for another body); a run id taken; a fence lost.
   */
  private async outcome(batch: readonly Write[], results: readonly QueryResult<Record<string, unknown>>[]): Promise<Map<Write, Error>> {
    const out = new Map<Write, Error>()
    const hasInserts = batch.some((w) => w.kind === 'insert')
    const keysWon = new Set<string>()
    const written = new Set<string>()
    if (hasInserts) {
      for (const r of results[0]!.rows as Array<{ kind: string; id: string }>) (r.kind === 'key' ? keysWon : written).add(r.id)
    }
    const changed = new Set((results[hasInserts ? 1 : 0]?.rows ?? []).map((r) => r.id as string))
    const lost: Array<{ w: Write; key: string; runId: string }> = []
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
        held = await this.db.query('SELECT key, fingerprint, response FROM hookgate_idempotency WHERE key = ANY($1::text[])', [lost.map((l) => l.key)])
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

  // ---- memory -------------------------------------------------------------------------------------

  /** A row as memory keeps it: without the received request, which a pending run must not hold. */
  private remember(row: RunRow): void {
    this.rows.set(row.id, row.received === undefined ? row : withoutReceived(row))
  }

  private countFinished(n: number): void {
    this.finished += n
    if (this.finished >= (this.options.retainFinished ?? DEFAULT_RETAIN_FINISHED) + 256) this.trim()
  }

  private track(id: string, p: Promise<unknown>): void {
    trackWrite(this.inFlight, id, p)
  }

  private serialise<T>(id: string, work: () => Promise<T>): Promise<T> {
    return afterWritesOf(this.inFlight, id, work)
  }
}

/**
 * A run's received request. A fan-out's runs share one, kept in the `received` column of one of
 * them: the first run's (the others name it in their row's `receivedIn`), or, once a prune deleted
 * that run, of a run of the same request it handed the request to (retention.ts). So the request
 * is the one a run of the same request (created in the same commit, so at the same created_at)
 * holds.
 */
export async function readReceived(q: Queryable, row: RunRow): Promise<ReceivedRequest | undefined> {
  if (row.received !== undefined) return row.received
  const r = await q.query<{ received: ReceivedRequest }>(
    `SELECT received FROM hookgate_runs
     WHERE created_at = $1::timestamptz AND (id = $2 OR received_in = $2) AND received IS NOT NULL
     LIMIT 1`, [row.createdAt, row.receivedIn ?? row.id])
  return r.rows[0]?.received ?? undefined
}

/** The Idempotency-Key a create was made with (its row that keeps the answer), if any. */
function keyOf(w: Extract<Write, { kind: 'insert' }>): { key: string; fingerprint: string } | undefined {
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
