// The Db interface on node-postgres (`pg`), imported only when a postgres:// store is configured.
// Chosen over `postgres` 3.4.9 by stopping the server with `-m immediate` under load: `pg` rejects
// every query in flight with a catchable error and reconnects by itself; `postgres` threw an
// uncatchable TypeError (reading 'write') and left queries that never settled (upstream
// porsager/postgres #1154, #1066, #1208). See the README's dependency section.
//
// `pg` emits 'error' on a client whose connection drops while it is checked out between queries:
// with no listener that is an uncaught exception, so every client carries one while it is out, and
// a client that failed is destroyed rather than put back.
import type { Pool, PoolClient, QueryResult as PgResult } from 'pg'
import type { Db, Queryable, QueryResult } from './db.js'

export interface PoolOptions {
  /** at most this many connections, default 10 */
  max?: number
  /** how long to wait for a connection (ms), default 5,000 */
  connectTimeoutMs?: number
  /** told once per idle connection the server dropped (not an error of any request) */
  warn?: (message: string) => void
}

/** A pool on `url` (postgres://user:password@host:port/db, or ?host=/socket/dir for a unix socket). */
export async function openPool(url: string, options: PoolOptions = {}): Promise<Db> {
  const { default: pg } = await import('pg')
  const pool: Pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
    idleTimeoutMillis: 30_000,
    // the server's own keepalive: a half-open connection (a database host that vanished) is found
    keepAlive: true,
  })
  // An idle connection the server closed (a restart, a crash): the pool drops it and opens a new
  // one when one is next needed.
  pool.on('error', (err) => options.warn?.(`an idle database connection was closed: ${err.message}`))
  // and every connection hears of its own end, whenever it comes: one that drops while checked out
  // (between two queries of a transaction) would otherwise be an uncaught exception; the query
  // that was running, if any, is rejected as well, and that is what the caller sees
  pool.on('connect', (client) => { client.on('error', () => {}) })
  const result = <T>(r: PgResult): QueryResult<T> => ({ rows: r.rows as T[], rowCount: r.rowCount ?? 0 })
  return {
    async query<T>(text: string, params?: readonly unknown[]): Promise<QueryResult<T>> {
      return result<T>(await pool.query(text, params as unknown[] | undefined))
    },
    async transaction<T>(fn: (q: Queryable) => Promise<T>, opts: { rollback?: boolean } = {}): Promise<T> {
      const client: PoolClient = await pool.connect()
      let broken: Error | undefined
      const onError = (err: Error): void => { broken = err }
      client.on('error', onError)
      const q: Queryable = { query: async <R>(text: string, params?: readonly unknown[]) => result<R>(await client.query(text, params as unknown[] | undefined)) }
      try {
        await client.query('BEGIN')
        const value = await fn(q)
        await client.query(opts.rollback ? 'ROLLBACK' : 'COMMIT')
        return value
      } catch (err) {
        broken ??= err as Error
        try { await client.query('ROLLBACK') } catch { /* the connection is gone: nothing was committed */ }
        throw err
      } finally {
        client.off('error', onError)
        // a failed connection is destroyed, not handed to the next caller
        client.release(broken !== undefined && isConnectionError(broken) ? broken : undefined)
      }
    },
    async script(text: string): Promise<QueryResult<Record<string, unknown>>[]> {
      // no parameters: the simple protocol, which takes several statements and runs them as one transaction
      const r = await pool.query(text) as unknown as PgResult | PgResult[]
      return (Array.isArray(r) ? r : [r]).map((x) => result<Record<string, unknown>>(x))
    },
    close: () => pool.end(),
  }
}

function isConnectionError(err: Error): boolean {
  const code = (err as { code?: string }).code ?? ''
  return !/^[0-9A-Z]{5}$/.test(code) || code.startsWith('08') || code.startsWith('57P')
}
