// Several real `hookgate serve --store postgres://…` runtimes on one database, and the client that
// sits in front of them in production: a load balancer with a retrying sender. The scenarios in
// test/multihost/ kill, pause and replace hosts under this client's load, then check what it was
// told (every acknowledged run) against what the database holds.
//
// The sender is what a careful caller does: each request carries an Idempotency-Key, and a request
// that gets no definite answer (the connection refused or reset, no headers in time, a 503) is sent
// again, with the same key and body, to the next host. So a run may be accepted once and answered
// twice, but never started twice; that is what the scenarios hold the runtimes to.
import { randomUUID } from 'node:crypto'
import { Agent, request } from 'undici'
import { hookgateBin } from './paths.js'
import { compileProject, spawnServer, type Project, type ServeProcess } from '../runtime/http/harness.js'
import { sleep } from './async.js'

/** A hooks.yaml with one echo agent (no heartbeat) on the hook token in $HOOKGATE_TEST_TOKEN. */
export const ECHO_AGENT_CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
agents:
  - { id: main, default: true, model: builtin/echo, heartbeat: { every: "off" } }
`

export interface Host {
  /** a, b, c… in start order (a replacement gets the next letter) */
  name: string
  origin: string
  stateDir: string
  serve: ServeProcess
  /** false once killed or stopped */
  alive: boolean
  paused: boolean
}

export interface HostsOptions {
  /** the database every host shares */
  storeUrl: string
  count: number
  /** hooks.yaml, compiled once and shared by every host (default ECHO_AGENT_CONFIG) */
  yaml?: string
  /** added to each host's environment */
  env?: NodeJS.ProcessEnv
  /** how long a host may live before the harness SIGKILLs it, should a test forget it (default 5 min) */
  lifetimeMs?: number
}

export interface Hosts {
  project: Project
  /** every host started, dead ones included */
  all: Host[]
  /** the hosts a load balancer would send to: alive and not paused */
  live(): Host[]
  /** one more host on the same bundle and database (a replacement for a killed one) */
  add(): Promise<Host>
  /** SIGKILL: no clean stop, its lease left to expire; resolves once it has exited */
  kill(host: Host): Promise<void>
  pause(host: Host): void
  resume(host: Host): void
  /** SIGTERM to every live host; resolves with each one's exit (code or signal), SIGKILLing one that takes longer than `withinMs` */
  stopAll(withinMs?: number): Promise<Record<string, number | string>>
  /** SIGKILL everything still running, at once (for an after hook: nothing is waited for) */
  killAll(): void
  /** every host's stderr, labelled, for assertion messages */
  stderr(): string
}

/** Compiles `yaml` once and starts `count` hosts on it, each with its own state directory, all on `storeUrl`. */
export async function startHosts(options: HostsOptions): Promise<Hosts> {
  const project = await compileProject(options.yaml ?? ECHO_AGENT_CONFIG)
  const all: Host[] = []
  const add = async (): Promise<Host> => {
    const name = String.fromCharCode(97 + all.length)
    const stateDir = `${project.stateDir}-${name}`
    const serve = await spawnServer(
      [hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--host', '127.0.0.1', '--state', stateDir, '--store', options.storeUrl],
      { cwd: project.dir, env: { ...process.env, ...options.env }, lifetimeMs: options.lifetimeMs ?? 300_000 },
    )
    const host: Host = { name, origin: serve.origin, stateDir, serve, alive: true, paused: false }
    void serve.exited.then(() => { host.alive = false })
    all.push(host)
    return host
  }
  const hosts: Hosts = {
    project,
    all,
    live: () => all.filter((h) => h.alive && !h.paused),
    add,
    async kill(host) {
      host.serve.child.kill('SIGKILL')
      await host.serve.exited
    },
    pause(host) {
      host.serve.child.kill('SIGSTOP')
      host.paused = true
    },
    resume(host) {
      host.serve.child.kill('SIGCONT')
      host.paused = false
    },
    async stopAll(withinMs = 10_000) {
      const running = all.filter((h) => h.alive)
      for (const h of running) {
        if (h.paused) hosts.resume(h)
        h.serve.child.kill('SIGTERM')
      }
      const exits = await Promise.all(running.map(async (h) => {
        const late = setTimeout(() => h.serve.child.kill('SIGKILL'), withinMs)
        const exit = await h.serve.exited
        clearTimeout(late)
        return [h.name, exit] as const
      }))
      return Object.fromEntries(exits)
    },
    killAll() {
      for (const h of all) if (h.serve.child.exitCode === null && h.serve.child.signalCode === null) h.serve.child.kill('SIGKILL')
    },
    stderr: () => all.map((h) => `--- host ${h.name} stderr ---\n${h.serve.stderr()}`).join('\n'),
  }
  try {
    // one at a time: the first migrates the schema, the others find it current
    for (let i = 0; i < options.count; i++) await add()
  } catch (err) {
    hosts.killAll()
    throw err
  }
  return hosts
}

// ---- the load balancer and retrying sender ----------------------------------------------------

/** One answer, or one failure to get one, from one host. */
export interface Attempt {
  key: string
  host: string
  /** ms since the sender was made */
  at: number
  /** the HTTP status, when an answer came */
  status?: number
  /** the error body's `code` (store_unavailable…), when it had one */
  code?: string
  retryAfter?: string
  /** the idempotent-replayed header was set: the answer of a run started before */
  replayed?: boolean
  /** the connection-level failure (ECONNREFUSED, UND_ERR_SOCKET, UND_ERR_HEADERS_TIMEOUT…), when no answer came */
  error?: string
}

/** A 2xx: the caller was told this run was accepted. */
export interface Ack {
  key: string
  runId: string
  host: string
  status: number
  /** the idempotent-replayed header was set */
  replayed: boolean
  at: number
}

/** The answer a request ended with: a 2xx or a definite 4xx. */
export interface Outcome {
  key: string
  host: string
  status: number
  headers: Record<string, string>
  body: any
  attempts: number
}

export interface SenderOptions {
  token: string
  /** no headers from a host within this long is a failed attempt (a paused host), default 3 s */
  attemptTimeoutMs?: number
  /** a request still without a definite answer after this long rejects, default 30 s */
  giveUpAfterMs?: number
  /** keep-alive connections per host, default 32 */
  connections?: number
}

/**
 * Spreads requests round-robin over `live()` (read afresh for every attempt, so a host killed or
 * added meanwhile is seen at once) on keep-alive connections, and logs every attempt and every ack.
 */
export class Sender {
  readonly acks: Ack[] = []
  readonly attempts: Attempt[] = []
  private readonly agent: Agent
  private readonly started = Date.now()
  private next = 0

  constructor(private readonly live: () => Host[], private readonly options: SenderOptions) {
    const timeout = options.attemptTimeoutMs ?? 3000
    this.agent = new Agent({ connections: options.connections ?? 32, headersTimeout: timeout, bodyTimeout: timeout, connectTimeout: timeout })
  }

  /** POSTs `body` to `path` with Idempotency-Key `key` (default: a fresh one) until a host answers 2xx or a definite 4xx. */
  async post(path: string, body: object, key: string = randomUUID()): Promise<Outcome> {
    const text = JSON.stringify(body)
    const deadline = Date.now() + (this.options.giveUpAfterMs ?? 30_000)
    let previous: Host | undefined
    for (let attempt = 1; ; attempt++) {
      const hosts = this.live()
      if (hosts.length === 0) throw new Error('no live host to send to')
      // the first attempt where round-robin says; a retry on the host after the one that failed
      const after = previous ? hosts.indexOf(previous) : -1
      const host = hosts[after >= 0 ? (after + 1) % hosts.length : this.next++ % hosts.length]!
      previous = host
      const outcome = await this.once(host, path, text, key)
      if (outcome && isDefinite(outcome.status)) return { ...outcome, attempts: attempt }
      if (Date.now() > deadline) throw new Error(`no definite answer for key ${key} after ${attempt} attempts: ${JSON.stringify(this.attempts.filter((a) => a.key === key).slice(-5))}`)
      // A full round of hosts failed: the database (not one host) is likely down; do not spin.
      if (attempt % hosts.length === 0) await sleep(Math.min(50 * 2 ** Math.floor(attempt / hosts.length), 500))
    }
  }

  /** One attempt on one host, logged; undefined when no answer came. */
  async once(host: Host, path: string, text: string, key: string): Promise<Omit<Outcome, 'attempts'> | undefined> {
    const at = Date.now() - this.started
    try {
      const res = await request(host.origin + path, {
        method: 'POST',
        dispatcher: this.agent,
        headers: { authorization: `Bearer ${this.options.token}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: text,
      })
      const raw = await res.body.text()
      let body: any
      try { body = JSON.parse(raw) } catch { body = raw }
      const headers = Object.fromEntries(Object.entries(res.headers).map(([k, v]) => [k, String(v)]))
      const status = res.statusCode
      const replayed = headers['idempotent-replayed'] === 'true'
      this.attempts.push({ key, host: host.name, at, status, ...(body?.code ? { code: body.code } : {}), ...(headers['retry-after'] ? { retryAfter: headers['retry-after'] } : {}), ...(replayed ? { replayed } : {}) })
      if (status >= 200 && status < 300) this.acks.push({ key, runId: body?.runId, host: host.name, status, replayed, at })
      return { key, host: host.name, status, headers, body }
    } catch (err) {
      this.attempts.push({ key, host: host.name, at, error: (err as { code?: string }).code ?? (err as Error).message })
      return undefined
    }
  }

  /** Keeps `concurrency` requests in flight, each a fresh key and `body(i)`, until `stop()` says so; resolves once the last has its answer. */
  async sustain(path: string, concurrency: number, body: (i: number) => object, stop: () => boolean): Promise<Outcome[]> {
    const outcomes: Outcome[] = []
    let i = 0
    const worker = async (): Promise<void> => {
      while (!stop()) outcomes.push(await this.post(path, body(i++)))
    }
    await Promise.all(Array.from({ length: concurrency }, worker))
    return outcomes
  }

  close(): Promise<void> {
    return this.agent.close()
  }
}

/** A 2xx, or a 4xx that asking again will not change (a 408 or 429 might). */
function isDefinite(status: number): boolean {
  return (status >= 200 && status < 300) || (status >= 400 && status < 500 && status !== 408 && status !== 429)
}

/**
 * A scenario's hooks.yaml: the hook token, server.store with the scenario's short lease and sweep
 * (the URL from $HOOKGATE_STORE_URL, which the hosts' --store overrides), the fake model provider
 * at `fakeUrl` when given (model `fake/gpt-test`), and `agents` (YAML list items, indented two).
 */
export function scenarioYaml(options: { hostTtlSeconds: number; sweepSeconds: number; server?: string; fakeUrl?: string; agents: string }): string {
  return `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
server:${options.server ? `\n  ${options.server}` : ''}
  store: { url: "\${HOOKGATE_STORE_URL}", hostTtlSeconds: ${options.hostTtlSeconds}, sweepSeconds: ${options.sweepSeconds} }
${options.fakeUrl ? `providers:\n  - { id: fake, type: openai, baseUrl: "${options.fakeUrl}", apiKey: "\${FAKE_OPENAI_KEY}", timeoutSeconds: 20, maxRetries: 0 }\n` : ''}agents:
${options.agents}
`
}
