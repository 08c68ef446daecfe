// The fake Google itself, held to what Google documents: token grants (JWT-bearer, PKCE code,
// refresh) and their refusals, bearer and scope checks, Pub/Sub topics, subscriptions and IAM
// etags, Gmail watch, history and messages, scripted failures, and OIDC tokens that verify
// against the published certs.
import { createHash, generateKeyPairSync, randomBytes, sign, verify, type KeyObject } from 'node:crypto'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { GMAIL_PUSH_MEMBER, keyFromJwk, SCOPES, startFakeGoogle, type FakeGoogle } from './google.js'

let g: FakeGoogle

const b64url = (s: string | Buffer) => Buffer.from(s).toString('base64url')

function assertion(sa: Record<string, string>, claims: Record<string, unknown> = {}, key?: KeyObject | string): string {
  const now = Math.floor(Date.now() / 1000)
  const payload = { iss: sa.client_email, scope: SCOPES.pubsub, aud: sa.token_uri, iat: now, exp: now + 3600, ...claims }
  const input = `${b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: sa.private_key_id }))}.${b64url(JSON.stringify(payload))}`
  return `${input}.${b64url(sign('sha256', Buffer.from(input), key ?? sa.private_key!))}`
}

async function form(url: string, fields: Record<string, string>) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields) })
  return { status: res.status, headers: res.headers, body: await res.json() as any }
}

async function tokenFor(sa: Record<string, string>, claims: Record<string, unknown> = {}): Promise<string> {
  const r = await form(g.tokenUrl, { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: assertion(sa, claims) })
  assert.is(r.status, 200, JSON.stringify(r.body))
  return r.body.access_token
}

async function call(method: string, path: string, token: string | undefined, body?: unknown) {
  const headers: Record<string, string> = {}
  if (token) headers.authorization = `Bearer ${token}`
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(`${g.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined }
}

async function mailboxToken(mailbox: string, scopes?: string[]): Promise<string> {
  const client = g.oauthClient()
  const refresh = g.refreshTokenFor(mailbox, client, scopes)
  const r = await form(g.tokenUrl, { grant_type: 'refresh_token', refresh_token: refresh, client_id: client.installed.client_id, client_secret: client.installed.client_secret })
  assert.is(r.status, 200, JSON.stringify(r.body))
  return r.body.access_token
}

async function topicWithGmailGrant(admin: string, topic = 'projects/hookgate-test/topics/gmail') {
  assert.is((await call('PUT', `/v1/${topic}`, admin, {})).status, 200)
  const policy = (await call('POST', `/v1/${topic}:getIamPolicy`, admin, {})).body
  const set = await call('POST', `/v1/${topic}:setIamPolicy`, admin, { policy: { etag: policy.etag, bindings: [{ role: 'roles/pubsub.publisher', members: [GMAIL_PUSH_MEMBER] }] } })
  assert.is(set.status, 200)
  return topic
}

const each = (s: ReturnType<typeof suite>) => {
  s.before.each(async () => { g = await startFakeGoogle() })
  s.after.each(async () => { await g.close() })
}

// ---- POST /token

const token = suite('POST /token')
each(token)

token('grants an access token for a JWT assertion signed by the service account key, with the scope asked for', async () => {
  const sa = g.serviceAccount('admin')
  const r = await form(g.tokenUrl, { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: assertion(sa) })
  assert.is(r.status, 200)
  assert.is(r.body.token_type, 'Bearer')
  assert.is(r.body.expires_in, 3600)
  assert.is(r.body.scope, SCOPES.pubsub)
  assert.ok(r.body.access_token.startsWith('ya29.'))
  assert.is(g.requests[0]!.body.grant_type, 'urn:ietf:params:oauth:grant-type:jwt-bearer')
})

token('refuses a JWT assertion signed with a key that is not the service account\'s', async () => {
  const sa = g.serviceAccount('admin')
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const r = await form(g.tokenUrl, { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: assertion(sa, {}, privateKey) })
  assert.is(r.status, 400)
  assert.equal(r.body, { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' })
})

token('refuses an assertion for another audience, or outside its iat/exp window, or without a scope', async () => {
  const sa = g.serviceAccount('admin')
  const now = Math.floor(Date.now() / 1000)
  for (const claims of [{ aud: 'https://oauth2.googleapis.com/token' }, { iat: now - 7200, exp: now - 3600 }, { iat: now, exp: now + 7200 }]) {
    const r = await form(g.tokenUrl, { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: assertion(sa, claims) })
    assert.is(r.status, 400)
    assert.is(r.body.error, 'invalid_grant')
  }
  const r = await form(g.tokenUrl, { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: assertion(sa, { scope: undefined }) })
  assert.is(r.body.error, 'invalid_scope')
})

token('impersonates a mailbox only when delegated, as domain-wide delegation does', async () => {
  const sa = g.serviceAccount('reader')
  const refused = await form(g.tokenUrl, { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: assertion(sa, { sub: 'ann@example.com', scope: SCOPES.gmailReadonly }) })
  assert.is(refused.status, 401)
  assert.is(refused.body.error, 'unauthorized_client')
  g.delegate(sa.client_email!, 'ann@example.com')
  const access = await tokenFor(sa, { sub: 'ann@example.com', scope: SCOPES.gmailReadonly })
  const profile = await call('GET', '/gmail/v1/users/me/profile', access)
  assert.is(profile.status, 200)
  assert.is(profile.body.emailAddress, 'ann@example.com')
})

token('the consent redirect and the code grant hold PKCE S256 and the redirect_uri, and give a refresh token that refreshes', async () => {
  const client = g.oauthClient().installed
  g.consentAs('ann@example.com')
  const verifier = b64url(randomBytes(32))
  const challenge = b64url(createHash('sha256').update(verifier).digest())
  const redirectUri = 'http://127.0.0.1:49152/callback'
  const q = new URLSearchParams({ client_id: client.client_id, redirect_uri: redirectUri, response_type: 'code', scope: SCOPES.gmailReadonly, state: 'st4te', code_challenge: challenge, code_challenge_method: 'S256', access_type: 'offline' })
  const consent = await fetch(`${g.authUrl}?${q}`, { redirect: 'manual' })
  assert.is(consent.status, 302)
  const back = new URL(consent.headers.get('location')!)
  assert.is(`${back.origin}${back.pathname}`, redirectUri)
  assert.is(back.searchParams.get('state'), 'st4te')
  const code = back.searchParams.get('code')!
  const grant = { grant_type: 'authorization_code', code, client_id: client.client_id, client_secret: client.client_secret, redirect_uri: redirectUri }

  assert.equal((await form(g.tokenUrl, { ...grant, code_verifier: 'not-the-verifier' })).body, { error: 'invalid_grant', error_description: 'Invalid code verifier.' })
  assert.is((await form(g.tokenUrl, { ...grant, code_verifier: verifier, redirect_uri: 'http://127.0.0.1:1/other' })).body.error, 'redirect_uri_mismatch')
  const ok = await form(g.tokenUrl, { ...grant, code_verifier: verifier })
  assert.is(ok.status, 200)
  assert.ok(ok.body.refresh_token)
  assert.is((await form(g.tokenUrl, { ...grant, code_verifier: verifier })).body.error, 'invalid_grant', 'a code is good once')

  const wrongSecret = await form(g.tokenUrl, { grant_type: 'refresh_token', refresh_token: ok.body.refresh_token, client_id: client.client_id, client_secret: 'GOCSPX-wrong' })
  assert.is(wrongSecret.status, 401)
  assert.is(wrongSecret.body.error, 'invalid_client')
  const refreshed = await form(g.tokenUrl, { grant_type: 'refresh_token', refresh_token: ok.body.refresh_token, client_id: client.client_id, client_secret: client.client_secret })
  assert.is(refreshed.status, 200)
  assert.is((await call('GET', '/gmail/v1/users/ann@example.com/profile', refreshed.body.access_token)).status, 200)
})

token.run()

// ---- bearer tokens and scopes

const bearer = suite('bearer tokens')
each(bearer)

bearer('a request without a bearer token, or with one the fake never issued, is 401 UNAUTHENTICATED', async () => {
  for (const t of [undefined, 'ya29.made-up']) {
    const r = await call('GET', '/v1/projects/hookgate-test/topics/gmail', t)
    assert.is(r.status, 401)
    assert.is(r.body.error.status, 'UNAUTHENTICATED')
    assert.is(r.body.error.code, 401)
  }
  const gmail = await call('GET', '/gmail/v1/users/me/profile', undefined)
  assert.is(gmail.body.error.errors[0].domain, 'global')
})

bearer('an access token stops working once its lifetime has passed, so a client must refresh', async () => {
  g.setTokenLifetime(0)
  const sa = g.serviceAccount('admin')
  const r = await form(g.tokenUrl, { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: assertion(sa) })
  assert.is(r.body.expires_in, 0)
  assert.is((await call('PUT', '/v1/projects/hookgate-test/topics/gmail', r.body.access_token, {})).status, 401)
})

bearer('a token without a Pub/Sub scope, or a principal not allowed Pub/Sub, is 403 PERMISSION_DENIED', async () => {
  const gmailOnly = await tokenFor(g.serviceAccount('admin'), { scope: SCOPES.gmailReadonly })
  const r = await call('PUT', '/v1/projects/hookgate-test/topics/gmail', gmailOnly, {})
  assert.is(r.status, 403)
  assert.equal(r.body, { error: { code: 403, message: 'Request had insufficient authentication scopes.', status: 'PERMISSION_DENIED' } })
  const reader = await tokenFor(g.serviceAccount('reader', { scopes: [SCOPES.gmailReadonly] }), { scope: SCOPES.cloudPlatform })
  const denied = await call('PUT', '/v1/projects/hookgate-test/topics/gmail', reader, {})
  assert.is(denied.status, 403)
  assert.is(denied.body.error.status, 'PERMISSION_DENIED')
  const mailbox = await mailboxToken('ann@example.com')
  assert.is((await call('GET', '/v1/projects/hookgate-test/topics/gmail', mailbox)).status, 403)
})

bearer('Gmail refuses a mailbox other than the token\'s, and a service account reading its own mailbox', async () => {
  const ann = await mailboxToken('ann@example.com')
  assert.is((await call('GET', '/gmail/v1/users/bob@example.com/profile', ann)).status, 403)
  const admin = await tokenFor(g.serviceAccount('admin'), { scope: SCOPES.gmailReadonly })
  const r = await call('GET', '/gmail/v1/users/me/profile', admin)
  assert.is(r.status, 400)
  assert.is(r.body.error.status, 'FAILED_PRECONDITION')
})

bearer.run()

// ---- Pub/Sub

const pubsub = suite('Pub/Sub v1')
each(pubsub)

pubsub('PUT creates a topic once: a second PUT is 409 ALREADY_EXISTS, an unknown topic is 404 NOT_FOUND', async () => {
  const admin = await tokenFor(g.serviceAccount('admin'))
  assert.is((await call('GET', '/v1/projects/hookgate-test/topics/gmail', admin)).body.error.message, 'Resource not found (resource=gmail).')
  const created = await call('PUT', '/v1/projects/hookgate-test/topics/gmail', admin, {})
  assert.equal(created.body, { name: 'projects/hookgate-test/topics/gmail' })
  const again = await call('PUT', '/v1/projects/hookgate-test/topics/gmail', admin, {})
  assert.is(again.status, 409)
  assert.is(again.body.error.status, 'ALREADY_EXISTS')
  assert.ok(g.topics.has('projects/hookgate-test/topics/gmail'))
})

pubsub('setIamPolicy with a stale etag is 409 ABORTED; a read-modify-write keeps the other bindings', async () => {
  const admin = await tokenFor(g.serviceAccount('admin'))
  const name = 'projects/hookgate-test/topics/gmail'
  g.topics.set(name, { name, policy: { version: 1, etag: 'BwYAAAAAAAE=', bindings: [{ role: 'roles/pubsub.viewer', members: ['user:ops@example.com'] }] } })
  const read = await call('POST', `/v1/${name}:getIamPolicy`, admin, { options: { requestedPolicyVersion: 3 } })
  assert.equal(read.body, { version: 1, etag: 'BwYAAAAAAAE=', bindings: [{ role: 'roles/pubsub.viewer', members: ['user:ops@example.com'] }] })
  const bindings = [...read.body.bindings, { role: 'roles/pubsub.publisher', members: [GMAIL_PUSH_MEMBER] }]
  const written = await call('POST', `/v1/${name}:setIamPolicy`, admin, { policy: { etag: read.body.etag, bindings } })
  assert.is(written.status, 200)
  assert.is.not(written.body.etag, read.body.etag)
  assert.equal(g.topics.get(name)!.policy.bindings, bindings)
  const stale = await call('POST', `/v1/${name}:setIamPolicy`, admin, { policy: { etag: read.body.etag, bindings: [] } })
  assert.is(stale.status, 409)
  assert.is(stale.body.error.status, 'ABORTED')
  assert.equal(g.topics.get(name)!.policy.bindings, bindings)
})

pubsub('a push subscription is created, read, patched by updateMask and repointed by modifyPushConfig; Pub/Sub pushes only to https', async () => {
  const admin = await tokenFor(g.serviceAccount('admin'))
  const topic = 'projects/hookgate-test/topics/gmail'
  const path = '/v1/projects/hookgate-test/subscriptions/gmail-push'
  assert.is((await call('PUT', path, admin, { topic, pushConfig: { pushEndpoint: 'https://x.example/p' } })).status, 404, 'the topic must exist')
  await call('PUT', `/v1/${topic}`, admin, {})
  assert.is((await call('PUT', path, admin, { topic, pushConfig: { pushEndpoint: 'http://x.example/p' } })).status, 400)
  const created = await call('PUT', path, admin, { topic, pushConfig: { pushEndpoint: 'https://x.example/p?token=a', oidcToken: { serviceAccountEmail: 'push@hookgate-test.iam.gserviceaccount.com', audience: 'hookgate' } }, ackDeadlineSeconds: 60 })
  assert.is(created.status, 200)
  assert.equal(created.body.pushConfig, { pushEndpoint: 'https://x.example/p?token=a', oidcToken: { serviceAccountEmail: 'push@hookgate-test.iam.gserviceaccount.com', audience: 'hookgate' } })
  assert.is((await call('PUT', path, admin, { topic })).status, 409)
  assert.is((await call('PATCH', path, admin, { subscription: { ackDeadlineSeconds: 30 } })).status, 400, 'updateMask is required')
  const patched = await call('PATCH', path, admin, { subscription: { pushConfig: { pushEndpoint: 'https://x.example/p?token=b' }, ackDeadlineSeconds: 30 }, updateMask: 'pushConfig,ackDeadlineSeconds' })
  assert.is(patched.body.ackDeadlineSeconds, 30)
  assert.equal(patched.body.pushConfig, { pushEndpoint: 'https://x.example/p?token=b' })
  assert.equal((await call('POST', `${path}:modifyPushConfig`, admin, { pushConfig: { pushEndpoint: 'https://x.example/p?token=c' } })).body, {})
  assert.is((await call('GET', path, admin)).body.pushConfig.pushEndpoint, 'https://x.example/p?token=c')
  assert.is(g.subscriptions.get('projects/hookgate-test/subscriptions/gmail-push').topic, topic)
})

pubsub.run()

// ---- Gmail

const gmail = suite('Gmail v1')
each(gmail)

gmail('watch is 400 FAILED_PRECONDITION until the topic grants Gmail\'s push account publish rights, then lasts 7 days', async () => {
  const admin = await tokenFor(g.serviceAccount('admin'))
  const ann = await mailboxToken('ann@example.com')
  const request = { topicName: 'projects/hookgate-test/topics/gmail', labelIds: ['INBOX'], labelFilterBehavior: 'include' }
  const early = await call('POST', '/gmail/v1/users/me/watch', ann, request)
  assert.is(early.status, 400)
  assert.is(early.body.error.status, 'FAILED_PRECONDITION')
  await topicWithGmailGrant(admin)
  const before = Date.now()
  const ok = await call('POST', '/gmail/v1/users/me/watch', ann, request)
  assert.is(ok.status, 200)
  assert.is(typeof ok.body.historyId, 'string')
  assert.ok(Number(ok.body.expiration) >= before + 7 * 24 * 3600 * 1000)
  await call('POST', '/gmail/v1/users/me/watch', ann, request)
  assert.is(g.watches.get('ann@example.com')!.calls, 2)
  assert.is((await call('POST', '/gmail/v1/users/me/stop', ann)).status, 204)
  assert.not.ok(g.watches.has('ann@example.com'))
})

gmail('history.list pages at the set page size and names the mailbox\'s current historyId', async () => {
  const ann = await mailboxToken('ann@example.com')
  const start = (await call('GET', '/gmail/v1/users/me/profile', ann)).body.historyId
  const added = [1, 2, 3].map((n) => g.addMessage('ann@example.com', { from: 'bob@example.com', subject: `s${n}`, text: `t${n}` }))
  g.setPageSize(2)
  const first = await call('GET', `/gmail/v1/users/me/history?startHistoryId=${start}&historyTypes=messageAdded`, ann)
  assert.equal(first.body.history.map((h: any) => h.messagesAdded[0].message.id), [added[0]!.id, added[1]!.id])
  assert.is(first.body.historyId, added[2]!.historyId)
  assert.ok(first.body.nextPageToken)
  const second = await call('GET', `/gmail/v1/users/me/history?startHistoryId=${start}&historyTypes=messageAdded&pageToken=${first.body.nextPageToken}`, ann)
  assert.equal(second.body.history.map((h: any) => h.messages[0].id), [added[2]!.id])
  assert.is(second.body.nextPageToken, undefined)
  const none = await call('GET', `/gmail/v1/users/me/history?startHistoryId=${added[2]!.historyId}`, ann)
  assert.equal(none.body, { historyId: added[2]!.historyId })
})

gmail('history.list from an expired startHistoryId is 404 Requested entity was not found.', async () => {
  const ann = await mailboxToken('ann@example.com')
  const old = g.addMessage('ann@example.com', { from: 'bob@example.com', subject: 'old', text: 'old' })
  const fresh = g.addMessage('ann@example.com', { from: 'bob@example.com', subject: 'new', text: 'new' })
  g.expireHistoryBefore('ann@example.com', fresh.historyId)
  const r = await call('GET', `/gmail/v1/users/me/history?startHistoryId=${old.historyId}`, ann)
  assert.is(r.status, 404)
  assert.equal(r.body, { error: { code: 404, message: 'Requested entity was not found.', errors: [{ message: 'Requested entity was not found.', domain: 'global', reason: 'notFound' }], status: 'NOT_FOUND' } })
})

gmail('messages.list honours newer_than and messages.get answers a real multipart/alternative tree', async () => {
  const ann = await mailboxToken('ann@example.com')
  g.addMessage('ann@example.com', { from: 'old@example.com', subject: 'old', text: 'old', date: new Date(Date.now() - 10 * 86400e3).toUTCString() })
  const m = g.addMessage('ann@example.com', { from: 'Bob <bob@example.com>', subject: 'Hi', text: 'Hello Ann, it\'s me', html: '<p>Hello Ann</p>' })
  const list = await call('GET', '/gmail/v1/users/me/messages?q=newer_than%3A2d&maxResults=50', ann)
  assert.equal(list.body, { messages: [{ id: m.id, threadId: m.id }], resultSizeEstimate: 1 })
  const full = (await call('GET', `/gmail/v1/users/ann%40example.com/messages/${m.id}?format=full`, ann)).body
  assert.is(full.payload.mimeType, 'multipart/alternative')
  const header = (name: string) => full.payload.headers.find((h: any) => h.name === name)?.value
  assert.is(header('From'), 'Bob <bob@example.com>')
  assert.is(header('Subject'), 'Hi')
  assert.ok(header('Message-ID') && header('Date'))
  const [plain, html] = full.payload.parts
  assert.is(Buffer.from(plain.body.data, 'base64url').toString('utf8'), 'Hello Ann, it\'s me')
  assert.is(html.mimeType, 'text/html')
  assert.is(full.snippet, 'Hello Ann, it&#39;s me')
  assert.is(full.historyId, m.historyId)
  assert.equal(full.labelIds, ['UNREAD', 'INBOX'])
  const meta = (await call('GET', `/gmail/v1/users/me/messages/${m.id}?format=metadata`, ann)).body
  assert.is(meta.payload.parts, undefined)
  assert.is((await call('GET', '/gmail/v1/users/me/messages/18f0000000000000', ann)).status, 404)
})

gmail('failNext answers the next matching calls with the API\'s error body and Retry-After, then serves again', async () => {
  const ann = await mailboxToken('ann@example.com')
  g.failNext('GET /gmail/v1/users/me/history', 429, { count: 2, retryAfter: 7 })
  for (let i = 0; i < 2; i++) {
    const r = await call('GET', '/gmail/v1/users/me/history?startHistoryId=1', ann)
    assert.is(r.status, 429)
    assert.is(r.headers.get('retry-after'), '7')
    assert.is(r.body.error.status, 'RESOURCE_EXHAUSTED')
    assert.is(r.body.error.errors[0].reason, 'rateLimitExceeded')
  }
  assert.is((await call('GET', '/gmail/v1/users/me/history?startHistoryId=100000', ann)).status, 200)
  g.failNext('POST /token', 503)
  const t = await form(g.tokenUrl, { grant_type: 'refresh_token' })
  assert.is(t.status, 503)
  assert.is(typeof t.body.error, 'string')
  assert.is(typeof t.body.error_description, 'string')
})

gmail.run()

// ---- OIDC tokens and pushes

const oidc = suite('oidcToken and pushBody')
each(oidc)

function verifyWithCerts(jwt: string, keys: any[]): { ok: boolean; payload: any; kidKnown: boolean } {
  const [h, p, s] = jwt.split('.') as [string, string, string]
  const header = JSON.parse(Buffer.from(h, 'base64url').toString())
  const jwk = keys.find((k) => k.kid === header.kid)
  const payload = JSON.parse(Buffer.from(p, 'base64url').toString())
  if (!jwk) return { ok: false, payload, kidKnown: false }
  return { ok: verify('sha256', Buffer.from(`${h}.${p}`), keyFromJwk(jwk), Buffer.from(s, 'base64url')), payload, kidKnown: true }
}

oidc('an OIDC token verifies against the published certs with node:crypto; a wrong one fails in the way asked', async () => {
  const certs = await fetch(g.certsUrl)
  assert.match(certs.headers.get('cache-control')!, /public, max-age=\d+/)
  const { keys } = await certs.json() as { keys: any[] }
  assert.ok(keys.length >= 1 && keys.every((k) => k.kty === 'RSA' && k.alg === 'RS256' && k.use === 'sig' && k.kid && k.n && k.e))
  const good = verifyWithCerts(g.oidcToken({ audience: 'hookgate', email: 'push@hookgate-test.iam.gserviceaccount.com' }), keys)
  assert.ok(good.ok)
  assert.is(good.payload.iss, 'https://accounts.google.com')
  assert.is(good.payload.aud, 'hookgate')
  assert.is(good.payload.email_verified, true)
  assert.ok(good.payload.exp > Date.now() / 1000)
  assert.not.ok(verifyWithCerts(g.oidcToken({ audience: 'a', email: 'e@x', badSignature: true }), keys).ok)
  assert.not.ok(verifyWithCerts(g.oidcToken({ audience: 'a', email: 'e@x', unknownKid: true }), keys).kidKnown)
  const expired = verifyWithCerts(g.oidcToken({ audience: 'a', email: 'e@x', expired: true }), keys)
  assert.ok(expired.ok && expired.payload.exp < Date.now() / 1000)
  assert.is(verifyWithCerts(g.oidcToken({ audience: 'a', email: 'e@x', issuer: 'https://evil.example' }), keys).payload.iss, 'https://evil.example')
})

oidc('a push body carries the mailbox and its current historyId as Pub/Sub sends them', async () => {
  const added = g.addMessage('ann@example.com', { from: 'bob@example.com', subject: 's', text: 't' })
  const body = g.pushBody('ann@example.com', 'projects/hookgate-test/subscriptions/gmail-push', { messageId: '42' })
  assert.equal(JSON.parse(Buffer.from(body.message.data, 'base64').toString()), { emailAddress: 'ann@example.com', historyId: Number(added.historyId) })
  assert.is(body.message.messageId, '42')
  assert.is(body.message.message_id, '42')
  assert.is(body.message.publishTime, body.message.publish_time)
  assert.is(body.subscription, 'projects/hookgate-test/subscriptions/gmail-push')
})

oidc.run()
