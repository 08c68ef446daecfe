// The listening socket: node:http with the timeouts the body timeout needs, bound before anything
// in the state is opened; what Node would answer by itself without our JSON body (a request that
// is not HTTP, headers too large or too slow, an Expect other than 100-continue, CONNECT) answered
// with it and noted as a refusal; and the stop: no new connections, idle ones closed, the rest
// closed when the grace runs out.
import { createServer, type Server } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { BundleConfig } from '../bundle/format.js'
import { resolveClientAddress, type AddressMatcher } from '../http/auth.js'
import { HttpError, sendError } from '../http/errors.js'
import type { RefusalRecorder } from '../store/store.js'

export function createListener(config: BundleConfig): Server {
  return createServer({
    // Node's own timers answer without our JSON body, so they sit behind the body timeout.
    requestTimeout: config.server.bodyTimeoutMs + 5000,
    headersTimeout: Math.min(config.server.bodyTimeoutMs + 2000, 60_000),
    keepAliveTimeout: 5000,
    // Node checks the two timeouts above only this often (30 s by default): a client dripping its
    // headers would hold its connection far past headersTimeout.
    connectionsCheckingInterval: 1000,
  })
}

export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((ok, fail) => {
    server.once('error', fail)
    server.listen(port, host, () => { server.off('error', fail); ok() })
  })
}

/** The URL the server is reached at (an IPv6 address in brackets). */
export function listeningUrl(server: Server): { url: string; port: number } {
  const address = server.address() as AddressInfo
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return { url: `http://${shownHost}:${address.port}`, port: address.port }
}

/** Answers, with the JSON error body, what Node would answer without it; each is a refusal like any other. */
export function refuseUnparsed(server: Server, refusals: RefusalRecorder, trusted: () => AddressMatcher): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy()
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
    const code = status === 431 ? 'headers_too_large' : status === 408 ? 'request_timeout' : 'bad_request'
    // No request was parsed: no path, method or headers, and the peer is the address (no X-Forwarded-For to read).
    refusals.note(resolveClientAddress((socket as Socket).remoteAddress, undefined, trusted()), '', status, code, '', undefined, undefined)
    const body = JSON.stringify({ ok: false, error: status === 431 ? 'the request headers are too large' : status === 408 ? 'the request did not arrive in time' : 'the request is not valid HTTP', code })
    socket.end(`HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
  })
  // What Node would answer by itself without our JSON body: an Expect other than 100-continue (a bare
  // 417), and CONNECT (the socket closed without a word). Both are refusals like any other.
  server.on('checkExpectation', (req, res) => {
    refusals.note(resolveClientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for'], trusted()), (req.url ?? '').slice(0, 512), 417, 'expectation_failed', req.method ?? '', req.headers, undefined)
    res.setHeader('connection', 'close')
    sendError(res, new HttpError(417, 'expectation_failed', 'only Expect: 100-continue is understood'))
  })
  server.on('connect', (req, socket) => {
    refusals.note(resolveClientAddress((socket as Socket).remoteAddress, req.headers['x-forwarded-for'], trusted()), (req.url ?? '').slice(0, 512), 405, 'method_not_allowed', 'CONNECT', req.headers, undefined)
    const body = JSON.stringify({ ok: false, error: 'CONNECT is not accepted here', code: 'method_not_allowed' })
    socket.end(`HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
  })
}

/** Stops accepting: idle connections close now, busy ones when they finish or the grace runs out. */
export async function stopListening(server: Server, graceMs: number): Promise<void> {
  const stopped = new Promise<void>((ok) => server.close(() => ok()))
  server.closeIdleConnections()
  const timer = setTimeout(() => server.closeAllConnections(), graceMs)
  await stopped
  clearTimeout(timer)
}
