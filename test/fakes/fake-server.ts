// What the fake model APIs share: a real node:http server on 127.0.0.1 (port 0) that records every
// request it receives (headers and parsed JSON body) and answers each one with the next behaviour
// a test queued, or with a normal reply when the queue is empty.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * One answer, in the protocol of the fake:
 * - 'ok': a normal reply (the last user message, echoed)
 * - { reply }: a normal reply with this text
 * - { status, retryAfter?, message? }: the protocol's error body for that status (Retry-After in seconds)
 * - 'hang': reads the request and never answers
 * - 'malformed': 200 with JSON that lacks the reply
 * - 'close': reads the request and closes the connection without an answer
 * - { raw, status?, contentType? }: exactly this body
 */
export type Behaviour =
  | 'ok'
  | 'hang'
  | 'malformed'
  | 'close'
  | { reply: string }
  /** answers 'ok' after a pause (a model that takes its time) */
  | { delayMs: number }
  /** answers 'ok' once the promise settles (a model the test lets answer at the moment it chooses) */
  | { after: Promise<unknown> }
  | { status: number; retryAfter?: number; message?: string }
  | { raw: string | Buffer; status?: number; contentType?: string }

export interface ReceivedRequest {
  method: string
  /** path and query, as sent */
  path: string
  headers: IncomingHttpHeaders
  /** the parsed JSON body; undefined when it was not JSON */
  body: any
  raw: string
  /** when it arrived (Date.now()) */
  at: number
}

export interface FakeApi {
  /** the base URL a provider is configured with */
  url: string
  /** every request received, in order (rejected ones included) */
  requests: ReceivedRequest[]
  /** adds behaviours for the next requests, in order */
  queue(...behaviours: Behaviour[]): void
  /** what happens once the queue is empty (default 'ok') */
  setDefault(behaviour: Behaviour): void
  close(): Promise<void>
}

/** What a protocol does with a request the queue lets through: an answer, or a problem found in it. */
export interface Protocol {
  /** the base path the fake's url ends with ('' or '/v1') */
  basePath: string
  /** why the request is not one the real API would accept, as [status, error body]; undefined when it is */
  reject(req: ReceivedRequest, apiKey: string | null): [number, unknown] | undefined
  reply(req: ReceivedRequest, text: string): unknown
  malformed(req: ReceivedRequest): unknown
  error(status: number, message: string | undefined): unknown
}

export interface FakeOptions {
  /** the key the fake requires; null (the default) accepts any request, with or without a key */
  apiKey?: string | null
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
  res.end(text)
}

/** The text of the last user message in an OpenAI or Anthropic request body. */
export function lastUserText(body: any): string {
  const messages = Array.isArray(body?.messages) ? body.messages : []
  const last = [...messages].reverse().find((m: any) => m?.role === 'user')
  if (typeof last?.content === 'string') return last.content
  if (Array.isArray(last?.content)) return last.content.map((p: any) => (typeof p?.text === 'string' ? p.text : '')).join('')
  return ''
}

export async function startFake(protocol: Protocol, options: FakeOptions = {}): Promise<FakeApi> {
  const requests: ReceivedRequest[] = []
  const script: Behaviour[] = []
  let fallback: Behaviour = 'ok'
  const apiKey = options.apiKey ?? null

  const handle = (req: IncomingMessage, res: ServerResponse, raw: string) => {
    let body: any
    try { body = JSON.parse(raw) } catch { body = undefined }
    const received: ReceivedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, raw, at: Date.now() }
    requests.push(received)
    const problem = protocol.reject(received, apiKey)
    if (problem) return sendJson(res, problem[0], problem[1])
    const next = script.shift() ?? fallback
    if (next === 'hang') return
    if (next === 'close') { req.socket.destroy(); return }
    if (next === 'ok') return sendJson(res, 200, protocol.reply(received, lastUserText(body)))
    if (next === 'malformed') return sendJson(res, 200, protocol.malformed(received))
    if ('reply' in next) return sendJson(res, 200, protocol.reply(received, next.reply))
    if ('delayMs' in next) {
      const timer = setTimeout(() => { if (!res.destroyed) sendJson(res, 200, protocol.reply(received, lastUserText(body))) }, next.delayMs)
      res.on('close', () => clearTimeout(timer))
      return
    }
    if ('after' in next) {
      const answer = (): void => { if (!res.destroyed) sendJson(res, 200, protocol.reply(received, lastUserText(body))) }
      void next.after.then(answer, answer)
      return
    }
    if ('raw' in next) {
      res.writeHead(next.status ?? 200, { 'content-type': next.contentType ?? 'application/json', 'content-length': Buffer.byteLength(next.raw) })
      return res.end(next.raw)
    }
    sendJson(res, next.status, protocol.error(next.status, next.message), next.retryAfter !== undefined ? { 'retry-after': String(next.retryAfter) } : {})
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => handle(req, res, Buffer.concat(chunks).toString('utf8')))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}${protocol.basePath}`,
    requests,
    queue: (...behaviours) => { script.push(...behaviours) },
    setDefault: (behaviour) => { fallback = behaviour },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

/** A base URL on 127.0.0.1 where nothing listens: a port bound and released again. */
export async function refusedUrl(basePath = ''): Promise<string> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `http://127.0.0.1:${port}${basePath}`
}
