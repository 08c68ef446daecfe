// Shared by the abuse tests: the real `hookgate serve` in a child process (so a crash shows as an
// exit and its memory can be read from /proc/<pid>/status), a flood helper that keeps a bounded
// number of requests in flight, and the check every attack ends with: the process is alive, a
// valid POST /hooks/wake answers 200, and its resident memory is under RSS_BOUND_MIB.
import { existsSync, readFileSync } from 'node:fs'
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { join } from 'node:path'
import * as assert from 'uvu/assert'
import { Journal } from '../../runtime/store/file/journal.js'
import { RunStore } from '../../runtime/store/file/runs.js'
import { compileProject, spawnServe, type Project, type ServeProcess } from '../runtime/http/harness.js'

/**
 * The memory bound for the server process, peak (VmHWM) included. Measured (Node 20, x86-64, at
 * 7ac2c78): 63-66 MiB idle, ~83 MiB with two transform workers; after each passing group 65-89
 * MiB, the highest peak 105 MiB (600 KB bodies parsed 100,000 deep). 200 MiB is about twice the
 * worst peak, so only a leak or an unbounded buffer trips it (queued-wakes.test.ts does: ~270 MiB).
 */
export const RSS_BOUND_MIB = 200

export const WAKE_KEYS = ['ok', 'action', 'runId', 'mode']

export interface Target extends Project {
  server: ServeProcess
  token: string
  origin: string
  port: number
  /** a keep-alive agent for floods (at most 16 sockets) */
  agent: Agent
}

/** Compiles `yaml` (token: ${HOOKGATE_TEST_TOKEN}) and spawns `hookgate serve` on 127.0.0.1:0. */
export async function startTarget(token: string, yaml: string, files: Record<string, string> = {}): Promise<Target> {
  const project = await compileProject(yaml, files)
  const server = await spawnServe(project.outDir, project.stateDir, ['--grace-seconds', '1'])
  const agent = new Agent({ keepAlive: true, maxSockets: 16 })
  return { ...project, server, token, origin: server.origin, port: server.port, agent }
}

/** SIGTERM, and SIGKILL if it has not exited within 3 s; resolves when the process is gone. */
export async function stopTarget(t: Target | undefined): Promise<void> {
  if (!t) return
  t.agent.destroy()
  if (t.server.child.exitCode !== null || t.server.child.signalCode !== null) return
  t.server.child.kill('SIGTERM')
  const timer = setTimeout(() => t.server.kill(), 3000)
  await t.server.exited
  clearTimeout(timer)
}

export interface Memory { rssMiB: number; peakMiB: number }

/** VmRSS and VmHWM (the peak since the process started) of a live process, in MiB. */
export function memoryOf(pid: number): Memory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN)
  return { rssMiB: Math.round(kib('VmRSS') / 1024), peakMiB: Math.round(kib('VmHWM') / 1024) }
}

export function alive(t: Target): boolean {
  return t.server.child.exitCode === null && t.server.child.signalCode === null
}

/**
 * The text a wake run queued for the main session, as rendered from its template: kept on the run
 * row (request.text), or in older stores as an event in the main session's journal.
 */
export function wakeTextOf(stateDir: string, runId: string): string | undefined {
  const row = RunStore.readRows(stateDir).find((r) => r.id === runId)
  const text = (row && (RunStore.readRequest(stateDir, row) as { text?: unknown } | undefined))?.text
  if (typeof text === 'string') return text
  const journal = join(stateDir, 'sessions', 'main', 'main.jsonl')
  if (!existsSync(journal)) return undefined
  const { records } = Journal.read<{ type: string; runId: string; text: string }>(journal)
  return records.find((r) => r.type === 'event' && r.runId === runId)?.text
}

// ---- requests ----------------------------------------------------------------------------------

export interface Answer {
  status: number
  headers: IncomingHttpHeaders
  text: string
  json: any
  ms: number
}

export interface RequestOptions {
  method?: string
  headers?: Record<string, string>
  body?: string | Buffer
  /** Authorization: Bearer <token> */
  token?: string
  /** default: a fresh connection that is closed after the answer */
  agent?: Agent
  withinMs?: number
}

/** One HTTP request; rejects on a connection error or when no answer arrives within `withinMs` (5 s). */
export function request(origin: string, path: string, options: RequestOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) }
  const body = options.body === undefined ? undefined : Buffer.isBuffer(options.body) ? options.body : Buffer.from(options.body, 'utf8')
  if (body !== undefined) {
    headers['content-length'] ??= String(body.length)
    headers['content-type'] ??= 'application/json'
  }
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
  const url = new URL(path, origin)
  const started = performance.now()
  const withinMs = options.withinMs ?? 5000
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: options.method ?? 'POST', headers, agent: options.agent ?? false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('error', (err) => { clearTimeout(timer); reject(err) })
      res.on('end', () => {
        clearTimeout(timer)
        const text = Buffer.concat(chunks).toString('utf8')
        let json: unknown
        try { json = text === '' ? undefined : JSON.parse(text) } catch { json = undefined }
        resolve({ status: res.statusCode!, headers: res.headers, text, json, ms: performance.now() - started })
      })
    })
    const timer = setTimeout(() => { req.destroy(new Error(`no answer to ${options.method ?? 'POST'} ${path.slice(0, 80)} within ${withinMs} ms`)) }, withinMs)
    req.on('error', (err) => { clearTimeout(timer); reject(err) })
    req.end(body)
  })
}

/** A JSON POST with the right token. */
export function postJson(t: Target, path: string, body: string | Buffer, headers: Record<string, string> = {}, withinMs = 5000): Promise<Answer> {
  return request(t.origin, path, { token: t.token, body, headers: { 'content-type': 'application/json', ...headers }, withinMs })
}

/** The contract's error shape: this status, JSON, exactly {"ok":false,"error":<sentence>,"code":<code>}. */
export function assertContractError(reply: { status: number; headers: Record<string, unknown> | IncomingHttpHeaders; json: any; text?: string; body?: string }, status: number, code: string | readonly string[]): void {
  const shown = reply.text ?? reply.body ?? ''
  assert.is(reply.status, status, `expected ${status} ${String(code)}, got ${reply.status} ${shown.slice(0, 300)}`)
  assert.match(String(reply.headers['content-type']), /^application\/json\b/, 'an error body is JSON')
  assert.ok(reply.json !== undefined && reply.json !== null, `the error body is not JSON: ${shown.slice(0, 300)}`)
  assert.equal(Object.keys(reply.json).sort(), ['code', 'error', 'ok'], `error body keys: ${shown.slice(0, 300)}`)
  assert.is(reply.json.ok, false)
  assert.type(reply.json.error, 'string')
  assert.ok(reply.json.error.length > 0, 'the error sentence is empty')
  const codes = typeof code === 'string' ? [code] : code
  assert.ok(codes.includes(reply.json.code), `error code ${reply.json.code}, expected ${codes.join(' or ')}: ${shown.slice(0, 300)}`)
}

/** A valid direct wake, answered 200 with the wake body. */
export async function validWake(t: Target, agent?: Agent): Promise<Answer> {
  const reply = await request(t.origin, '/hooks/wake', { token: t.token, body: JSON.stringify({ text: 'still here?', mode: 'next-heartbeat' }), ...(agent ? { agent } : {}) })
  assert.is(reply.status, 200, `a valid POST /hooks/wake answered ${reply.status} ${reply.text.slice(0, 300)}`)
  assert.equal(Object.keys(reply.json).sort(), [...WAKE_KEYS].sort())
  assert.is(reply.json.action, 'wake')
  return reply
}

/**
 * After an attack: the process has not exited, a valid POST /hooks/wake answers 200, and both
 * its resident memory now and its peak so far are under RSS_BOUND_MIB.
 */
export async function assertStillServing(t: Target, after: string): Promise<Memory> {
  assert.ok(alive(t), `the server process exited (${t.server.child.exitCode ?? t.server.child.signalCode}) after ${after}; stderr:\n${t.server.stderr().slice(-2000)}`)
  await validWake(t)
  assert.ok(alive(t), `the server process exited after answering, after ${after}`)
  const mem = memoryOf(t.server.child.pid!)
  if (process.env.HOOKGATE_ABUSE_VERBOSE) process.stdout.write(`  [rss] after ${after}: ${mem.rssMiB} MiB now, ${mem.peakMiB} MiB peak\n`)
  assert.ok(mem.rssMiB < RSS_BOUND_MIB, `the server holds ${mem.rssMiB} MiB after ${after} (bound ${RSS_BOUND_MIB} MiB)`)
  assert.ok(mem.peakMiB < RSS_BOUND_MIB, `the server peaked at ${mem.peakMiB} MiB by ${after} (bound ${RSS_BOUND_MIB} MiB)`)
  return mem
}

// ---- floods ------------------------------------------------------------------------------------

export interface Tally {
  sent: number
  /** status → count; connection errors are counted under their code (ECONNRESET, …) in `errors` */
  statuses: Record<number, number>
  errors: Record<string, number>
  ms: number
}

/** Runs `one(i)` for i < count with at most `concurrency` in flight; tallies statuses and errors. */
export async function flood(count: number, concurrency: number, one: (i: number) => Promise<{ status: number }>): Promise<Tally> {
  const tally: Tally = { sent: 0, statuses: {}, errors: {}, ms: 0 }
  const started = performance.now()
  let next = 0
  const worker = async () => {
    while (next < count) {
      const i = next++
      tally.sent++
      try {
        const { status } = await one(i)
        tally.statuses[status] = (tally.statuses[status] ?? 0) + 1
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message.slice(0, 60)
        tally.errors[code] = (tally.errors[code] ?? 0) + 1
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker))
  tally.ms = Math.round(performance.now() - started)
  return tally
}

export function describeTally(t: Tally): string {
  return `${t.sent} sent in ${t.ms} ms, statuses ${JSON.stringify(t.statuses)}, errors ${JSON.stringify(t.errors)}`
}

export { sleep } from '../helpers/async.js'
