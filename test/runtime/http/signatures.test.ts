// Signed mappings over real HTTP: a sender's signature over the raw body is its credential (no hook
// token), a repeated delivery is answered as the original and starts nothing (also after a restart),
// Slack's url_verification and GitHub's ping are answered without a run, a signed path refuses a
// token-only request, and signature failures count toward the same lock-out as a wrong token.
import { createHmac, randomUUID } from 'node:crypto'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertError, assertOk, post, rowOf, send, serveProject, compileProject, setTestToken, until, type Harness, type Project, type Reply } from './harness.js'
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { hookgateBin } from '../../helpers/paths.js'
import { Webhook as SvixWebhook } from 'svix'
import { Webhook as StandardWebhook } from 'standardwebhooks'
import { sign as githubSign, verify as githubVerify } from '@octokit/webhooks-methods'
import { storeArgs } from '../../helpers/stores.js'
import { readRows } from '../../helpers/history.js'

const TOKEN = setTestToken()
process.env.HOOKGATE_TEST_GH_SECRET = 'gh-signing-secret'
process.env.HOOKGATE_TEST_STRIPE_OLD = 'whsec_stripe_old'
process.env.HOOKGATE_TEST_STRIPE_NEW = 'whsec_stripe_new'
process.env.HOOKGATE_TEST_SLACK_SECRET = '8f742231b10e8888abcd99yyyzzz85a5'
const SW_KEY = Buffer.from('standard webhooks test key 32by!')
process.env.HOOKGATE_TEST_SW_SECRET = 'whsec_' + SW_KEY.toString('base64')
process.env.HOOKGATE_TEST_HMAC_SECRET = 'generic-hmac-secret'

const CONFIG = `
server:
  authFailures: { limit: 10, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: github
      match: { path: github }
      action: wake
      textTemplate: "github {{headers.x-github-event}}"
      signature: { scheme: github, secret: "\${HOOKGATE_TEST_GH_SECRET}" }
    - id: github-form
      match: { path: github-form, when: { payload.action: opened } }
      action: agent
      messageTemplate: "issue #{{payload.issue.number}} {{payload.action}} by {{payload.sender.login}}"
      signature: { scheme: github, secret: "\${HOOKGATE_TEST_GH_SECRET}" }
    - id: stripe
      match: { path: stripe }
      action: agent
      messageTemplate: "stripe {{payload.type}}"
      signature:
        scheme: stripe
        secret: ["\${HOOKGATE_TEST_STRIPE_OLD}", { env: HOOKGATE_TEST_STRIPE_NEW }]
    - id: slack
      match: { path: slack }
      action: wake
      textTemplate: "slack {{payload.command}}{{payload.event.type}}"
      signature: { scheme: slack, secret: "\${HOOKGATE_TEST_SLACK_SECRET}" }
    - id: sw
      match: { path: sw }
      action: wake
      textTemplate: "sw {{payload.type}}"
      signature: { scheme: standard-webhooks, secret: "\${HOOKGATE_TEST_SW_SECRET}", toleranceSeconds: 60 }
    - id: generic
      match: { path: generic }
      action: wake
      textTemplate: "generic {{payload.n}}"
      signature: { scheme: hmac, secret: "\${HOOKGATE_TEST_HMAC_SECRET}", header: x-sig, prefix: "sha256=", timestampHeader: x-ts, signedString: "{{timestamp}}.{{body}}" }
    - id: generic-id
      match: { path: generic-id }
      action: wake
      textTemplate: "generic-id {{payload.n}}"
      signature: { scheme: hmac, secret: "\${HOOKGATE_TEST_HMAC_SECRET}", header: x-sig, prefix: "sha256=", timestampHeader: x-ts, idHeader: x-delivery, signedString: "{{id}}.{{timestamp}}.{{body}}" }
    - id: plain
      match: { path: plain }
      action: wake
      textTemplate: "plain"
`

const now = () => Math.floor(Date.now() / 1000)
const hmacHex = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest('hex')

function github(h: Harness, body: string, options: { event?: string; delivery?: string; secret?: string } = {}): Promise<Reply> {
  return send(h.origin, '/hooks/github', {
    body,
    headers: {
      'content-type': 'application/json',
      'x-github-event': options.event ?? 'issues',
      'x-github-delivery': options.delivery ?? randomUUID(),
      'x-hub-signature-256': `sha256=${hmacHex(options.secret ?? 'gh-signing-secret', body)}`,
    },
  })
}

function stripe(h: Harness, body: string, secret = 'whsec_stripe_new', t = now()): Promise<Reply> {
  return send(h.origin, '/hooks/stripe', { body, headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${hmacHex(secret, `${t}.${body}`)}` } })
}

function slack(h: Harness, body: string, contentType: string, t = now()): Promise<Reply> {
  return send(h.origin, '/hooks/slack', { body, headers: { 'content-type': contentType, 'x-slack-request-timestamp': String(t), 'x-slack-signature': `v0=${hmacHex('8f742231b10e8888abcd99yyyzzz85a5', `v0:${t}:${body}`)}` } })
}

function standard(h: Harness, body: string, id = `msg_${randomUUID()}`, t = now()): Promise<Reply> {
  const sig = createHmac('sha256', SW_KEY).update(`${id}.${t}.${body}`).digest('base64')
  return send(h.origin, '/hooks/sw', { body, headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(t), 'webhook-signature': `v1,${sig}` } })
}

/** The generic scheme: `sha256=<hex>` over `[id.]timestamp.body`, with x-delivery when `id` is given. */
function generic(h: Harness, body: string, t = now(), id?: string): Promise<Reply> {
  const sig = hmacHex('generic-hmac-secret', `${id === undefined ? '' : `${id}.`}${t}.${body}`)
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-ts': String(t), 'x-sig': `sha256=${sig}` }
  if (id !== undefined) headers['x-delivery'] = id
  return send(h.origin, id === undefined ? '/hooks/generic' : '/hooks/generic-id', { body, headers })
}

function runCount(h: Harness): number {
  return h.service.engine.runs.list().length
}

const signed = suite<{ project: Project; h: Harness }>('signed mappings')

signed.before(async (ctx) => {
  ctx.project = await compileProject(CONFIG)
  ctx.h = await serveProject(ctx.project)
})
signed.after(async (ctx) => { await ctx.h.close() })

signed('each scheme: a valid signature is accepted without a hook token', async ({ h }) => {
  assertOk(await github(h, '{"action":"opened"}'), 200, ['ok', 'action', 'runId', 'mode'])
  assertOk(await stripe(h, JSON.stringify({ id: `evt_${randomUUID()}`, type: 'charge.succeeded' })), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assertOk(await slack(h, JSON.stringify({ type: 'event_callback', event_id: `Ev${randomUUID()}`, event: { type: 'app_mention' } }), 'application/json'), 200, ['ok', 'action', 'runId', 'mode'])
  assertOk(await standard(h, '{"type":"invoice.paid"}'), 200, ['ok', 'action', 'runId', 'mode'])
})

signed('a form-encoded Slack slash command verifies on its raw bytes', async ({ h }) => {
  const body = 'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&command=%2Fwebhook-collect&text=hello+world%21'
  const reply = assertOk(await slack(h, body, 'application/x-www-form-urlencoded'), 200, ['ok', 'action', 'runId', 'mode'])
  assert.ok(h.service.engine.runs.get(reply.runId), 'the command started a run')
})

signed('tampered body, wrong secret, stale or future timestamp, missing or malformed header: 401 signature_invalid', async ({ h }) => {
  const body = '{"action":"opened"}'
  const sig = `sha256=${hmacHex('gh-signing-secret', body)}`
  const cases: Array<[string, Promise<Reply>, RegExp]> = [
    ['tampered body', send(h.origin, '/hooks/github', { body: '{"action":"closed"}', headers: { 'x-hub-signature-256': sig } }), /no signature matches/],
    ['wrong secret', github(h, body, { secret: 'not-the-secret' }), /no signature matches/],
    ['stale timestamp', standard(h, '{}', undefined, now() - 120), /more than 60 s old/],
    ['future timestamp', stripe(h, '{"id":"evt_future"}', 'whsec_stripe_new', now() + 600), /in the future/],
    ['missing header', send(h.origin, '/hooks/slack', { body: '{}' }), /x-slack-request-timestamp header is missing/],
    ['malformed header', send(h.origin, '/hooks/github', { body, headers: { 'x-hub-signature-256': 'sha1=abc' } }), /malformed/],
  ]
  for (const [what, pending, reason] of cases) {
    const reply = await pending
    assertError(reply, 401, 'signature_invalid')
    assert.match(reply.json.error, reason, what)
    assert.not.ok(reply.text.includes('gh-signing-secret') || reply.text.includes(hmacHex('gh-signing-secret', '{"action":"closed"}')), `${what}: the answer shows a secret or an expected value`)
  }
  // a valid one clears the count before the lock-out suite below
  assertOk(await github(h, body), 200, ['ok', 'action', 'runId', 'mode'])
  // every refusal is in `hookgate rejects` with its reason code, and no secret is in the log
  const rejects = await until('the refusals in hookgate rejects', () => {
    const run = spawnSync(process.execPath, [hookgateBin, 'rejects', '--state', h.stateDir, ...storeArgs(h.stateDir), '--json'], { encoding: 'utf8' })
    const rows = JSON.parse(run.stdout || '[]') as Array<{ path: string; status: number; code: string; count: number }>
    const signed = rows.filter((r) => r.code === 'signature_invalid')
    return signed.reduce((n, r) => n + r.count, 0) >= cases.length ? rows : undefined
  })
  assert.ok(rejects.some((r) => r.path === '/hooks/github' && r.status === 401))
  const files = readdirSync(h.stateDir).filter((f) => f.startsWith('rejects')).map((f) => readFileSync(join(h.stateDir, f), 'utf8')).join('')
  assert.not.ok(files.includes('gh-signing-secret') || files.includes(hmacHex('gh-signing-secret', body)), 'the rejected-request log shows a secret or a signature')
})

signed('a signed path refuses a token-only request; an unsigned path still needs the token', async ({ h }) => {
  const reply = await post(h.origin, '/hooks/github', TOKEN, { action: 'opened' })
  assertError(reply, 401, 'signature_invalid')
  assert.match(reply.json.error, /x-hub-signature-256 header is missing/)
  assertOk(await post(h.origin, '/hooks/plain', TOKEN, {}), 200, ['ok', 'action', 'runId', 'mode'])
  assertError(await send(h.origin, '/hooks/plain', { body: {} }), 401, 'unauthorized')
  // a signature is no credential for another path
  const body = '{}'
  assertError(await send(h.origin, '/hooks/plain', { body, headers: { 'x-hub-signature-256': `sha256=${hmacHex('gh-signing-secret', body)}` } }), 401, 'unauthorized')
  assertOk(await github(h, '{}'), 200, ['ok', 'action', 'runId', 'mode'])
})

signed('rotation: a delivery signed with either Stripe secret is accepted', async ({ h }) => {
  assertOk(await stripe(h, JSON.stringify({ id: `evt_${randomUUID()}` }), 'whsec_stripe_old'), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assertOk(await stripe(h, JSON.stringify({ id: `evt_${randomUUID()}` }), 'whsec_stripe_new'), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assertError(await stripe(h, JSON.stringify({ id: `evt_${randomUUID()}` }), 'whsec_stripe_other'), 401, 'signature_invalid')
  assertOk(await github(h, '{}'), 200, ['ok', 'action', 'runId', 'mode'])
})

signed('Slack url_verification gets its challenge back as JSON and starts no run', async ({ h }) => {
  const before = runCount(h)
  const reply = await slack(h, JSON.stringify({ token: 'x', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P', type: 'url_verification' }), 'application/json')
  assert.is(reply.status, 200)
  assert.equal(reply.json, { challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' })
  assert.is(runCount(h), before)
  // the challenge is only answered once the signature checks
  const forged = await send(h.origin, '/hooks/slack', { body: { type: 'url_verification', challenge: 'c' }, headers: { 'x-slack-request-timestamp': String(now()), 'x-slack-signature': `v0=${'0'.repeat(64)}` } })
  assertError(forged, 401, 'signature_invalid')
  assertOk(await github(h, '{}'), 200, ['ok', 'action', 'runId', 'mode'])
})

signed('GitHub ping gets 200 {"ok":true,"ping":true} without a run', async ({ h }) => {
  const before = runCount(h)
  const reply = await github(h, '{"zen":"Keep it logically awesome.","hook_id":1}', { event: 'ping' })
  assert.is(reply.status, 200)
  assert.equal(reply.json, { ok: true, ping: true })
  assert.is(runCount(h), before)
})

signed('a replayed delivery is answered as the original and starts nothing, for each scheme with a delivery id', async ({ h }) => {
  const delivery = randomUUID()
  const first = await github(h, '{"n":1}', { delivery })
  const evt = JSON.stringify({ id: `evt_${randomUUID()}`, type: 'invoice.paid' })
  const firstStripe = await stripe(h, evt)
  const swId = `msg_${randomUUID()}`
  const firstSw = await standard(h, '{"type":"a"}', swId)
  const slackEvent = JSON.stringify({ type: 'event_callback', event_id: `Ev${randomUUID()}`, event: { type: 'message' } })
  const firstSlack = await slack(h, slackEvent, 'application/json')
  const count = runCount(h)
  for (const [original, again] of [
    [first, await github(h, '{"n":1}', { delivery })],
    // Stripe retries a failed event with a fresh t and signature, the same event id
    [firstStripe, await stripe(h, evt, 'whsec_stripe_new', now() - 5)],
    [firstSw, await standard(h, '{"type":"a"}', swId, now() - 3)],
    // a Slack retry (X-Slack-Retry-Num) of the same event_id, signed anew
    [firstSlack, await send(h.origin, '/hooks/slack', { body: slackEvent, headers: { 'content-type': 'application/json', 'x-slack-retry-num': '1', 'x-slack-request-timestamp': String(now() - 2), 'x-slack-signature': `v0=${hmacHex('8f742231b10e8888abcd99yyyzzz85a5', `v0:${now() - 2}:${slackEvent}`)}` } })],
  ] as const) {
    assert.is(again.status, original.status)
    assert.equal(again.json, original.json)
    assert.is(again.headers['idempotent-replayed'], 'true')
  }
  assert.is(runCount(h), count, 'a replay started a run')
})

signed('an exact replay of a timestamped hmac delivery inside the tolerance is answered as the original and starts no new run', async ({ h }) => {
  const t = now()
  const body = JSON.stringify({ n: randomUUID() })
  const first = assertOk(await generic(h, body, t), 200, ['ok', 'action', 'runId', 'mode'])
  const count = runCount(h)
  for (let i = 0; i < 3; i++) {
    const again = await generic(h, body, t)
    assert.is(again.status, 200)
    assert.equal(again.json, first)
    assert.is(again.headers['idempotent-replayed'], 'true')
  }
  assert.is(runCount(h), count, 'a replay started a run')
  // the sender's next event (another body, or the same body signed at another second) is a new run
  assert.is.not(assertOk(await generic(h, JSON.stringify({ n: randomUUID() }), t), 200, ['ok', 'action', 'runId', 'mode']).runId, first.runId)
  assert.is(runCount(h), count + 1)
})

signed('with an idHeader, a retry re-signed at another time with the same id is answered as the original; a forged id does not verify', async ({ h }) => {
  const id = `dlv_${randomUUID()}`
  const body = JSON.stringify({ n: 1 })
  const first = assertOk(await generic(h, body, now(), id), 200, ['ok', 'action', 'runId', 'mode'])
  const count = runCount(h)
  const retry = await generic(h, body, now() - 7, id)
  assert.equal(retry.json, first)
  assert.is(retry.headers['idempotent-replayed'], 'true')
  assert.is(runCount(h), count)
  // {{id}} is signed: a captured request sent again under another id fails the signature
  const t = now()
  const sig = `sha256=${hmacHex('generic-hmac-secret', `${id}.${t}.${body}`)}`
  assertError(await send(h.origin, '/hooks/generic-id', { body, headers: { 'content-type': 'application/json', 'x-ts': String(t), 'x-sig': sig, 'x-delivery': `${id}-2` } }), 401, 'signature_invalid')
  assertError(await send(h.origin, '/hooks/generic-id', { body, headers: { 'content-type': 'application/json', 'x-ts': String(t), 'x-sig': sig } }), 401, 'signature_invalid')
})

signed('a Svix-powered sender (svix-id, svix-timestamp, svix-signature, signed by the svix library) is accepted as svix\'s own verifier accepts it, and a Standard Webhooks one still is', async ({ h }) => {
  const secret = process.env.HOOKGATE_TEST_SW_SECRET!
  const svix = new SvixWebhook(secret)
  const body = JSON.stringify({ type: 'user.created', data: { id: `user_${randomUUID()}` } })
  const id = `msg_${randomUUID()}`
  const at = new Date()
  const headers = { 'svix-id': id, 'svix-timestamp': String(Math.floor(at.getTime() / 1000)), 'svix-signature': svix.sign(id, at, body) }
  assert.equal(svix.verify(body, headers), JSON.parse(body), 'svix\'s verifier accepts the request as sent')
  const first = assertOk(await send(h.origin, '/hooks/sw', { body, headers: { 'content-type': 'application/json', ...headers } }), 200, ['ok', 'action', 'runId', 'mode'])
  // Svix retries a message with the same svix-id, signed anew: answered as the original
  const later = new Date(at.getTime() - 4000)
  const retry = await send(h.origin, '/hooks/sw', { body, headers: { 'content-type': 'application/json', 'svix-id': id, 'svix-timestamp': String(Math.floor(later.getTime() / 1000)), 'svix-signature': svix.sign(id, later, body) } })
  assert.equal(retry.json, first)
  assert.is(retry.headers['idempotent-replayed'], 'true')
  assertError(await send(h.origin, '/hooks/sw', { body: body.replace('created', 'deleted'), headers: { 'content-type': 'application/json', ...headers, 'svix-id': `${id}-x` } }), 401, 'signature_invalid')

  const standard = new StandardWebhook(secret)
  const stdId = `msg_${randomUUID()}`
  const stdBody = JSON.stringify({ type: 'invoice.paid' })
  const stdHeaders = { 'webhook-id': stdId, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': standard.sign(stdId, at, stdBody) }
  assert.ok(standard.verify(stdBody, stdHeaders))
  assertOk(await send(h.origin, '/hooks/sw', { body: stdBody, headers: { 'content-type': 'application/json', ...stdHeaders } }), 200, ['ok', 'action', 'runId', 'mode'])
})

signed('a GitHub delivery sent form-encoded (payload=<json>) is verified over the raw form and its event is what templates and conditions read', async ({ h }) => {
  const deliver = async (event: object, secret = 'gh-signing-secret') => {
    const form = new URLSearchParams({ payload: JSON.stringify(event) }).toString()
    const signature = await githubSign(secret, form)
    return { form, signature, reply: await send(h.origin, '/hooks/github-form', { body: form, headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-github-event': 'issues', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': signature } }) }
  }
  const opened = await deliver({ action: 'opened', issue: { number: 7, title: 'a & b = c' }, sender: { login: 'octocat' } })
  assert.ok(await githubVerify('gh-signing-secret', opened.form, opened.signature), 'GitHub\'s library signed the form bytes as sent')
  const accepted = assertOk(opened.reply, 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assert.is(((await rowOf(h.stateDir, accepted.runId))?.request as { message?: string }).message, 'issue #7 opened by octocat')
  // the condition reads the event too: another action is filtered out
  assert.is((await deliver({ action: 'closed', issue: { number: 7 }, sender: { login: 'octocat' } })).reply.status, 204)
  assertError((await deliver({ action: 'opened' }, 'another secret')).reply, 401, 'signature_invalid')
  const broken = 'payload=' + encodeURIComponent('{"action":')
  assertError(await send(h.origin, '/hooks/github-form', { body: broken, headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-github-event': 'issues', 'x-hub-signature-256': await githubSign('gh-signing-secret', broken) } }), 400, 'invalid_json')
})

signed('a replayed delivery is still answered as the original after a restart on the same state dir', async (ctx) => {
  const delivery = randomUUID()
  const first = assertOk(await github(ctx.h, '{"restart":true}', { delivery }), 200, ['ok', 'action', 'runId', 'mode'])
  await ctx.h.close()
  ctx.h = await serveProject(ctx.project)
  const again = await github(ctx.h, '{"restart":true}', { delivery })
  assert.is(again.status, 200)
  assert.equal(again.json, first)
  assert.is(again.headers['idempotent-replayed'], 'true')
  const rows = (await readRows(ctx.h.stateDir)).filter((r) => r.idempotency?.key === `sig:github:${delivery}`)
  assert.is(rows.length, 1, 'one run row carries the delivery')
})

signed('the lock-out counts signature failures: 401 up to the limit, then 429 with Retry-After', async ({ h }) => {
  for (let i = 1; i <= 10; i++) assertError(await github(h, '{}', { secret: 'forged' }), 401, 'signature_invalid')
  const locked = await github(h, '{}', { secret: 'forged' })
  assertError(locked, 429, 'too_many_auth_failures')
  assert.match(String(locked.headers['retry-after']), /^\d+$/)
  // the token path shares the count
  assertError(await post(h.origin, '/hooks/plain', TOKEN + 'x', {}), 429, 'too_many_auth_failures')
})

signed.run()
