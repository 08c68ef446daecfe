// Shared by the HTTP contract tests: compiles a hooks.yaml written into a temp directory, serves
// the bundle in-process on port 0 (or spawns the real `hookgate serve`), and talks to it over real
// HTTP: node:http for ordinary requests, raw node:net sockets for slow, stalled or malformed ones.
// Each runtime it starts runs on the store under test (test/helpers/stores.ts: the file store, or
// with HOOKGATE_TEST_STORE=postgres a database of its own), and what it stored is read back through
// the store-neutral reader (test/helpers/history.ts).
import { randomBytes } from 'node:crypto'
import { spawn, type ChildProcess } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { connect, type Socket } from 'node:net'
import { dirname, join } from 'node:path'
import * as assert from 'uvu/assert'
import { compileFile } from '../../../compiler/index.js'
import { startService, type Service } from '../../../runtime/serve/service.js'
import type { RunRow } from '../../../runtime/store/store.js'
import { storedRow } from '../../helpers/history.js'
import { storeUrlFor, withTestStore } from '../../helpers/stores.js'
import { hookgateBin } from '../../helpers/paths.js'

/** A fresh random hook token in HOOKGATE_TEST_TOKEN, for configs written with token: ${HOOKGATE_TEST_TOKEN}. */
export function setTestToken(): string {
  const token = randomBytes(24).toString('hex')
  process.env.HOOKGATE_TEST_TOKEN = token
  return token
}

import { scratchDir, writeTree } from '../../helpers/paths.js'
import { sleep } from '../../helpers/async.js'
export { scratchDir, writeTree }

export interface Project {
  /** the directory holding hooks.yaml (and transforms/) */
  dir: string
  configFile: string
  outDir: string
  stateDir: string
}

/** Writes hooks.yaml (and any extra files, e.g. transforms) into a new directory and compiles it into <dir>/dist. */
export async function compileProject(yaml: string, files: Record<string, string> = {}): Promise<Project> {
  const dir = scratchDir('project-')
  writeTree(dir, { 'hooks.yaml': withTestStore(yaml), ...files })
  const project = { dir, configFile: join(dir, 'hooks.yaml'), outDir: join(dir, 'dist'), stateDir: join(dir, 'state') }
  await recompile(project)
  return project
}

/** Compiles the project's hooks.yaml (as it is now) into its out dir; throws with the findings if it fails. */
export async function recompile(project: Project, yaml?: string): Promise<void> {
  if (yaml !== undefined) writeFileSync(project.configFile, withTestStore(yaml))
  const outcome = await compileFile(project.configFile, { outDir: project.outDir })
  if (!outcome.ok) {
    throw new Error('test setup: the config does not compile:\n' + outcome.diagnostics.map((d) => `${d.file}:${d.line}:${d.column}: ${d.severity} ${d.code}: ${d.message}`).join('\n'))
  }
}

export interface Harness extends Project {
  service: Service
  /** http://127.0.0.1:<port> */
  origin: string
  port: number
  /** every line the service wrote */
  logs: string[]
  close(): Promise<void>
}

/** Compiles `yaml` and serves it in-process on 127.0.0.1:0 with a temp state dir; logs are captured. */
export async function serve(yaml: string, files: Record<string, string> = {}, options: { watch?: boolean; reloadDeadlineMs?: number } = {}): Promise<Harness> {
  const project = await compileProject(yaml, files)
  return serveProject(project, options)
}

export async function serveProject(project: Project, options: { watch?: boolean; reloadDeadlineMs?: number } = {}): Promise<Harness> {
  const logs: string[] = []
  const store = await storeUrlFor(project.stateDir)
  const service = await startService({
    bundle: project.outDir,
    ...(store !== undefined ? { store } : {}),
    port: 0,
    host: '127.0.0.1',
    stateDir: project.stateDir,
    watch: options.watch ?? false,
    graceMs: 1500,
    ...(options.reloadDeadlineMs !== undefined ? { reloadDeadlineMs: options.reloadDeadlineMs } : {}),
    write: (line) => { logs.push(line) },
  })
  return { ...project, service, origin: `http://127.0.0.1:${service.port}`, port: service.port, logs, close: () => service.close() }
}

// ---- ordinary requests -----------------------------------------------------------------------

export interface Reply {
  status: number
  headers: IncomingHttpHeaders
  text: string
  /** the body parsed as JSON, or undefined when it is empty or not JSON */
  json: any
}

export interface SendOptions {
  method?: string
  headers?: Record<string, string | string[]>
  /** a string, a Buffer, or an object sent as JSON (with Content-Type: application/json unless headers say otherwise) */
  body?: string | Buffer | object
  /** Authorization: Bearer <token> */
  token?: string
}

/** One request on its own connection (Connection: close); rejects only when no answer arrives within 5 s. */
export function send(origin: string, path: string, options: SendOptions = {}): Promise<Reply> {
  const headers: Record<string, string | string[]> = { ...(options.headers ?? {}) }
  let body: Buffer | undefined
  if (options.body !== undefined) {
    if (typeof options.body === 'string') body = Buffer.from(options.body, 'utf8')
    else if (Buffer.isBuffer(options.body)) body = options.body
    else {
      body = Buffer.from(JSON.stringify(options.body), 'utf8')
      if (!Object.keys(headers).some((k) => k.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json'
    }
    headers['content-length'] = String(body.length)
  }
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
  const url = new URL(path, origin)
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: options.method ?? 'POST', headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        clearTimeout(timer)
        const text = Buffer.concat(chunks).toString('utf8')
        let json: unknown
        try { json = text === '' ? undefined : JSON.parse(text) } catch { json = undefined }
        resolve({ status: res.statusCode!, headers: res.headers, text, json })
      })
    })
    const timer = setTimeout(() => { req.destroy(); reject(new Error(`no answer to ${options.method ?? 'POST'} ${path} within 5 s`)) }, 5000)
    req.on('error', (err) => { clearTimeout(timer); reject(err) })
    req.end(body)
  })
}

/** POST with the right token (Bearer). */
export function post(origin: string, path: string, token: string, body?: SendOptions['body'], headers: Record<string, string> = {}): Promise<Reply> {
  return send(origin, path, { token, ...(body !== undefined ? { body } : {}), headers })
}

/** The contract's error answer: this status, JSON, exactly {"ok":false,"error":<sentence>,"code":<code>}. */
export function assertError(reply: Reply, status: number, code: string): void {
  assert.is(reply.status, status, `expected ${status} ${code}, got ${reply.status} ${reply.text}`)
  assert.match(String(reply.headers['content-type']), /^application\/json\b/, 'an error body is JSON')
  assert.ok(reply.json !== undefined, `the error body is not JSON: ${reply.text}`)
  assert.equal(Object.keys(reply.json).sort(), ['code', 'error', 'ok'], `error body keys: ${reply.text}`)
  assert.is(reply.json.ok, false)
  assert.type(reply.json.error, 'string')
  assert.ok(reply.json.error.length > 0, 'the error sentence is empty')
  assert.is(reply.json.code, code, `error code: ${reply.text}`)
}

/** A success answer: this status and JSON body with exactly these keys. */
export function assertOk(reply: Reply, status: number, keys: string[]): any {
  assert.is(reply.status, status, `expected ${status}, got ${reply.status} ${reply.text}`)
  assert.ok(reply.json !== undefined, `the body is not JSON: ${reply.text}`)
  assert.equal(Object.keys(reply.json).sort(), [...keys].sort(), `body keys: ${reply.text}`)
  assert.is(reply.json.ok, true)
  return reply.json
}

// ---- raw sockets -----------------------------------------------------------------------------

export interface RawReply {
  status: number
  headers: Record<string, string>
  body: string
  json: any
}

/** A connection to the server on which the test writes exactly the bytes it wants, when it wants. */
export class RawClient {
  private buffered = Buffer.alloc(0)
  private ended = false
  private waiters: Array<() => void> = []
  readonly closed: Promise<void>

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => { this.buffered = Buffer.concat([this.buffered, d]); this.wake() })
    this.closed = new Promise((resolve) => {
      socket.on('close', () => { this.ended = true; this.wake(); resolve() })
    })
    socket.on('end', () => { this.ended = true; this.wake() })
    socket.on('error', () => { this.ended = true; this.wake() })
  }

  static open(port: number): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1')
      socket.once('connect', () => { socket.off('error', reject); resolve(new RawClient(socket)) })
      socket.once('error', reject)
    })
  }

  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve, reject) => this.socket.write(data, (err) => (err ? reject(err) : resolve())))
  }

  /** Whether any answer byte has arrived so far. */
  get answered(): boolean {
    return this.buffered.length > 0
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w()
  }

  /** Waits for one complete response (by Content-Length, or to the end of the connection). */
  async response(withinMs = 5000): Promise<RawReply> {
    const deadline = Date.now() + withinMs
    for (;;) {
      const parsed = parseResponse(this.buffered, this.ended)
      if (parsed) return parsed
      if (this.ended) throw new Error(`the connection ended without a complete response: ${JSON.stringify(this.buffered.toString('latin1').slice(0, 300))}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no complete response within ${withinMs} ms (got ${JSON.stringify(this.buffered.toString('latin1').slice(0, 300))})`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiters.push(() => { clearTimeout(timer); resolve() })
      })
    }
  }

  destroy(): void {
    this.socket.destroy()
  }
}

function parseResponse(buf: Buffer, ended: boolean): RawReply | undefined {
  const end = buf.indexOf('\r\n\r\n')
  if (end < 0) return undefined
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n')
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1])
  const headers: Record<string, string> = {}
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':')
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
  }
  const rest = buf.subarray(end + 4)
  let body: Buffer
  if (headers['content-length'] !== undefined) {
    const n = Number(headers['content-length'])
    if (rest.length < n) return undefined
    body = rest.subarray(0, n)
  } else if (status === 204 || status === 304) {
    body = Buffer.alloc(0)
  } else {
    if (!ended) return undefined
    body = rest
  }
  const text = body.toString('utf8')
  let json: unknown
  try { json = text === '' ? undefined : JSON.parse(text) } catch { json = undefined }
  return { status, headers, body: text, json }
}

/** The head of a raw request: request line, headers, blank line (Connection: close is added). */
export function head(method: string, path: string, headers: Record<string, string>): string {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1']
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`)
  lines.push('Connection: close')
  return lines.join('\r\n') + '\r\n\r\n'
}

/** assertError for a raw reply. */
export function assertRawError(reply: RawReply, status: number, code: string): void {
  assertError({ status: reply.status, headers: reply.headers, text: reply.body, json: reply.json }, status, code)
}

// ---- waiting and reading state ---------------------------------------------------------------

export { sleep }

/** `promise`'s value, or `fallback` when it has not settled within `ms` (the timer never outlives the race). */
export async function within<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<F>((resolve) => { timer = setTimeout(() => resolve(fallback), ms) })])
  } finally {
    clearTimeout(timer)
  }
}

/** Polls `probe` until it returns a value other than undefined; fails with `what` after `withinMs`. */
export async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, withinMs = 3000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + withinMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what} after ${withinMs} ms`)
    await sleep(everyMs)
  }
}

/** The run row with this id as it is stored now. */
export function rowOf(stateDir: string, id: string): Promise<RunRow | undefined> {
  return storedRow(stateDir, id)
}

/** Waits until the run reaches `status` in the store. */
export async function runReaches(stateDir: string, id: string, status: RunRow['status'], withinMs = 4000): Promise<RunRow> {
  let last: RunRow | undefined
  return until(`run ${id} to be ${status}`, async () => {
    last = await rowOf(stateDir, id)
    return last && last.status === status ? last : undefined
  }, withinMs).catch((err: Error) => { throw new Error(`${err.message} (now ${last?.status ?? 'missing'})`) })
}

// ---- the real CLI ----------------------------------------------------------------------------

export interface ServeProcess {
  child: ChildProcess
  /** http://127.0.0.1:<port>, from the `hookgate listening on …` line */
  origin: string
  port: number
  stdout: string[]
  stderr: () => string
  /** resolves with the exit code (or the signal's name) */
  exited: Promise<number | string>
  /** waits for a stdout line containing `text` */
  line(text: string, withinMs?: number): Promise<string>
  kill(): void
}

/** Spawns `hookgate serve --bundle <outDir> --port 0 --state <stateDir>` (on the store under test) and waits for its listening line. */
export async function spawnServe(bundle: string, stateDir: string, extra: string[] = []): Promise<ServeProcess> {
  const store = await storeUrlFor(stateDir)
  return spawnServer([hookgateBin, 'serve', '--bundle', bundle, '--port', '0', '--host', '127.0.0.1', '--state', stateDir, ...(store !== undefined ? ['--store', store] : []), ...extra], { cwd: dirname(stateDir) })
}

/** Spawns `node ...args` (a server that prints `hookgate listening on …`, e.g. a standalone runtime) and waits for its listening line. */
/** `ready`: the line that says it is up, its URL captured (default: `hookgate listening on <url>`). */
/** `lifetimeMs`: it is SIGKILLed after this long, should a test forget it (default 60 s). */
export async function spawnServer(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; ready?: { text: string; url: RegExp }; lifetimeMs?: number }): Promise<ServeProcess> {
  const child = spawn(process.execPath, args, {
    cwd: options.cwd,
    env: { ...(options.env ?? process.env), NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const stdout: string[] = []
  let partial = ''
  let stderr = ''
  const listeners = new Set<() => void>()
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    partial += d
    const parts = partial.split('\n')
    partial = parts.pop()!
    stdout.push(...parts)
    for (const l of listeners) l()
  })
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { stderr += d })
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')))
  const safety = setTimeout(() => child.kill('SIGKILL'), options.lifetimeMs ?? 60_000)
  safety.unref()
  void exited.then(() => clearTimeout(safety))
  // one listener per child while it lives (a scenario starts a dozen hosts in turn)
  const killOnExit = (): void => { if (child.exitCode === null) child.kill('SIGKILL') }
  process.on('exit', killOnExit)
  void exited.then(() => process.off('exit', killOnExit))

  const line = (text: string, withinMs = 5000): Promise<string> => new Promise((resolve, reject) => {
    const check = () => {
      const found = stdout.find((l) => l.includes(text))
      if (found !== undefined) { done(); resolve(found) }
    }
    const timer = setTimeout(() => { done(); reject(new Error(`hookgate serve printed no line containing ${JSON.stringify(text)} within ${withinMs} ms; stdout:\n${stdout.join('\n')}\nstderr:\n${stderr}`)) }, withinMs)
    const done = () => { clearTimeout(timer); listeners.delete(check) }
    listeners.add(check)
    check()
  })
  const ready = options.ready ?? { text: 'hookgate listening on ', url: /hookgate listening on (\S+)/ }
  const listening = await line(ready.text, 10_000)
  const url = new URL(ready.url.exec(listening)![1]!)
  return { child, origin: url.origin, port: Number(url.port), stdout, stderr: () => stderr, exited, line, kill: () => { child.kill('SIGKILL') } }
}
