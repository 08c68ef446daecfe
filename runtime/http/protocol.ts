// The answers Node would otherwise give by itself, without the contract's JSON body: a request that
// is not valid HTTP (400), whose head is too large (431) or too slow (408), an Expect other than
// 100-continue (Node's bare 417) and CONNECT (Node closed the socket without a word). Each is the
// one error shape, and each is noted in the rejected-request log like any other refusal.
import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import type { RefusalRecorder } from '../store/store.js'
import { resolveClientAddress, type AddressMatcher } from './auth.js'
import { errorBody, HttpError, sendError } from './errors.js'

/** Installs the answers on `server`; `trusted` is the current bundle's trusted proxies. */
export function answerProtocolRefusals(server: Server, refusals: RefusalRecorder, trusted: () => AddressMatcher): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable) return socket.destroy()
    const refusal = err.code === 'HPE_HEADER_OVERFLOW'
      ? new HttpError(431, 'headers_too_large', 'the request headers are too large')
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new HttpError(408, 'request_timeout', 'the request did not arrive in time')
        : new HttpError(400, 'bad_request', 'the request is not valid HTTP')
    // No request was parsed: no path, method or headers, and the peer is the address (no X-Forwarded-For to read).
    refusals.note(resolveClientAddress(socket.remoteAddress, undefined, trusted()), '', refusal.status, refusal.code, '', undefined, undefined)
    socket.end(rawAnswer(refusal, refusal.status === 431 ? 'Request Header Fields Too Large' : refusal.status === 408 ? 'Request Timeout' : 'Bad Request'))
  })
  server.on('checkExpectation', (req, res) => {
    const refusal = new HttpError(417, 'expectation_failed', 'only Expect: 100-continue is understood')
    refusals.note(resolveClientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for'], trusted()), (req.url ?? '').slice(0, 512), refusal.status, refusal.code, req.method ?? '', req.headers, undefined)
    res.setHeader('connection', 'close')
    sendError(res, refusal)
  })
  server.on('connect', (req, socket: Socket) => {
    const refusal = new HttpError(405, 'method_not_allowed', 'CONNECT is not accepted here')
    refusals.note(resolveClientAddress(socket.remoteAddress, req.headers['x-forwarded-for'], trusted()), (req.url ?? '').slice(0, 512), refusal.status, refusal.code, 'CONNECT', req.headers, undefined)
    socket.end(rawAnswer(refusal, 'Method Not Allowed'))
  })
}

/** A whole HTTP/1.1 answer for a socket no response object was made for; the connection closes after it. */
function rawAnswer(refusal: HttpError, reason: string): string {
  const body = errorBody(refusal)
  return `HTTP/1.1 ${refusal.status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
}
