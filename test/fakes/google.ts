// A fake of the Google endpoints the Gmail helper talks to, on one node:http server on 127.0.0.1
// (port 0): the OAuth token endpoint (JWT-bearer, refresh and authorization-code grants), the
// consent redirect, the JWKS certs, Pub/Sub v1 (topics, subscriptions, IAM policy) and Gmail v1
// (watch, stop, profile, history, messages). It holds the state a test seeds and inspects, and is
// as strict as the real APIs about bearer tokens, scopes and principals, with their error bodies.
// Over ~400 lines because it is one server for five APIs that share the tokens it issues: split
// apart, each piece would need the others' state anyway.
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, sign, verify, type KeyObject } from 'node:crypto'
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface FakeGoogleRequest { method: string; path: string; headers: IncomingHttpHeaders; body: any; raw: string; at: number }

export interface GmailWatch { topicName: string; labelIds?: string[]; labelFilterBehavior?: string; historyId: string; expiration: string; calls: number }

export interface IamPolicy { version: number; etag: string; bindings: Array<{ role: string; members: string[] }> }

export interface FakeGoogle {
  url: string
  tokenUrl: string
  gmailUrl: string
  pubsubUrl: string
  certsUrl: string
  authUrl: string
  /** every request received, in order (refused ones included); body is parsed JSON, or the form fields for /token */
  requests: FakeGoogleRequest[]
  serviceAccount(name: string, opts?: { scopes?: string[] }): Record<string, string>
  delegate(clientEmail: string, mailbox: string): void
  oauthClient(): Record<string, any>
  /** scopes default to gmail.readonly */
  refreshTokenFor(mailbox: string, client: Record<string, any>, scopes?: string[]): string
  consentAs(mailbox: string): void
  topics: Map<string, { name: string; policy: IamPolicy }>
  subscriptions: Map<string, any>
  watches: Map<string, GmailWatch>
  addMessage(mailbox: string, m: { from: string; to?: string; subject: string; text: string; html?: string; labelIds?: string[]; date?: string }): { id: string; historyId: string }
  expireHistoryBefore(mailbox: string, historyId: string): void
  failNext(route: string, status: number, opts?: { count?: number; retryAfter?: number; message?: string }): void
  pushBody(mailbox: string, subscription: string, opts?: { messageId?: string }): any
  oidcToken(opts: { audience: string; email: string; expired?: boolean; issuer?: string; unknownKid?: boolean; badSignature?: boolean }): string
  setTokenLifetime(seconds: number): void
  /** the largest page history.list and messages.list answer, whatever maxResults asks (default 100, Gmail's own default) */
  setPageSize(size: number): void
  close(): Promise<void>
}

export const GMAIL_PUSH_MEMBER = 'serviceAccount:gmail-api-push@system.gserviceaccount.com'
export const SCOPES = {
  cloudPlatform: 'https://www.googleapis.com/auth/cloud-platform',
  pubsub: 'https://www.googleapis.com/auth/pubsub',
  gmailReadonly: 'https://www.googleapis.com/auth/gmail.readonly',
  gmailModify: 'https://www.googleapis.com/auth/gmail.modify',
  gmailMetadata: 'https://www.googleapis.com/auth/gmail.metadata',
  mailGoogle: 'https://mail.google.com/',
} as const
const PUBSUB_SCOPES: readonly string[] = [SCOPES.pubsub, SCOPES.cloudPlatform]
const GMAIL_READ_SCOPES: readonly string[] = [SCOPES.gmailReadonly, SCOPES.gmailModify, SCOPES.mailGoogle]
const GMAIL_ANY_SCOPES: readonly string[] = [...GMAIL_READ_SCOPES, SCOPES.gmailMetadata]
const PROJECT = 'hookgate-test'
const WEEK_MS = 7 * 24 * 3600 * 1000

// Google's own wording, so a test can check that a message reached the operator unchanged.
const MISSING_CREDENTIALS = 'Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.'
const INVALID_CREDENTIALS = 'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.'
const INSUFFICIENT_SCOPES = 'Request had insufficient authentication scopes.'
const JWT_TIME = 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.'
const UNAUTHORIZED_CLIENT = 'Client is unauthorized to retrieve access tokens using this method, or client not authorized for any of the scopes requested.'

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND', 409: 'ABORTED',
  429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 501: 'NOT_IMPLEMENTED', 502: 'UNAVAILABLE', 503: 'UNAVAILABLE', 504: 'DEADLINE_EXCEEDED',
}
const GMAIL_REASONS: Record<number, string> = {
  400: 'invalidArgument', 401: 'authError', 403: 'insufficientPermissions', 404: 'notFound', 409: 'conflict',
  429: 'rateLimitExceeded', 500: 'backendError', 503: 'backendError',
}
const DEFAULT_MESSAGES: Record<number, string> = {
  400: 'Invalid argument.', 401: INVALID_CREDENTIALS, 403: 'The caller does not have permission', 404: 'Requested entity was not found.',
  409: 'Conflict.', 429: 'Too many concurrent requests for user.', 500: 'Internal error encountered.', 503: 'The service is currently unavailable.',
}

interface Issued { token: string; principal: string; isMailbox: boolean; scopes: string[]; allowed: string[]; expiresAt: number }
interface ServiceAccount { email: string; keyId: string; publicKey: KeyObject; allowed: string[]; delegates: Set<string> }
interface OAuthClient { id: string; secret: string }
interface RefreshGrant { clientId: string; mailbox: string; scopes: string[] }
interface AuthCode { clientId: string; redirectUri: string; mailbox: string; scopes: string[]; challenge?: string; method?: string; offline: boolean; used: boolean }
interface StoredMessage {
  id: string; threadId: string; labelIds: string[]; historyId: number; internalDate: number
  headers: Array<{ name: string; value: string }>; text: string; html?: string; raw: string; snippet: string
}
interface Mailbox { address: string; historyId: number; messages: StoredMessage[]; history: Array<{ id: number; message: StoredMessage }>; expiredBefore: number }
interface Failure { route: RegExp; status: number; count: number; retryAfter?: number; message?: string }

class Refusal { constructor(readonly status: number, readonly body: unknown, readonly headers: Record<string, string> = {}) {} }

const b64url = (data: Buffer | string) => Buffer.from(data).toString('base64url')
const randomId = (bytes: number) => randomBytes(bytes).toString('base64url')
const nowSeconds = () => Math.floor(Date.now() / 1000)

function signJwt(header: object, payload: object, key: KeyObject): string {
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`
  return `${input}.${b64url(sign('sha256', Buffer.from(input), key))}`
}

function splitJwt(token: string): { header: any; payload: any; input: string; signature: Buffer } | undefined {
  const parts = token.split('.')
  if (parts.length !== 3) return undefined
  try {
    return { header: JSON.parse(Buffer.from(parts[0]!, 'base64url').toString('utf8')), payload: JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')), input: `${parts[0]}.${parts[1]}`, signature: Buffer.from(parts[2]!, 'base64url') }
  } catch {
    return undefined
  }
}

function rsaKeyPair() {
  return generateKeyPairSync('rsa', { modulusLength: 2048 })
}

function escapeSnippet(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 200).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;')
}

/** Date in RFC 2822 form, as a Date header carries it. */
function rfc2822(ms: number): string {
  const d = new Date(ms)
  const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
  const pad = (n: number) => String(n).padStart(2, '0')
  return `${days[d.getUTCDay()]}, ${d.getUTCDate()} ${months[d.getUTCMonth()]} ${d.getUTCFullYear()} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} +0000`
}

function routePattern(route: string): RegExp {
  const escaped = route.trim().replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')
  return new RegExp(`^${escaped}$`)
}

export async function startFakeGoogle(): Promise<FakeGoogle> {
  const requests: FakeGoogleRequest[] = []
  const topics = new Map<string, { name: string; policy: IamPolicy }>()
  const subscriptions = new Map<string, any>()
  const watches = new Map<string, GmailWatch>()
  const accounts = new Map<string, ServiceAccount>()
  const clients = new Map<string, OAuthClient>()
  const refreshTokens = new Map<string, RefreshGrant>()
  const codes = new Map<string, AuthCode>()
  const issued = new Map<string, Issued>()
  const mailboxes = new Map<string, Mailbox>()
  const failures: Failure[] = []
  let consenting: string | undefined
  let tokenLifetime = 3600
  let pageSize = 100
  let etagCounter = 1
  let messageCounter = 0
  let pushCounter = 0

  // Google publishes more than one key at a time (it rotates them); the first one signs.
  const googleKeys = [rsaKeyPair(), rsaKeyPair()].map((pair) => ({ ...pair, kid: randomBytes(20).toString('hex') }))
  let strangerKey: KeyObject | undefined
  const stranger = () => (strangerKey ??= rsaKeyPair().privateKey)

  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      try {
        handle(req, res, Buffer.concat(chunks).toString('utf8'))
      } catch (err) {
        if (err instanceof Refusal) return send(res, err.status, err.body, err.headers)
        send(res, 500, googleError(500, 'Internal error encountered.', false))
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const tokenUrl = `${url}/token`
  const authUrl = `${url}/o/oauth2/v2/auth`
  const certsUrl = `${url}/oauth2/v3/certs`

  function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (body === undefined) {
      res.writeHead(status, headers)
      return void res.end()
    }
    const text = JSON.stringify(body)
    res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', 'content-length': String(Buffer.byteLength(text)), ...headers })
    res.end(text)
  }

  function googleError(status: number, message: string, gmail: boolean, statusName = STATUS_NAMES[status] ?? 'UNKNOWN', reason?: string) {
    const error: Record<string, unknown> = { code: status, message }
    if (gmail) error.errors = [{ message, domain: 'global', reason: reason ?? GMAIL_REASONS[status] ?? 'backendError' }]
    error.status = statusName
    return { error }
  }

  const refuse = (status: number, message: string, gmail: boolean, statusName?: string, reason?: string, headers?: Record<string, string>) =>
    new Refusal(status, googleError(status, message, gmail, statusName, reason), headers)
  const tokenRefusal = (status: number, error: string, description: string) => new Refusal(status, { error, error_description: description })

  function mailbox(address: string): Mailbox {
    const key = address.toLowerCase()
    let box = mailboxes.get(key)
    if (!box) mailboxes.set(key, (box = { address: key, historyId: 100000, messages: [], history: [], expiredBefore: 0 }))
    return box
  }

  function issue(principal: string, isMailbox: boolean, scopes: string[], allowed: string[]) {
    const token = `ya29.${randomId(48)}`
    issued.set(token, { token, principal, isMailbox, scopes, allowed, expiresAt: Date.now() + tokenLifetime * 1000 })
    return { access_token: token, expires_in: tokenLifetime, scope: scopes.join(' '), token_type: 'Bearer' }
  }

  // ---- the request router

  function handle(req: IncomingMessage, res: ServerResponse, raw: string): void {
    const method = req.method ?? 'GET'
    const target = new URL(req.url ?? '/', url)
    const path = target.pathname
    const isToken = path === '/token'
    let body: any
    if (isToken) body = Object.fromEntries(new URLSearchParams(raw))
    else { try { body = raw ? JSON.parse(raw) : undefined } catch { body = undefined } }
    requests.push({ method, path: req.url ?? '/', headers: req.headers, body, raw, at: Date.now() })

    const gmail = path.startsWith('/gmail/')
    const failure = failures.find((f) => f.route.test(`${method} ${path}`) || f.route.test(`${method} ${safeDecode(path)}`))
    if (failure) {
      if (--failure.count <= 0) failures.splice(failures.indexOf(failure), 1)
      const headers: Record<string, string> = failure.retryAfter !== undefined ? { 'retry-after': String(failure.retryAfter) } : {}
      if (isToken) {
        const error = failure.status === 401 ? 'invalid_client' : failure.status >= 500 || failure.status === 429 ? 'temporarily_unavailable' : 'invalid_grant'
        return send(res, failure.status, { error, error_description: failure.message ?? (failure.status === 429 ? 'Rate limit exceeded' : 'Backend Error') }, headers)
      }
      return send(res, failure.status, googleError(failure.status, failure.message ?? DEFAULT_MESSAGES[failure.status] ?? 'Error.', gmail), headers)
    }

    if (isToken) {
      if (method !== 'POST') throw tokenRefusal(405, 'invalid_request', 'Method not allowed')
      return send(res, 200, tokenGrant(req, body))
    }
    if (method === 'GET' && path === '/oauth2/v3/certs') {
      const keys = googleKeys.map((k) => ({ ...k.publicKey.export({ format: 'jwk' }), kid: k.kid, alg: 'RS256', use: 'sig' }))
      return send(res, 200, { keys }, { 'cache-control': 'public, max-age=21600, must-revalidate, no-transform' })
    }
    if (method === 'GET' && path === '/o/oauth2/v2/auth') return consent(res, target.searchParams)
    if (raw && body === undefined && method !== 'GET') throw refuse(400, 'Invalid JSON payload received. Unexpected token.', gmail)

    const pubsub = /^\/v1\/projects\/([^/]+)\/(topics|subscriptions)\/([^/:]+)(?::([A-Za-z]+))?$/.exec(safeDecode(path))
    if (pubsub) {
      const token = authenticate(req, false)
      requireScope(token, PUBSUB_SCOPES, false, 'User not authorized to perform this action.')
      const [, project, kind, id, verb] = pubsub as unknown as [string, string, string, string, string | undefined]
      const answer = kind === 'topics' ? topicCall(method, project, id, verb, body) : subscriptionCall(method, project, id, verb, body)
      return send(res, 200, answer)
    }
    const users = /^\/gmail\/v1\/users\/([^/]+)\/(watch|stop|profile|history|messages)(?:\/([^/]+))?$/.exec(path)
    if (users) {
      const [, userId, what, messageId] = users as unknown as [string, string, string, string | undefined]
      const token = authenticate(req, true)
      const box = gmailUser(token, safeDecode(userId), what, target.searchParams)
      const answer = gmailCall(method, box, token, what, messageId, target.searchParams, body)
      return answer === undefined ? send(res, 204, undefined) : send(res, 200, answer)
    }
    throw refuse(404, 'Method not found.', gmail)
  }

  function safeDecode(s: string): string {
    try { return decodeURIComponent(s) } catch { return s }
  }

  // ---- the token endpoint

  function clientOf(req: IncomingMessage, form: Record<string, string>): OAuthClient {
    let id = form.client_id, secret = form.client_secret
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '')
    if (basic) {
      const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8')
      const colon = decoded.indexOf(':')
      id = safeDecode(decoded.slice(0, colon)); secret = safeDecode(decoded.slice(colon + 1))
    }
    const client = id ? clients.get(id) : undefined
    if (!client) throw tokenRefusal(401, 'invalid_client', 'The OAuth client was not found.')
    if (client.secret !== secret) throw tokenRefusal(401, 'invalid_client', 'Unauthorized')
    return client
  }

  function tokenGrant(req: IncomingMessage, form: Record<string, string>) {
    if (!/^application\/x-www-form-urlencoded/i.test(req.headers['content-type'] ?? '')) throw tokenRefusal(400, 'invalid_request', 'Invalid request: the body must be application/x-www-form-urlencoded')
    const grant = form.grant_type
    if (grant === 'urn:ietf:params:oauth:grant-type:jwt-bearer') return jwtGrant(form.assertion ?? '')
    if (grant === 'refresh_token') {
      const client = clientOf(req, form)
      const stored = refreshTokens.get(form.refresh_token ?? '')
      if (!stored || stored.clientId !== client.id) throw tokenRefusal(400, 'invalid_grant', 'Bad Request')
      return issue(stored.mailbox, true, stored.scopes, stored.scopes)
    }
    if (grant === 'authorization_code') {
      const client = clientOf(req, form)
      const code = codes.get(form.code ?? '')
      if (!code || code.used || code.clientId !== client.id) throw tokenRefusal(400, 'invalid_grant', 'Malformed auth code.')
      if (code.redirectUri !== form.redirect_uri) throw tokenRefusal(400, 'redirect_uri_mismatch', 'Bad Request')
      if (code.challenge !== undefined) {
        const verifier = form.code_verifier
        if (!verifier) throw tokenRefusal(400, 'invalid_grant', 'Missing code verifier.')
        const derived = code.method === 'S256' ? b64url(createHash('sha256').update(verifier).digest()) : verifier
        if (derived !== code.challenge) throw tokenRefusal(400, 'invalid_grant', 'Invalid code verifier.')
      }
      code.used = true
      const answer: Record<string, unknown> = issue(code.mailbox, true, code.scopes, code.scopes)
      if (code.offline) {
        const refresh = `1//0${randomId(60)}`
        refreshTokens.set(refresh, { clientId: client.id, mailbox: code.mailbox, scopes: code.scopes })
        answer.refresh_token = refresh
      }
      return answer
    }
    throw tokenRefusal(400, 'unsupported_grant_type', `Invalid grant_type: ${grant ?? ''}`)
  }

  function jwtGrant(assertion: string) {
    const jwt = splitJwt(assertion)
    if (!jwt) throw tokenRefusal(400, 'invalid_grant', 'Invalid JWT: not a JWT')
    const account = typeof jwt.payload.iss === 'string' ? accounts.get(jwt.payload.iss) : undefined
    if (!account) throw tokenRefusal(400, 'invalid_grant', 'Invalid grant: account not found')
    if (jwt.header.alg !== 'RS256' || !verify('sha256', Buffer.from(jwt.input), account.publicKey, jwt.signature)) throw tokenRefusal(400, 'invalid_grant', 'Invalid JWT Signature.')
    if (jwt.payload.aud !== tokenUrl) throw tokenRefusal(400, 'invalid_grant', `Invalid JWT: Failed audience check. The expected value was ${tokenUrl}`)
    const { iat, exp } = jwt.payload
    const now = nowSeconds()
    if (typeof iat !== 'number' || typeof exp !== 'number' || exp <= now || iat > now + 300 || exp - iat > 3600 || exp <= iat) throw tokenRefusal(400, 'invalid_grant', JWT_TIME)
    const scopes: string[] = typeof jwt.payload.scope === 'string' ? jwt.payload.scope.split(' ').filter(Boolean) : []
    if (scopes.length === 0) throw tokenRefusal(400, 'invalid_scope', 'Invalid OAuth scope or ID token audience provided.')
    const sub = jwt.payload.sub
    if (typeof sub === 'string' && sub.toLowerCase() !== account.email) {
      // Domain-wide delegation: the admin allowed this client for this mailbox and these scopes.
      if (!account.delegates.has(sub.toLowerCase()) || scopes.some((s) => !account.allowed.includes(s))) throw tokenRefusal(401, 'unauthorized_client', UNAUTHORIZED_CLIENT)
      mailbox(sub)
      return issue(sub.toLowerCase(), true, scopes, account.allowed)
    }
    return issue(account.email, false, scopes, account.allowed)
  }

  // ---- the consent screen

  function consent(res: ServerResponse, q: URLSearchParams): void {
    const page = (status: number, text: string) => {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' })
      res.end(text)
    }
    const client = clients.get(q.get('client_id') ?? '')
    if (!client) return page(401, 'Error 401: invalid_client. The OAuth client was not found.')
    const redirect = q.get('redirect_uri') ?? ''
    let target: URL
    try { target = new URL(redirect) } catch { return page(400, 'Error 400: redirect_uri_mismatch') }
    // An installed-app client registered with http://localhost accepts any loopback port.
    if (target.protocol !== 'http:' || !['localhost', '127.0.0.1', '[::1]'].includes(target.hostname)) return page(400, 'Error 400: redirect_uri_mismatch')
    if (q.get('response_type') !== 'code') return page(400, 'Error 400: invalid_request. Invalid response_type')
    const scopes = (q.get('scope') ?? '').split(' ').filter(Boolean)
    if (scopes.length === 0) return page(400, 'Error 400: invalid_request. Missing required parameter: scope')
    const challenge = q.get('code_challenge') ?? undefined
    const method = q.get('code_challenge_method') ?? (challenge ? 'plain' : undefined)
    if (challenge !== undefined && method !== 'S256' && method !== 'plain') return page(400, 'Error 400: invalid_request. Invalid code_challenge_method')
    if (!consenting) return page(403, 'Error 403: access_denied. Nobody consented (the test did not call consentAs).')
    const code = `4/0A${randomId(40)}`
    codes.set(code, { clientId: client.id, redirectUri: redirect, mailbox: consenting, scopes, challenge, method, offline: q.get('access_type') === 'offline', used: false })
    target.searchParams.set('code', code)
    target.searchParams.set('scope', scopes.join(' '))
    const state = q.get('state')
    if (state !== null) target.searchParams.set('state', state)
    res.writeHead(302, { location: target.toString(), 'content-length': '0' })
    res.end()
  }

  // ---- bearer tokens and principals

  function authenticate(req: IncomingMessage, gmail: boolean): Issued {
    const header = req.headers.authorization
    const challenge = { 'www-authenticate': 'Bearer realm="https://accounts.google.com/", error="invalid_token"' }
    if (!header) throw refuse(401, MISSING_CREDENTIALS, gmail, 'UNAUTHENTICATED', 'required', { 'www-authenticate': 'Bearer realm="https://accounts.google.com/"' })
    const m = /^Bearer (\S+)$/i.exec(header)
    const token = m ? issued.get(m[1]!) : undefined
    if (!token || token.expiresAt <= Date.now()) throw refuse(401, INVALID_CREDENTIALS, gmail, 'UNAUTHENTICATED', 'authError', challenge)
    return token
  }

  function requireScope(token: Issued, accepted: readonly string[], gmail: boolean, deniedMessage: string): void {
    if (!token.scopes.some((s) => accepted.includes(s))) throw refuse(403, INSUFFICIENT_SCOPES, gmail, 'PERMISSION_DENIED', 'insufficientPermissions', { 'www-authenticate': 'Bearer realm="https://accounts.google.com/", error="insufficient_scope"' })
    if (!token.allowed.some((s) => accepted.includes(s))) throw refuse(403, deniedMessage, gmail, 'PERMISSION_DENIED', 'forbidden')
  }

  function gmailUser(token: Issued, userId: string, what: string, q: URLSearchParams): Mailbox {
    requireScope(token, GMAIL_ANY_SCOPES, true, 'Insufficient Permission')
    if (what === 'messages' && q.get('q') && !token.scopes.some((s) => GMAIL_READ_SCOPES.includes(s))) throw refuse(403, "Metadata scope does not support 'q' parameter", true)
    // A service account reading its own (nonexistent) mailbox is Gmail's classic "Precondition check failed".
    if (!token.isMailbox) throw refuse(400, 'Precondition check failed.', true, 'FAILED_PRECONDITION', 'failedPrecondition')
    if (userId !== 'me' && userId.toLowerCase() !== token.principal) throw refuse(403, `Delegation denied for ${token.principal}`, true, 'PERMISSION_DENIED', 'forbidden')
    return mailbox(token.principal)
  }

  // ---- Pub/Sub

  const NAME_RE = /^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$/
  const notFound = (id: string) => refuse(404, `Resource not found (resource=${id}).`, false)

  function publicPolicy(policy: IamPolicy) {
    const out: Record<string, unknown> = {}
    if (policy.bindings.length > 0) out.version = policy.version || 1
    out.etag = policy.etag
    if (policy.bindings.length > 0) out.bindings = policy.bindings.map((b) => ({ role: b.role, members: [...b.members] }))
    return out
  }

  function nextEtag(): string {
    return Buffer.from(`\x07\x05${String(etagCounter++).padStart(6, '0')}`).toString('base64')
  }

  function topicCall(method: string, project: string, id: string, verb: string | undefined, body: any) {
    const name = `projects/${project}/topics/${id}`
    const topic = topics.get(name)
    if (verb === undefined && method === 'PUT') {
      if (!NAME_RE.test(id) || id.startsWith('goog')) throw refuse(400, `Invalid resource name given (name=${name}). Refer to https://cloud.google.com/pubsub/docs/pubsub-basics#resource_names for more information.`, false)
      if (topic) throw refuse(409, `Resource already exists in the project (resource=${id}).`, false, 'ALREADY_EXISTS')
      topics.set(name, { name, policy: { version: 0, etag: 'ACAB', bindings: [] } })
      return body?.labels ? { name, labels: body.labels } : { name }
    }
    if (!topic) throw notFound(id)
    if (verb === undefined && method === 'GET') return { name }
    if (verb === 'getIamPolicy' && method === 'POST') return publicPolicy(topic.policy)
    if (verb === 'setIamPolicy' && method === 'POST') {
      const policy = body?.policy
      if (!policy || typeof policy !== 'object') throw refuse(400, 'Invalid JSON payload received. Missing "policy".', false)
      if (policy.etag !== undefined && policy.etag !== topic.policy.etag) throw refuse(409, 'There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.', false, 'ABORTED')
      const bindings = Array.isArray(policy.bindings) ? policy.bindings : []
      for (const b of bindings) {
        if (typeof b?.role !== 'string' || !b.role.startsWith('roles/')) throw refuse(400, `Role (${String(b?.role)}) does not exist in the resource's hierarchy.`, false)
        if (!Array.isArray(b.members) || b.members.some((m: unknown) => typeof m !== 'string' || !/^(allUsers|allAuthenticatedUsers|(user|serviceAccount|group|domain|principal|principalSet):.+)$/.test(m))) throw refuse(400, `Invalid member in binding for role ${b.role}.`, false)
      }
      topic.policy = { version: typeof policy.version === 'number' ? policy.version : 1, etag: nextEtag(), bindings: bindings.filter((b: any) => b.members.length > 0).map((b: any) => ({ role: b.role, members: [...b.members] })) }
      return publicPolicy(topic.policy)
    }
    throw refuse(404, 'Method not found.', false)
  }

  function checkedPushConfig(config: any) {
    if (config === undefined || config === null) return {}
    if (typeof config !== 'object') throw refuse(400, 'Invalid push config given.', false)
    const out: Record<string, unknown> = {}
    if (config.pushEndpoint !== undefined && config.pushEndpoint !== '') {
      let endpoint: URL | undefined
      try { endpoint = new URL(String(config.pushEndpoint)) } catch { endpoint = undefined }
      // Pub/Sub pushes only to HTTPS endpoints.
      if (!endpoint || endpoint.protocol !== 'https:') throw refuse(400, `Invalid push endpoint given (endpoint=${String(config.pushEndpoint)}). Refer to https://cloud.google.com/pubsub/docs/create-push-subscription#properties_of_a_push_subscription for more information.`, false)
      out.pushEndpoint = config.pushEndpoint
    }
    if (config.attributes !== undefined) out.attributes = { ...config.attributes }
    if (config.oidcToken !== undefined) {
      if (typeof config.oidcToken?.serviceAccountEmail !== 'string' || !config.oidcToken.serviceAccountEmail.includes('@')) throw refuse(400, 'Invalid OIDC token: a service account email is required.', false)
      out.oidcToken = config.oidcToken.audience ? { serviceAccountEmail: config.oidcToken.serviceAccountEmail, audience: config.oidcToken.audience } : { serviceAccountEmail: config.oidcToken.serviceAccountEmail }
    }
    return out
  }

  function checkedAckDeadline(value: unknown): number {
    if (value === undefined || value === 0) return 10
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 10 || value > 600) throw refuse(400, 'Invalid ack deadline given. The minimum deadline you can specify is 10 seconds. The maximum deadline you can specify is 600 seconds.', false)
    return value
  }

  function subscriptionCall(method: string, project: string, id: string, verb: string | undefined, body: any) {
    const name = `projects/${project}/subscriptions/${id}`
    const existing = subscriptions.get(name)
    if (verb === undefined && method === 'PUT') {
      if (!NAME_RE.test(id) || id.startsWith('goog')) throw refuse(400, `Invalid resource name given (name=${name}).`, false)
      if (existing) throw refuse(409, `Resource already exists in the project (resource=${id}).`, false, 'ALREADY_EXISTS')
      const topicName = body?.topic
      if (typeof topicName !== 'string' || !/^projects\/[^/]+\/topics\/[^/]+$/.test(topicName)) throw refuse(400, `Invalid resource name given (name=${String(topicName)}).`, false)
      if (!topics.has(topicName)) throw notFound(topicName.split('/').pop()!)
      const created = { name, topic: topicName, pushConfig: checkedPushConfig(body.pushConfig), ackDeadlineSeconds: checkedAckDeadline(body.ackDeadlineSeconds), messageRetentionDuration: '604800s', expirationPolicy: { ttl: '2678400s' }, state: 'ACTIVE' }
      subscriptions.set(name, created)
      return created
    }
    if (!existing) throw notFound(id)
    if (verb === undefined && method === 'GET') return existing
    if (verb === undefined && method === 'PATCH') {
      const mask = typeof body?.updateMask === 'string' ? body.updateMask.split(',').map((s: string) => s.trim()).filter(Boolean) : []
      if (mask.length === 0) throw refuse(400, 'The update_mask in the UpdateSubscriptionRequest must be set, and must be non-empty.', false)
      const update = body.subscription ?? {}
      const next = { ...existing }
      for (const field of mask) {
        if (field === 'pushConfig' || field === 'push_config') next.pushConfig = checkedPushConfig(update.pushConfig)
        else if (field === 'ackDeadlineSeconds' || field === 'ack_deadline_seconds') next.ackDeadlineSeconds = checkedAckDeadline(update.ackDeadlineSeconds)
        else if (field === 'labels') next.labels = update.labels
        else throw refuse(400, `Invalid update_mask provided in the UpdateSubscriptionRequest: the '${field}' path is not valid or cannot be updated.`, false)
      }
      subscriptions.set(name, next)
      return next
    }
    if (verb === 'modifyPushConfig' && method === 'POST') {
      if (!body || typeof body !== 'object' || !('pushConfig' in body)) throw refuse(400, 'Invalid JSON payload received. Missing "pushConfig".', false)
      subscriptions.set(name, { ...existing, pushConfig: checkedPushConfig(body.pushConfig) })
      return {}
    }
    throw refuse(404, 'Method not found.', false)
  }

  // ---- Gmail

  function pageOf<T>(items: T[], q: URLSearchParams) {
    const asked = q.get('maxResults')
    let size = asked === null ? 100 : Number(asked)
    if (!Number.isInteger(size) || size < 1) throw refuse(400, `Invalid value '${asked}'. Values must be within the range: [1, 500]`, true)
    size = Math.min(size, 500, pageSize)
    const token = q.get('pageToken')
    let offset = 0
    if (token) {
      offset = Number(Buffer.from(token, 'base64url').toString('utf8'))
      if (!Number.isInteger(offset) || offset < 0) throw refuse(400, 'Invalid pageToken', true)
    }
    const page = items.slice(offset, offset + size)
    const next = offset + size < items.length ? b64url(String(offset + size)) : undefined
    return { page, next }
  }

  function gmailCall(method: string, box: Mailbox, token: Issued, what: string, messageId: string | undefined, q: URLSearchParams, body: any): unknown {
    if (what === 'watch' && method === 'POST' && !messageId) return watch(box, body)
    if (what === 'stop' && method === 'POST' && !messageId) { watches.delete(box.address); return undefined }
    if (what === 'profile' && method === 'GET' && !messageId) {
      return { emailAddress: box.address, messagesTotal: box.messages.length, threadsTotal: new Set(box.messages.map((m) => m.threadId)).size, historyId: String(box.historyId) }
    }
    if (what === 'history' && method === 'GET' && !messageId) return history(box, q)
    if (what === 'messages' && method === 'GET' && !messageId) return listMessages(box, q)
    if (what === 'messages' && method === 'GET' && messageId) return getMessage(box, token, messageId, q)
    throw refuse(404, 'Method not found.', true)
  }

  function watch(box: Mailbox, body: any) {
    const topicName = body?.topicName
    if (typeof topicName !== 'string' || !/^projects\/[^/]+\/topics\/[^/]+$/.test(topicName)) throw refuse(400, 'Invalid topicName does not match projects/SOME_PROJECT/topics/*', true)
    const behaviour = body.labelFilterBehavior ?? body.labelFilterAction
    if (behaviour !== undefined && !/^(include|exclude)$/i.test(String(behaviour))) throw refuse(400, `Invalid value at 'label_filter_behavior' (${String(behaviour)})`, true)
    const topic = topics.get(topicName)
    const publishes = topic?.policy.bindings.some((b) => b.role === 'roles/pubsub.publisher' && b.members.includes(GMAIL_PUSH_MEMBER))
    // Gmail publishes a test message when a watch starts; without the topic or the grant it cannot.
    if (!topic || !publishes) throw refuse(400, `Error sending test message to Cloud PubSub ${topicName} : User not authorized to perform this action.`, true, 'FAILED_PRECONDITION', 'failedPrecondition')
    const historyId = String(box.historyId)
    const expiration = String(Date.now() + WEEK_MS)
    const previous = watches.get(box.address)
    const entry: GmailWatch = { topicName, historyId, expiration, calls: (previous?.calls ?? 0) + 1 }
    if (Array.isArray(body.labelIds)) entry.labelIds = [...body.labelIds]
    if (behaviour !== undefined) entry.labelFilterBehavior = String(behaviour)
    watches.set(box.address, entry)
    return { historyId, expiration }
  }

  function history(box: Mailbox, q: URLSearchParams) {
    const startRaw = q.get('startHistoryId')
    if (startRaw === null) throw refuse(400, 'Missing required parameter: startHistoryId', true, 'INVALID_ARGUMENT', 'required')
    const start = Number(startRaw)
    if (!/^\d+$/.test(startRaw)) throw refuse(400, 'Invalid startHistoryId', true)
    if (start < box.expiredBefore) throw refuse(404, 'Requested entity was not found.', true)
    const types = q.getAll('historyTypes')
    const label = q.get('labelId')
    const matching = types.length > 0 && !types.includes('messageAdded') ? [] : box.history.filter((h) => h.id > start && (!label || h.message.labelIds.includes(label)))
    const { page, next } = pageOf(matching, q)
    const out: Record<string, unknown> = {}
    if (page.length > 0) {
      out.history = page.map((h) => ({
        id: String(h.id),
        messages: [{ id: h.message.id, threadId: h.message.threadId }],
        messagesAdded: [{ message: { id: h.message.id, threadId: h.message.threadId, labelIds: [...h.message.labelIds] } }],
      }))
    }
    if (next) out.nextPageToken = next
    out.historyId = String(box.historyId)
    return out
  }

  function matchesQuery(m: StoredMessage, query: string): boolean {
    const now = Date.now()
    const unitMs: Record<string, number> = { h: 3600e3, d: 86400e3, m: 30 * 86400e3, y: 365 * 86400e3 }
    for (const term of query.split(/\s+/).filter(Boolean)) {
      const age = /^(newer_than|older_than):(\d+)([hdmy])$/i.exec(term)
      if (age) {
        const cutoff = now - Number(age[2]) * unitMs[age[3]!.toLowerCase()]!
        if (age[1]!.toLowerCase() === 'newer_than' ? m.internalDate <= cutoff : m.internalDate > cutoff) return false
        continue
      }
      const label = /^(?:in|label|is):(.+)$/i.exec(term)
      if (label) { if (!m.labelIds.includes(label[1]!.toUpperCase()) && !m.labelIds.includes(label[1]!)) return false; continue }
      const header = /^(from|to|subject):(.+)$/i.exec(term)
      const haystack = header ? (m.headers.find((h) => h.name.toLowerCase() === header[1]!.toLowerCase())?.value ?? '') : `${m.text} ${m.headers.map((h) => h.value).join(' ')}`
      if (!haystack.toLowerCase().includes((header ? header[2]! : term).toLowerCase())) return false
    }
    return true
  }

  function listMessages(box: Mailbox, q: URLSearchParams) {
    const labels = q.getAll('labelIds')
    const query = q.get('q') ?? ''
    const withSpam = q.get('includeSpamTrash') === 'true'
    const matching = [...box.messages].reverse().filter((m) =>
      (withSpam || (!m.labelIds.includes('SPAM') && !m.labelIds.includes('TRASH'))) && labels.every((l) => m.labelIds.includes(l)) && matchesQuery(m, query))
    const { page, next } = pageOf(matching, q)
    const out: Record<string, unknown> = {}
    if (page.length > 0) out.messages = page.map((m) => ({ id: m.id, threadId: m.threadId }))
    if (next) out.nextPageToken = next
    out.resultSizeEstimate = matching.length
    return out
  }

  function part(partId: string, mimeType: string, content: string) {
    const data = Buffer.from(content, 'utf8')
    return { partId, mimeType, filename: '', headers: [{ name: 'Content-Type', value: `${mimeType}; charset="UTF-8"` }], body: { size: data.length, data: b64url(data) } }
  }

  function getMessage(box: Mailbox, token: Issued, id: string, q: URLSearchParams) {
    const m = box.messages.find((x) => x.id === id)
    if (!m) throw refuse(404, 'Requested entity was not found.', true)
    const format = q.get('format') ?? 'full'
    if (!['full', 'metadata', 'minimal', 'raw'].includes(format)) throw refuse(400, `Invalid value at 'format' (${format})`, true)
    if (format !== 'metadata' && format !== 'minimal' && !token.scopes.some((s) => GMAIL_READ_SCOPES.includes(s))) throw refuse(403, "Metadata scope doesn't allow format FULL", true)
    const out: Record<string, unknown> = { id: m.id, threadId: m.threadId, labelIds: [...m.labelIds], snippet: m.snippet, sizeEstimate: Buffer.byteLength(m.raw), historyId: String(m.historyId), internalDate: String(m.internalDate) }
    const mimeType = m.html !== undefined ? 'multipart/alternative' : 'text/plain'
    if (format === 'metadata') {
      const wanted = q.getAll('metadataHeaders').map((h) => h.toLowerCase())
      out.payload = { partId: '', mimeType, filename: '', headers: m.headers.filter((h) => wanted.length === 0 || wanted.includes(h.name.toLowerCase())) }
    } else if (format === 'full') {
      out.payload = m.html !== undefined
        ? { partId: '', mimeType, filename: '', headers: m.headers, body: { size: 0 }, parts: [part('0', 'text/plain', m.text), part('1', 'text/html', m.html)] }
        : { ...part('', 'text/plain', m.text), headers: m.headers }
    } else if (format === 'raw') {
      out.raw = b64url(m.raw)
    }
    return out
  }

  function addMessage(address: string, input: Parameters<FakeGoogle['addMessage']>[1]) {
    const box = mailbox(address)
    const internalDate = input.date ? Date.parse(input.date) : Date.now()
    if (Number.isNaN(internalDate)) throw new Error(`addMessage: not a date: ${input.date}`)
    // Gmail's ids are 16 hex digits; its history ids grow by more than one per change.
    const id = (0x18f0000000000000n + BigInt(Date.now()) * 4096n + BigInt(++messageCounter)).toString(16).slice(-16)
    box.historyId += 3
    const headers = [
      { name: 'From', value: input.from },
      { name: 'To', value: input.to ?? box.address },
      { name: 'Subject', value: input.subject },
      { name: 'Date', value: input.date ?? rfc2822(internalDate) },
      { name: 'Message-ID', value: `<${randomId(18)}@mail.gmail.com>` },
      { name: 'MIME-Version', value: '1.0' },
    ]
    const boundary = `0000000000${randomBytes(8).toString('hex')}`
    const head = headers.map((h) => `${h.name}: ${h.value}`).join('\r\n')
    const raw = input.html !== undefined
      ? `${head}\r\nContent-Type: multipart/alternative; boundary="${boundary}"\r\n\r\n--${boundary}\r\nContent-Type: text/plain; charset="UTF-8"\r\n\r\n${input.text}\r\n--${boundary}\r\nContent-Type: text/html; charset="UTF-8"\r\n\r\n${input.html}\r\n--${boundary}--\r\n`
      : `${head}\r\nContent-Type: text/plain; charset="UTF-8"\r\n\r\n${input.text}\r\n`
    headers.push({ name: 'Content-Type', value: input.html !== undefined ? `multipart/alternative; boundary="${boundary}"` : 'text/plain; charset="UTF-8"' })
    const message: StoredMessage = { id, threadId: id, labelIds: input.labelIds ? [...input.labelIds] : ['UNREAD', 'INBOX'], historyId: box.historyId, internalDate, headers, text: input.text, html: input.html, raw, snippet: escapeSnippet(input.text) }
    box.messages.push(message)
    box.history.push({ id: box.historyId, message })
    return { id, historyId: String(box.historyId) }
  }

  return {
    url,
    tokenUrl,
    gmailUrl: url,
    pubsubUrl: url,
    certsUrl,
    authUrl,
    requests,
    topics,
    subscriptions,
    watches,

    serviceAccount(name, opts = {}) {
      const { privateKey, publicKey } = rsaKeyPair()
      const email = `${name}@${PROJECT}.iam.gserviceaccount.com`.toLowerCase()
      const keyId = randomBytes(20).toString('hex')
      accounts.set(email, { email, keyId, publicKey, allowed: opts.scopes ?? [SCOPES.cloudPlatform, SCOPES.pubsub, ...GMAIL_ANY_SCOPES], delegates: accounts.get(email)?.delegates ?? new Set() })
      const clientId = String(100000000000000000000n + BigInt(accounts.size))
      return {
        type: 'service_account',
        project_id: PROJECT,
        private_key_id: keyId,
        private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
        client_email: email,
        client_id: clientId,
        auth_uri: authUrl,
        token_uri: tokenUrl,
        auth_provider_x509_cert_url: `${url}/oauth2/v1/certs`,
        client_x509_cert_url: `${url}/robot/v1/metadata/x509/${encodeURIComponent(email)}`,
        universe_domain: 'googleapis.com',
      }
    },

    delegate(clientEmail, address) {
      const account = accounts.get(clientEmail.toLowerCase())
      if (!account) throw new Error(`delegate: no service account ${clientEmail}`)
      account.delegates.add(address.toLowerCase())
      mailbox(address)
    },

    oauthClient() {
      const id = `${100000000000 + clients.size}-${randomBytes(16).toString('hex')}.apps.googleusercontent.com`
      const secret = `GOCSPX-${randomId(21)}`
      clients.set(id, { id, secret })
      return { installed: { client_id: id, project_id: PROJECT, auth_uri: authUrl, token_uri: tokenUrl, auth_provider_x509_cert_url: `${url}/oauth2/v1/certs`, client_secret: secret, redirect_uris: ['http://localhost'] } }
    },

    refreshTokenFor(address, client, scopes = [SCOPES.gmailReadonly]) {
      const id = client?.installed?.client_id ?? client?.web?.client_id ?? client?.client_id
      if (!clients.has(id)) throw new Error('refreshTokenFor: not a client this fake issued')
      const token = `1//0${randomId(60)}`
      refreshTokens.set(token, { clientId: id, mailbox: address.toLowerCase(), scopes: [...scopes] })
      mailbox(address)
      return token
    },

    consentAs(address) {
      consenting = address.toLowerCase()
      mailbox(address)
    },

    addMessage,

    expireHistoryBefore(address, historyId) {
      mailbox(address).expiredBefore = Number(historyId)
    },

    failNext(route, status, opts = {}) {
      failures.push({ route: routePattern(route), status, count: opts.count ?? 1, retryAfter: opts.retryAfter, message: opts.message })
    },

    pushBody(address, subscription, opts = {}) {
      const box = mailbox(address)
      const name = subscription.startsWith('projects/') ? subscription : ([...subscriptions.keys()].find((k) => k.endsWith(`/subscriptions/${subscription}`)) ?? `projects/${PROJECT}/subscriptions/${subscription}`)
      const messageId = opts.messageId ?? String(10000000000000000n + BigInt(++pushCounter))
      const publishTime = new Date().toISOString()
      // Gmail's notification carries historyId as a JSON number (its documentation shows a string).
      const data = Buffer.from(JSON.stringify({ emailAddress: box.address, historyId: box.historyId })).toString('base64')
      return { message: { data, messageId, message_id: messageId, publishTime, publish_time: publishTime, attributes: {} }, subscription: name }
    },

    oidcToken(opts) {
      const now = nowSeconds()
      const iat = opts.expired ? now - 7200 : now
      const payload = { aud: opts.audience, azp: '113774264463038321964', email: opts.email, email_verified: true, exp: iat + 3600, iat, iss: opts.issuer ?? 'https://accounts.google.com', sub: '113774264463038321964' }
      const published = googleKeys[0]!
      if (opts.unknownKid) return signJwt({ alg: 'RS256', kid: randomBytes(20).toString('hex'), typ: 'JWT' }, payload, stranger())
      // A bad signature: the published kid, signed by a key Google never published.
      return signJwt({ alg: 'RS256', kid: published.kid, typ: 'JWT' }, payload, opts.badSignature ? stranger() : published.privateKey)
    },

    setTokenLifetime(seconds) { tokenLifetime = seconds },
    setPageSize(size) { pageSize = size },

    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

/** The public key a JWKS entry describes (for tests that check a token by hand). */
export function keyFromJwk(jwk: Record<string, unknown>): KeyObject {
  return createPublicKey({ key: jwk as any, format: 'jwk' })
}
