// Agents' main sessions across runtimes: one owner per session, by lease. Each runtime competes for
// the sessions of the agents it serves with one statement every second, which renews the leases it
// holds and takes those that expired; a lease taken from another runtime gets a new fence. The
// owner alone runs the session's turns: it reads the session's log when it gains it, pulls what
// other runtimes queued (events from the inbox, wakes from the run table) every POLL_MS, and
// commits each turn's record only while its lease and fence still hold (a runtime paused past its
// lease finds its turn refused, `fenced_out`, and forgets the session).
//
// No session-level advisory lock and no LISTEN: both break behind pgbouncer in transaction mode.
// Polling bounds the delay of an event queued on another runtime to about POLL_MS.
import { RunStoreError, sessionLogName, type SessionHandler, type SessionOwnership, type StoreHealth } from '../store.js'
import { isUnavailable, jsonLiteral, literal, type Db } from './db.js'
import { recordKeys } from './logs.js'
import { PgWriter, type Lane } from './group-commit.js'
import type { PgRunLog } from './runs.js'
import { claimReleased, claimWakes } from './takeover.js'

/** How often an owner pulls what other runtimes queued for its sessions. */
export const SESSION_POLL_MS = 500
const RETRY_MAX_MS = 2000

interface Inboxed { log: string; id: string; record: object; now: boolean }


export class PgSessions implements SessionOwnership {
  private agents: readonly string[] = []
  private handler: SessionHandler<object> | undefined
  /** the sessions this runtime owns: agent → fence, and until when the lease holds by this clock */
  private readonly owned = new Map<string, { fence: number; until: number }>()
  /**
   * Sessions just gained: their next pull takes this runtime's own queued wakes as well. A wake
   * accepted here while the gain was under way (after its claim, before the session counted as
   * owned) was left in the table for the owner, and the owner is now this runtime.
   */
  private readonly fresh = new Set<string>()
  private readonly inbox: PgWriter
  /** the routes as last read or set here, as JSON (to tell the handler of changes only) */
  private readonly routes = new Map<string, string>()
  private readonly routeLane: Lane<{ agent_id: string; route: object; at: string }> = {
    statements: (batch) => [`INSERT INTO hookgate_routes AS r (agent_id, route, at)
       SELECT DISTINCT ON (agent_id) agent_id, route, at FROM (VALUES ${batch.map((w) => `(${literal(w.agent_id)}::text, ${jsonLiteral(w.route)}, ${literal(w.at)}::timestamptz)`).join(',\n')}) AS t(agent_id, route, at)
       ORDER BY agent_id, at DESC
       ON CONFLICT (agent_id) DO UPDATE SET route = excluded.route, at = excluded.at WHERE r.at <= excluded.at`],
    outcome: () => new Map(),
    retry: () => true,
  }
  private readonly inboxLane: Lane<Inboxed> = {
    statements: (batch) => [`INSERT INTO hookgate_session_inbox (log, id, record, now)
       VALUES ${batch.map((w) => `(${literal(w.log)}, ${literal(w.id)}, ${jsonLiteral(w.record)}, ${w.now})`).join(',\n')}
       ON CONFLICT (log, id) DO NOTHING`],
    outcome: () => new Map(),
    retry: () => true,
  }
  private leaseTimer: NodeJS.Timeout | undefined
  private pullTimer: NodeJS.Timeout | undefined
  private busy: Promise<void> = Promise.resolve()
  private readonly competeStep = (): Promise<void> => this.compete()
  private readonly pullStep = (): Promise<void> => this.pull()
  private closed = false
  private warned = false

  /** `writer`: the store's group commit, which the inbox's inserts share */
  constructor(private readonly db: Db, private readonly hostId: string, private readonly runs: PgRunLog, private readonly options: { ttlMs: number; pollMs?: number; warn?: (message: string) => void }, writer?: PgWriter) {
    this.inbox = writer ?? new PgWriter(db)
  }

  /**
   * Starts renewing the leases (a third of one apart, at most a second) and pulling what others
   * queued for the sessions owned here: the store's `sessionOwnership` duty.
   */
  start(): void {
    if (this.closed || this.leaseTimer) return
    this.leaseTimer = setInterval(() => this.tick(this.competeStep), Math.min(1000, Math.max(50, Math.floor(this.options.ttlMs / 3))))
    this.pullTimer = setInterval(() => { if (this.owned.size > 0) this.tick(this.pullStep) }, this.options.pollMs ?? SESSION_POLL_MS)
    this.leaseTimer.unref()
    this.pullTimer.unref()
  }

  /** No more renewals or pulls (the leases held run out unless close hands them over); resolves once the step under way ends. */
  async stop(): Promise<void> {
    clearInterval(this.leaseTimer)
    clearInterval(this.pullTimer)
    this.leaseTimer = undefined
    this.pullTimer = undefined
    await this.busy
  }

  serve(agentIds: readonly string[], handler: SessionHandler<object>): void {
    this.agents = [...agentIds]
    this.handler = handler
    // sessions of agents no longer served are let go at the next renewal (not renewed)
    for (const agentId of [...this.owned.keys()]) if (!agentIds.includes(agentId)) this.owned.delete(agentId)
    this.tick(this.competeStep)
  }

  /** The agents this runtime competes for (serve). */
  get served(): readonly string[] {
    return this.agents
  }

  owns(agentId: string): boolean {
    const lease = this.owned.get(agentId)
    return lease !== undefined && lease.until > Date.now()
  }

  async queue(agentId: string, record: object & { id: string }, now: boolean): Promise<void> {
    if (this.closed) throw new RunStoreError('store_closed', 'the session store is closed')
    await this.inbox.add(this.inboxLane, { log: sessionLogName(agentId), id: record.id, record, now })
    // an event that asks for a turn now, and the owner here: no need to wait for the next poll
    if (now && this.owned.has(agentId)) this.tick(this.pullStep)
  }

  async commitTurn(agentId: string, record: object): Promise<void> {
    const lease = this.owned.get(agentId)
    if (!lease) throw fencedOut(agentId)
    const log = sessionLogName(agentId)
    let delay = 50
    for (;;) {
      try {
        // FOR SHARE: a runtime taking the lease over waits for this commit, and then reads it.
        const keys = recordKeys(log, record)
        const r = await this.db.query(
          `INSERT INTO hookgate_logs (log, record, kind, ref, refs)
           SELECT $1, $2::json, $6, $7, $8::text[]
           WHERE EXISTS (SELECT 1 FROM hookgate_session_leases WHERE agent_id = $3 AND owner = $4 AND fence = $5 AND expires_at > now() FOR SHARE)`,
          [log, JSON.stringify(record), agentId, this.hostId, lease.fence, keys.kind, keys.ref, keys.refs])
        if (r.rowCount === 1) return
        if (this.owned.get(agentId) === lease) this.lose(agentId)
        throw fencedOut(agentId)
      } catch (err) {
        if (!isUnavailable(err) || this.closed) throw err
        await new Promise((r) => setTimeout(r, delay))
        delay = Math.min(delay * 2, RETRY_MAX_MS)
      }
    }
  }

  async setRoute(agentId: string, route: { channel: string; to: string | null }): Promise<void> {
    const at = new Date().toISOString()
    this.routes.set(agentId, JSON.stringify(route))
    await this.inbox.add(this.routeLane, { agent_id: agentId, route, at })
  }

  get health(): StoreHealth {
    return this.inbox.health
  }

  async close(): Promise<void> {
    this.closed = true
    await this.stop()
    await this.inbox.close()
    // A runtime that stops cleanly hands its sessions over at once instead of after the lease: the
    // lease ends now (kept, not deleted: when it ended tells the others how long nobody has served
    // the agent, and its fence goes on from where it was).
    if (this.owned.size > 0) {
      await this.db.query('UPDATE hookgate_session_leases SET expires_at = now() WHERE owner = $1', [this.hostId]).catch(() => {})
      this.owned.clear()
    }
  }

  // ---- the background work, one step at a time ----------------------------------------------------

  /** steps queued and not begun: a slow database gets one of each, not a pile */
  private readonly queued = new Set<() => Promise<void>>()

  private tick(step: () => Promise<void>): void {
    if (this.closed || this.queued.has(step)) return
    this.queued.add(step)
    this.busy = this.busy.then(() => { this.queued.delete(step); return step() }).then(() => { this.warned = false }, (err: Error) => {
      if (this.warned || this.closed) return
      this.warned = true
      this.options.warn?.(`could not renew or pull the agents' sessions: ${err.message}`)
    })
  }

  /** Renews the leases held and takes the free ones; tells the handler what changed. */
  private async compete(): Promise<void> {
    if (this.agents.length === 0 || !this.handler) return
    const started = Date.now()
    // the leases, and (in the same statement) every served agent's last delivery route
    const r = await this.db.query<{ kind: string; agent_id: string; value: string }>(
      `WITH leased AS (
         INSERT INTO hookgate_session_leases AS l (agent_id, owner, fence, expires_at)
         SELECT a, $1, 1, now() + $3 * interval '1 millisecond' FROM unnest($2::text[]) AS a
         ON CONFLICT (agent_id) DO UPDATE
           SET owner = $1, fence = CASE WHEN l.owner = $1 THEN l.fence ELSE l.fence + 1 END, expires_at = excluded.expires_at
           WHERE l.owner = $1 OR l.expires_at < now()
         RETURNING agent_id, fence::text AS value)
       SELECT 'lease' AS kind, agent_id, value FROM leased
       UNION ALL
       SELECT 'route', agent_id, route::text FROM hookgate_routes WHERE agent_id = ANY($2::text[])`, [this.hostId, this.agents, this.options.ttlMs])
    for (const x of r.rows) {
      if (x.kind !== 'route' || this.routes.get(x.agent_id) === x.value) continue
      this.routes.set(x.agent_id, x.value)
      this.handler?.routed(x.agent_id, JSON.parse(x.value) as { channel: string; to: string | null })
    }
    // a margin for the clocks: this runtime stops taking the session as its own a little early
    const until = started + this.options.ttlMs - Math.min(1000, this.options.ttlMs / 5)
    const held = new Map(r.rows.filter((x) => x.kind === 'lease').map((x) => [x.agent_id, Number(x.value)]))
    for (const [agentId, lease] of [...this.owned]) {
      if (held.get(agentId) !== lease.fence) this.lose(agentId)
    }
    for (const [agentId, fence] of held) {
      const lease = this.owned.get(agentId)
      if (lease) { lease.until = until; continue }
      await this.gain(agentId, fence, until)
    }
  }

  /** Reads the session as it stands, takes its queued wakes, and hands both to the handler. */
  private async gain(agentId: string, fence: number, until: number): Promise<void> {
    const log = sessionLogName(agentId)
    const { records, wakes } = await this.db.transaction(async (q) => {
      await moveInbox(q, [log])
      const read = await q.query<{ record: object }>('SELECT record FROM hookgate_logs WHERE log = $1 ORDER BY seq', [log])
      return { records: read.rows.map((x) => x.record), wakes: await claimWakes(q, this.hostId, [agentId], true) }
    })
    this.owned.set(agentId, { fence, until })
    this.fresh.add(agentId)
    this.runs.adopt(wakes)
    this.handler?.gained(agentId, records, wakes.map((w) => w.row))
    this.tick(this.pullStep)
  }

  /** What other runtimes queued for the sessions owned here: inbox events, then wakes. */
  private async pull(): Promise<void> {
    const agents = [...this.owned.keys()].filter((a) => this.owns(a))
    if (agents.length === 0) return
    const logs = new Map(agents.map((a) => [sessionLogName(a), a]))
    const fresh = agents.filter((a) => this.fresh.has(a))
    // and the wakes this runtime released (it did not count itself the owner when it accepted them)
    const released = this.runs.releasedWakes(this.options.ttlMs * 2)
    const { moved, wakes, gone } = await this.db.transaction(async (q) => ({
      moved: await moveInbox(q, [...logs.keys()]),
      wakes: [
        ...await claimWakes(q, this.hostId, agents.filter((a) => !this.fresh.has(a))),
        ...await claimWakes(q, this.hostId, fresh, true, this.runs.queuedWakes(fresh)),
        ...await claimReleased(q, this.hostId, agents.filter((a) => !this.fresh.has(a)), released),
      ],
      // released wakes another runtime claimed since, or that were read: none to look for again
      gone: released.length === 0 ? [] : (await q.query<{ id: string }>(
        "SELECT id FROM unnest($1::text[]) AS r(id) WHERE NOT EXISTS (SELECT 1 FROM hookgate_runs w WHERE w.id = r.id AND w.owner = $2 AND w.status = 'queued')", [released, this.hostId])).rows.map((r) => r.id),
    }))
    for (const a of fresh) this.fresh.delete(a)
    this.runs.forgetReleased([...gone, ...wakes.map((w) => w.row.id)])
    if (moved.length === 0 && wakes.length === 0) return
    this.runs.adopt(wakes)
    for (const agentId of agents) {
      if (!this.owned.has(agentId)) continue
      const records = moved.filter((m) => logs.get(m.log) === agentId)
      const rows = wakes.filter((w) => w.row.agentId === agentId).map((w) => w.row)
      if (records.length === 0 && rows.length === 0) continue
      const now = records.some((m) => m.now) || rows.some((w) => (w.request as { now?: boolean } | undefined)?.now === true)
      this.handler?.pulled(agentId, records.map((m) => m.record), rows, now)
    }
  }

  private lose(agentId: string): void {
    this.owned.delete(agentId)
    this.fresh.delete(agentId)
    this.handler?.lost(agentId)
  }
}

/** Moves the inbox's events of `logs` into those logs, oldest first; returns them. */
async function moveInbox(q: { query: Db['query'] }, logs: readonly string[]): Promise<Inboxed[]> {
  const r = await q.query<Inboxed>(
    `WITH moved AS (DELETE FROM hookgate_session_inbox WHERE log = ANY($1::text[]) RETURNING log, id, record, now, queued_at),
     logged AS (INSERT INTO hookgate_logs (log, record, kind, ref) SELECT log, record, 'event', id FROM moved ORDER BY queued_at)
     SELECT log, id, record, now FROM moved ORDER BY queued_at`, [logs])
  return r.rows
}

function fencedOut(agentId: string): RunStoreError {
  return new RunStoreError('fenced_out', `the main session of agent ${agentId} is no longer this runtime's: another took it over`)
}
