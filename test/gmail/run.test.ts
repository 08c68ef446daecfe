// `hookgate webhooks gmail run` against a fake Google over real HTTP and a real `hookgate serve` on a
// compiled project with presets: [gmail]: pushes become one agent run per message, redeliveries and
// restarts start nothing twice, pushes are authenticated before anything is fetched, and the
// helper recovers from an expired history id, renews its watch, waits out Gmail's 429s and splits
// batches to the preset's body limit.
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { createServer, request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { spawn } from 'node:child_process'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { GMAIL_PUSH_MEMBER, startFakeGoogle } from '../fakes/google.js'
import { compileProject, scratchDir, send, setTestToken, spawnServe, until } from '../runtime/http/harness.js'
import { RunStore, type RunRow } from '../../runtime/store/file/runs.js'
import { hookgateBin } from '../helpers/paths.js'
import { loadHelperConfig, type HelperConfig } from '../../gmail/config.js'
import { storeRefreshToken } from '../../gmail/credentials.js'
import { readCursor } from '../../gmail/outbox.js'
import { startHelper, type Helper, type HelperOptions } from '../../gmail/run.js'

const ACCOUNT = 'me@example.com'
const fake = await startFakeGoogle()
Object.assign(process.env, {
  HOOKGATE_GOOGLE_TOKEN_URL: fake.tokenUrl,
  HOOKGATE_GMAIL_API_URL: fake.gmailUrl,
  HOOKGATE_PUBSUB_API_URL: fake.pubsubUrl,
  HOOKGATE_GOOGLE_CERTS_URL: fake.certsUrl,
})
const hookToken = setTestToken()
const pushToken = randomBytes(24).toString('base64url')
const client = fake.oauthClient()
const clientId = client.installed.client_id as string
const TOPIC = 'projects/hookgate-test/topics/hookgate-gmail'
// setup's work on the Pub/Sub side, so that Gmail accepts the watch
fake.topics.set(TOPIC, { name: TOPIC, policy: { version: 1, etag: 'BwX1', bindings: [{ role: 'roles/pubsub.publisher', members: [GMAIL_PUSH_MEMBER] }] } })

const yaml = (hookUrl: string) => `
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  presets: [gmail]
  gmail:
    account: ${ACCOUNT}
    project: hookgate-test
    topic: hookgate-gmail
    subscription: hookgate-gmail-push
    labels: [INBOX]
    pushEndpoint: https://mail.example.com/gmail-pubsub
    pushToken: { file: push-token }
    hookUrl: ${hookUrl}
    receiver: { host: 127.0.0.1, port: 0, path: /gmail-pubsub }
    maxBytes: 200000
    renewEveryMinutes: 720
    credentials:
      pubsub: { file: pubsub-key.json }
      gmail: { oauthClient: { file: oauth-client.json } }
agents:
  - id: main
    default: true
    model: builtin/echo
    heartbeat: { every: "off" }
`
const project = await compileProject(yaml('http://127.0.0.1:1/hooks/gmail'), {
  'push-token': pushToken + '\n',
  'oauth-client.json': JSON.stringify(client),
  'pubsub-key.json': JSON.stringify(fake.serviceAccount('hookgate-pubsub')),
})
const serve = await spawnServe(project.outDir, project.stateDir)
const hookUrl = `${serve.origin}/hooks/gmail`
writeFileSync(project.configFile, yaml(hookUrl))

const helpers: Helper[] = []
/** A helper on its own state directory (so its own cursor), signed in as `account`. */
async function startCase(options: { account?: string; state?: string; mutate?: (c: HelperConfig) => void } & Partial<HelperOptions> = {}): Promise<{ helper: Helper; config: HelperConfig; lines: string[] }> {
  const state = options.state ?? scratchDir('helper-')
  const config = loadHelperConfig(project.configFile, state)
  const account = options.account ?? ACCOUNT
  config.gmail.account = account
  options.mutate?.(config)
  storeRefreshToken(config.helperDir, { mailbox: account, client_id: clientId, refresh_token: fake.refreshTokenFor(account, client), createdAt: new Date().toISOString() })
  const lines: string[] = []
  const helper = await startHelper({ config, write: (l) => lines.push(l), hookAttempts: 2, hookMaxWaitMs: 200, ...options })
  helpers.push(helper)
  await helper.idle()
  return { helper, config, lines }
}

const push = (helper: Helper, account = ACCOUNT, opts: { token?: string | null; headers?: Record<string, string>; body?: object } = {}) => {
  const t = opts.token === null ? '' : `?token=${encodeURIComponent(opts.token ?? pushToken)}`
  return send(helper.url, `/gmail-pubsub${t}`, { body: opts.body ?? fake.pushBody(account, 'hookgate-gmail-push'), ...(opts.headers ? { headers: opts.headers } : {}) })
}

/** The runtime's gmail runs for these message ids, one entry per run. */
function runsFor(ids: string[]): RunRow[] {
  const keys = new Set(ids.map((id) => `hook:gmail:${id}`))
  const byId = new Map<string, RunRow>()
  for (const row of RunStore.readRows(project.stateDir)) if (row.sessionKey && keys.has(row.sessionKey)) byId.set(row.id, row)
  return [...byId.values()]
}
const messageOf = (row: RunRow) => String((row.request as { message?: string } | undefined)?.message ?? '')
async function closeHelpers(): Promise<void> {
  for (const h of helpers.splice(0)) await h.close()
}
/** A hook in front of the runtime that, per request, forwards, forwards and loses the answer, or refuses 429. */
async function proxyHook(decide: (n: number) => 'forward' | 'lose' | 'refuse', retryAfter = '1'): Promise<{ url: string; at: number[]; close(): Promise<void> }> {
  const at: number[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      at.push(Date.now())
      const what = decide(at.length)
      if (what === 'refuse') { res.writeHead(429, { 'content-type': 'application/json', 'retry-after': retryAfter }).end('{"ok":false,"error":"slow down","code":"rate_limited"}'); return }
      const fwd = httpRequest(hookUrl, { method: 'POST', headers: { ...req.headers, host: new URL(hookUrl).host } }, (answer) => {
        const back: Buffer[] = []
        answer.on('data', (c: Buffer) => back.push(c))
        answer.on('end', () => {
          if (what === 'lose') res.writeHead(503, { 'content-type': 'application/json' }).end('{"ok":false,"error":"lost","code":"lost"}')
          else res.writeHead(answer.statusCode!, answer.headers).end(Buffer.concat(back))
        })
      })
      fwd.end(Buffer.concat(chunks))
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/gmail`, at, close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()) }) }
}

const gmailCalls = () => fake.requests.filter((r) => r.path.startsWith('/gmail/')).length

// ---------------------------------------------------------------------------------------------

const pushes = suite('a push')

pushes('with two new messages starts two agent runs, each with its message\'s subject', async () => {
  const { helper } = await startCase()
  const a = fake.addMessage(ACCOUNT, { from: 'Ann <ann@example.org>', subject: 'quarterly numbers', text: 'see attached' })
  const b = fake.addMessage(ACCOUNT, { from: 'Bob <bob@example.org>', subject: 'lunch on friday', text: 'noon?' })
  const r = await push(helper)
  assert.is(r.status, 204, r.text)
  const rows = runsFor([a.id, b.id])
  assert.is(rows.length, 2)
  assert.ok(rows.some((row) => messageOf(row).includes('Subject: quarterly numbers')), 'a run for the first subject')
  assert.ok(rows.some((row) => messageOf(row).includes('Subject: lunch on friday')), 'a run for the second subject')
  assert.ok(rows.every((row) => row.definitionId === 'preset:gmail'))
})

pushes('redelivered by Pub/Sub starts nothing new', async () => {
  const { helper } = await startCase()
  const a = fake.addMessage(ACCOUNT, { from: 'c@example.org', subject: 'once only', text: 'x' })
  const body = fake.pushBody(ACCOUNT, 'hookgate-gmail-push')
  assert.is((await push(helper, ACCOUNT, { body })).status, 204)
  assert.is(runsFor([a.id]).length, 1)
  assert.is((await push(helper, ACCOUNT, { body })).status, 204)
  assert.is(runsFor([a.id]).length, 1)
})

pushes('lost after the hook accepted it and before the cursor advanced is posted again after a restart and starts nothing twice', async () => {
  // A hook in front of the runtime that passes the batch on but loses the answer: as if the helper
  // crashed between posting and advancing its cursor.
  const lossy = await proxyHook(() => 'lose')
  const state = scratchDir('helper-')
  const first = await startCase({ state, hookAttempts: 1, mutate: (c) => { c.gmail.hookUrl = lossy.url } })
  const a = fake.addMessage(ACCOUNT, { from: 'd@example.org', subject: 'crash-safe', text: 'y' })
  const b = fake.addMessage(ACCOUNT, { from: 'e@example.org', subject: 'crash-safe too', text: 'z' })
  assert.is((await push(first.helper)).status, 503, 'not acknowledged while the hook has not answered')
  assert.is(runsFor([a.id, b.id]).length, 2, 'the runtime took the batch')
  const planned = readCursor(first.config.helperDir).outbox
  assert.ok(planned && planned.batches.length === 1, 'the batch waits in the outbox')
  await first.helper.close()
  await lossy.close()

  const second = await startCase({ state })
  assert.is(readCursor(second.config.helperDir).outbox, undefined, 'the restart posted the outbox')
  assert.is(runsFor([a.id, b.id]).length, 2, 'the same key and body were answered from the runtime\'s memory')
  assert.ok(second.lines.some((l) => /"event":"sync"/.test(l) && /"replayed":1/.test(l)), second.lines.join('\n'))
  assert.is((await push(second.helper)).status, 204)
  assert.is(runsFor([a.id, b.id]).length, 2)
})

pushes.after.each(closeHelpers)
pushes.run()

// ---------------------------------------------------------------------------------------------

const auth = suite('push authentication')

auth('a wrong or missing push token is refused 401 and nothing is fetched from Gmail', async () => {
  const { helper, lines } = await startCase()
  fake.addMessage(ACCOUNT, { from: 'f@example.org', subject: 'unseen', text: 'q' })
  const before = gmailCalls()
  const wrong = await push(helper, ACCOUNT, { token: 'not-the-token' })
  assert.is(wrong.status, 401)
  assert.equal(Object.keys(wrong.json).sort(), ['code', 'error', 'ok'])
  assert.is((await push(helper, ACCOUNT, { token: null })).status, 401)
  assert.is(gmailCalls(), before)
  assert.not.ok(lines.join('\n').includes(pushToken), 'the push token is never logged')
})

auth('with OIDC, a valid ID token passes and a wrong audience, an expired token or a bad signature is refused', async () => {
  const email = 'push-invoker@hookgate-test.iam.gserviceaccount.com'
  const audience = 'https://mail.example.com/gmail-pubsub'
  const { helper } = await startCase({ mutate: (c) => { c.gmail.oidc = { serviceAccountEmail: email } } })
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` })
  assert.is((await push(helper, ACCOUNT, { headers: bearer(fake.oidcToken({ audience, email })) })).status, 204)
  const before = gmailCalls()
  assert.is((await push(helper, ACCOUNT)).status, 401, 'no ID token')
  assert.is((await push(helper, ACCOUNT, { headers: bearer(fake.oidcToken({ audience: 'https://elsewhere.example.com/', email })) })).status, 403, 'wrong audience')
  assert.is((await push(helper, ACCOUNT, { headers: bearer(fake.oidcToken({ audience, email: 'someone@else.iam.gserviceaccount.com' })) })).status, 403, 'another service account')
  assert.is((await push(helper, ACCOUNT, { headers: bearer(fake.oidcToken({ audience, email, expired: true })) })).status, 401, 'expired')
  assert.is((await push(helper, ACCOUNT, { headers: bearer(fake.oidcToken({ audience, email, badSignature: true })) })).status, 401, 'bad signature')
  assert.is((await push(helper, ACCOUNT, { headers: bearer(fake.oidcToken({ audience, email, unknownKid: true })) })).status, 401, 'unknown key')
  assert.is((await push(helper, ACCOUNT, { headers: bearer(fake.oidcToken({ audience, email, issuer: 'https://evil.example.com' })) })).status, 401, 'another issuer')
  assert.is(gmailCalls(), before, 'nothing fetched for a refused push')
})

auth('a push for another mailbox is acknowledged and ignored', async () => {
  const { helper, lines } = await startCase()
  const before = gmailCalls()
  assert.is((await push(helper, 'other@example.com')).status, 204)
  assert.is(gmailCalls(), before)
  assert.ok(lines.some((l) => l.includes('push_ignored')))
})

auth.after.each(closeHelpers)
auth.run()

// ---------------------------------------------------------------------------------------------

const recovery = suite('recovery')

recovery('a second helper on the same state directory is refused, so two never share a cursor', async () => {
  const state = scratchDir('helper-')
  await startCase({ state })
  const refused = await startCase({ state }).then(() => undefined, (err: Error) => err)
  assert.ok(refused, 'the second helper started')
  assert.match(refused!.message, /in use by another hookgate process/)
})

recovery('an expired history id resyncs the recent window without posting a message twice', async () => {
  const box = 'resync@example.com'
  const { helper, config, lines } = await startCase({ account: box })
  const a = fake.addMessage(box, { from: 'g@example.org', subject: 'before expiry', text: '1' })
  assert.is((await push(helper, box)).status, 204)
  const b = fake.addMessage(box, { from: 'h@example.org', subject: 'after expiry', text: '2' })
  fake.expireHistoryBefore(box, b.historyId)
  assert.is((await push(helper, box)).status, 204)
  assert.ok(lines.some((l) => l.includes('"event":"resync"')), lines.join('\n'))
  assert.is(runsFor([a.id]).length, 1, 'the message posted before is not posted again')
  assert.is(runsFor([b.id]).length, 1, 'the message Gmail\'s history lost is posted')
  assert.is(readCursor(config.helperDir).historyId, b.historyId, 'the cursor continues from the profile\'s history id')
  assert.is((await push(helper, box)).status, 204)
  assert.is(runsFor([a.id, b.id]).length, 2)
})

recovery('a 429 from Gmail with Retry-After is waited out and the push still succeeds', async () => {
  const { helper, lines } = await startCase()
  const a = fake.addMessage(ACCOUNT, { from: 'i@example.org', subject: 'rate limited', text: 'r' })
  fake.failNext(`GET /gmail/v1/users/*/messages/${a.id}*`, 429, { retryAfter: 1 })
  assert.is((await push(helper)).status, 204)
  const gets = fake.requests.filter((r) => r.path.includes(`/messages/${a.id}`))
  assert.is(gets.length, 2)
  assert.ok(gets[1]!.at - gets[0]!.at >= 900, 'waited for Retry-After')
  assert.is(runsFor([a.id]).length, 1)
  assert.ok(lines.some((l) => /"event":"google_retry"/.test(l) && /"status":429/.test(l)))
})

recovery('an access token that expires is refreshed with the stored refresh token', async () => {
  fake.setTokenLifetime(60)
  try {
    const { helper } = await startCase()
    const grants = () => fake.requests.filter((r) => r.path === '/token' && r.body?.grant_type === 'refresh_token').length
    const before = grants()
    const a = fake.addMessage(ACCOUNT, { from: 'j@example.org', subject: 'fresh token', text: 't' })
    assert.is((await push(helper)).status, 204)
    assert.ok(grants() - before >= 2, `a token per call when each is about to expire (${grants() - before})`)
    assert.is(runsFor([a.id]).length, 1)
  } finally {
    fake.setTokenLifetime(3600)
  }
})

recovery('the watch is renewed at start when it expires soon, and then on schedule', async () => {
  const state = scratchDir('helper-')
  const first = await startCase({ state })
  await first.helper.close()
  const cursorFile = join(state, 'gmail', 'cursor.json')
  const cursor = JSON.parse(readFileSync(cursorFile, 'utf8'))
  cursor.watchExpiration = String(Date.now() + 60_000)
  writeFileSync(cursorFile, JSON.stringify(cursor))
  const calls = fake.watches.get(ACCOUNT)!.calls
  const second = await startCase({ state, renewEveryMs: 300 })
  await until('a renewal at start', () => (fake.watches.get(ACCOUNT)!.calls > calls ? true : undefined))
  await until('a renewal on schedule', () => (fake.watches.get(ACCOUNT)!.calls > calls + 1 ? true : undefined))
  const watch = fake.watches.get(ACCOUNT)!
  assert.is(watch.topicName, TOPIC)
  assert.equal(watch.labelIds, ['INBOX'])
  await second.helper.close()
  assert.ok(Number(readCursor(join(state, 'gmail')).watchExpiration) > Date.now() + 6 * 86400_000, 'the new expiration is kept in the cursor')
})

recovery.after.each(closeHelpers)
recovery.run()

// ---------------------------------------------------------------------------------------------

const batches = suite('batches and the preset')

batches('mail over the preset\'s body limit is posted in several batches, each accepted', async () => {
  const { helper, lines } = await startCase()
  const ids = Array.from({ length: 7 }, (_, i) => fake.addMessage(ACCOUNT, { from: 'k@example.org', subject: `big ${i}`, text: `${i}`.repeat(190_000) }).id)
  assert.is((await push(helper)).status, 204)
  const posts = lines.filter((l) => l.includes('"event":"sync"'))
  assert.match(posts.at(-1)!, /"batches":[2-9]/)
  assert.is(runsFor(ids).length, 7)
  assert.not.ok(lines.some((l) => l.includes('hook_retry')))
})

batches('a 413 from the hook splits the batch in two under new keys instead of looping', async () => {
  // The helper believes in a larger limit than the compiled preset (maxBytes raised, not recompiled).
  const { helper, lines } = await startCase({ mutate: (c) => { c.gmail.maxBytes = 2_000_000 } })
  const ids = Array.from({ length: 6 }, (_, i) => fake.addMessage(ACCOUNT, { from: 'l@example.org', subject: `wide ${i}`, text: 'w'.repeat(250_000) }).id)
  assert.is((await push(helper)).status, 204)
  assert.ok(lines.some((l) => l.includes('batch_split')), lines.join('\n'))
  assert.is(runsFor(ids).length, 6)
})

batches('a 429 from the hook is retried after its Retry-After within the same push', async () => {
  const flaky = await proxyHook((n) => (n === 1 ? 'refuse' : 'forward'))
  try {
    const { helper, lines } = await startCase({ hookMaxWaitMs: 5000, mutate: (c) => { c.gmail.hookUrl = flaky.url } })
    const a = fake.addMessage(ACCOUNT, { from: 'o@example.org', subject: 'busy hook', text: 'p' })
    assert.is((await push(helper)).status, 204)
    assert.is(flaky.at.length, 2)
    assert.ok(flaky.at[1]! - flaky.at[0]! >= 900, 'waited for Retry-After')
    assert.is(runsFor([a.id]).length, 1)
    assert.ok(lines.some((l) => /"event":"hook_retry"/.test(l) && /"status":429/.test(l)))
  } finally {
    await flaky.close()
  }
})

batches('a fractional Retry-After from the hook (1.5 s) is waited for, not read as a date long past and retried at once', async () => {
  const flaky = await proxyHook((n) => (n === 1 ? 'refuse' : 'forward'), '1.5')
  try {
    const { helper, lines } = await startCase({ hookMaxWaitMs: 5000, mutate: (c) => { c.gmail.hookUrl = flaky.url } })
    const a = fake.addMessage(ACCOUNT, { from: 'o@example.org', subject: 'busy hook, fractional', text: 'p' })
    assert.is((await push(helper)).status, 204)
    assert.is(flaky.at.length, 2)
    assert.ok(lines.some((l) => /"event":"hook_retry"/.test(l) && /"waitMs":1500/.test(l)), lines.join('\n'))
    assert.ok(flaky.at[1]! - flaky.at[0]! >= 1400, 'waited for Retry-After')
    assert.is(runsFor([a.id]).length, 1)
  } finally {
    await flaky.close()
  }
})

batches('a hook that answers 404 fails the sync with a clear reason, keeps the outbox and /healthz says so', async () => {
  const { helper, config, lines } = await startCase({ mutate: (c) => { c.gmail.hookUrl = `${serve.origin}/hooks/no-such-mapping` } })
  const healthy = await send(helper.url, '/healthz', { method: 'GET' })
  assert.is(healthy.status, 200, healthy.text)
  assert.equal(Object.keys(healthy.json).sort(), ['account', 'lastError', 'lastPushAt', 'lastRenewalAt', 'lastSyncAt', 'ok', 'pendingBatches', 'watchExpiration'])
  fake.addMessage(ACCOUNT, { from: 'm@example.org', subject: 'nowhere', text: 'n' })
  assert.is((await push(helper)).status, 503)
  assert.ok(lines.some((l) => /"event":"error"/.test(l) && /answered 404/.test(l)), lines.join('\n'))
  assert.is(readCursor(config.helperDir).outbox?.batches.length, 1)
  const sick = await send(helper.url, '/healthz', { method: 'GET' })
  assert.is(sick.status, 503)
  assert.ok(sick.json.reasons.some((r: string) => r.includes('the last sync failed')))
  assert.is(sick.json.pendingBatches, 1)
  const all = lines.join('\n')
  assert.not.ok(all.includes(hookToken) || all.includes(pushToken), 'no secret in the logs')
})

batches.after.each(closeHelpers)
batches.run()

// ---------------------------------------------------------------------------------------------

const cli = suite('hookgate webhooks gmail run')

function runCli(args: string[]): { exited: Promise<number | string>; stdout: () => string; stderr: () => string; kill(signal: NodeJS.Signals): void } {
  const child = spawn(process.execPath, [hookgateBin, 'webhooks', 'gmail', 'run', ...args], { env: process.env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d })
  child.stderr.setEncoding('utf8').on('data', (d: string) => { err += d })
  return { exited: new Promise((r) => child.on('exit', (code, signal) => r(code ?? signal ?? 'unknown'))), stdout: () => out, stderr: () => err, kill: (s) => { child.kill(s) } }
}

cli('exits 2 on a usage error and 1 with one JSON log line (time, level error) when the config has no hooks.gmail', async () => {
  assert.is(await runCli(['--no-such-flag']).exited, 2)
  const dir = scratchDir('bare-')
  writeFileSync(join(dir, 'hooks.yaml'), 'hooks:\n  enabled: true\n')
  const bare = runCli(['--config', join(dir, 'hooks.yaml')])
  assert.is(await bare.exited, 1)
  assert.is(bare.stderr().trim().split('\n').length, 1, bare.stderr())
  const line = JSON.parse(bare.stderr()) as { t: string; level: string; msg: string }
  assert.is(line.level, 'error')
  assert.ok(!Number.isNaN(Date.parse(line.t)), bare.stderr())
  assert.match(line.msg, /^hookgate webhooks gmail run: cannot start: .*no hooks\.gmail/)
})

cli('serves /healthz and exits 0 after SIGTERM', async () => {
  const state = scratchDir('helper-')
  storeRefreshToken(join(state, 'gmail'), { mailbox: ACCOUNT, client_id: clientId, refresh_token: fake.refreshTokenFor(ACCOUNT, client), createdAt: new Date().toISOString() })
  const run = runCli(['--config', project.configFile, '--state', state])
  const listening = await until('the listening line', () => /"event":"listening".*"url":"([^"]+)"/.exec(run.stdout())?.[1], 8000)
  const health = await send(new URL(listening).origin, '/healthz', { method: 'GET' })
  assert.is(health.status, 200, health.text)
  assert.is(health.json.account, ACCOUNT)
  run.kill('SIGTERM')
  assert.is(await run.exited, 0, run.stderr())
})

cli.after(async () => {
  serve.kill()
  await fake.close()
})

cli.after.each(closeHelpers)
cli.run()
