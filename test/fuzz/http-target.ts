// The HTTP fuzzer's target: the real `hookgate serve`, twice — once on the file store, once on a
// throwaway PostgreSQL — serving one fuzz config, and the invariants every request must keep on
// both (checkExchange): no 5xx but the documented ones, the contract's error shape without a stack
// trace, every 2xx durable and finished within a bound, both stores answering alike, the server
// still up afterwards. A pair is replaced after ROTATE_AFTER cases, so that the histories the
// checks read stay small, and whenever one of its servers has died.
import { randomBytes } from 'node:crypto'
import { connect } from 'node:net'
import { hookgateBin } from '../helpers/paths.js'
import { startPostgres, type TestPostgres } from '../helpers/pg.js'
import { compileProject, spawnServer, type Project, type ServeProcess } from '../runtime/http/harness.js'
import { openHistory } from '../../runtime/store/open.js'
import type { HistoryReader, RunRow } from '../../runtime/store/store.js'
import { encodeRequest, type FuzzRequest, type Secrets } from './http-cases.js'

/**
 * Every route kind the brief names: a wake, an agent on builtin/echo, a workflow, a transform (whose
 * behaviour the payload picks: skip, throw, spin, fan out, override), a forEach fan-out, a signed
 * route, match.when conditions (with regexes) and a form route. The lock-out is set out of reach:
 * wrong tokens are part of every run, and a locked-out client would hide everything behind 429.
 */
export const FUZZ_CONFIG = `
server:
  maxBodyBytes: 65536
  bodyTimeoutSeconds: 5
  maxWaitSeconds: 2
  authFailures: { limit: 1000000, windowSeconds: 1, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: \${HOOKGATE_FUZZ_TOKEN}
  transformsDir: transforms
  mappings:
    - id: alert
      match: { path: alert }
      action: wake
      wakeMode: now
      textTemplate: "{{payload.status}}: {{payload.commonLabels.alertname}} {{query.q}} {{headers.x-fuzz}}"
    - id: deploy
      match: { path: deploy }
      action: agent
      name: "Deploy {{payload.service}}"
      messageTemplate: "Deploy of {{payload.service}} finished with {{payload.status}}: {{payload}}"
    - id: triage
      match: { path: triage }
      action: workflow
      workflow: triage
      name: "triage {{payload.id}}"
    - id: shaped
      match: { path: shaped }
      action: agent
      transform: { module: shape.ts, timeoutMs: 500 }
      messageTemplate: "shaped {{payload.title}}"
    - id: batch
      match: { path: batch }
      action: agent
      forEach: "{{payload.items}}"
      maxItems: 20
      messageTemplate: "item {{index}}: {{item}}"
    - id: github
      match: { path: github }
      action: agent
      signature: { scheme: github, secret: "\${HOOKGATE_FUZZ_SECRET}" }
      messageTemplate: "GitHub {{headers.x-github-event}}: {{payload.action}}"
    - id: pr-opened
      match:
        path: pr
        when:
          headers.x-event: pull_request
          payload.action: { in: [opened, reopened] }
          payload.ref: { matches: "^refs/(heads|tags)/[A-Za-z0-9._/-]+$" }
          not: { payload.draft: true }
      action: agent
      messageTemplate: "PR {{payload.number}}"
    - id: pr-wip
      match:
        path: pr
        when: { payload.title: { matches: "^wip\\\\b.*:\\\\s*\\\\S.*$", flags: i } }
      action: wake
      wakeMode: now
      textTemplate: "wip {{payload.title}}"
    - id: form
      match: { path: form }
      action: wake
      wakeMode: now
      textTemplate: "form {{payload.user_name}}: {{payload.text}}"
agents:
  - { id: main, default: true, model: builtin/echo, heartbeat: { every: 1s } }
  - { id: ops, model: builtin/echo, heartbeat: { every: 1s } }
workflows:
  - id: triage
    steps:
      - { id: read, action: agent, messageTemplate: "Read {{payload.subject}}" }
      - { id: tell, action: wake, needs: [read], textTemplate: "read {{payload.id}}" }
`

export const FUZZ_TRANSFORM = `// The fuzz transform: the payload picks what it does, so that the fuzzer reaches every outcome.
export default function shape({ payload }: { payload: any }) {
  if (payload === null || typeof payload !== 'object') return undefined
  if (payload.skip === true) return null
  if (payload.boom === true) throw new Error('boom')
  if (payload.spin === true) for (;;) {}
  if (Array.isArray(payload.items)) return payload.items
  if ('override' in payload) return payload.override
  return undefined
}
`

/** Cases one server pair serves before a fresh one takes over (fresh state, fresh database). */
const ROTATE_AFTER = 400
/** A request's answer must arrive within this (the slowest documented wait is 2 s: maxWaitSeconds). */
const ANSWER_WITHIN_MS = 10_000
/** An acknowledged run must be final within this (a next-heartbeat wake waits for the 1 s heartbeat; generous, so that a machine busy with other work does not pass for a stuck run). */
export const FINAL_WITHIN_MS = 60_000
/** /healthz must answer within this after every case. */
const HEALTH_WITHIN_MS = 5_000

/** 5xx answers the contract documents, by status: the codes each may carry. */
const DOCUMENTED_5XX: Record<number, string[]> = {
  500: ['transform_failed', 'transform_timeout', 'transform_invalid_output'],
  503: ['store_unavailable', 'too_many_pending_runs'],
}
const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'skipped'])

export interface Answer {
  status: number
  headers: Record<string, string>
  body: string
  json: any
  ms: number
}

/** One exchange over a raw socket: the bytes as generated, the answer as sent (interim 1xx skipped). */
export function exchange(port: number, bytes: Buffer, method: string, withinMs = ANSWER_WITHIN_MS): Promise<Answer | { error: string }> {
  const started = performance.now()
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let buffered = Buffer.alloc(0)
    let settled = false
    const finish = (value: Answer | { error: string }) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      resolve(value)
    }
    const timer = setTimeout(() => finish({ error: `no complete answer within ${withinMs} ms (got ${JSON.stringify(buffered.toString('latin1').slice(0, 200))})` }), withinMs)
    // written, not ended: Node's server drops the answer to a request whose client half-closed
    // before it was sent (no http allowHalfOpen), which is not what the fuzzer is after
    socket.on('connect', () => socket.write(bytes))
    socket.on('data', (d: Buffer) => {
      buffered = Buffer.concat([buffered, d])
      const parsed = parseAnswer(buffered, method, false, started)
      if (parsed) finish(parsed)
    })
    socket.on('error', () => { /* the close that follows decides */ })
    socket.on('close', () => {
      finish(parseAnswer(buffered, method, true, started) ?? { error: `the connection closed without a complete answer (got ${JSON.stringify(buffered.toString('latin1').slice(0, 200))})` })
    })
  })
}

function parseAnswer(buf: Buffer, method: string, ended: boolean, started: number): Answer | undefined {
  let at = 0
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', at)
    if (end < 0) return undefined
    const lines = buf.subarray(at, end).toString('latin1').split('\r\n')
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1])
    // 100 Continue (Expect: 100-continue) comes before the answer
    if (status >= 100 && status < 200) { at = end + 4; continue }
    const headers: Record<string, string> = {}
    for (const line of lines.slice(1)) {
      const i = line.indexOf(':')
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
    }
    const rest = buf.subarray(end + 4)
    let body: Buffer
    if (method === 'HEAD' || status === 204 || status === 304) body = Buffer.alloc(0)
    else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length'])
      if (rest.length < n) return undefined
      body = rest.subarray(0, n)
    } else if (ended) body = rest
    else return undefined
    const text = body.toString('utf8')
    let json: unknown
    try { json = text === '' ? undefined : JSON.parse(text) } catch { json = undefined }
    return { status, headers, body: text, json, ms: Math.round(performance.now() - started) }
  }
}

/** One `hookgate serve` of the pair, and the history reader of its store. */
export interface Server {
  store: 'file' | 'postgres'
  process: ServeProcess
  history: HistoryReader
  port: number
}

export class ServerPair {
  servers: Server[] = []
  cases = 0
  private project: Project | undefined
  private databases = 0
  readonly secrets: Secrets = { token: randomBytes(24).toString('hex'), signingSecret: randomBytes(16).toString('hex') }

  private constructor(private readonly pg: TestPostgres | null) {}

  /** Starts PostgreSQL (when this machine has it: else only the file store is fuzzed) and a first pair. */
  static async start(): Promise<ServerPair> {
    const pair = new ServerPair(await startPostgres())
    process.env.HOOKGATE_FUZZ_TOKEN = pair.secrets.token
    process.env.HOOKGATE_FUZZ_SECRET = pair.secrets.signingSecret
    pair.project = await compileProject(FUZZ_CONFIG, { 'transforms/shape.ts': FUZZ_TRANSFORM })
    await pair.spawn()
    return pair
  }

  get withPostgres(): boolean {
    return this.pg !== null
  }

  private async spawn(): Promise<void> {
    const generation = ++this.databases
    const stateDir = `${this.project!.stateDir}-${generation}`
    const args = (state: string, extra: string[]) => [hookgateBin, 'serve', '--bundle', this.project!.outDir, '--port', '0', '--host', '127.0.0.1', '--state', state, '--grace-seconds', '1', ...extra]
    const started: Array<Promise<Server>> = [
      spawnServer(args(`${stateDir}-file`, []), { cwd: this.project!.dir, lifetimeMs: 24 * 3600_000 })
        .then((p) => ({ store: 'file' as const, process: p, history: openHistory(`${stateDir}-file`), port: p.port })),
    ]
    if (this.pg) {
      const url = await this.pg.createDatabase(`fuzz_${process.pid}_${generation}`)
      started.push(spawnServer(args(`${stateDir}-pg`, ['--store', url]), { cwd: this.project!.dir, lifetimeMs: 24 * 3600_000 })
        .then((p) => ({ store: 'postgres' as const, process: p, history: openHistory(`${stateDir}-pg`, url), port: p.port })))
    }
    this.servers = await Promise.all(started)
    this.cases = 0
  }

  /** A fresh pair when this one has served its share or lost a server; call before each case. */
  async ready(): Promise<void> {
    const dead = this.servers.some((s) => s.process.child.exitCode !== null || s.process.child.signalCode !== null)
    if (!dead && this.cases < ROTATE_AFTER) return
    await this.stopServers()
    await this.spawn()
  }

  private async stopServers(): Promise<void> {
    await Promise.all(this.servers.map(async (s) => {
      await s.history.close().catch(() => {})
      if (s.process.child.exitCode === null && s.process.child.signalCode === null) {
        s.process.child.kill('SIGTERM')
        const timer = setTimeout(() => s.process.kill(), 5000)
        await s.process.exited
        clearTimeout(timer)
      }
    }))
    this.servers = []
  }

  async stop(): Promise<void> {
    await this.stopServers()
    await this.pg?.destroy()
  }
}

/** What went wrong with one case: `kind` groups violations of one cause (the runner reports each kind once). */
export interface Violation {
  kind: string
  detail: string
}

/** Sends the case to every server of the pair (at once) and checks every invariant; returns what broke. */
export async function checkCase(pair: ServerPair, r: FuzzRequest): Promise<Violation[]> {
  await pair.ready()
  pair.cases++
  const violations: Violation[] = []
  const nonce = randomBytes(6).toString('hex')
  const bytes = encodeRequest(r, pair.secrets, nonce)
  const rounds = r.repeat ? 2 : 1
  for (let round = 0; round < rounds; round++) {
    const answers = await Promise.all(pair.servers.map((s) => exchange(s.port, bytes, r.method)))
    for (let i = 0; i < answers.length; i++) violations.push(...checkAnswer(pair.servers[i]!, r, answers[i]!, pair.secrets))
    if (answers.length === 2) violations.push(...compareStores(answers[0]!, answers[1]!))
    // durability: every acknowledged run is in the store at once, and final within the bound
    await Promise.all(pair.servers.map(async (s, i) => {
      const a = answers[i]!
      if ('error' in a) return
      violations.push(...await checkRuns(s, a))
    }))
  }
  // the server is still up
  await Promise.all(pair.servers.map(async (s) => {
    if (s.process.child.exitCode !== null || s.process.child.signalCode !== null) {
      violations.push({ kind: `${s.store}: the server exited`, detail: `exit ${s.process.child.exitCode ?? s.process.child.signalCode}; stderr: ${s.process.stderr().slice(-2000)}` })
      return
    }
    const health = await exchange(s.port, Buffer.from('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'), 'GET', HEALTH_WITHIN_MS)
    if ('error' in health) violations.push({ kind: `${s.store}: /healthz does not answer after the case`, detail: health.error })
    else if (health.status !== 200) violations.push({ kind: `${s.store}: /healthz is ${health.status} after the case`, detail: health.body.slice(0, 500) })
  }))
  return violations
}

/** A trace from a server: a V8 frame (`at f (file.js:1:2)`) or a file:line:col of ours. */
const STACK = /\n\s+at |\bat [\w.<>$]+ \(|(?:\/|\\)[\w.-]+\.(?:m?js|ts):\d+:\d+/

function checkAnswer(s: Server, r: FuzzRequest, a: Answer | { error: string }, secrets: Secrets): Violation[] {
  const out: Violation[] = []
  const where = s.store
  // by method: a CONNECT that gets none is another fault than a POST that gets none
  if ('error' in a) return [{ kind: `${where}: no answer to a ${r.method}`, detail: a.error }]
  const probe = /^\/(healthz|livez|readyz|startupz)\b/.test(r.target)
  if (a.status >= 500) {
    const allowed = DOCUMENTED_5XX[a.status]
    const code = a.json?.code
    if (!allowed || !allowed.includes(code)) out.push({ kind: `${where}: undocumented ${a.status}${code ? ` ${code}` : ''}`, detail: a.body.slice(0, 500) })
    else if (a.status === 503 && !/^\d+$/.test(a.headers['retry-after'] ?? '')) out.push({ kind: `${where}: 503 ${code} without Retry-After`, detail: JSON.stringify(a.headers) })
  }
  if (a.status >= 400 && r.method !== 'HEAD' && !(probe && a.status === 503)) {
    const j = a.json
    const shape = j !== null && typeof j === 'object' && !Array.isArray(j) && Object.keys(j).sort().join(',') === 'code,error,ok' && j.ok === false &&
      typeof j.error === 'string' && j.error.length > 0 && typeof j.code === 'string' && /^[a-z][a-z0-9_]*$/.test(j.code)
    if (!shape) out.push({ kind: `${where}: a ${a.status} body is not {ok:false,error,code}`, detail: a.body.slice(0, 500) })
    if (!/^application\/json\b/.test(a.headers['content-type'] ?? '')) out.push({ kind: `${where}: a ${a.status} is not application/json`, detail: `content-type: ${a.headers['content-type']}` })
  }
  if (STACK.test(a.body) && !STACK.test(r.target)) out.push({ kind: `${where}: a stack trace in the answer`, detail: a.body.slice(0, 500) })
  if (a.body.includes(secrets.token) || a.body.includes(secrets.signingSecret)) out.push({ kind: `${where}: a secret in the answer`, detail: '(the token or the signing secret is in the body)' })
  if (a.status >= 200 && a.status < 300 && a.status !== 204 && r.method !== 'HEAD' && !probe && !/^\/metrics\b/.test(r.target)) {
    if (a.json?.ok !== true) out.push({ kind: `${where}: a ${a.status} body without ok:true`, detail: a.body.slice(0, 500) })
  }
  return out
}

/** The run ids a 2xx acknowledged: runId, and a fan-out's runIds. */
function acknowledged(a: Answer): string[] {
  if (a.status < 200 || a.status >= 300 || !a.json || typeof a.json !== 'object') return []
  const ids = new Set<string>()
  if (typeof a.json.runId === 'string') ids.add(a.json.runId)
  if (Array.isArray(a.json.runIds)) for (const id of a.json.runIds) if (typeof id === 'string') ids.add(id)
  return [...ids]
}

async function checkRuns(s: Server, a: Answer): Promise<Violation[]> {
  const ids = acknowledged(a)
  if (ids.length === 0) return []
  const read = async (): Promise<Map<string, RunRow>> => {
    const rows = (await s.history.read()).rows
    const wanted = new Map<string, RunRow>()
    for (const row of rows) if (ids.includes(row.id)) wanted.set(row.id, row)
    return wanted
  }
  let rows: Map<string, RunRow>
  try {
    rows = await read()
  } catch (err) {
    return [{ kind: `${s.store}: the history cannot be read`, detail: (err as Error).message }]
  }
  const missing = ids.filter((id) => !rows.has(id))
  if (missing.length > 0) return [{ kind: `${s.store}: an acknowledged run is not in the store`, detail: `${a.status} acknowledged ${missing.join(', ')}, not in ${s.history.where}` }]
  const deadline = Date.now() + FINAL_WITHIN_MS
  for (;;) {
    const open = [...rows.values()].filter((row) => !FINAL.has(row.status))
    if (open.length === 0) return []
    if (Date.now() > deadline) {
      return [{ kind: `${s.store}: an acknowledged run is not final within ${FINAL_WITHIN_MS / 1000} s`, detail: open.map((row) => `${row.id} (${row.definitionId}) is ${row.status}`).join('; ') }]
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
    try { rows = await read() } catch { /* read again */ }
  }
}

/** The two stores answer one request alike: the same status and, for a refusal, the same code. */
function compareStores(file: Answer | { error: string }, pg: Answer | { error: string }): Violation[] {
  if ('error' in file || 'error' in pg) return []
  const codeOf = (a: Answer) => (a.status >= 400 ? `${a.status} ${a.json?.code ?? ''}`.trim() : String(a.status))
  if (codeOf(file) !== codeOf(pg)) return [{ kind: `the stores differ: file ${codeOf(file)}, postgres ${codeOf(pg)}`, detail: `file: ${file.body.slice(0, 300)}\npostgres: ${pg.body.slice(0, 300)}` }]
  return []
}
