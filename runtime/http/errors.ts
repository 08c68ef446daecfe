// The one error shape every refusal takes: {"ok":false,"error":"<sentence>","code":"<snake_case>"}.
import type { ServerResponse } from 'node:http'

export class HttpError extends Error {
  readonly status: number
  readonly code: string
  readonly headers: Record<string, string>

  constructor(status: number, code: string, message: string, headers: Record<string, string> = {}) {
    // A refusal is an answer, not a fault: no stack trace is captured for it (under a 401/429
    // flood that capture was the largest single cost of a refusal).
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(message)
    Error.stackTraceLimit = limit
    this.status = status
    this.code = code
    this.headers = headers
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  const text = JSON.stringify(body)
  const all: Record<string, string | number> = { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' }
  if (headers) for (const k in headers) all[k] = headers[k]!
  res.writeHead(status, all)
  res.end(text)
}

export function sendError(res: ServerResponse, err: HttpError): void {
  sendJson(res, err.status, { ok: false, error: err.message, code: err.code }, err.headers)
}
