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

/**
 * Errors that mean the database cannot take writes now (as opposed to a statement it refused, which
 * group commit narrows down to the writes it refuses): writes wait for it, or are refused at once.
 */
export function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined
  const code = e?.code ?? ''
  // connection-level: refused, reset, gone; 57P01–57P03 admin shutdown / crash / cannot connect now;
  // 08xxx connection exceptions; 53xxx insufficient resources (a full disk, out of memory, too many
  // connections): no write of a batch is at fault, and each alone would be refused the same way
  return ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOENT', 'ETIMEDOUT', 'EHOSTUNREACH'].includes(code)
    || code.startsWith('08') || code.startsWith('53') || code === '57P01' || code === '57P02' || code === '57P03'
    || /Connection terminated|connection ended|not queryable|Client has encountered a connection error/i.test(e?.message ?? '')
}

/** A NUL, or a surrogate without its other half (code units: no `u` flag): what a text column cannot hold. */
export const NOT_TEXT = /\0|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g

/** `text` with what a text column cannot hold replaced by U+FFFD (for messages, never for data). */
export function storableText(text: string): string {
  return text.replace(NOT_TEXT, '\ufffd')
}

/**
 * `text` as a dollar-quoted SQL literal, with a tag that does not occur in it: no escaping to get
 * wrong, whatever the text holds (quotes, backslashes, dollars). A NUL cannot be in a query's text
 * (nor in a text column): it is refused here, failing only the write that holds it (group-commit.ts).
 */
export function literal(text: string): string {
  if (text.includes('\0')) throw new Error('a value with a NUL character cannot be written to a text column')
  let tag = 'hg'
  while (text.includes(`$${tag}$`)) tag = `hg${Math.random().toString(36).slice(2, 10)}`
  return `$${tag}$${text}$${tag}$`
}

/**
 * A value as a json literal (JSON.stringify, dollar-quoted, cast), for the columns that hold what
 * a request, a model or a transform made. They are json, not jsonb: jsonb refuses \u0000 and an
 * unpaired surrogate escape, which JSON allows (and the file store keeps), where json keeps the text
 * as given and checks only its syntax, so a value comes back exactly as it went in. JSON.stringify
 * writes a NUL or a lone surrogate as an escape, so the text holds neither. No query looks inside
 * these columns (every json function de-escapes, and fails on \u0000): what one selects by is in
 * a column of its own.
 */
export function jsonLiteral(value: unknown): string {
  return value === undefined || value === null ? 'NULL::json' : `${literal(JSON.stringify(value))}::json`
}

/** `value` as a text literal, or NULL. */
export function textLiteral(value: string | null | undefined): string {
  return value === undefined || value === null ? 'NULL::text' : `${literal(value)}::text`
}

/** A list of texts as a text[] literal. */
export function textArrayLiteral(values: readonly string[]): string {
  return values.length === 0 ? "'{}'::text[]" : `ARRAY[${values.map((v) => literal(v)).join(',')}]::text[]`
}
