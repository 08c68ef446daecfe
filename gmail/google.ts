// Talking to Google on the operator's behalf, with nothing but Node and undici: access tokens
// minted from a service-account key (an RS256 JWT assertion signed with node:crypto) or from an
// OAuth refresh token, cached until shortly before they expire and never logged; and one request
// function for Google's JSON APIs that backs off on 429 and 5xx (honouring Retry-After, through the
// runtime's one retry loop, runtime/lib/retry.ts), mints a new token once on a 401, and turns
// Google's error bodies into one error type.
//
// Every base URL can be moved (tests, private gateways): HOOKGATE_GOOGLE_TOKEN_URL,
// HOOKGATE_GMAIL_API_URL, HOOKGATE_PUBSUB_API_URL, HOOKGATE_GOOGLE_CERTS_URL, HOOKGATE_GOOGLE_AUTH_URL.
import { createSign } from 'node:crypto'
import { request } from 'undici'
import { backoffDelay, parseRetryAfter, retry, type Backoff } from '../runtime/lib/retry.js'

export interface GoogleBases {
  tokenUrl: string
  gmailUrl: string
  pubsubUrl: string
  certsUrl: string
  authUrl: string
}

export function googleBases(env: NodeJS.ProcessEnv = process.env): GoogleBases {
  const base = (name: string, fallback: string) => (env[name]?.trim() || fallback).replace(/\/+$/, '')
  return {
    tokenUrl: base('HOOKGATE_GOOGLE_TOKEN_URL', 'https://oauth2.googleapis.com/token'),
    gmailUrl: base('HOOKGATE_GMAIL_API_URL', 'https://gmail.googleapis.com'),
    pubsubUrl: base('HOOKGATE_PUBSUB_API_URL', 'https://pubsub.googleapis.com'),
    certsUrl: base('HOOKGATE_GOOGLE_CERTS_URL', 'https://www.googleapis.com/oauth2/v3/certs'),
    authUrl: base('HOOKGATE_GOOGLE_AUTH_URL', 'https://accounts.google.com/o/oauth2/v2/auth'),
  }
}

export const SCOPES = {
  pubsub: 'https://www.googleapis.com/auth/pubsub',
  gmailRead: 'https://www.googleapis.com/auth/gmail.readonly',
} as const

/** A Google error, as its JSON body told it: never a token or a key in the message. */
export class GoogleError extends Error {
  override name = 'GoogleError'
  constructor(readonly status: number, readonly reason: string, message: string, readonly retryAfterMs?: number) {
    super(message)
  }
}

/** Where access tokens come from; `invalidate` drops a cached one that Google refused. */
export interface TokenSource {
  /** who the token speaks for, for messages (an email address) */
  readonly principal: string
  token(): Promise<string>
  invalidate(): void
}

export interface ServiceAccountKey {
  type?: string
  client_email: string
  private_key: string
  private_key_id?: string
  project_id?: string
  token_uri?: string
}

/** Reads a service-account key file's JSON, saying what is missing (never echoing the key). */
export function parseServiceAccountKey(text: string, where: string): ServiceAccountKey {
  let value: any
  try {
    value = JSON.parse(text)
  } catch {
    throw new GoogleError(0, 'key_invalid', `${where} is not JSON: expected a service-account key file (Google Cloud console → IAM → Service accounts → Keys → Add key → JSON)`)
  }
  if (value?.type !== undefined && value.type !== 'service_account') throw new GoogleError(0, 'key_invalid', `${where} is a "${String(value.type)}" credential, not a service-account key`)
  if (typeof value?.client_email !== 'string' || typeof value?.private_key !== 'string') throw new GoogleError(0, 'key_invalid', `${where} lacks client_email or private_key: expected a service-account key file`)
  return value as ServiceAccountKey
}

export interface OAuthClient { client_id: string; client_secret: string }

/** Reads an OAuth client file (Google Cloud console → APIs & Services → Credentials → OAuth client ID → Desktop app → Download JSON). */
export function parseOAuthClient(text: string, where: string): OAuthClient {
  let value: any
  try {
    value = JSON.parse(text)
  } catch {
    throw new GoogleError(0, 'client_invalid', `${where} is not JSON: expected an OAuth client file (type Desktop app)`)
  }
  const c = value?.installed ?? value?.web ?? value
  if (typeof c?.client_id !== 'string' || typeof c?.client_secret !== 'string') throw new GoogleError(0, 'client_invalid', `${where} lacks client_id or client_secret: expected an OAuth client file (type Desktop app)`)
  return { client_id: c.client_id, client_secret: c.client_secret }
}

const REFRESH_EARLY_MS = 5 * 60_000

/** A cache around a mint function: one mint at a time, reused until five minutes before expiry. */
function cachedSource(principal: string, mint: () => Promise<{ token: string; expiresInS: number }>, now: () => number): TokenSource {
  let cached: { token: string; until: number } | undefined
  let minting: Promise<string> | undefined
  return {
    principal,
    token() {
      if (cached && now() < cached.until) return Promise.resolve(cached.token)
      minting ??= mint().then(({ token, expiresInS }) => {
        cached = { token, until: now() + Math.max(0, expiresInS * 1000 - REFRESH_EARLY_MS) }
        return token
      }).finally(() => { minting = undefined })
      return minting
    },
    invalidate() { cached = undefined },
  }
}

function base64url(data: string | Buffer): string {
  return Buffer.from(data).toString('base64url')
}

/** Tokens for a service account (Pub/Sub administration, or a mailbox through domain-wide delegation with `subject`). */
export function serviceAccountTokens(key: ServiceAccountKey, scopes: string[], bases: GoogleBases, options: { subject?: string; now?: () => number } = {}): TokenSource {
  const now = options.now ?? Date.now
  return cachedSource(options.subject ?? key.client_email, async () => {
    const iat = Math.floor(now() / 1000)
    const header = { alg: 'RS256', typ: 'JWT', ...(key.private_key_id ? { kid: key.private_key_id } : {}) }
    const claims = { iss: key.client_email, scope: scopes.join(' '), aud: bases.tokenUrl, iat, exp: iat + 3600, ...(options.subject ? { sub: options.subject } : {}) }
    const unsigned = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`
    let signature: string
    try {
      signature = createSign('RSA-SHA256').update(unsigned).sign(key.private_key, 'base64url')
    } catch {
      throw new GoogleError(0, 'key_invalid', `the private key of ${key.client_email} cannot sign (is the key file damaged?)`)
    }
    return tokenGrant(bases.tokenUrl, { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: `${unsigned}.${signature}` }, key.client_email)
  }, now)
}

/** Tokens for a mailbox from the refresh token `hookgate webhooks gmail login` stored. */
export function refreshTokens(client: OAuthClient, refreshToken: string, mailbox: string, bases: GoogleBases, now: () => number = Date.now): TokenSource {
  return cachedSource(mailbox, () => tokenGrant(bases.tokenUrl, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.client_id, client_secret: client.client_secret }, mailbox), now)
}

/** POSTs a grant to the token endpoint; the answer's access token, and for a code grant its refresh token. */
export function tokenGrant(tokenUrl: string, form: Record<string, string>, principal: string): Promise<{ token: string; expiresInS: number; refreshToken?: string; scope?: string }> {
  return retry({ ...googleRetries(TOKEN_ATTEMPTS), fail: (err: GoogleError) => err }, async () => {
    let res
    try {
      res = await request(tokenUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: new URLSearchParams(form).toString(), headersTimeout: 30_000, bodyTimeout: 30_000 })
    } catch (err) {
      return { ok: false, retryable: true, failure: new GoogleError(0, 'unreachable', `cannot reach Google's token endpoint ${tokenUrl}: ${(err as Error).message}`) }
    }
    const text = await res.body.text()
    let body: any
    try { body = JSON.parse(text) } catch { body = {} }
    if (res.statusCode === 200 && typeof body.access_token === 'string') {
      return { ok: true, value: { token: body.access_token, expiresInS: Number(body.expires_in) || 3600, ...(typeof body.refresh_token === 'string' ? { refreshToken: body.refresh_token } : {}), ...(typeof body.scope === 'string' ? { scope: body.scope } : {}) } }
    }
    const reason = typeof body.error === 'string' ? body.error : `http_${res.statusCode}`
    const described = typeof body.error_description === 'string' ? `: ${body.error_description}` : ''
    const hint = reason === 'invalid_grant' ? ' (a refresh token that was revoked or expired: run `hookgate webhooks gmail login` again; a service-account key that was deleted: make a new one)' : ''
    const failure = new GoogleError(res.statusCode, reason, `Google refused a token for ${principal}: ${reason}${described}${hint}`)
    return { ok: false, failure, retryable: res.statusCode === 429 || res.statusCode >= 500, retryAfterMs: parseRetryAfter(res.headers['retry-after']) }
  })
}

export interface CallOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  body?: unknown
  /** attempts for 429, 5xx and connection errors (default 5) */
  attempts?: number
  /** longest single wait between attempts (default 60 s) */
  maxWaitMs?: number
  /** told about each wait, for logs and health */
  onRetry?: (info: { status: number; waitMs: number; attempt: number }) => void
}

/** One call to a Google JSON API; 404 and other refusals throw GoogleError with Google's status word (NOT_FOUND, ABORTED …). */
export function callGoogle<T = any>(tokens: TokenSource, url: string, options: CallOptions = {}): Promise<T> {
  let refreshed = false
  return retry({
    ...googleRetries(options.attempts ?? 5),
    maxWaitMs: options.maxWaitMs ?? 60_000,
    fail: (err: GoogleError) => err,
    waiting: (err, attempt, waitMs) => options.onRetry?.({ status: err.status, waitMs, attempt }),
  }, async () => {
    for (;;) {
      const token = await tokens.token()
      let res
      try {
        res = await request(url, {
          method: options.method ?? 'GET',
          headers: { authorization: `Bearer ${token}`, accept: 'application/json', ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}) },
          ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
          headersTimeout: 30_000,
          bodyTimeout: 60_000,
        })
      } catch (err) {
        return { ok: false, retryable: true, failure: new GoogleError(0, 'unreachable', `cannot reach ${new URL(url).origin}: ${(err as Error).message}`) }
      }
      const text = await res.body.text()
      let body: any
      try { body = text === '' ? {} : JSON.parse(text) } catch { body = undefined }
      if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, value: (body ?? {}) as T }
      if (res.statusCode === 401 && !refreshed) {
        // An access token Google no longer takes (revoked, or its clock and ours disagree): mint one
        // more, once per call, and ask again; that is no extra attempt.
        refreshed = true
        tokens.invalidate()
        continue
      }
      const wait = retryAfterMs(res.headers['retry-after'])
      const e = body?.error
      const status = typeof e?.status === 'string' ? e.status : `HTTP_${res.statusCode}`
      const message = typeof e?.message === 'string' ? e.message : text.slice(0, 200)
      const failure = new GoogleError(res.statusCode, status, `${options.method ?? 'GET'} ${new URL(url).pathname}: ${res.statusCode} ${status}: ${message}`, wait)
      return { ok: false, failure, retryable: res.statusCode === 429 || res.statusCode >= 500, retryAfterMs: wait ?? null }
    }
  })
}

/** Attempts at a token (a grant), the first included. */
const TOKEN_ATTEMPTS = 4

/** Google's schedule: about 1, 2, 4, 8 … s, at most 60 s. */
export const GOOGLE_BACKOFF: Backoff = { baseMs: 1000, capMs: 60_000 }

/** What every call to Google retries with: `attempts` in all, Google's schedule, never cancelled (no signal). */
export function googleRetries(attempts: number): { attempts: number; backoff: Backoff; cancelled: () => Error } {
  return { attempts, backoff: GOOGLE_BACKOFF, cancelled: () => new Error('cancelled') }
}

/** Exponential backoff with jitter on Google's schedule: about 1, 2, 4, 8 … s, at most 60 s. */
export function backoffMs(attempt: number): number {
  return backoffDelay(GOOGLE_BACKOFF, attempt)
}

/** Retry-After as seconds or an HTTP date, in ms (runtime/lib/retry.ts reads it); undefined when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined): number | undefined {
  return parseRetryAfter(header) ?? undefined
}
