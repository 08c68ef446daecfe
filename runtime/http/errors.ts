// The one error type and the one JSON writer of every HTTP surface: the runtime, the operator page's
// API (admin/server.ts) and the Gmail helper's receiver (gmail/run.ts). A refusal is an HttpError
// with a status, a code from the registry (error-codes.ts) and a sentence; `sendError` writes it as
// {"ok":false,"error":"<sentence>","code":"<snake_case>"} (plus the fields a surface adds, such as
// the page's findings), `errorBody` gives the same text for an answer written straight to a socket.
import type { ServerResponse } from 'node:http'
import type { ErrorCode } from './error-codes.js'

export type { ErrorCode } from './error-codes.js'

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({})

export class HttpError extends Error {
  readonly status: number
  readonly code: ErrorCode
  readonly headers: Readonly<Record<string, string>>
  /** answered beside ok, error and code (the operator page's findings, a file hash); never a secret */
  readonly fields: Readonly<Record<string, unknown>> | undefined

  constructor(status: number, code: ErrorCode, message: string, headers: Readonly<Record<string, string>> = NO_HEADERS, fields?: Readonly<Record<string, unknown>>) {
    // A refusal is an answer, not a fault: no stack trace is captured for it (under a 401/429
    // flood that capture was the largest single cost of a refusal).
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(message)
    Error.stackTraceLimit = limit
    this.status = status
    this.code = code
    this.headers = headers
    this.fields = fields
  }
}

/**
 * A JSON answer. `base` are a surface's own headers on every answer (the page's security headers),
 * `headers` this answer's (Retry-After, Allow); content type, length and no-store are always set.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Readonly<Record<string, string>>, base?: Readonly<Record<string, string>>): void {
  const text = JSON.stringify(body)
  const all: Record<string, string | number> = { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' }
  if (base) for (const k in base) all[k] = base[k]!
  if (headers) for (const k in headers) all[k] = headers[k]!
  res.writeHead(status, all)
  res.end(text)
}

/** The error body as JSON text. */
export function errorBody(err: HttpError): string {
  return JSON.stringify(errorObject(err))
}

/** Writes the refusal: its status, its headers (and a surface's own, `base`), the one error body. */
export function sendError(res: ServerResponse, err: HttpError, base?: Readonly<Record<string, string>>): void {
  sendJson(res, err.status, errorObject(err), err.headers, base)
}

function errorObject(err: HttpError): Record<string, unknown> {
  return err.fields === undefined ? { ok: false, error: err.message, code: err.code } : { ok: false, error: err.message, code: err.code, ...err.fields }
}
