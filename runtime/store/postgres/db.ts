// The little the PostgreSQL store needs of a client: a query, a transaction on one connection, and
// a pool that reconnects by itself. Kept behind this interface so that the client (loaded only
// when a postgres:// store is configured) is one module's business.

export interface QueryResult<T> { rows: T[]; rowCount: number }

export interface Queryable {
  query<T = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<QueryResult<T>>
}

export interface Db extends Queryable {
  /**
   * Runs several statements, their values written into the text (see `literal`), in one round
   * trip: PostgreSQL runs a multi-statement simple query as one transaction. One result per statement.
   */
  script(text: string): Promise<QueryResult<Record<string, unknown>>[]>
  /**
   * Runs `fn` in one transaction on one connection: COMMIT when it resolves, ROLLBACK when it
   * throws (or always, with `rollback`, for a dry run). Resolves once the commit is durable.
   */
  transaction<T>(fn: (q: Queryable) => Promise<T>, options?: { rollback?: boolean }): Promise<T>
  close(): Promise<void>
}

/** Errors that mean the database cannot be reached now (as opposed to a statement it refused). */
export function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined
  const code = e?.code ?? ''
  // connection-level: refused, reset, gone; 57P01–57P03 admin shutdown / crash / cannot connect now;
  // 08xxx connection exceptions
  return ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOENT', 'ETIMEDOUT', 'EHOSTUNREACH'].includes(code)
    || code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03'
    || /Connection terminated|connection ended|not queryable|Client has encountered a connection error/i.test(e?.message ?? '')
}

/**
 * `text` as a dollar-quoted SQL literal, with a tag that does not occur in it: no escaping to get
 * wrong, whatever the text holds (quotes, backslashes, dollars).
 */
export function literal(text: string): string {
  let tag = 'hg'
  while (text.includes(`$${tag}$`)) tag = `hg${Math.random().toString(36).slice(2, 10)}`
  return `$${tag}$${text}$${tag}$`
}

/** A value as a jsonb literal (JSON.stringify, dollar-quoted, cast). */
export function jsonLiteral(value: unknown): string {
  return `${literal(JSON.stringify(value))}::jsonb`
}
