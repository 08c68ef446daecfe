// Fake chat receivers for the channel tests, each a node:http server on 127.0.0.1 (port 0): a
// Slack incoming webhook, a Discord webhook, the Telegram Bot API and a Standard Webhooks receiver.
// Each records every request and plays a queue of scripted failures before answering for real:
// `{ status, retryAfter?, body? }` answers with that status, 'hang' never answers, 'close' drops
// the connection without an answer.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { verifyStandardWebhook, type VerifyResult } from '../../runtime/channels/index.js'

export type Scripted = { status: number; retryAfter?: number | string; body?: string; contentType?: string } | 'hang' | 'close'

export interface RecordedRequest {
  method: string
  /** path and query, as sent */
  url: string
  path: string
  query: URLSearchParams
  headers: IncomingHttpHeaders
  body: string
  /** the body parsed as JSON, or undefined */
  json: any
}

interface Answer { status: number; body?: string | object; headers?: Record<string, string> }

export class FakeServer {
  readonly requests: RecordedRequest[] = []
  private readonly script: Scripted[] = []
  private readonly server: Server
  private port = 0

  constructor(private readonly answer: (req: RecordedRequest) => Answer) {
    this.server = createServer((req, res) => this.handle(req, res))
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(0, '127.0.0.1', () => resolve())
    })
    this.port = (this.server.address() as AddressInfo).port
    return this
  }

  /** http://127.0.0.1:<port> */
  get origin(): string {
    return `http://127.0.0.1:${this.port}`
  }

  /** Failures to play, in order, one per request, before the fake answers normally again. */
  queue(...items: Scripted[]): this {
    this.script.push(...items)
    return this
  }

  /** the last request received */
  get last(): RecordedRequest | undefined {
    return this.requests[this.requests.length - 1]
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      const url = new URL(req.url ?? '/', 'http://fake')
      let json: unknown
      try { json = JSON.parse(body) } catch { json = undefined }
      const recorded: RecordedRequest = { method: req.method ?? '', url: req.url ?? '/', path: url.pathname, query: url.searchParams, headers: req.headers, body, json }
      this.requests.push(recorded)
      const scripted = this.script.shift()
      if (scripted === 'hang') return
      if (scripted === 'close') { req.socket.destroy(); return }
      if (scripted) {
        const headers: Record<string, string> = { 'content-type': scripted.contentType ?? 'text/plain' }
        if (scripted.retryAfter !== undefined) headers['retry-after'] = String(scripted.retryAfter)
        res.writeHead(scripted.status, headers).end(scripted.body ?? `scripted ${scripted.status}`)
        return
      }
      const a = this.answer(recorded)
      if (a.body === undefined) { res.writeHead(a.status, a.headers).end(); return }
      const text = typeof a.body === 'string' ? a.body : JSON.stringify(a.body)
      res.writeHead(a.status, { 'content-type': typeof a.body === 'string' ? 'text/plain' : 'application/json', ...a.headers }).end(text)
    })
  }
}

// --- Slack ------------------------------------------------------------------------------------

export class FakeSlack extends FakeServer {
  /** the path that is a valid incoming webhook */
  readonly hookPath: string
  constructor(hookPath = '/services/T/B/X') {
    super((r) => {
      if (r.method !== 'POST' || r.path !== hookPath) return { status: 404, body: 'no_service' }
      if (!r.json || typeof r.json !== 'object') return { status: 400, body: 'invalid_payload' }
      if (typeof r.json.text !== 'string' || r.json.text === '') return { status: 400, body: 'invalid_payload' }
      return { status: 200, body: 'ok' }
    })
    this.hookPath = hookPath
  }

  /** the incoming-webhook URL */
  get webhookUrl(): string {
    return this.origin + this.hookPath
  }
}

export async function startFakeSlack(hookPath?: string): Promise<FakeSlack> {
  return new FakeSlack(hookPath).start()
}

// --- Discord ----------------------------------------------------------------------------------

export class FakeDiscord extends FakeServer {
  private nextId = 1000
  constructor(readonly webhookId = '123456789', readonly webhookToken = 'discord-token-abcdef') {
    super((r) => {
      const m = /^\/api\/webhooks\/([^/]+)\/([^/]+)$/.exec(r.path)
      if (r.method !== 'POST' || !m || m[1] !== this.webhookId || m[2] !== this.webhookToken) return { status: 404, body: { message: 'Unknown Webhook', code: 10015 } }
      if (!r.json || typeof r.json !== 'object') return { status: 400, body: { message: 'Cannot send an empty message', code: 50006 } }
      const content = r.json.content
      if (typeof content !== 'string' || content === '') return { status: 400, body: { message: 'Cannot send an empty message', code: 50006 } }
      if (content.length > 2000) return { status: 400, body: { message: 'Invalid Form Body', code: 50035, errors: { content: { _errors: [{ code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 2000 or fewer in length.' }] } } } }
      if (r.query.get('wait') !== 'true') return { status: 204 }
      const id = String(this.nextId++)
      return { status: 200, body: { id, type: 0, channel_id: '42', content, webhook_id: this.webhookId, mentions: [], mention_everyone: false } }
    })
  }

  get webhookUrl(): string {
    return `${this.origin}/api/webhooks/${this.webhookId}/${this.webhookToken}`
  }
}

export async function startFakeDiscord(webhookId?: string, webhookToken?: string): Promise<FakeDiscord> {
  return new FakeDiscord(webhookId, webhookToken).start()
}

// --- Telegram ---------------------------------------------------------------------------------

export class FakeTelegram extends FakeServer {
  private nextMessageId = 41
  /** chats the bot may write to (chat_id compared as a string) */
  constructor(readonly token = '123456:ABC-fake-telegram-token', readonly chats: string[] = ['1001', '-100200']) {
    super((r) => {
      const m = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(r.path)
      if (!m) return { status: 404, body: { ok: false, error_code: 404, description: 'Not Found' } }
      if (m[1] !== this.token) return { status: 401, body: { ok: false, error_code: 401, description: 'Unauthorized' } }
      if (m[2] !== 'sendMessage') return { status: 404, body: { ok: false, error_code: 404, description: 'Not Found' } }
      const chatId = r.json?.chat_id
      if (chatId === undefined || chatId === null || chatId === '') return { status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: chat_id is empty' } }
      if (!this.chats.includes(String(chatId))) return { status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: chat not found' } }
      const text = r.json?.text
      if (typeof text !== 'string' || text.trim() === '') return { status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: message text is empty' } }
      if (text.length > 4096) return { status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: message is too long' } }
      this.nextMessageId += 1
      return { status: 200, body: { ok: true, result: { message_id: this.nextMessageId, date: 1700000000, chat: { id: Number(chatId), type: 'private' }, text } } }
    })
  }

  /** the apiBaseUrl a channel uses to reach this fake */
  get apiBaseUrl(): string {
    return this.origin
  }
}

export async function startFakeTelegram(token?: string, chats?: string[]): Promise<FakeTelegram> {
  return new FakeTelegram(token, chats).start()
}

// --- Standard Webhooks receiver ----------------------------------------------------------------

export class FakeReceiver extends FakeServer {
  /** the verification of each request that reached the real handler (not the scripted ones) */
  readonly verifications: VerifyResult[] = []
  constructor(readonly secret: string | null, readonly now: () => number = Date.now) {
    super((r) => {
      if (this.secret === null) return { status: 204 }
      const result = verifyStandardWebhook(this.secret, r.headers, r.body, { now: this.now })
      this.verifications.push(result)
      return result.ok ? { status: 204 } : { status: 401, body: { error: result.reason } }
    })
  }

  get url(): string {
    return `${this.origin}/hooks/agent-replies`
  }
}

/** A receiver that verifies every request with `secret` (null: accepts anything). */
export async function startFakeReceiver(secret: string | null, now?: () => number): Promise<FakeReceiver> {
  return new FakeReceiver(secret, now).start()
}
