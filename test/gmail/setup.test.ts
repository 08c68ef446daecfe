// `hookgate webhooks gmail login` and `setup` against a fake Google that speaks the real token,
// consent, Pub/Sub, IAM and Gmail shapes over real HTTP: the production code, with only the base
// URLs moved (HOOKGATE_GOOGLE_TOKEN_URL and friends).
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeGoogle, GMAIL_PUSH_MEMBER, type FakeGoogle } from '../fakes/google.js'
import { scratchDir, writeTree } from '../helpers/paths.js'
import { findVerb } from '../../cli/commands.js'
import type { CommandIO } from '../../cli/flags.js'
import { compileFile } from '../../compiler/index.js'

/** A command's verb run in-process, as bin/hookgate.js runs it. */
const main = (name: string, argv: string[], io: CommandIO): Promise<number> => findVerb(name.split(' '))!.verb.run(argv, io)

const MAILBOX = 'ops@example.com'
const PROJECT = 'hookgate-test'

let google: FakeGoogle
const saved: Record<string, string | undefined> = {}
const ENV = ['HOOKGATE_GOOGLE_TOKEN_URL', 'HOOKGATE_GMAIL_API_URL', 'HOOKGATE_PUBSUB_API_URL', 'HOOKGATE_GOOGLE_CERTS_URL', 'HOOKGATE_GOOGLE_AUTH_URL']

const CONFIG = `# the team's hookgate config
hooks:
  enabled: false   # turned on by setup
  token: \${HOOKGATE_TEST_TOKEN}
  mappings:
    - id: alerts
      match: { path: alerts }     # kept as it is
      action: wake
      textTemplate: "{{payload.status}}"
`

interface Run { code: number; stdout: string; stderr: string }

async function hookgate(argv: string[]): Promise<Run> {
  let stdout = ''
  let stderr = ''
  const [a, b, c, ...rest] = argv
  const code = await main(`${a} ${b} ${c}`, rest, { stdout: (t) => { stdout += t }, stderr: (t) => { stderr += t } })
  return { code, stdout, stderr }
}

/** A project with both key files, and the refresh token login would have stored. */
function project(): { dir: string; config: string; args: string[] } {
  const dir = scratchDir('gmail-setup-')
  const client = google.oauthClient()
  writeTree(dir, {
    'hooks.yaml': CONFIG,
    'secrets/pubsub.json': JSON.stringify(google.serviceAccount('hookgate-pubsub', { scopes: ['https://www.googleapis.com/auth/pubsub'] })),
    'secrets/client.json': JSON.stringify(client),
    '.hookgate/gmail/refresh-token.json': JSON.stringify({ mailbox: MAILBOX, client_id: client.installed.client_id, refresh_token: google.refreshTokenFor(MAILBOX, client), createdAt: new Date().toISOString() }),
  })
  const config = join(dir, 'hooks.yaml')
  return { dir, config, args: ['--config', config, '--out', join(dir, 'dist'), '--account', MAILBOX, '--project', PROJECT, '--pubsub-key', join(dir, 'secrets/pubsub.json'), '--oauth-client', join(dir, 'secrets/client.json'), '--push-endpoint', 'https://hooks.example.com/gmail-pubsub'] }
}

const writes = (from: number) => google.requests.slice(from).filter((r) => r.method !== 'GET' && !r.path.startsWith('/token') && !r.path.endsWith(':getIamPolicy'))

const setup = suite('hookgate webhooks gmail setup')

setup.before(async () => {
  google = await startFakeGoogle()
  for (const k of ENV) saved[k] = process.env[k]
  process.env.HOOKGATE_GOOGLE_TOKEN_URL = google.tokenUrl
  process.env.HOOKGATE_GMAIL_API_URL = google.gmailUrl
  process.env.HOOKGATE_PUBSUB_API_URL = google.pubsubUrl
  process.env.HOOKGATE_GOOGLE_CERTS_URL = google.certsUrl
  process.env.HOOKGATE_GOOGLE_AUTH_URL = google.authUrl
  process.env.HOOKGATE_TEST_TOKEN = 'test-hook-token-0123456789abcdef'
})

setup.after(async () => {
  for (const k of ENV) if (saved[k] === undefined) delete process.env[k]; else process.env[k] = saved[k]
  await google.close()
})

setup('the first setup creates the topic, grants Gmail publish rights keeping other bindings, creates the push subscription, starts the watch and writes hooks.gmail', async () => {
  const p = project()
  const topic = `projects/${PROJECT}/topics/hookgate-gmail`
  // the topic exists already, with someone else's binding that must survive
  google.topics.set(topic, { name: topic, policy: { version: 1, etag: 'BwXyZ1', bindings: [{ role: 'roles/pubsub.subscriber', members: ['user:alice@example.com'] }] } })
  const r = await hookgate(['webhooks', 'gmail', 'setup', ...p.args])
  assert.is(r.code, 0, r.stderr)
  assert.match(r.stdout, `1. topic ${topic}: already right`)
  assert.match(r.stdout, '2. topic IAM: Gmail may publish: updated')
  assert.match(r.stdout, '3. subscription projects/hookgate-test/subscriptions/hookgate-gmail-push: created')
  assert.match(r.stdout, '4. watch ops@example.com: started')
  assert.match(r.stdout, 'hookgate webhooks gmail run --config')

  const bindings = google.topics.get(topic)!.policy.bindings
  assert.equal(bindings.find((b) => b.role === 'roles/pubsub.subscriber')?.members, ['user:alice@example.com'], 'the other binding is kept')
  assert.equal(bindings.find((b) => b.role === 'roles/pubsub.publisher')?.members, [GMAIL_PUSH_MEMBER])

  const sub = google.subscriptions.get(`projects/${PROJECT}/subscriptions/hookgate-gmail-push`)
  assert.is(sub.topic, topic)
  const pushed = new URL(sub.pushConfig.pushEndpoint)
  assert.is(`${pushed.origin}${pushed.pathname}`, 'https://hooks.example.com/gmail-pubsub')
  const pushToken = readFileSync(join(p.dir, '.hookgate/gmail/push-token'), 'utf8').trim()
  assert.is(pushed.searchParams.get('token'), pushToken, 'the push token travels in the push URL')
  assert.is(statSync(join(p.dir, '.hookgate/gmail/push-token')).mode & 0o777, 0o600)

  const watch = google.watches.get(MAILBOX)!
  assert.is(watch.topicName, topic)
  assert.equal(watch.labelIds, ['INBOX'])
  // run starts reading where the watch began: mail between setup and the first run is not missed
  const cursor = JSON.parse(readFileSync(join(p.dir, '.hookgate/gmail/cursor.json'), 'utf8'))
  assert.is(String(cursor.historyId), String(watch.historyId))
  assert.is(String(cursor.watchExpiration), String(watch.expiration))

  const text = readFileSync(p.config, 'utf8')
  assert.ok(text.startsWith("# the team's hookgate config\nhooks:\n  enabled: true   # turned on by setup\n"), text)
  assert.match(text, '      match: { path: alerts }     # kept as it is\n')
  assert.match(text, 'presets:\n    - gmail\n')
  assert.match(text, 'pushToken:\n      file: .hookgate/gmail/push-token')
  assert.match(text, 'pubsub:\n        file: secrets/pubsub.json')
  assert.not.match(text, pushToken, 'no secret in hooks.yaml')
  const compiled = await compileFile(p.config, { outDir: join(p.dir, 'dist'), check: true })
  assert.ok(compiled.ok, JSON.stringify(compiled.diagnostics))
  // saved with its bundle, through the page's save path: the runtime watching dist serves /hooks/gmail
  const manifest = JSON.parse(readFileSync(join(p.dir, 'dist', 'manifest.json'), 'utf8'))
  assert.is(manifest.inputsHash, compiled.result!.manifest.inputsHash)
  assert.ok(manifest.routes.some((route: { name: string }) => route.name === 'gmail'), JSON.stringify(manifest.routes))
})

setup('running setup again changes nothing: no write call to Google, hooks.yaml byte for byte the same', async () => {
  const p = project()
  const first = await hookgate(['webhooks', 'gmail', 'setup', ...p.args])
  assert.is(first.code, 0, first.stderr)
  const before = readFileSync(p.config, 'utf8')
  const from = google.requests.length
  const again = await hookgate(['webhooks', 'gmail', 'setup', '--config', p.config])
  assert.is(again.code, 0, again.stderr)
  assert.equal(writes(from).map((r) => `${r.method} ${r.path}`), [], again.stdout)
  for (const n of [1, 2, 3, 4, 5]) assert.match(again.stdout, new RegExp(`  ${n}\\. .*: (already right|unchanged)`))
  assert.is(readFileSync(p.config, 'utf8'), before)
})

setup('a changed push endpoint patches only the subscription', async () => {
  const p = project()
  assert.is((await hookgate(['webhooks', 'gmail', 'setup', ...p.args])).code, 0)
  const from = google.requests.length
  const r = await hookgate(['webhooks', 'gmail', 'setup', '--config', p.config, '--out', join(p.dir, 'dist'), '--push-endpoint', 'https://mail.example.com/push'])
  assert.is(r.code, 0, r.stderr)
  assert.equal(writes(from).map((x) => x.method + ' ' + x.path.split('?')[0]), ['PATCH /v1/projects/hookgate-test/subscriptions/hookgate-gmail-push'])
  assert.match(google.subscriptions.get(`projects/${PROJECT}/subscriptions/hookgate-gmail-push`).pushConfig.pushEndpoint, 'https://mail.example.com/push?token=')
  assert.match(readFileSync(p.config, 'utf8'), 'pushEndpoint: https://mail.example.com/push')
})

setup('--dry-run prints the plan and calls nothing, writes nothing', async () => {
  const p = project()
  const from = google.requests.length
  const r = await hookgate(['webhooks', 'gmail', 'setup', ...p.args, '--dry-run'])
  assert.is(r.code, 0, r.stderr)
  assert.match(r.stdout, 'dry run')
  assert.match(r.stdout, '1. topic projects/hookgate-test/topics/hookgate-gmail')
  assert.is(google.requests.length, from)
  assert.is(readFileSync(p.config, 'utf8'), CONFIG)
  assert.not.ok(existsSync(join(p.dir, '.hookgate/gmail/push-token')))
})

setup('a Pub/Sub key without the Pub/Sub scope is refused with Google\'s reason, and hooks.yaml is left alone', async () => {
  const p = project()
  writeFileSync(join(p.dir, 'secrets/pubsub.json'), JSON.stringify(google.serviceAccount('no-pubsub', { scopes: ['https://www.googleapis.com/auth/gmail.readonly'] })))
  const r = await hookgate(['webhooks', 'gmail', 'setup', ...p.args])
  assert.is(r.code, 1)
  assert.match(r.stderr, /hookgate webhooks gmail setup: .*(unauthorized|scope|PERMISSION_DENIED)/i)
  assert.not.match(r.stderr, /BEGIN PRIVATE KEY|at \w+ \(/)
  assert.is(readFileSync(p.config, 'utf8'), CONFIG)
})

setup('what is missing the first time is named (exit 1); a malformed flag is a usage error (exit 2)', async () => {
  const dir = scratchDir('gmail-setup-')
  writeTree(dir, { 'hooks.yaml': CONFIG })
  const r = await hookgate(['webhooks', 'gmail', 'setup', '--config', join(dir, 'hooks.yaml')])
  assert.is(r.code, 1)
  assert.match(r.stderr, '--account EMAIL')
  assert.match(r.stderr, '--push-endpoint URL')
  const bad = await hookgate(['webhooks', 'gmail', 'setup', '--config', join(dir, 'hooks.yaml'), '--include-body', 'maybe'])
  assert.is(bad.code, 2)
})

setup.run()

const login = suite('hookgate webhooks gmail login')

login.before(async () => {
  google = await startFakeGoogle()
  process.env.HOOKGATE_GOOGLE_TOKEN_URL = google.tokenUrl
  process.env.HOOKGATE_GOOGLE_AUTH_URL = google.authUrl
})

login.after(async () => {
  for (const k of ENV) if (saved[k] === undefined) delete process.env[k]; else process.env[k] = saved[k]
  await google.close()
})

login('the loopback flow with PKCE ends with the refresh token saved 0600 in <state>/gmail, never printed', async () => {
  const dir = scratchDir('gmail-login-')
  writeTree(dir, { 'hooks.yaml': CONFIG, 'client.json': JSON.stringify(google.oauthClient()) })
  google.consentAs(MAILBOX)
  let stdout = ''
  const running = main('webhooks gmail login', ['--client', join(dir, 'client.json'), '--account', MAILBOX, '--config', join(dir, 'hooks.yaml'), '--timeout-seconds', '20'], { stdout: (t) => { stdout += t }, stderr: (t) => { stdout += t } })
  // the operator opens the URL: the fake consents and redirects to the loopback listener
  let url: string | undefined
  for (let i = 0; i < 100 && !url; i++) {
    url = /(http:\/\/127\.0\.0\.1:\d+\/o\/oauth2\/v2\/auth\?\S+)/.exec(stdout)?.[1]
    if (!url) await new Promise((r) => setTimeout(r, 50))
  }
  assert.ok(url, stdout)
  const consent = new URL(url!)
  assert.is(consent.searchParams.get('code_challenge_method'), 'S256')
  assert.is(consent.searchParams.get('access_type'), 'offline')
  const landed = await fetch(url!)
  assert.is(landed.status, 200)
  assert.is(await running, 0, stdout)
  const file = join(dir, '.hookgate/gmail/refresh-token.json')
  assert.is(statSync(file).mode & 0o777, 0o600)
  const stored = JSON.parse(readFileSync(file, 'utf8'))
  assert.is(stored.mailbox, MAILBOX)
  assert.ok(stored.refresh_token.length > 20)
  assert.not.match(stdout, stored.refresh_token)
})

login.run()
