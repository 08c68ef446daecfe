// One isolated turn per session key at a time across the runtimes on one database (each runtime
// orders its own turns of a key in memory, KeyedLock in the engine). Before a turn, its runtime
// takes the key's lease, a write of the store's group commit (it shares the commit of the moment's
// other writes), won when no other runtime holds the key or its lease has run out. Otherwise the
// turn waits, asking again after 25 ms, doubling to 500 ms, and marks its runtime the key's waiter:
// the holder then hands the key over instead of taking it again for its own next turn, so runtimes
// take turns on a busy key. Held leases are renewed every ttl / 3; a runtime that dies gives its
// keys up within ttl (server.store.hostTtlSeconds), as its runs are taken over.
//
// No advisory lock: behind pgbouncer in transaction mode a session-level lock would not hold, and a
// transaction-scoped one would hold a connection for a whole model call.
import { createHash } from 'node:crypto'
import { RunStoreError, type SessionKeyLocks } from '../store.js'
import { literal, type Db, type QueryResult } from './db.js'
import type { Lane, PgWriter } from './group-commit.js'

const WAIT_FIRST_MS = 25
const WAIT_MAX_MS = 500

interface Write { kind: 'take' | 'free'; key: string; runId: string }

/** A take that found the key held by another runtime (or promised to its waiter). */
class Held extends Error {}

export class PgKeyLeases implements SessionKeyLocks {
  /** the keys held here (hash → run), renewed until let go */
  private readonly held = new Map<string, string>()
  private readonly lane: Lane<Write> = {
    statements: (batch) => this.statements(batch),
    outcome: (batch, results) => this.outcome(batch, results),
    // a take or a release waits out an outage: the turn waits for the database in any case
    retry: () => true,
  }
  private readonly renewal: NodeJS.Timeout
  private renewalWarned = false
  private closed = false

  constructor(private readonly db: Db, private readonly hostId: string, private readonly ttlMs: number, private readonly writer: PgWriter, private readonly warn?: (message: string) => void) {
    this.renewal = setInterval(() => void this.renew(), Math.max(100, Math.floor(ttlMs / 3)))
    this.renewal.unref()
  }

  async hold<T>(sessionKey: string, runId: string, task: () => Promise<T>): Promise<T> {
    const key = keyOf(sessionKey)
    await this.take(key, runId)
    try {
      return await task()
    } finally {
      this.held.delete(key)
      // not waited for: a release that does not land (an outage, a close) ends with the lease
      if (!this.closed) void this.writer.add(this.lane, { kind: 'free', key, runId }).catch(() => {})
    }
  }

  /** Stops renewing; the leases held are let go at once, not left to run out. */
  async close(): Promise<void> {
    this.closed = true
    clearInterval(this.renewal)
    this.held.clear()
    await this.db.query('DELETE FROM hookgate_key_leases WHERE owner = $1', [this.hostId]).catch(() => {})
  }

  private async take(key: string, runId: string): Promise<void> {
    let delay = WAIT_FIRST_MS
    for (;;) {
      if (this.closed) throw new RunStoreError('store_closed', 'the store is closed')
      try {
        await this.writer.add(this.lane, { kind: 'take', key, runId })
        this.held.set(key, runId)
        return
      } catch (err) {
        if (!(err instanceof Held)) throw err
      }
      await new Promise((r) => setTimeout(r, delay))
      delay = Math.min(delay * 2, WAIT_MAX_MS)
    }
  }

  private async renew(): Promise<void> {
    if (this.held.size === 0 || this.closed) return
    try {
      await this.db.query(`UPDATE hookgate_key_leases SET expires_at = now() + $3 * interval '1 millisecond' WHERE owner = $1 AND key = ANY($2::text[]) AND expires_at > now()`,
        [this.hostId, [...this.held.keys()], this.ttlMs])
      this.renewalWarned = false
    } catch (err) {
      if (!this.renewalWarned && !this.closed) this.warn?.(`could not renew the session keys' leases: ${(err as Error).message}`)
      this.renewalWarned = true
    }
  }

  /**
   * Releases first (a key let go and taken again in one batch is taken), then takes: a take wins a
   * key nobody holds, one whose lease ran out or was let go, or one this runtime holds already (a
   * release that did not land), unless another runtime is its waiter; a take that loses marks its
   * runtime the waiter, unless another one is.
   */
  private statements(batch: readonly Write[]): string[] {
    const me = literal(this.hostId)
    const ttl = `now() + ${Math.floor(this.ttlMs)} * interval '1 millisecond'`
    const out: string[] = []
    const frees = batch.filter((w) => w.kind === 'free')
    if (frees.length > 0) {
      const values = frees.map((w) => `(${literal(w.key)}, ${literal(w.runId)})`).join(', ')
      const mine = `l.key = f.key AND l.run_id = f.run_id AND l.owner = ${me}`
      const waited = `l.waiter IS NOT NULL AND l.waiter <> ${me} AND l.waiter_until > now()`
      // a key another runtime waits for stays, let go, for it to take
      out.push(`UPDATE hookgate_key_leases AS l SET expires_at = '-infinity' FROM (VALUES ${values}) AS f(key, run_id) WHERE ${mine} AND ${waited}`)
      out.push(`DELETE FROM hookgate_key_leases AS l USING (VALUES ${values}) AS f(key, run_id) WHERE ${mine} AND NOT (${waited})`)
    }
    const takes = uniqueTakes(batch)
    if (takes.length > 0) {
      const values = takes.map((w) => `(${literal(w.key)}, ${literal(w.runId)})`).join(', ')
      out.push(`INSERT INTO hookgate_key_leases AS l (key, owner, run_id, expires_at)
        SELECT key, ${me}, run_id, ${ttl} FROM (VALUES ${values}) AS t(key, run_id)
        ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, run_id = excluded.run_id, expires_at = excluded.expires_at, waiter = NULL, waiter_until = NULL
        WHERE (l.expires_at < now() OR l.owner = excluded.owner) AND (l.waiter IS NULL OR l.waiter = excluded.owner OR l.waiter_until < now())
        RETURNING key`)
      out.push(`UPDATE hookgate_key_leases AS l SET waiter = ${me}, waiter_until = ${ttl}
        FROM (VALUES ${values}) AS t(key, run_id)
        WHERE l.key = t.key AND l.owner <> ${me} AND (l.waiter IS NULL OR l.waiter = ${me} OR l.waiter_until < now())`)
    }
    return out
  }

  private outcome(batch: readonly Write[], results: readonly QueryResult<Record<string, unknown>>[]): Map<Write, Error> {
    const out = new Map<Write, Error>()
    const takes = batch.filter((w) => w.kind === 'take')
    if (takes.length === 0) return out
    const won = new Set((results[batch.some((w) => w.kind === 'free') ? 2 : 0]?.rows ?? []).map((r) => r.key as string))
    const first = new Set(uniqueTakes(batch))
    for (const w of takes) if (!won.has(w.key) || !first.has(w)) out.set(w, new Held(`session key held elsewhere`))
    return out
  }
}

/** The takes of a batch, one per key (the first): ON CONFLICT cannot write one row twice in a statement. */
function uniqueTakes(batch: readonly Write[]): Write[] {
  const seen = new Set<string>()
  const out: Write[] = []
  for (const w of batch) {
    if (w.kind !== 'take' || seen.has(w.key)) continue
    seen.add(w.key)
    out.push(w)
  }
  return out
}

/** A session key as the lease table holds it: a hash (a key may be long, or hold a NUL). */
function keyOf(sessionKey: string): string {
  return createHash('sha256').update(sessionKey).digest('base64url')
}
