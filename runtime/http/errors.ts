// The one error shape every refusal takes: {"ok":false,"error":"<sentence>","code":"<snake_case>"}.
import type { ServerResponse } from 'node:http'

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
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
