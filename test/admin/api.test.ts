// The operator page's API over real HTTP: startAdmin in-process on a temp project (a real
// hooks.yaml, a real compile), the real `hookgate admin` for its start-up checks, and the real
// `hookgate serve` on the same state and bundle for a save that must reach the runtime.
// Every answer is checked for a stack trace; every error for the one error shape.
import { createHash, randomBytes } from 'node:crypto'
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { connect } from 'node:net'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startAdmin, CSP, type AdminServer } from '../../admin/server.js'
import { diffLines } from '../../admin/yaml-edit.js'
import { tokenDigest } from '../../runtime/http/auth.js'
import { BUNDLE_FILE } from '../../runtime/bundle/format.js'
import { RunStore, type NewRun } from '../../runtime/store/file/runs.js'
import { hookgateBin } from '../helpers/paths.js'
import { hookgate, describeRun } from '../cli/cli-helpers.js'
import { compileProject, send, spawnServe, until, setTestToken, writeTree, type Project, type Reply, type ServeProcess } from '../runtime/http/harness.js'

const HOOK_TOKEN = setTestToken()
const ADMIN_TOKEN = randomBytes(24).toString('base64url')
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

const BASE = `# the operator's config: comments and spacing must survive every save
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}   # the hook token, from the environment
  path: /hooks
  mappings:
    - id: plain
      match: { path: plain }      # a hand-written mapping
      action: wake
      textTemplate: "plain {{payload.x}}"

channels:
  - { id: ops-log, type: file, path: delivered.jsonl }

workflows:
  - id: deploy-check
    steps:
      - { id: note, action: agent, messageTemplate: "deploy {{payload.service}}" }

agents:
  - id: main
    default: true
    model: builtin/echo
    heartbeat: { every: 30m }
    triggers:
      - name: Deploy finished
        path: deploys
        target: agent
        prompt: "Deploy {{payload.service}} finished"   # the prompt
      - name: Paused
        path: paused
        target: wake
        enabled: false
    tasks:
      - name: Morning check
        schedule: "0 8 * * 1-5"
        timezone: Europe/Berlin
        target: wake
        prompt: good morning
`

/** The same, with ingress off and no hook token: the first save turns it on and generates one. */
const NO_TOKEN = `# a fresh config
hooks:
  enabled: false   # off until the first Trigger
  path: /hooks

agents:
  - id: main
    model: builtin/echo
`

// ---- helpers -----------------------------------------------------------------------------------

const STACK = /\n\s+at \S+ \(|\bat .+:\d+:\d+\)|node:internal|\.ts:\d+:\d+/

interface Call { method?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string>; token?: string | null; ifMatch?: string }

/** One API call with the admin token (unless `token` says otherwise); no answer may carry a stack. */
async function api(admin: AdminServer, path: string, call: Call = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...(call.headers ?? {}) }
  if (call.ifMatch !== undefined) headers['if-match'] = call.ifMatch
  const token = call.token === undefined ? ADMIN_TOKEN : call.token
  const body = call.raw ?? (call.body === undefined ? undefined : JSON.stringify(call.body))
  if (body !== undefined && !Object.keys(headers).some((k) => k.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json'
  const reply = await send(admin.url, path, { method: call.method ?? (body === undefined ? 'GET' : 'POST'), headers, ...(body !== undefined ? { body } : {}), ...(token !== null ? { token } : {}) })
  assert.not.match(reply.text, STACK, `a stack trace in the answer to ${path}: ${reply.text.slice(0, 500)}`)
  return reply
}

/** `{ok:false, code, error}` (plus the named extra keys), with this status. */
function assertApiError(reply: Reply, status: number, code: string, extra: string[] = []): any {
  assert.is(reply.status, status, `expected ${status} ${code}, got ${reply.status} ${reply.text.slice(0, 800)}`)
  assert.match(String(reply.headers['content-type']), /^application\/json\b/)
  assert.equal(Object.keys(reply.json).sort(), ['code', 'error', 'ok', ...extra].sort(), reply.text.slice(0, 800))
  assert.is(reply.json.ok, false)
  assert.is(reply.json.code, code, reply.text.slice(0, 800))
  assert.type(reply.json.error, 'string')
  assert.ok(reply.json.error.length > 0)
  assert.match(reply.json.code, /^[a-z_]+$/)
  return reply.json
}

function sha256(text: string | Buffer): string {
  return createHash('sha256').update(text).digest('hex')
}

interface Admin { project: Project; admin: AdminServer; logs: string[] }

async function adminOn(project: Project, options: { publicUrl?: string; reloadWaitMs?: number } = {}): Promise<Admin> {
  const logs: string[] = []
  const admin = await startAdmin({
    config: project.configFile,
    outDir: project.outDir,
    stateDir: project.stateDir,
    host: '127.0.0.1',
    port: 0,
    token: { digest: tokenDigest(ADMIN_TOKEN), describe: '$HOOKGATE_ADMIN_TOKEN' },
    reloadWaitMs: 4000,
    log: (line) => { logs.push(line) },
    ...options,
  })
  return { project, admin, logs }
}

async function freshAdmin(yaml = BASE, options: { publicUrl?: string; reloadWaitMs?: number } = {}): Promise<Admin> {
  const project = await compileProject(yaml)
  mkdirSync(project.stateDir, { recursive: true })
  return adminOn(project, options)
}

async function hashOf(admin: AdminServer): Promise<string> {
  const r = await api(admin, '/api/overview')
  assert.is(r.status, 200, r.text)
  return r.json.config.hash
}

function bundleBytes(project: Project): Buffer {
  return readFileSync(join(project.outDir, BUNDLE_FILE))
}

/** The lines of `before` the edit changed or removed (insertions change none). */
function changedOldLines(before: string, after: string): string[] {
  const a = before.split('\n')
  return diffLines(a, after.split('\n')).flatMap((h) => a.slice(h.start, h.end))
}

// The page is built by scripts/build.mjs into build/admin/ui/; where it has not been built (a
// branch without the page), a stand-in lets the static route be held to its headers.
const UI_DIR = new URL('../../admin/ui/', import.meta.url)
for (const [file, text] of [['index.html', '<!doctype html><title>hookgate</title><script src="/app.js" type="module"></script>\n'], ['app.js', 'export {}\n'], ['app.css', 'body{}\n']]) {
  mkdirSync(UI_DIR, { recursive: true })
  if (!existsSync(new URL(file, UI_DIR))) writeFileSync(new URL(file, UI_DIR), text)
}

const ENDPOINTS: Array<[string, string, unknown?]> = [
  ['GET', '/api/overview'],
  ['POST', '/api/check', { kind: 'trigger', agentId: 'main', definition: { name: 'x', path: 'x', target: 'wake' } }],
  ['POST', '/api/try', { agentId: 'main', definition: { name: 'x', path: 'x', target: 'wake' } }],
  ['GET', '/api/runs'],
  ['GET', '/api/runs/changes?after=x&wait=10'],
  ['GET', '/api/runs/some-run'],
  ['POST', '/api/agents/main/triggers', { definition: { name: 'x', path: 'x', target: 'wake' } }],
  ['PUT', '/api/agents/main/triggers/Paused', { definition: { name: 'Paused', path: 'paused', target: 'wake' } }],
  ['DELETE', '/api/agents/main/triggers/Paused'],
  ['POST', '/api/agents/main/tasks', { definition: { name: 'x', every: '1h', target: 'wake' } }],
  ['PUT', '/api/agents/main/tasks/Morning%20check', { definition: { name: 'Morning check', every: '1h', target: 'wake' } }],
  ['DELETE', '/api/agents/main/tasks/Morning%20check'],
]

// ---------------------------------------------------------------------------------------------

const auth = suite<{ admins: Admin[] }>('the admin token')
auth.before(async (ctx) => { ctx.admins = [] })
auth.after(async (ctx) => { for (const a of ctx.admins) await a.admin.close() })

// Each case has its own server: the limiter counts every failure of 127.0.0.1.
async function fresh(ctx: { admins: Admin[] }): Promise<Admin> {
  const a = await freshAdmin()
  ctx.admins.push(a)
  return a
}

auth('every endpoint answers 401 token_missing without a token, and changes nothing', async (ctx) => {
  const { admin, project } = await fresh(ctx)
  const before = readFileSync(project.configFile)
  for (const [method, path, body] of ENDPOINTS) {
    const r = await api(admin, path, { method, body, token: null, ifMatch: sha256(before) })
    assertApiError(r, 401, 'token_missing')
    assert.not.ok('agents' in r.json)
  }
  assert.equal(readFileSync(project.configFile), before)
})

auth('every endpoint answers 401 token_invalid to a wrong token', async (ctx) => {
  const { admin, project } = await fresh(ctx)
  const before = readFileSync(project.configFile)
  for (const [method, path, body] of ENDPOINTS) {
    assertApiError(await api(admin, path, { method, body, token: 'not-the-admin-token', ifMatch: sha256(before) }), 401, 'token_invalid')
  }
  assert.equal(readFileSync(project.configFile), before)
})

auth('the hook token used as the admin token is refused (401), in either header', async (ctx) => {
  const { admin } = await fresh(ctx)
  assertApiError(await api(admin, '/api/overview', { token: HOOK_TOKEN }), 401, 'token_invalid')
  assertApiError(await api(admin, '/api/overview', { token: null, headers: { 'x-hookgate-admin-token': HOOK_TOKEN } }), 401, 'token_invalid')
  assertApiError(await api(admin, '/api/overview', { token: null, headers: { 'x-hookgate-token': HOOK_TOKEN } }), 401, 'token_invalid')
})

auth('both header forms carry the admin token', async (ctx) => {
  const { admin } = await fresh(ctx)
  assert.is((await api(admin, '/api/overview')).status, 200)
  assert.is((await api(admin, '/api/overview', { token: null, headers: { 'x-hookgate-admin-token': ADMIN_TOKEN } })).status, 200)
})

auth('after 20 failures a client gets 429 with Retry-After, not 401', async (ctx) => {
  const { admin } = await fresh(ctx)
  for (let i = 0; i < 20; i++) assertApiError(await api(admin, '/api/overview', { token: `wrong-${i}` }), 401, 'token_invalid')
  const locked = await api(admin, '/api/overview', { token: 'wrong-again' })
  assertApiError(locked, 429, 'too_many_auth_failures')
  const wait = Number(locked.headers['retry-after'])
  assert.ok(Number.isInteger(wait) && wait > 0 && wait <= 60, `retry-after ${locked.headers['retry-after']}`)
  assertApiError(await api(admin, '/api/runs', { token: null }), 429, 'too_many_auth_failures')
})

auth('the right admin token still passes while locked out and clears the count, as hook tokens do', async (ctx) => {
  const { admin } = await fresh(ctx)
  for (let i = 0; i < 21; i++) await api(admin, '/api/overview', { token: `wrong-${i}` })
  assert.is((await api(admin, '/api/overview')).status, 200)
  // the count starts again: a wrong token is a 401 once more
  assertApiError(await api(admin, '/api/overview', { token: 'wrong' }), 401, 'token_invalid')
})

auth('the page is served without a token, with the CSP exactly and no API data', async (ctx) => {
  const { admin, project } = await fresh(ctx)
  const hash = sha256(readFileSync(project.configFile))
  for (const [path, type] of [['/', /^text\/html/], ['/index.html', /^text\/html/], ['/app.js', /^text\/javascript/], ['/app.css', /^text\/css/]] as const) {
    const r = await api(admin, path, { token: null })
    assert.is(r.status, 200, `${path}: ${r.text.slice(0, 200)}`)
    assert.is(r.headers['content-security-policy'], CSP)
    assert.is(CSP, "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    assert.match(String(r.headers['content-type']), type)
    assert.is(r.headers['x-content-type-options'], 'nosniff')
    assert.is(r.headers['x-frame-options'], 'DENY')
    assert.is(r.headers['set-cookie'], undefined)
    for (const secret of [hash, ADMIN_TOKEN, HOOK_TOKEN, 'Deploy finished', 'deploy-check']) assert.not.ok(r.text.includes(secret), `${path} carries ${secret}`)
  }
  // every API answer carries the same headers
  const overview = await api(admin, '/api/overview')
  assert.is(overview.headers['content-security-policy'], CSP)
  assert.is(overview.headers['cache-control'], 'no-store')
})

auth('an unknown path is a 404 in the error shape, and a wrong method a 405', async (ctx) => {
  const { admin } = await fresh(ctx)
  assertApiError(await api(admin, '/api/nothing'), 404, 'not_found')
  assertApiError(await api(admin, '/nothing', { token: null }), 404, 'not_found')
  assertApiError(await api(admin, '/api/overview', { method: 'DELETE' }), 405, 'method_not_allowed')
  assertApiError(await api(admin, '/api/agents/main/triggers', { method: 'GET' }), 405, 'method_not_allowed')
})

auth('malformed percent-encoding in a path segment is a 400 path_invalid, never a 500, and writes nothing', async (ctx) => {
  const { admin, project } = await fresh(ctx)
  const before = readFileSync(project.configFile)
  const bad = '%E0%A4%A'
  const cases: Array<[string, string, unknown?]> = [
    ['GET', `/api/runs/${bad}`],
    ['POST', `/api/agents/${bad}/triggers`, { definition: { name: 'x', path: 'x', target: 'wake' } }],
    ['POST', `/api/agents/${bad}/tasks`, { definition: { name: 'x', every: '1h', target: 'wake' } }],
    ['PUT', `/api/agents/main/triggers/${bad}`, { definition: { name: 'x', path: 'x', target: 'wake' } }],
    ['DELETE', `/api/agents/main/triggers/${bad}`],
    ['PUT', `/api/agents/main/tasks/${bad}`, { definition: { name: 'x', every: '1h', target: 'wake' } }],
    ['DELETE', `/api/agents/main/tasks/%`],
  ]
  for (const [method, path, body] of cases) {
    const r = await api(admin, path, { method, body, ifMatch: sha256(before) })
    assertApiError(r, 400, 'path_invalid')
    assert.match(r.json.error, /percent-encoding/)
  }
  // The query is read leniently: a broken escape there is a filter that matches nothing.
  const runs = await api(admin, `/api/runs?definition=${bad}&status=${bad}`)
  assert.is(runs.status, 200, runs.text)
  // A request target that is no URL path at all (fetch cannot send one: a raw request).
  const raw = await rawRequest(admin.url, `GET //[ HTTP/1.1\r\nhost: admin\r\nauthorization: Bearer ${ADMIN_TOKEN}\r\nconnection: close\r\n\r\n`)
  assert.match(raw, /^HTTP\/1\.1 400 /, raw)
  assert.equal(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)).code, 'path_invalid')
  assert.equal(readFileSync(project.configFile), before)
})

/** Sends `text` as it is and resolves with everything the server answered. */
function rawRequest(url: string, text: string): Promise<string> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(text))
    let answer = ''
    socket.setEncoding('utf8').on('data', (d: string) => { answer += d })
    socket.on('end', () => resolve(answer))
    socket.on('error', reject)
  })
}

auth.run()

// ---------------------------------------------------------------------------------------------

interface AdminProcess { stdout: () => string; stderr: () => string; exited: Promise<number | null>; stop(): Promise<number | null> }

/** Starts the real `hookgate admin` on port 0 and waits for its `hookgate admin on` line (or its exit). */
async function runAdmin(dir: string, env: Record<string, string | undefined>): Promise<AdminProcess> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  delete childEnv.HOOKGATE_ADMIN_TOKEN
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k]; else childEnv[k] = v
  const child = spawn(process.execPath, [hookgateBin, 'admin', '--port', '0', '--config', 'hooks.yaml', '--state', 'state', '--out', 'dist'], { cwd: dir, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d })
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const safety = setTimeout(() => child.kill('SIGKILL'), 20_000)
  void exited.then(() => clearTimeout(safety))
  process.on('exit', () => { if (child.exitCode === null) child.kill('SIGKILL') })
  await Promise.race([exited, until('the admin line', () => (/admin token/.test(stdout) ? true : undefined), 10_000)])
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    stop: () => { if (child.exitCode === null) child.kill('SIGTERM'); return exited },
  }
}

const startup = suite('hookgate admin at start')

for (const [label, token, files] of [
  ['an ${ENV} reference', '${HOOKGATE_TEST_TOKEN}', {}],
  ['a { file } reference', '{ file: secrets/hook-token }', { 'secrets/hook-token': HOOK_TOKEN + '\n' }],
  ['a generated <state>/token', '{ generate: true }', { 'state/token': HOOK_TOKEN + '\n' }],
] as const) {
  startup(`refuses to start when HOOKGATE_ADMIN_TOKEN is the hook token from ${label}, without printing it`, async () => {
    const dir = (await compileProject(BASE.replace('${HOOKGATE_TEST_TOKEN}', token))).dir
    writeTree(dir, files)
    const run = await runAdmin(dir, { HOOKGATE_ADMIN_TOKEN: HOOK_TOKEN })
    const code = await run.exited
    assert.is(code, 1, `stdout:\n${run.stdout()}\nstderr:\n${run.stderr()}`)
    assert.match(run.stderr(), /hookgate admin: cannot start: the admin token .* is the hook token/)
    assert.is(run.stderr().trim().split('\n').length, 1, run.stderr())
    // a log line as every line the page writes: JSON with the time
    assert.ok(/^\d{4}-\d\d-\d\dT/.test((JSON.parse(run.stderr()) as { t: string }).t), run.stderr())
    assert.not.ok((run.stdout() + run.stderr()).includes(HOOK_TOKEN), 'the token was printed')
    assert.not.match(run.stdout(), /hookgate admin on/)
  })
}

startup('generates <state>/admin-token (mode 0600) on first start and prints it once; the second start does not', async () => {
  const { dir } = await compileProject(BASE)
  const first = await runAdmin(dir, {})
  assert.is(await first.stop(), 0, first.stderr())
  const file = join(dir, 'state', 'admin-token')
  assert.ok(existsSync(file), first.stdout())
  assert.is(statSync(file).mode & 0o777, 0o600)
  const token = readFileSync(file, 'utf8').trim()
  assert.ok(token.length >= 16)
  assert.ok(first.stdout().includes(token), first.stdout())
  assert.match(first.stdout(), /printed only this once/)
  const second = await runAdmin(dir, {})
  assert.is(await second.stop(), 0, second.stderr())
  assert.not.ok(second.stdout().includes(token), second.stdout())
  assert.match(second.stdout(), /admin token \S*admin-token\)/)
  assert.is(readFileSync(file, 'utf8').trim(), token)
})

startup('a short HOOKGATE_ADMIN_TOKEN is refused (exit 1) without printing it', async () => {
  const { dir } = await compileProject(BASE)
  const short = await runAdmin(dir, { HOOKGATE_ADMIN_TOKEN: 'short' })
  assert.is(await short.exited, 1, describeRun({ code: null, signal: null, stdout: short.stdout(), stderr: short.stderr() }))
  assert.match(short.stderr(), /shorter than 16 characters/)
  assert.not.ok(short.stderr().includes("'short'"))
})

startup.run()

// ---------------------------------------------------------------------------------------------

const overview = suite<Admin>('GET /api/overview')
overview.before(async (ctx) => {
  Object.assign(ctx, await freshAdmin())
  writeFileSync(join(ctx.project.stateDir, 'address.json'), JSON.stringify({ url: 'http://127.0.0.1:9', basePath: '/hooks', pid: 1 }) + '\n')
  const store = RunStore.open(ctx.project.stateDir, { now: () => new Date('2026-01-05T10:00:00.000Z') })
  await store.create({ id: 'run-deploy', definitionKind: 'trigger', definitionId: 'trigger:main:deploy-finished', correlationId: 'c1', action: 'agent', status: 'succeeded', agentId: 'main' })
  await store.close()
})
overview.after(async (ctx) => { await ctx.admin.close() })

overview('lists the agent with its Triggers: ids, enabled, last run and endpoint', async ({ admin }) => {
  const o = (await api(admin, '/api/overview')).json
  assert.is(o.agents.length, 1)
  const main = o.agents[0]
  assert.is(main.id, 'main')
  assert.is(main.default, true)
  assert.equal(main.triggers.map((t: any) => [t.id, t.enabled]), [['trigger:main:deploy-finished', true], ['trigger:main:paused', false]])
  assert.is(main.triggers[0].lastRun.id, 'run-deploy')
  assert.is(main.triggers[0].lastRun.status, 'succeeded')
  assert.is(main.triggers[1].lastRun, null)
  assert.is(main.triggers[0].endpoint.url, 'http://127.0.0.1:9/hooks/deploys')
  assert.match(main.triggers[0].endpoint.curl, /\$HOOKGATE_TEST_TOKEN/)
  assert.not.ok(JSON.stringify(o).includes(HOOK_TOKEN))
})

overview('lists the Tasks with their next five firings (08:00 in Berlin on weekdays)', async ({ admin }) => {
  const task = (await api(admin, '/api/overview')).json.agents[0].tasks[0]
  assert.is(task.id, 'task:main:morning-check')
  assert.is(task.enabled, true)
  assert.is(task.lastRun, null)
  assertBerlinMornings(task.next)
})

overview('has the workflows, the channels, the config hash (sha256 of the file) and the diagnostics', async ({ admin, project }) => {
  const o = (await api(admin, '/api/overview')).json
  assert.equal(o.workflows, [{ id: 'deploy-check' }])
  assert.equal(o.channels, [{ id: 'ops-log', type: 'file' }])
  assert.is(o.config.hash, sha256(readFileSync(project.configFile)))
  assert.is(o.config.enabled, true)
  assert.is(o.config.basePath, '/hooks')
  assert.equal(o.diagnostics.filter((d: any) => d.severity === 'error'), [])
  assert.is(o.runtime.url, 'http://127.0.0.1:9')
  assert.is(o.runtime.status, 'not answering')
  assert.type(o.history.version, 'string')
})

overview('a config that does not compile still lists its definitions, with the diagnostics', async ({ admin, project }) => {
  const good = readFileSync(project.configFile, 'utf8')
  try {
    writeFileSync(project.configFile, good.replace('path: deploys', 'path: "bad path!"'))
    const o = (await api(admin, '/api/overview')).json
    assert.ok(o.diagnostics.some((d: any) => d.code === 'MATCH_PATH_INVALID'), JSON.stringify(o.diagnostics))
    assert.is(o.agents[0].triggers.length, 2)
  } finally {
    writeFileSync(project.configFile, good)
  }
})

overview('an alias bomb in hooks.yaml is answered with its finding at the alias, not expanded into the overview', async ({ admin, project }) => {
  const good = readFileSync(project.configFile, 'utf8')
  // 149 Triggers whose prompt is an alias of one 100 KB string: 110 KB of YAML, 14.9 MB expanded
  const bomb = [`        prompt: &big "${'x'.repeat(100_000)}"`]
  for (let i = 0; i < 149; i++) bomb.push(`      - { name: t${i}, path: t${i}, target: wake, prompt: *big }`)
  try {
    writeFileSync(project.configFile, good.replace('        prompt: "Deploy {{payload.service}} finished"   # the prompt', bomb.join('\n')))
    const r = await api(admin, '/api/overview')
    assert.is(r.status, 200, r.text.slice(0, 500))
    assert.equal(r.json.diagnostics.map((d: any) => d.code), ['YAML_ALIAS_EXPANSION'])
    assert.match(r.json.diagnostics[0].message, /^alias \*big /)
    assert.ok(r.text.length < 1024 * 1024, `the overview is ${r.text.length} bytes`)
  } finally {
    writeFileSync(project.configFile, good)
  }
})

function assertBerlinMornings(next: unknown): void {
  assert.ok(Array.isArray(next) && next.length === 5, JSON.stringify(next))
  const berlin = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', weekday: 'short', hourCycle: 'h23' })
  let last = 0
  for (const at of next as string[]) {
    assert.match(at, ISO)
    const t = Date.parse(at)
    assert.ok(t > last && t > Date.now())
    last = t
    const parts = Object.fromEntries(berlin.formatToParts(new Date(t)).map((p) => [p.type, p.value]))
    assert.is(`${parts.hour}:${parts.minute}`, '08:00', at)
    assert.ok(!['Sat', 'Sun'].includes(parts.weekday!), at)
  }
}

overview.run()

// ---------------------------------------------------------------------------------------------

const check = suite<Admin>('POST /api/check')
check.before(async (ctx) => { Object.assign(ctx, await freshAdmin()) })
check.after(async (ctx) => { await ctx.admin.close() })

async function checkTrigger(admin: AdminServer, definition: Record<string, unknown>, original: string | null = null): Promise<any> {
  const r = await api(admin, '/api/check', { body: { kind: 'trigger', agentId: 'main', original, definition } })
  assert.is(r.status, 200, r.text)
  return r.json
}

const codesAt = (result: any, field: string): string[] => (result.findings.fields[field] ?? []).map((d: any) => d.code)

check('a valid Trigger has no findings, its id and its endpoint', async ({ admin }) => {
  const r = await checkTrigger(admin, { name: 'Build done', path: 'builds', target: 'wake' })
  assert.is(r.ok, true)
  assert.equal(r.findings, { fields: {}, other: [] })
  assert.is(r.id, 'trigger:main:build-done')
  assert.match(r.endpoint.url, /\/hooks\/builds$/)
})

check('an invalid path is MATCH_PATH_INVALID under fields.path', async ({ admin }) => {
  const r = await checkTrigger(admin, { name: 'Bad', path: 'has space/..', target: 'wake' })
  assert.is(r.ok, false)
  assert.ok(codesAt(r, 'path').includes('MATCH_PATH_INVALID'), JSON.stringify(r.findings))
  const d = r.findings.fields.path[0]
  assert.type(d.line, 'number')
  assert.type(d.message, 'string')
})

check('a Trigger path with an empty segment (a//b) is a finding under fields.path and gets no URL the runtime would answer 404 to', async ({ admin }) => {
  const r = await checkTrigger(admin, { name: 'Doubled', path: 'builds//done', target: 'wake' })
  assert.is(r.ok, false)
  assert.equal(codesAt(r, 'path'), ['MATCH_PATH_INVALID'], JSON.stringify(r.findings))
  assert.is(r.findings.fields.path[0].hint, 'write path: builds/done')
  assert.is(r.endpoint, null)
  // with slashes around it, the URL is the name the route table has
  const around = await checkTrigger(admin, { name: 'Around', path: '/builds/done/', target: 'wake' })
  assert.is(around.ok, true, JSON.stringify(around.findings))
  assert.match(around.endpoint.url, /\/hooks\/builds\/done$/)
})

check('a reserved path is a finding under fields.path', async ({ admin }) => {
  const r = await checkTrigger(admin, { name: 'Reserved', path: 'wake', target: 'wake' })
  assert.is(r.ok, false)
  assert.ok(codesAt(r, 'path').length > 0, JSON.stringify(r.findings))
})

check('a value outside an enum is a finding under its field (target)', async ({ admin }) => {
  const r = await checkTrigger(admin, { name: 'Enum', path: 'enum', target: 'explode' })
  assert.is(r.ok, false)
  assert.ok(codesAt(r, 'target').length > 0, JSON.stringify(r.findings))
})

check('a name already taken is a finding of the new definition', async ({ admin }) => {
  const r = await checkTrigger(admin, { name: 'deploy finished', path: 'other', target: 'wake' })
  assert.is(r.ok, false)
  const all = [...Object.values(r.findings.fields).flat(), ...r.findings.other] as any[]
  assert.ok(all.some((d) => /DUPLICATE/.test(d.code)), JSON.stringify(r.findings))
  // editing the one that has the name is no duplicate
  assert.is((await checkTrigger(admin, { name: 'Deploy finished', path: 'deploys', target: 'wake' }, 'Deploy finished')).ok, true)
})

check('an unknown workflow is a finding under fields.workflow', async ({ admin }) => {
  const r = await checkTrigger(admin, { name: 'Flow', path: 'flow', target: 'workflow', workflow: 'no-such-flow' })
  assert.is(r.ok, false)
  assert.ok(codesAt(r, 'workflow').length > 0, JSON.stringify(r.findings))
})

check('a Task answers its next five firings, right for a Europe/Berlin cron', async ({ admin }) => {
  const r = await api(admin, '/api/check', { body: { kind: 'task', agentId: 'main', definition: { name: 'Berlin', schedule: '0 8 * * 1-5', timezone: 'Europe/Berlin', target: 'wake', prompt: 'x' } } })
  assert.is(r.status, 200, r.text)
  assert.is(r.json.ok, true, r.text)
  assertBerlinMornings(r.json.next)
})

check('a broken cron gives findings and no next firings', async ({ admin }) => {
  const r = await api(admin, '/api/check', { body: { kind: 'task', agentId: 'main', definition: { name: 'Broken', schedule: '61 * * * *', target: 'wake' } } })
  assert.is(r.json.ok, false)
  assert.equal(r.json.next, [])
  assert.ok(codesAt(r.json, 'schedule').length > 0, JSON.stringify(r.json.findings))
})

check('a request without a kind or an agent is a 400; an unknown agent a 404', async ({ admin }) => {
  assertApiError(await api(admin, '/api/check', { body: { agentId: 'main', definition: {} } }), 400, 'kind_invalid')
  assertApiError(await api(admin, '/api/check', { body: { kind: 'task', definition: {} } }), 400, 'agent_missing')
  assertApiError(await api(admin, '/api/check', { body: { kind: 'trigger', agentId: 'nobody', definition: { name: 'x', path: 'x', target: 'wake' } } }), 404, 'agent_unknown')
  assertApiError(await api(admin, '/api/check', { body: { kind: 'trigger', agentId: 'main', definition: { name: 'x', colour: 'red' } } }), 400, 'definition_invalid')
})

check('check writes nothing', async ({ admin, project }) => {
  const before = readFileSync(project.configFile)
  const bundle = bundleBytes(project)
  await checkTrigger(admin, { name: 'Build done', path: 'builds', target: 'wake' })
  assert.equal(readFileSync(project.configFile), before)
  assert.equal(bundleBytes(project), bundle)
})

check.run()

// ---------------------------------------------------------------------------------------------

const tryIt = suite<Admin>('POST /api/try')
tryIt.before(async (ctx) => { Object.assign(ctx, await freshAdmin()) })
tryIt.after(async (ctx) => { await ctx.admin.close() })

tryIt('a wake Trigger answers 200 wake, as hookgate try does', async ({ admin, project }) => {
  const r = await api(admin, '/api/try', { body: { agentId: 'main', definition: { name: 'Ping', path: 'ping', target: 'wake', prompt: 'ping {{payload.n}}' }, payload: { n: 7 } } })
  assert.is(r.status, 200, r.text)
  assert.is(r.json.status, 200)
  assert.is(r.json.mapping, 'trigger:main:ping')
  assert.is(r.json.action.kind, 'wake')
  assert.match(JSON.stringify(r.json.action), /ping 7/)
  assert.equal(readFileSync(project.configFile, 'utf8'), BASE, 'try wrote nothing')
})

tryIt('an agent Trigger answers 202 with the rendered prompt in the envelope, as hookgate try does', async ({ admin, project }) => {
  const r = await api(admin, '/api/try', { body: { agentId: 'main', original: 'Deploy finished', definition: { name: 'Deploy finished', path: 'deploys', target: 'agent', prompt: 'Deploy {{payload.service}} finished' }, payload: { service: 'api' } } })
  assert.is(r.status, 200, r.text)
  assert.is(r.json.status, 202)
  assert.is(r.json.action.kind, 'agent')
  assert.is(r.json.external, true)
  assert.match(r.json.action.message, /Deploy api finished/)
  assert.match(r.json.action.message, /EXTERNAL|external|untrusted/i)
  // the same Trigger through the real CLI on the compiled bundle
  writeFileSync(join(project.dir, 'payload.json'), '{"service":"api"}')
  const cli = await hookgate(['try', 'deploys', '--payload', 'payload.json', '--bundle', 'dist'], { cwd: project.dir })
  assert.is(cli.code, 0, describeRun(cli))
  const fromCli = JSON.parse(cli.stdout)
  assert.equal(Object.keys(r.json).sort(), Object.keys(fromCli).sort())
  assert.is(fromCli.status, r.json.status)
  assert.is(fromCli.mapping, r.json.mapping)
  assert.is(fromCli.action.kind, r.json.action.kind)
  const unwrap = (m: string) => m.replace(/[0-9a-f]{16,}/gi, 'ID')
  assert.is(unwrap(fromCli.action.message), unwrap(r.json.action.message))
})

tryIt('a Trigger that does not compile is a 422 with findings by field', async ({ admin }) => {
  const r = await api(admin, '/api/try', { body: { agentId: 'main', definition: { name: 'Bad', path: 'bad path', target: 'wake' }, payload: {} } })
  const body = assertApiError(r, 422, 'config_invalid', ['findings'])
  assert.ok(body.findings.fields.path?.some((d: any) => d.code === 'MATCH_PATH_INVALID'), r.text)
})

tryIt.run()

// ---------------------------------------------------------------------------------------------

const edits = suite<Admin & { plain: Admin; publicUrl: Admin }>('creating, replacing and deleting Triggers and Tasks')
edits.before(async (ctx) => {
  Object.assign(ctx, await freshAdmin(NO_TOKEN))
  // a save waits for a runtime that answers, never for one that does not: with a minute to wait,
  // the 5 s client timeout fails any save that waited on the stale address below
  ctx.plain = await freshAdmin(BASE, { reloadWaitMs: 60_000 })
  writeFileSync(join(ctx.plain.project.stateDir, 'address.json'), JSON.stringify({ url: 'http://127.0.0.1:9', basePath: '/hooks', pid: 1 }) + '\n')
  ctx.publicUrl = await freshAdmin(BASE, { publicUrl: 'https://hooks.example.com/' })
})
edits.after(async (ctx) => { await ctx.admin.close(); await ctx.plain.admin.close(); await ctx.publicUrl.admin.close() })

const TRIGGER = { name: 'Build done', path: 'builds', target: 'agent', prompt: 'Build {{payload.id}} done', timeoutSeconds: 60, notify: 'state' }

edits('a save without If-Match is a 428 and writes nothing', async ({ plain }) => {
  const before = readFileSync(plain.project.configFile)
  assertApiError(await api(plain.admin, '/api/agents/main/triggers', { body: { definition: TRIGGER } }), 428, 'if_match_required')
  assertApiError(await api(plain.admin, '/api/agents/main/triggers/Paused', { method: 'DELETE' }), 428, 'if_match_required')
  assert.equal(readFileSync(plain.project.configFile), before)
})

edits('a stale If-Match is a 409 config_changed with the current hash', async ({ plain }) => {
  const before = readFileSync(plain.project.configFile)
  const r = await api(plain.admin, '/api/agents/main/triggers', { body: { definition: TRIGGER }, ifMatch: sha256('an older file') })
  const body = assertApiError(r, 409, 'config_changed', ['hash'])
  assert.is(body.hash, sha256(before))
  assert.equal(readFileSync(plain.project.configFile), before)
})

edits('hooks.yaml changed on disk after the page read it (a git pull): 409, and the pulled file stays', async ({ plain }) => {
  const read = await hashOf(plain.admin)
  const pulled = readFileSync(plain.project.configFile, 'utf8') + '# pulled from git\n'
  writeFileSync(plain.project.configFile, pulled)
  const body = assertApiError(await api(plain.admin, '/api/agents/main/triggers', { body: { definition: TRIGGER }, ifMatch: read }), 409, 'config_changed', ['hash'])
  assert.is(body.hash, sha256(pulled))
  assert.is(readFileSync(plain.project.configFile, 'utf8'), pulled)
})

edits('two saves made on the same read: the first is saved, the second is a 409', async ({ plain }) => {
  const read = await hashOf(plain.admin)
  const [a, b] = await Promise.all([
    api(plain.admin, '/api/agents/main/tasks', { body: { definition: { name: 'One', every: '1h', target: 'wake' } }, ifMatch: read }),
    api(plain.admin, '/api/agents/main/tasks', { body: { definition: { name: 'Two', every: '2h', target: 'wake' } }, ifMatch: read }),
  ])
  assert.is(a.status, 201, a.text)
  assertApiError(b, 409, 'config_changed', ['hash'])
  const text = readFileSync(plain.project.configFile, 'utf8')
  assert.ok(text.includes('name: One') && !text.includes('name: Two'))
})

edits('an edit that does not compile is a 422 with findings; hooks.yaml and the bundle are unchanged', async ({ plain }) => {
  const before = readFileSync(plain.project.configFile)
  const bundle = bundleBytes(plain.project)
  const r = await api(plain.admin, '/api/agents/main/triggers', { body: { definition: { ...TRIGGER, path: 'no good/..' } }, ifMatch: sha256(before) })
  const body = assertApiError(r, 422, 'config_invalid', ['findings'])
  assert.ok(body.findings.fields.path.some((d: any) => d.code === 'MATCH_PATH_INVALID'))
  assert.equal(readFileSync(plain.project.configFile), before)
  assert.equal(bundleBytes(plain.project), bundle)
})

edits('a save whose bundle cannot be written answers 500 save_failed and changes neither hooks.yaml nor the bundle', async () => {
  const { project, admin } = await freshAdmin(BASE)
  try {
    const before = readFileSync(project.configFile)
    const manifest = readFileSync(join(project.outDir, 'manifest.json'))
    // a directory where the bundle file goes: staging succeeds, putting it in place cannot
    rmSync(join(project.outDir, BUNDLE_FILE))
    mkdirSync(join(project.outDir, BUNDLE_FILE, 'in-the-way'), { recursive: true })
    const put = await api(admin, '/api/agents/main/triggers/Paused', { method: 'PUT', body: { definition: { name: 'Paused', path: 'paused', target: 'wake' } }, ifMatch: sha256(before) })
    const body = assertApiError(put, 500, 'save_failed')
    assert.match(body.error, /hooks\.yaml and the bundle are unchanged/)
    assert.equal(readFileSync(project.configFile), before)
    assert.equal(readFileSync(join(project.outDir, 'manifest.json')), manifest)
    // and the out dir where a file is: nothing written either
    rmSync(project.outDir, { recursive: true })
    writeFileSync(project.outDir, 'not a directory\n')
    const post = await api(admin, '/api/agents/main/tasks', { body: { definition: { name: 'Hourly', every: '1h', target: 'wake' } }, ifMatch: sha256(before) })
    assertApiError(post, 500, 'save_failed')
    assert.equal(readFileSync(project.configFile), before)
    assert.equal(readdirSync(project.dir).sort(), ['dist', 'hooks.yaml', 'state'], 'a temp file was left behind')
  } finally {
    await admin.close()
  }
})

edits('a valid save keeps every comment and untouched line byte for byte, answers the endpoint at the runtime address, and no longer waits out a stale address.json', async ({ plain }) => {
  const before = readFileSync(plain.project.configFile, 'utf8')
  const r = await api(plain.admin, '/api/agents/main/triggers', { body: { definition: TRIGGER }, ifMatch: sha256(before) })
  assert.is(r.status, 201, r.text)
  const after = readFileSync(plain.project.configFile, 'utf8')
  assert.equal(changedOldLines(before, after), [], 'no old line changed')
  assert.is(r.json.hash, sha256(after))
  assert.is(r.json.id, 'trigger:main:build-done')
  assert.is(r.json.endpoint.url, 'http://127.0.0.1:9/hooks/builds')
  assert.match(r.json.endpoint.curl, /^curl -X POST 'http:\/\/127\.0\.0\.1:9\/hooks\/builds'/)
  assert.is(r.json.tokenGenerated, undefined)
  assert.equal(r.json.runtime, { url: 'http://127.0.0.1:9', serving: false, status: 'not answering' })
  assert.is(r.json.bundle.hash, JSON.parse(readFileSync(join(plain.project.outDir, 'manifest.json'), 'utf8')).inputsHash)
  assert.ok(bundleBytes(plain.project).toString().includes('trigger:main:build-done'))
})

edits('replacing a Trigger answers 200 and changes only its lines; disabling writes enabled: false', async ({ plain }) => {
  const before = readFileSync(plain.project.configFile, 'utf8')
  const r = await api(plain.admin, '/api/agents/main/triggers/Build%20done', { method: 'PUT', body: { definition: { ...TRIGGER, prompt: 'Build {{payload.id}} finished', enabled: false } }, ifMatch: sha256(before) })
  assert.is(r.status, 200, r.text)
  const after = readFileSync(plain.project.configFile, 'utf8')
  const changed = changedOldLines(before, after)
  assert.equal(changed, ['        prompt: Build {{payload.id}} done'], after)
  assert.match(after, /prompt: Build \{\{payload.id\}\} finished\n\s+timeoutSeconds: 60\n\s+notify: state\n\s+enabled: false/)
  const o = (await api(plain.admin, '/api/overview')).json
  assert.is(o.agents[0].triggers.find((t: any) => t.id === 'trigger:main:build-done').enabled, false)
})

edits('deleting a Trigger answers 200 and gives back the file as it was before it was created', async ({ plain }) => {
  const before = readFileSync(plain.project.configFile, 'utf8')
  const r = await api(plain.admin, '/api/agents/main/triggers/build-done', { method: 'DELETE', ifMatch: sha256(before) })
  assert.is(r.status, 200, r.text)
  assert.is(r.json.id, null)
  const after = readFileSync(plain.project.configFile, 'utf8')
  assert.not.ok(after.includes('Build done'))
  assert.ok(after.startsWith(BASE.slice(0, BASE.indexOf('    tasks:'))), after)
  assert.not.ok(bundleBytes(plain.project).toString().includes('trigger:main:build-done'))
})

edits('Tasks are created (201), replaced (200) and deleted (200) the same way', async ({ plain }) => {
  let hash = await hashOf(plain.admin)
  const created = await api(plain.admin, '/api/agents/main/tasks', { body: { definition: { name: 'Nightly', schedule: '0 3 * * *', timezone: 'Europe/Berlin', target: 'wake', prompt: 'night' } }, ifMatch: hash })
  assert.is(created.status, 201, created.text)
  assert.is(created.json.id, 'task:main:nightly')
  assert.is(created.json.endpoint, undefined)
  hash = created.json.hash
  const replaced = await api(plain.admin, '/api/agents/main/tasks/Nightly', { method: 'PUT', body: { definition: { name: 'Nightly', every: '6h', target: 'wake', prompt: 'night' } }, ifMatch: hash })
  assert.is(replaced.status, 200, replaced.text)
  const text = readFileSync(plain.project.configFile, 'utf8')
  // a field the Task did not have goes where the spec's order puts it, no longer at the end
  assert.match(text, /name: Nightly\n\s+every: 6h\n\s+target: wake\n\s+prompt: night\n/)
  assert.not.match(text, /0 3 \* \* \*/)
  const deleted = await api(plain.admin, '/api/agents/main/tasks/Nightly', { method: 'DELETE', ifMatch: replaced.json.hash })
  assert.is(deleted.status, 200, deleted.text)
  assert.not.ok(readFileSync(plain.project.configFile, 'utf8').includes('Nightly'))
})

edits('the first save on a config without a hook token turns hooks on, generates <state>/token (0600) and writes only a reference', async ({ admin, project }) => {
  const before = readFileSync(project.configFile, 'utf8')
  const r = await api(admin, '/api/agents/main/triggers', { body: { definition: TRIGGER }, ifMatch: sha256(before) })
  assert.is(r.status, 201, r.text)
  const tokenFile = join(project.stateDir, 'token')
  assert.ok(existsSync(tokenFile))
  assert.is(statSync(tokenFile).mode & 0o777, 0o600)
  const token = readFileSync(tokenFile, 'utf8').trim()
  assert.ok(token.length >= 16)
  assert.match(r.json.tokenGenerated, /token$/)
  const after = readFileSync(project.configFile, 'utf8')
  assert.not.ok(after.includes(token), 'the token value is in hooks.yaml')
  assert.not.ok(r.text.includes(token), 'the token value is in the answer')
  assert.match(after, /\n {2}token: \{ ?generate: true ?\}\n/)
  assert.match(after, /\n {2}enabled: true +# off until the first Trigger\n/)
  // the only old line changed is hooks.enabled (its comment kept)
  assert.equal(changedOldLines(before, after), ['  enabled: false   # off until the first Trigger'])
  assert.ok(after.startsWith('# a fresh config\nhooks:\n'))
  assert.match(r.json.endpoint.curl, /\$\(cat .*token\)/)
  // the endpoint without a running runtime: the server address the config names
  assert.is(r.json.endpoint.url, 'http://127.0.0.1:8787/hooks/builds')
  // a second save generates nothing
  const again = await api(admin, '/api/agents/main/tasks', { body: { definition: { name: 'Tick', every: '1h', target: 'wake' } }, ifMatch: r.json.hash })
  assert.is(again.status, 201, again.text)
  assert.is(again.json.tokenGenerated, undefined)
  assert.is(readFileSync(tokenFile, 'utf8').trim(), token)
})

edits('the endpoint URL uses --public-url when it is given', async ({ publicUrl }) => {
  const r = await api(publicUrl.admin, '/api/agents/main/triggers', { body: { definition: TRIGGER }, ifMatch: await hashOf(publicUrl.admin) })
  assert.is(r.status, 201, r.text)
  assert.is(r.json.endpoint.url, 'https://hooks.example.com/hooks/builds')
  const o = (await api(publicUrl.admin, '/api/overview')).json
  assert.is(o.agents[0].triggers[0].endpoint.url, 'https://hooks.example.com/hooks/deploys')
})

edits('an unknown agent or definition is a 404', async ({ plain }) => {
  const hash = await hashOf(plain.admin)
  assertApiError(await api(plain.admin, '/api/agents/nobody/triggers', { body: { definition: TRIGGER }, ifMatch: hash }), 404, 'agent_unknown')
  assertApiError(await api(plain.admin, '/api/agents/main/triggers/No%20such', { method: 'PUT', body: { definition: TRIGGER }, ifMatch: hash }), 404, 'definition_unknown')
  assertApiError(await api(plain.admin, '/api/agents/main/tasks/No%20such', { method: 'DELETE', ifMatch: hash }), 404, 'definition_unknown')
  assert.is(sha256(readFileSync(plain.project.configFile)), hash)
})

edits('a wrong content type is a 415, a body over 1 MiB a 413, bad JSON a 400, an unknown field a 400', async ({ plain }) => {
  const hash = await hashOf(plain.admin)
  const path = '/api/agents/main/triggers'
  assertApiError(await api(plain.admin, path, { raw: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' }, ifMatch: hash }), 415, 'unsupported_media_type')
  assertApiError(await api(plain.admin, '/api/check', { raw: '{}', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type')
  const big = JSON.stringify({ definition: { ...TRIGGER, prompt: 'x'.repeat(1024 * 1024 + 10) } })
  assertApiError(await api(plain.admin, path, { raw: big, ifMatch: hash }), 413, 'payload_too_large')
  assertApiError(await api(plain.admin, path, { raw: '{"definition": {', ifMatch: hash }), 400, 'invalid_json')
  assertApiError(await api(plain.admin, '/api/check', { raw: 'nope' }), 400, 'invalid_json')
  assertApiError(await api(plain.admin, path, { body: { definition: { ...TRIGGER, colour: 'red' } }, ifMatch: hash }), 400, 'definition_invalid')
  assertApiError(await api(plain.admin, path, { body: { definition: 'a string' }, ifMatch: hash }), 400, 'definition_invalid')
  assert.is(sha256(readFileSync(plain.project.configFile)), hash)
})

edits.run()

// ---------------------------------------------------------------------------------------------

const live = suite<Admin & { server: ServeProcess }>('a save with hookgate serve running on the same state and bundle')
live.before(async (ctx) => {
  const project = await compileProject(BASE)
  ctx.server = await spawnServe(project.outDir, project.stateDir)
  Object.assign(ctx, await adminOn(project))
})
live.after(async (ctx) => {
  await ctx.admin.close()
  if (ctx.server.child.exitCode === null) ctx.server.child.kill('SIGTERM')
  await ctx.server.exited
})

live('the overview shows the runtime serving the bundle', async ({ admin, server }) => {
  const o = (await api(admin, '/api/overview')).json
  assert.is(o.runtime.url, server.origin)
  assert.is(o.runtime.status, 'ok')
  assert.type(o.runtime.bundle, 'string')
})

live('a new Trigger is served once the save answers, and its run is in the history as a trigger run', async ({ admin, server, project }) => {
  const r = await api(admin, '/api/agents/main/triggers', { body: { definition: { name: 'Release', path: 'releases', target: 'agent', prompt: 'Release {{payload.tag}}' } }, ifMatch: await hashOf(admin) })
  assert.is(r.status, 201, r.text)
  assert.equal(r.json.runtime, { url: server.origin, serving: true, status: 'ok' })
  assert.is(r.json.endpoint.url, `${server.origin}/hooks/releases`)
  const posted = await send(server.origin, new URL(r.json.endpoint.url).pathname, { token: HOOK_TOKEN, body: { tag: 'v1' }, headers: { 'x-request-id': 'abc' } })
  assert.is(posted.status, 202, posted.text)
  const runId = posted.json.runId
  const runs = await until('the run in GET /api/runs', async () => {
    const page = (await api(admin, '/api/runs?kind=trigger')).json
    return page.rows.find((row: any) => row.id === runId)
  }, 5000, 100)
  assert.is(runs.definitionKind, 'trigger')
  assert.is(runs.definitionId, 'trigger:main:release')
  // the detail shows the request with its secrets redacted
  const detail = await api(admin, `/api/runs/${runId}`)
  assert.is(detail.status, 200, detail.text)
  assert.is(detail.json.run.id, runId)
  assert.is(detail.json.run.received.headers.authorization, '[redacted]')
  assert.is(detail.json.run.received.headers['x-request-id'], 'abc')
  assert.equal(detail.json.run.received.payload, { tag: 'v1' })
  assert.not.ok(detail.text.includes(HOOK_TOKEN))
  for (const hidden of ['request', 'idempotency', 'response']) assert.not.ok(hidden in detail.json.run, hidden)
  assert.ok(existsSync(project.stateDir))
})

live('disabling a Trigger makes its path 404 on the running runtime', async ({ admin, server }) => {
  const r = await api(admin, '/api/agents/main/triggers/Release', { method: 'PUT', body: { definition: { name: 'Release', path: 'releases', target: 'agent', prompt: 'Release {{payload.tag}}', enabled: false } }, ifMatch: await hashOf(admin) })
  assert.is(r.status, 200, r.text)
  assert.is(r.json.runtime.serving, true)
  assert.is((await send(server.origin, '/hooks/releases', { token: HOOK_TOKEN, body: {} })).status, 404)
})

live('deleting a Trigger makes its path 404', async ({ admin, server }) => {
  assert.is((await send(server.origin, '/hooks/deploys', { token: HOOK_TOKEN, body: { service: 'x' } })).status, 202)
  const r = await api(admin, '/api/agents/main/triggers/Deploy%20finished', { method: 'DELETE', ifMatch: await hashOf(admin) })
  assert.is(r.status, 200, r.text)
  assert.is(r.json.runtime.serving, true)
  assert.is((await send(server.origin, '/hooks/deploys', { token: HOOK_TOKEN, body: {} })).status, 404)
})

live('a workflow Trigger run shows its steps in the detail', async ({ admin, server }) => {
  const r = await api(admin, '/api/agents/main/triggers', { body: { definition: { name: 'Check deploy', path: 'check-deploy', target: 'workflow', workflow: 'deploy-check' } }, ifMatch: await hashOf(admin) })
  assert.is(r.status, 201, r.text)
  assert.is(r.json.runtime.serving, true)
  const posted = await send(server.origin, '/hooks/check-deploy', { token: HOOK_TOKEN, body: { service: 'api' } })
  assert.is(posted.status, 202, posted.text)
  const detail = await until('the workflow run with its step', async () => {
    const d = (await api(admin, `/api/runs/${posted.json.runId}`)).json
    return d.run?.status === 'succeeded' && d.steps.length > 0 ? d : undefined
  }, 8000, 100)
  assert.is(detail.run.definitionKind, 'trigger')
  assert.equal(detail.steps.map((s: any) => [s.stepId, s.parentRunId]), [['note', posted.json.runId]])
})

live('GET /api/runs/changes resolves soon after a new run is written', async ({ admin, server }) => {
  const { version } = (await api(admin, '/api/runs')).json
  // asked to wait the longest (25 s): the client's own 5 s limit fails the test if it does
  const waiting = api(admin, `/api/runs/changes?after=${encodeURIComponent(version)}&wait=25`)
  await new Promise((r) => setTimeout(r, 100))
  assert.is((await send(server.origin, '/hooks/plain', { token: HOOK_TOKEN, body: { x: 1 } })).status, 200)
  const changed = await waiting
  assert.is(changed.status, 200, changed.text)
  assert.is.not(changed.json.version, version)
  // the run's later records (its wake settled by the heartbeat) may already have moved it on again
  const page = (await api(admin, '/api/runs')).json
  assert.is.not(page.version, version)
  assert.is(page.rows[0].definitionId, 'plain')
})

live.run()

// ---------------------------------------------------------------------------------------------

const runs = suite<Admin>('GET /api/runs and /api/runs/:id over a written history')
runs.before(async (ctx) => {
  Object.assign(ctx, await freshAdmin())
  let clock = Date.parse('2026-03-01T00:00:00.000Z')
  const store = RunStore.open(ctx.project.stateDir, { now: () => new Date(clock) })
  const at = async (minutes: number, run: NewRun) => { clock = Date.parse('2026-03-01T00:00:00.000Z') + minutes * 60_000; return store.create(run) }
  // 210 hook runs (more than a page can hold), then the ones the filters look for
  await store.createMany(Array.from({ length: 210 }, (_, i) => ({ id: `hook-${String(i).padStart(3, '0')}`, definitionKind: 'hook' as const, definitionId: 'plain', correlationId: `ch-${i}`, action: 'wake' as const, status: 'succeeded' as const })))
  await at(10, { id: 'trig-ok', definitionKind: 'trigger', definitionId: 'trigger:main:deploy-finished', correlationId: 'c-deploy', action: 'agent', status: 'succeeded', received: { path: '/hooks/deploys', query: {}, headers: { authorization: '[redacted]', 'user-agent': 'test' }, payload: { service: 'api' } } })
  await at(20, { id: 'trig-failed', definitionKind: 'trigger', definitionId: 'trigger:main:deploy-finished', correlationId: 'c-deploy2', action: 'agent', status: 'failed', error: 'the model did not answer' })
  await at(30, { id: 'task-run', definitionKind: 'task', definitionId: 'task:main:morning-check', correlationId: 'c-task', action: 'wake', status: 'skipped', scheduledFor: '2026-03-01T07:00:00.000Z' })
  await at(40, { id: 'flow', definitionKind: 'trigger', definitionId: 'trigger:main:check-deploy', correlationId: 'c-flow', action: 'workflow', status: 'succeeded' })
  await at(41, { id: 'flow-step-1', definitionKind: 'trigger', definitionId: 'trigger:main:check-deploy', correlationId: 'c-flow', action: 'agent', status: 'succeeded', parentRunId: 'flow', stepId: 'note' })
  await at(42, { id: 'flow-step-2', definitionKind: 'trigger', definitionId: 'trigger:main:check-deploy', correlationId: 'c-flow', action: 'deliver', status: 'succeeded', parentRunId: 'flow', stepId: 'tell' })
  await at(43, { id: 'flow-summary', definitionKind: 'hook', definitionId: 'agent', correlationId: 'c-flow', action: 'agent', status: 'succeeded' })
  await at(50, { id: 'replay-1', definitionKind: 'trigger', definitionId: 'trigger:main:deploy-finished', correlationId: 'c-replay', action: 'agent', status: 'running', replayOf: 'trig-failed' })
  await store.close()
})
runs.after(async (ctx) => { await ctx.admin.close() })

runs('pages newest first with page, pages and total; the limit is capped at 200', async ({ admin }) => {
  const first = (await api(admin, '/api/runs?limit=10')).json
  assert.is(first.total, 218)
  assert.is(first.pages, 22)
  assert.is(first.page, 1)
  assert.equal(first.rows.map((r: any) => r.id).slice(0, 3), ['replay-1', 'flow-summary', 'flow-step-2'])
  const times = first.rows.map((r: any) => Date.parse(r.createdAt))
  assert.equal(times, [...times].sort((a: number, b: number) => b - a))
  const second = (await api(admin, '/api/runs?limit=10&page=2')).json
  assert.is(second.page, 2)
  assert.not.ok(second.rows.some((r: any) => first.rows.some((f: any) => f.id === r.id)))
  const capped = (await api(admin, '/api/runs?limit=100000')).json
  assert.is(capped.rows.length, 200)
  assert.is(capped.pages, 2)
  const beyond = (await api(admin, '/api/runs?limit=10&page=999')).json
  assert.is(beyond.page, 22)
  // a row is a summary: no request, no received
  assert.not.ok('received' in first.rows.find((r: any) => r.id === 'replay-1'))
})

runs('a limit or page that is not a number no longer pages into null: the defaults apply', async ({ admin }) => {
  const fallback = (await api(admin, '/api/runs?limit=abc&page=-3')).json
  assert.is(fallback.page, 1)
  assert.is(fallback.rows.length, 25)
  assert.is(fallback.pages, Math.ceil(218 / 25))
  assert.is((await api(admin, '/api/runs?limit=10&page=two')).json.page, 1)
})

runs('filters by kind, a status list, definition and time', async ({ admin }) => {
  const ids = async (q: string) => (await api(admin, `/api/runs?${q}`)).json.rows.map((r: any) => r.id)
  assert.equal(await ids('kind=task'), ['task-run'])
  assert.equal(await ids('kind=trigger&status=failed'), ['trig-failed'])
  assert.equal(await ids('status=failed,skipped'), ['task-run', 'trig-failed'])
  assert.equal(await ids('status=failed&status=running'), ['replay-1', 'trig-failed'])
  assert.equal(await ids('definition=trigger:main:deploy-finished'), ['replay-1', 'trig-failed', 'trig-ok'])
  assert.equal(await ids('kind=trigger&since=2026-03-01T00:15:00Z&until=2026-03-01T00:41:00Z'), ['flow', 'trig-failed'])
  assert.equal(await ids('kind=hook&until=2026-03-01T00:05:00Z&limit=1'), ['hook-209'])
})

runs('a run\'s detail has its received request (secrets redacted), its steps, the runs under its correlation id and its replays', async ({ admin }) => {
  const ok = (await api(admin, '/api/runs/trig-ok')).json
  assert.is(ok.run.received.headers.authorization, '[redacted]')
  const flow = (await api(admin, '/api/runs/flow')).json
  assert.equal(flow.steps.map((s: any) => s.stepId), ['note', 'tell'])
  assert.equal(flow.correlated.map((s: any) => s.id), ['flow-summary'])
  assert.equal(flow.replays, [])
  assert.equal(flow.deliveries, [])
  const failed = (await api(admin, '/api/runs/trig-failed')).json
  assert.equal(failed.replays.map((s: any) => s.id), ['replay-1'])
  assert.is(failed.run.error, 'the model did not answer')
})

runs('an unknown run id is a 404', async ({ admin }) => {
  assertApiError(await api(admin, '/api/runs/no-such-run'), 404, 'run_unknown')
  assertApiError(await api(admin, '/api/runs/%2e%2e%2fetc'), 404, 'run_unknown')
})

runs('GET /api/runs/changes answers the same version after `wait` when nothing changes, and at once for an old one', async ({ admin }) => {
  const { version } = (await api(admin, '/api/runs')).json
  const same = await api(admin, `/api/runs/changes?after=${encodeURIComponent(version)}&wait=0.3`)
  assert.equal(same.json, { version })
  const old = await api(admin, '/api/runs/changes?after=an-old-version&wait=4')
  assert.equal(old.json, { version })
})

runs.run()

// ---------------------------------------------------------------------------------------------

// The page once listed only the Triggers: with the repo's own hooks.yaml it said "No Webhook
// Triggers yet" while /hooks/github, /hooks/alerts and /hooks/gmail were live; and its history
// showed ids where names are expected, no durations, times to the second.
const WITH_PRESET = BASE.replace('  path: /hooks\n', '  path: /hooks\n  presets: [gmail]\n')
const named = suite<Admin>('every route and the names and durations of runs')
named.before(async (ctx) => {
  assert.ok(WITH_PRESET.includes('presets: [gmail]'))
  Object.assign(ctx, await freshAdmin(WITH_PRESET))
  writeFileSync(join(ctx.project.stateDir, 'address.json'), JSON.stringify({ url: 'http://127.0.0.1:9', basePath: '/hooks', pid: 1 }) + '\n')
  let clock = Date.parse('2026-03-01T00:00:00.000Z')
  const store = RunStore.open(ctx.project.stateDir, { now: () => new Date(clock) })
  const tick = (ms: number) => { clock += ms }
  await store.create({ id: 'plain-run', definitionKind: 'hook', definitionId: 'plain', correlationId: 'c-plain', action: 'wake', status: 'succeeded' })
  tick(1000)
  await store.create({ id: 'gmail-run', definitionKind: 'hook', definitionId: 'preset:gmail', correlationId: 'c-gmail', action: 'agent', status: 'queued', name: 'Gmail' })
  tick(250)
  await store.transition('gmail-run', 'running')
  tick(1234)
  await store.transition('gmail-run', 'succeeded')
  tick(1000)
  await store.create({ id: 'deploy', definitionKind: 'trigger', definitionId: 'trigger:main:deploy-finished', correlationId: 'c-deploy', action: 'workflow', status: 'running', name: 'Deploy api' })
  await store.create({ id: 'deploy-note', definitionKind: 'trigger', definitionId: 'trigger:main:deploy-finished', correlationId: 'c-deploy', action: 'agent', status: 'queued', parentRunId: 'deploy', stepId: 'note', name: 'Deploy api' })
  tick(5)
  await store.transition('deploy-note', 'running')
  tick(42)
  await store.transition('deploy-note', 'succeeded')
  await store.create({ id: 'gone', definitionKind: 'trigger', definitionId: 'trigger:main:removed-long-ago', correlationId: 'c-gone', action: 'agent', status: 'failed', error: 'x' })
  await store.close()
})
named.after(async (ctx) => { await ctx.admin.close() })

named('the overview lists every route served: the built-ins, a mapping and a preset (read-only), and the enabled Trigger', async ({ admin }) => {
  const o = (await api(admin, '/api/overview')).json
  assert.is(o.routesFrom, 'hooks.yaml')
  assert.equal(o.routes.map((r: any) => [r.id, r.kind, r.title, r.url, r.action, r.agentId]), [
    ['wake', 'built-in', '/wake', 'http://127.0.0.1:9/hooks/wake', 'wake', null],
    ['agent', 'built-in', '/agent', 'http://127.0.0.1:9/hooks/agent', 'agent', null],
    ['plain', 'mapping', 'plain', 'http://127.0.0.1:9/hooks/plain', 'wake', 'main'],
    ['trigger:main:deploy-finished', 'trigger', 'Deploy finished', 'http://127.0.0.1:9/hooks/deploys', 'agent', 'main'],
    ['preset:gmail', 'preset', 'gmail', 'http://127.0.0.1:9/hooks/gmail', 'agent', 'main'],
  ])
  const byId = new Map(o.routes.map((r: any) => [r.id, r]))
  const plain: any = byId.get('plain')
  assert.is(plain.line, WITH_PRESET.split('\n').findIndex((l) => l.includes('- id: plain')) + 1, 'the mapping names its line in hooks.yaml')
  assert.is(plain.lastRun.id, 'plain-run')
  assert.is((byId.get('preset:gmail') as any).lastRun.id, 'gmail-run')
  assert.equal((byId.get('trigger:main:deploy-finished') as any).trigger, { agentId: 'main', name: 'Deploy finished' })
  assert.is((byId.get('wake') as any).lastRun, null)
})

named('while hooks.yaml does not compile, the routes are the ones the bundle on disk serves', async ({ admin, project }) => {
  const good = readFileSync(project.configFile, 'utf8')
  try {
    writeFileSync(project.configFile, good.replace('path: deploys', 'path: "bad path!"'))
    const o = (await api(admin, '/api/overview')).json
    assert.is(o.routesFrom, 'bundle')
    assert.ok(o.routes.some((r: any) => r.id === 'preset:gmail'), JSON.stringify(o.routes))
  } finally {
    writeFileSync(project.configFile, good)
  }
})

named('a history row names its definition (a Trigger\'s name, a preset, a step under its Trigger) and says how long it took', async ({ admin }) => {
  const rows = new Map((await api(admin, '/api/runs')).json.rows.map((r: any) => [r.id, r]))
  const row = (id: string): any => rows.get(id)
  assert.is(row('deploy').definitionName, 'Deploy finished')
  assert.is(row('deploy-note').definitionName, 'Deploy finished')
  assert.is(row('deploy-note').stepId, 'note')
  assert.is(row('plain-run').definitionName, 'plain')
  assert.is(row('gmail-run').definitionName, 'gmail (preset)')
  assert.not.ok('definitionName' in row('gone'), 'an id hooks.yaml no longer has keeps no name')
  // from its start to its end (its queue time left out), to the millisecond
  assert.is(row('gmail-run').durationMs, 1234)
  assert.is(row('deploy-note').durationMs, 42)
  assert.is(row('plain-run').durationMs, 0)
  assert.not.ok('durationMs' in row('deploy'), 'a running run has no duration yet')
  assert.match(row('gmail-run').startedAt, ISO)
})

named('a run\'s detail carries the same names and durations, for the run and its steps', async ({ admin }) => {
  const d = (await api(admin, '/api/runs/deploy')).json
  assert.is(d.run.definitionName, 'Deploy finished')
  assert.equal(d.steps.map((s: any) => [s.stepId, s.definitionName, s.durationMs]), [['note', 'Deploy finished', 42]])
  assert.is((await api(admin, '/api/runs/gmail-run')).json.run.durationMs, 1234)
})

named.run()
