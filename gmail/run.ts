// The Gmail helper's push receiver (`hookgate webhooks gmail run`, cli/verbs/webhooks-gmail-run.ts). It holds the lock on <state>/gmail (one helper
// per cursor), checks each Pub/Sub push (the token in its URL, and the OIDC token when configured)
// before anything is fetched, hands the push to the mailbox's sync and answers 204 only once the
// hook accepted every batch (else 503: Pub/Sub redelivers with backoff); it renews the watch on a
// timer and reports its health on GET /healthz and as JSON lines on stdout, never a secret.
import { createHash, timingSafeEqual } from 'node:crypto'
import { existsSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { HttpError, sendError, sendJson } from '../runtime/http/errors.js'
import { acquireStateLock, type StateLock } from '../runtime/lib/state-lock.js'
import { HelperConfigError, PUSH_TOKEN_FILE, hookToken, readRef, type HelperConfig } from './config.js'
import { mailboxTokens } from './credentials.js'
import { backoffMs, googleBases, type GoogleBases, type TokenSource } from './google.js'
import { OidcVerifier } from './oidc.js'
import { createLogger, type Logger } from '../runtime/observe/log.js'
import { MailSync, type Log } from './sync.js'

const PUSH_BODY_LIMIT = 64 * 1024
const RENEWAL_RETRY_MAX_MS = 10 * 60_000

export interface HelperOptions {
  config: HelperConfig
  bases?: GoogleBases
  /** the mailbox's tokens (default: from hooks.gmail.credentials.gmail) */
  tokens?: TokenSource
  /** where to listen instead of hooks.gmail.receiver (tests: port 0) */
  host?: string
  port?: number
  /** how often the watch is renewed instead of renewEveryMinutes (tests) */
  renewEveryMs?: number
  /** where the JSON log lines go (`hookgate webhooks gmail run` writes them to stdout) */
  write: (line: string) => void
  hookAttempts?: number
  hookMaxWaitMs?: number
}

export interface Helper {
  /** http://host:port */
  url: string
  port: number
  sync: MailSync
  /** resolves once no sync is running or waiting */
  idle(): Promise<void>
  /** stops taking pushes, waits for the sync under way, releases the lock */
  close(): Promise<void>
}

export async function startHelper(options: HelperOptions): Promise<Helper> {
  const { config } = options
  const g = config.gmail
  const log = helperLog(createLogger(options.write))
  const account = g.account
  if (!account) throw new HelperConfigError('hooks.gmail.account is not set: run `hookgate webhooks gmail setup` first')
  const pushToken = readPushToken(config)
  const token = hookToken(config)
  const bases = options.bases ?? googleBases()
  const tokens = options.tokens ?? mailboxTokens(config, bases)
  let oidc: OidcVerifier | undefined
  if (g.oidc) {
    const audience = g.oidc.audience ?? g.pushEndpoint
    if (!audience) throw new HelperConfigError('hooks.gmail.oidc needs an audience: set hooks.gmail.oidc.audience or hooks.gmail.pushEndpoint')
    oidc = new OidcVerifier(bases.certsUrl, { audience, email: g.oidc.serviceAccountEmail })
  }

  const lock: StateLock = acquireStateLock(config.helperDir)
  let sync: MailSync
  try {
    sync = new MailSync({ config, account, tokens, bases, hookToken: token, log, ...(options.hookAttempts !== undefined ? { hookAttempts: options.hookAttempts } : {}), ...(options.hookMaxWaitMs !== undefined ? { hookMaxWaitMs: options.hookMaxWaitMs } : {}) })
    // Without a cursor the watch's history id becomes it, so this start must succeed.
    if (!sync.hasCursor) await sync.renewWatch()
  } catch (err) {
    lock.release()
    throw err
  }

  const renewEveryMs = options.renewEveryMs ?? g.renewEveryMinutes * 60_000
  let closing = false
  let renewTimer: NodeJS.Timeout | undefined
  let renewing: Promise<void> | undefined
  let renewalFailures = 0
  const scheduleRenewal = (ms: number) => {
    clearTimeout(renewTimer)
    if (closing) return
    renewTimer = setTimeout(() => { renew() }, ms)
  }
  const renew = () => {
    renewing = sync.renewWatch().then(() => {
      renewalFailures = 0
      scheduleRenewal(renewEveryMs)
    }, () => {
      renewalFailures++
      scheduleRenewal(Math.min(backoffMs(renewalFailures) * 5, RENEWAL_RETRY_MAX_MS, renewEveryMs))
    }).finally(() => { renewing = undefined })
  }
  if (sync.watchDue(renewEveryMs)) renew()
  else scheduleRenewal(renewEveryMs)

  let lastPushAt: string | undefined
  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      log('error', { during: 'request', error: (err as Error).message })
      if (!res.headersSent) sendError(res, new HttpError(500, 'internal_error', 'the helper failed to handle the push'))
      else res.destroy()
    })
  })

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://receiver')
    if (url.pathname === '/healthz' && (req.method === 'GET' || req.method === 'HEAD')) return health(res)
    if (url.pathname !== g.receiver.path) return sendError(res, new HttpError(404, 'not_found', 'no such path'))
    if (req.method !== 'POST') return sendError(res, new HttpError(405, 'method_not_allowed', 'pushes are POSTed', { allow: 'POST' }))
    if (!sameSecret(url.searchParams.get('token') ?? '', pushToken)) {
      log('push_refused', { reason: 'wrong or missing push token' })
      return sendError(res, new HttpError(401, 'unauthorized', 'the push token is wrong or missing'))
    }
    if (oidc) {
      const verdict = await oidc.check(req.headers.authorization)
      if (!verdict.ok) {
        log('push_refused', { reason: verdict.reason })
        return sendError(res, new HttpError(verdict.status, verdict.status === 401 ? 'unauthorized' : 'forbidden', verdict.reason))
      }
    }
    const body = await readBody(req)
    if (body === undefined) return sendError(res, new HttpError(413, 'payload_too_large', 'a push body is at most 64 KiB'))
    const note = notificationOf(body)
    if (!note) {
      log('push_refused', { reason: 'not a Pub/Sub push of a Gmail notification' })
      return sendError(res, new HttpError(400, 'invalid_push', 'the body is not a pub/sub push of a gmail notification'))
    }
    lastPushAt = new Date().toISOString()
    if (note.emailAddress.toLowerCase() !== account!.toLowerCase()) {
      log('push_ignored', { reason: 'another mailbox', emailAddress: note.emailAddress, messageId: note.messageId })
      res.writeHead(204).end()
      return
    }
    log('push', { messageId: note.messageId, historyId: note.historyId })
    if (closing) return sendError(res, new HttpError(503, 'shutting_down', 'the helper is stopping; pub/sub will redeliver', { 'retry-after': '10' }))
    try {
      await sync.requestSync('push')
    } catch {
      // the reason is in the log and on /healthz; Pub/Sub redelivers, and the outbox waits on disk
      return sendError(res, new HttpError(503, 'sync_failed', 'the mail could not be handed to the hook yet; pub/sub will redeliver', { 'retry-after': '30' }))
    }
    res.writeHead(204).end()
  }

  function health(res: ServerResponse): void {
    const expiration = Number(sync.cursor.watchExpiration)
    const facts = {
      account,
      lastPushAt: lastPushAt ?? null,
      lastSyncAt: sync.lastSyncAt ?? null,
      lastRenewalAt: sync.cursor.lastRenewalAt ?? null,
      watchExpiration: Number.isFinite(expiration) && expiration > 0 ? new Date(expiration).toISOString() : null,
      pendingBatches: sync.cursor.outbox?.batches.length ?? 0,
      lastError: sync.lastSyncError ?? sync.lastRenewalError ?? null,
    }
    const reasons: string[] = []
    if (!(Number.isFinite(expiration) && expiration > Date.now())) reasons.push('the gmail watch has expired (or was never started)')
    if (sync.lastSyncError) reasons.push(`the last sync failed: ${sync.lastSyncError}`)
    if (sync.lastRenewalError) reasons.push(`the last watch renewal failed: ${sync.lastRenewalError}`)
    if (reasons.length > 0) return sendJson(res, 503, { ok: false, status: 'degraded', reasons, ...facts }, { 'retry-after': '30' })
    sendJson(res, 200, { ok: true, ...facts })
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? g.receiver.port, options.host ?? g.receiver.host, () => { server.off('error', reject); resolve() })
  }).catch((err) => {
    closing = true
    clearTimeout(renewTimer)
    lock.release()
    throw new HelperConfigError(`cannot listen on ${g.receiver.host}:${g.receiver.port}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
  })
  const address = server.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  const url = `http://${host}:${address.port}`
  log('listening', { url: `${url}${g.receiver.path}`, account, historyId: sync.cursor.historyId ?? null, pendingBatches: sync.cursor.outbox?.batches.length ?? 0 })

  // Mail that came while the helper was down (or batches a crash left planned) goes out now.
  sync.requestSync('start').catch(() => {})

  let closed: Promise<void> | undefined
  return {
    url,
    port: address.port,
    sync,
    idle: () => sync.idle(),
    close() {
      closed ??= (async () => {
        closing = true
        clearTimeout(renewTimer)
        await new Promise<void>((resolve) => { server.close(() => resolve()); server.closeIdleConnections() })
        await renewing
        await sync.idle()
        lock.release()
      })()
      return closed
    },
  }
}

/** hooks.gmail.pushToken, else the file setup keeps in <state>/gmail. */
function readPushToken(config: HelperConfig): string {
  if (config.gmail.pushToken !== undefined) return readRef(config.gmail.pushToken, config.dir, 'hooks.gmail.pushToken')
  const file = join(config.helperDir, PUSH_TOKEN_FILE)
  if (existsSync(file)) return readRef({ file }, config.dir, 'the push token')
  throw new HelperConfigError('hooks.gmail.pushToken is not set: run `hookgate webhooks gmail setup` first')
}

/** Compares digests so neither the length nor the content of the token leaks through timing. */
function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest()
  const b = createHash('sha256').update(expected).digest()
  return timingSafeEqual(a, b) && given.length > 0
}

async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > PUSH_BODY_LIMIT) return undefined
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks)
}

/**
 * The helper's log over the runtime's one logger (runtime/observe/log.ts): each line JSON with `t`,
 * a level (error for `error` events) and its event as the message and as `event`.
 */
export function helperLog(logger: Logger): Log {
  return (event, fields = {}) => (event === 'error' ? logger.error : logger.info)(event, { event, ...fields })
}

/** Pub/Sub's push envelope around Gmail's {emailAddress, historyId}; undefined when it is not one. */
function notificationOf(body: Buffer): { emailAddress: string; historyId: string; messageId: string } | undefined {
  try {
    const envelope = JSON.parse(body.toString('utf8'))
    const data = JSON.parse(Buffer.from(String(envelope?.message?.data ?? ''), 'base64').toString('utf8'))
    if (typeof data?.emailAddress !== 'string' || (typeof data.historyId !== 'string' && typeof data.historyId !== 'number')) return undefined
    return { emailAddress: data.emailAddress, historyId: String(data.historyId), messageId: String(envelope.message.messageId ?? envelope.message.message_id ?? '') }
  } catch {
    return undefined
  }
}
