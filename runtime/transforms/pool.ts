// Child processes that run transforms, isolated from the server: each runs hookgate-worker (beside
// this file), which imports only the transform module it serves (transform code never runs in the
// server's process), under Node's permission model: it may read its own file and the transform
// module and nothing else, start no process or thread, load no addon; its environment is empty
// (the names its mappings list are handed over after start, so not even /proc/<pid>/environ holds
// more), and the worker takes away what the permission model leaves that could signal the server.
// Its memory is capped as a whole, heap and Buffers alike: this process reads the child's
// resident anonymous memory every MEMORY_SAMPLE_MS and kills it past the cap. A transform that
// does not answer in time has its process killed (stopping even a synchronous endless loop) and
// a fresh one takes its place.
//
// A child runs its calls one at a time, in the order they were sent, but up to PIPELINE_DEPTH of
// them are sent to it at once: handing a call over and its answer back costs a wake-up of the
// child each way, and with a short queue in the child one wake-up carries several calls and
// several answers (under load the round trips were most of the transform path's cost). Because
// the child runs them in order, the first call sent is the one running and the ones behind it
// have not started: a call's deadline starts when the call before it answers, and when a child
// dies or is killed only the running call fails; the ones behind it go to a fresh child.
//
// Children end with the server: killed at close, and each one ends itself when its end of the
// call pipe closes (the server exited, however). On Linux they are started through util-linux's
// setpriv with a parent-death signal, so that the kernel kills one even while it is stuck in a
// synchronous loop when the server is SIGKILLed.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { closeSync, existsSync, openSync, readSync, realpathSync } from 'node:fs'
import { dirname, extname, join } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { DefaultSerializer, deserialize } from 'node:v8'
import { Fifo } from '../fifo.js'
import { WORKER_MODULE, type BundleRoute, type TransformInput } from '../bundle-format.js'
import type { LoadedBundle } from '../bundle.js'

export class TransformTimeout extends Error {}
export class TransformFailed extends Error {
  constructor(message: string, readonly invalidOutput = false) {
    super(message)
  }
}

/** How long a child may take to start and import its transform module (its top-level code) before it is given up. */
export const DEFAULT_START_DEADLINE_MS = 10_000

/** The most calls sent to one child at once (the one it runs and those queued behind it). */
export const PIPELINE_DEPTH = 8

/** How often each child's memory is read; what a transform allocates within one interval is the cap's slack. */
export const MEMORY_SAMPLE_MS = 10

/** The largest answer frame read: the worker's 1 MiB cap on a value (MAX_OUTPUT_BYTES) and its header, with room. */
const MAX_ANSWER_BYTES = 1024 * 1024 + 4096
/** An error line from a child is cut to this (the worker cuts it to 200 already; a transform may write its own frames). */
const MAX_ERROR_CHARS = 200
/** A frame's length (filled in once known) and its kind, v8-serialized. */
const FRAME_HEAD_V8 = Buffer.from([0, 0, 0, 0, 2])
/** What a frame from a child says: the same numbers as Kind in hookgate-worker.ts. */
const ANSWER = { booted: 1, ready: 2, fatal: 3, value: 4, threw: 5, invalid: 6, valueV8: 7 } as const

/**
 * The worker module sits beside this one with the same extension: build/runtime/transforms/ in the
 * package (.js), or beside dist/hookgate-serve.mjs when the runtime was bundled into it (.mjs).
 */
const WORKER_FILE = fileURLToPath(new URL(`./${WORKER_MODULE}${extname(fileURLToPath(import.meta.url))}`, import.meta.url))

let permissionFlags: string[] | undefined
/**
 * Node 20 names the permission model --experimental-permission, later versions --permission; the
 * versions whose model covers the network (--allow-net) get it allowed, as Node 20 leaves it.
 */
function permission(): string[] {
  const known = process.allowedNodeEnvironmentFlags
  permissionFlags ??= [known.has('--permission') ? '--permission' : '--experimental-permission', ...(known.has('--allow-net') ? ['--allow-net'] : [])]
  return permissionFlags
}

let setprivPath: string | null | undefined
/** util-linux's setpriv when it can set a parent-death signal (Linux), else null; looked up once. */
function setpriv(): string | null {
  if (setprivPath !== undefined) return setprivPath
  setprivPath = null
  for (const file of ['/usr/bin/setpriv', '/bin/setpriv']) {
    if (!existsSync(file)) continue
    const help = spawnSync(file, ['--help'], { encoding: 'utf8', timeout: 2000, env: {} })
    if (help.stdout?.includes('--pdeathsig')) setprivPath = file
    break
  }
  return setprivPath
}

interface ChildSpec {
  transformsFile: string
  env: Record<string, string>
  memoryMiB: number
  startDeadlineMs: number
}

function realpath(file: string): string {
  try { return realpathSync(file) } catch { return file }
}

/** The command line of a child: node under the permission model, reading only the worker and the module. */
function childArgs(spec: ChildSpec): string[] {
  const young = Math.max(4, Math.min(32, Math.floor(spec.memoryMiB / 8)))
  return [
    ...permission(),
    `--allow-fs-read=${realpath(WORKER_FILE)}`,
    `--allow-fs-read=${realpath(spec.transformsFile)}`,
    '--disable-warning=ExperimentalWarning',
    `--max-old-space-size=${spec.memoryMiB}`,
    `--max-semi-space-size=${Math.max(1, Math.floor(young / 3))}`,
    realpath(WORKER_FILE),
  ]
}

// ---- memory ---------------------------------------------------------------------------------
// One timer for every child of this process: each tick reads /proc/<pid>/status of each (a pread
// on a file kept open, ~8 µs) and kills those past their cap.
const watched = new Set<Child>()
let sampler: NodeJS.Timeout | undefined
const statusBuffer = Buffer.alloc(4096)

/** Resident anonymous memory (heap, Buffers, stacks) plus swap, in KiB; undefined when it cannot be read. */
function anonKiB(fd: number): number | undefined {
  let text: string
  try {
    text = statusBuffer.toString('latin1', 0, readSync(fd, statusBuffer, 0, statusBuffer.length, 0))
  } catch {
    return undefined
  }
  const field = (name: string): number => {
    const at = text.indexOf(name)
    return at < 0 ? 0 : parseInt(text.slice(at + name.length), 10) || 0
  }
  if (!text.includes('RssAnon:')) return undefined
  return field('RssAnon:') + field('VmSwap:')
}

function watch(child: Child): void {
  watched.add(child)
  sampler ??= setInterval(() => { for (const c of watched) c.checkMemory() }, MEMORY_SAMPLE_MS).unref()
}

function unwatch(child: Child): void {
  watched.delete(child)
  if (watched.size === 0 && sampler) {
    clearInterval(sampler)
    sampler = undefined
  }
}

// ---- output --------------------------------------------------------------------------------
// What a transform prints goes where the server's own output goes. A destination that does not
// keep up pauses the children writing to it (their writes then block, and their calls time out):
// nothing piles up in this process.
const pausedOn = new Map<Writable, Set<Readable>>()

function forward(from: Readable, to: Writable): (chunk: Buffer) => void {
  return (chunk) => {
    if (to.write(chunk)) return
    from.pause()
    let paused = pausedOn.get(to)
    if (!paused) {
      paused = new Set()
      pausedOn.set(to, paused)
      to.once('drain', () => {
        pausedOn.delete(to)
        for (const r of paused!) r.resume()
      })
    }
    paused.add(from)
  }
}

/** V8's report when the heap limit is hit: a native stack trace, which never goes into the server's log. */
const V8_OUT_OF_MEMORY = /^(<--- Last few GCs --->|FATAL ERROR: .*(heap|memory))/

// ---- one child -----------------------------------------------------------------------------
interface ChildEvents {
  booted(): void
  ready(): void
  answer(kind: number, id: number, payload: Buffer): void
  /** the child is gone (or broke the protocol and was killed): why, as a line for the error */
  gone(reason: string): void
}

/** One transform process: its pipes, its frames, its memory. */
class Child {
  readonly process: ChildProcess
  private baselineKiB: number | undefined
  private statusFd: number | undefined
  private readonly limitKiB: number
  /** why this side killed it, or what it said before it died (a fatal frame) */
  private reason: string | undefined
  /** killed by this side: its later frames are not read */
  private stopped = false
  private ended = false
  private readonly closed: Promise<void>
  // the frame being read from fd 3: its chunks, their bytes, and the bytes it needs (once its length is known)
  private chunks: Buffer[] = []
  private buffered = 0
  private need = 4
  /** whether its handles keep this process running (hold) */
  private held = true

  constructor(spec: ChildSpec, private readonly events: ChildEvents) {
    this.limitKiB = spec.memoryMiB * 1024
    const args = childArgs(spec)
    const wrapper = setpriv()
    // An empty environment: not the hook token, not provider keys, not NODE_OPTIONS.
    this.process = wrapper
      ? spawn(wrapper, ['--pdeathsig', 'KILL', '--', process.execPath, ...args], { env: {}, cwd: '/', stdio: ['pipe', 'pipe', 'pipe', 'pipe'], detached: true })
      : spawn(process.execPath, args, { env: {}, cwd: '/', stdio: ['pipe', 'pipe', 'pipe', 'pipe'], detached: true })
    const child = this.process
    const [stdin, stdout, stderr, answers] = child.stdio as unknown as [Writable, Readable, Readable, Readable]
    for (const stream of [stdin, stdout, stderr, answers]) stream.on('error', () => {}) // EPIPE and the like: 'close' tells the child's end
    ;(stdin as unknown as { unref(): void }).unref()
    this.hold(false)
    answers.on('data', (chunk: Buffer) => this.read(chunk))
    stdout.on('data', forward(stdout, process.stdout))
    this.filterStderr(stderr)
    this.closed = new Promise((resolve) => {
      child.once('error', (err) => {
        this.end(`the transform process could not start (${(err as NodeJS.ErrnoException).code ?? err.message})`)
        resolve()
      })
      child.once('close', (code, signal) => {
        this.end(signal ? `the transform process was ended by ${signal}` : `the transform process stopped (exit code ${code})`)
        resolve()
      })
    })
  }

  /**
   * Sends one frame: a 4-byte length, a kind and `value` as JSON (1), or v8-serialized (2) when
   * JSON cannot hold it (a BigInt, a cycle); throws when neither can. JSON is what a transform's
   * input is (a payload parsed from JSON or a form, headers, query, path, and a workflow's step
   * outputs, which are stored as JSON anyway), and costs a third of v8.serialize's CPU here.
   */
  send(value: unknown): void {
    let text: string | undefined
    try {
      text = JSON.stringify(value)
    } catch { /* v8 below */ }
    let frame: Buffer
    if (text !== undefined) {
      const length = Buffer.byteLength(text, 'utf8')
      frame = Buffer.allocUnsafe(5 + length)
      frame.write(text, 5, 'utf8')
      frame[4] = 1
    } else {
      // the length and kind written ahead of the value, then filled in: one buffer, no copy
      const serializer = new DefaultSerializer()
      serializer.writeRawBytes(FRAME_HEAD_V8)
      serializer.writeHeader()
      serializer.writeValue(value)
      frame = serializer.releaseBuffer()
    }
    frame.writeUInt32LE(frame.length - 4, 0)
    this.process.stdin!.write(frame)
  }

  /** Whether it keeps this process running: while it is starting, has calls to answer, or is being stopped. */
  hold(busy: boolean): void {
    if (busy === this.held) return
    this.held = busy
    for (const handle of [this.process, ...this.process.stdio.slice(1)] as unknown as Array<{ ref?(): void; unref?(): void } | null>) {
      if (busy) handle?.ref?.()
      else handle?.unref?.()
    }
  }

  /** Kills it now; `reason` becomes what its running call fails with. Settles once it is gone. */
  kill(reason?: string): Promise<void> {
    this.reason ??= reason
    this.stopped = true
    if (!this.ended) {
      this.hold(true)
      this.process.kill('SIGKILL')
    }
    return this.closed
  }

  checkMemory(): void {
    if (this.statusFd === undefined || this.baselineKiB === undefined) return
    const now = anonKiB(this.statusFd)
    if (now !== undefined && now - this.baselineKiB > this.limitKiB) void this.kill(this.outOfMemory())
  }

  private outOfMemory(): string {
    return `the transform used more than its ${this.limitKiB / 1024} MiB of memory (server.transformMemoryMiB)`
  }

  private end(fallback: string): void {
    if (this.ended) return
    this.ended = true
    unwatch(this)
    if (this.statusFd !== undefined) closeSync(this.statusFd)
    this.statusFd = undefined
    this.events.gone(this.reason ?? fallback)
  }

  /** The child's own baseline, before its transform module is imported: what the cap counts from. */
  private startWatching(): void {
    try {
      this.statusFd = openSync(`/proc/${this.process.pid}/status`, 'r')
    } catch {
      return // no /proc (not Linux): the heap limit alone holds
    }
    this.baselineKiB = anonKiB(this.statusFd)
    watch(this)
  }

  private read(chunk: Buffer): void {
    this.chunks.push(chunk)
    this.buffered += chunk.length
    // a frame arriving in many chunks is put together once, when all of it is here
    while (this.buffered >= this.need && !this.stopped) {
      const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.buffered)
      this.chunks = [all]
      const length = all.readUInt32LE(0)
      if (length < 9 || length > MAX_ANSWER_BYTES) {
        void this.kill(`the transform process sent a frame of ${length} bytes (at most ${MAX_ANSWER_BYTES})`)
        return
      }
      if (this.buffered < 4 + length) { this.need = 4 + length; return }
      this.need = 4
      const kind = all.readUInt8(4)
      const id = all.readDoubleLE(5)
      const payload = all.subarray(13, 4 + length)
      const rest = all.subarray(4 + length)
      this.chunks = rest.length > 0 ? [rest] : []
      this.buffered = rest.length
      if (kind === ANSWER.booted) {
        this.startWatching()
        this.events.booted()
      } else if (kind === ANSWER.ready) this.events.ready()
      else if (kind === ANSWER.fatal) void this.kill(boundedLine(payload))
      else if (kind === ANSWER.value || kind === ANSWER.valueV8 || kind === ANSWER.threw || kind === ANSWER.invalid) this.events.answer(kind, id, payload)
      else void this.kill(`the transform process sent a frame of unknown kind ${kind}`)
    }
  }

  /** Forwards the child's stderr line by line, except V8's out-of-memory report (a stack trace). */
  private filterStderr(stderr: Readable): void {
    let partial = ''
    let muted = false
    const out = forward(stderr, process.stderr)
    stderr.setEncoding('utf8')
    stderr.on('data', (text: string) => {
      if (muted) return
      partial += text
      const lines = partial.split('\n')
      partial = lines.pop()!
      // a line that never ends is forwarded in pieces, so that it cannot grow here without bound
      if (partial.length > 8192) { lines.push(partial); partial = '' }
      let kept = ''
      for (const line of lines) {
        if (V8_OUT_OF_MEMORY.test(line)) {
          muted = true
          this.reason ??= this.outOfMemory()
          break
        }
        kept += line + '\n'
      }
      if (kept) out(Buffer.from(kept, 'utf8'))
    })
    stderr.on('end', () => { if (partial && !muted) out(Buffer.from(partial, 'utf8')) })
  }
}

/** A line of text from a child, as the server shows it: one line, bounded. */
function boundedLine(payload: Buffer): string {
  const line = payload.toString('utf8', 0, Math.min(payload.length, MAX_ERROR_CHARS * 4)).split('\n', 1)[0]!.trim()
  return line.length > MAX_ERROR_CHARS ? `${line.slice(0, MAX_ERROR_CHARS - 1)}…` : line
}

// ---- the pool ------------------------------------------------------------------------------
interface Job { id: number; routeId: string; input: TransformInput; timeoutMs: number; resolve(v: unknown): void; reject(e: Error): void }

class Slot {
  private child: Child | undefined
  /** true once the child has imported its module and may be sent calls */
  private loaded = false
  private ready: Promise<void> | undefined
  /** calls not yet sent (the child is starting), in order */
  private unsent: Job[] = []
  /** calls sent to the child, in order: the first is the one it is running */
  private readonly sent = new Fifo<Job>()
  /** the running call's deadline */
  private timer: NodeJS.Timeout | undefined
  /** calls given to this slot and not yet answered (the group balances on it) */
  load = 0
  private closed = false

  constructor(private readonly spec: ChildSpec) {}

  /** Starts a child unless one is running or starting; settles when it has imported its module. */
  started(): Promise<void> {
    if (this.child) return this.ready!
    this.loaded = false
    this.ready = new Promise<void>((ok, fail) => {
      let timer: NodeJS.Timeout | undefined = undefined
      const child: Child = new Child(this.spec, {
        booted: () => {
          // the names its mappings list, handed over now rather than as its environment
          if (this.child === child) child.send({ env: this.spec.env, transformsUrl: pathToFileURL(realpath(this.spec.transformsFile)).href })
        },
        ready: () => {
          if (this.child !== child || this.loaded) return
          clearTimeout(timer)
          this.loaded = true
          ok()
          this.sendUnsent()
          this.holdWhileBusy()
        },
        answer: (kind, id, payload) => this.settle(child, kind, id, payload),
        gone: (reason) => {
          clearTimeout(timer)
          if (!this.loaded) fail(new TransformFailed(reason))
          this.forget(child, new TransformFailed(reason), this.loaded)
        },
      })
      this.child = child
      child.hold(true)
      timer = setTimeout(() => void child.kill(`the transform module did not load within ${this.spec.startDeadlineMs} ms`), this.spec.startDeadlineMs)
      timer.unref()
    })
    // A start nobody waits for (warm-up that failed elsewhere) must not be an unhandled rejection.
    this.ready.catch(() => {})
    return this.ready
  }

  /** Runs one call on this slot's child (started if need be), after the calls sent before it. */
  call(id: number, routeId: string, input: TransformInput, timeoutMs: number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.unsent.push({ id, routeId, input, timeoutMs, resolve, reject })
      // Calls that arrive in the same turn of the event loop go over in one frame.
      if (this.loaded) { if (this.unsent.length === 1) setImmediate(this.sendUnsent) }
      else this.started().catch(() => {})
    })
  }

  /** Sends the calls waiting for the child, in one frame; the first one sent to an idle child starts its deadline. */
  private readonly sendUnsent = (): void => {
    const child = this.child
    if (!child || !this.loaded || this.unsent.length === 0) return
    let jobs = this.unsent
    this.unsent = []
    try {
      child.send(jobs.map((j) => ({ id: j.id, routeId: j.routeId, input: j.input })))
    } catch {
      // An input could not be serialized: each call is tried on its own, so that only the one
      // that cannot be fails.
      jobs = jobs.filter((job) => {
        try {
          child.send([{ id: job.id, routeId: job.routeId, input: job.input }])
          return true
        } catch {
          job.reject(new TransformFailed('an input the transform process cannot receive'))
          return false
        }
      })
    }
    const idle = this.sent.length === 0
    for (const job of jobs) this.sent.push(job)
    if (idle && jobs.length > 0) this.arm(jobs[0]!)
    this.holdWhileBusy()
  }

  /** An idle child does not keep this process running (`hookgate try` exits once it has its answer). */
  private holdWhileBusy(): void {
    if (this.loaded) this.child?.hold(this.sent.length + this.unsent.length > 0)
  }

  private arm(job: Job): void {
    clearTimeout(this.timer)
    const child = this.child!
    this.timer = setTimeout(() => {
      if (this.sent.peek() !== job || this.child !== child) return
      // Its late events (close, a last frame) are ignored: they name a child no call runs on.
      this.forget(child, new TransformTimeout(`did not finish within ${job.timeoutMs} ms`))
      void child.kill()
    }, job.timeoutMs)
  }

  /**
   * The child has ended (or was given up): drop it and fail the call it was running, if any. The
   * calls queued behind that one had not started: they go to a fresh child. When the child never
   * loaded its module, nothing will: every call waiting for it fails.
   */
  private forget(child: Child, error: Error, loaded = true): void {
    if (this.child !== child) return
    this.child = undefined
    this.loaded = false
    this.ready = undefined
    clearTimeout(this.timer)
    this.timer = undefined
    this.sent.shift()?.reject(error)
    const behind: Job[] = []
    for (let job = this.sent.shift(); job; job = this.sent.shift()) behind.push(job)
    this.unsent = behind.concat(this.unsent)
    if (this.unsent.length === 0) return
    if (!loaded || this.closed) {
      // the module did not load (nothing waiting can run), or the pool closed
      const failed = this.unsent
      this.unsent = []
      for (const job of failed) job.reject(error)
      return
    }
    this.started().catch(() => {})
  }

  private settle(child: Child, kind: number, id: number, payload: Buffer): void {
    const job = this.sent.peek()
    if (!job || this.child !== child || id !== job.id) return
    let value: unknown
    const isValue = kind === ANSWER.value || kind === ANSWER.valueV8
    if (isValue) {
      try {
        value = kind === ANSWER.value ? JSON.parse(payload.toString('utf8')) : deserialize(payload)
      } catch {
        this.forget(child, new TransformFailed('the transform process sent an answer that cannot be read', true))
        void child.kill()
        return
      }
    }
    this.sent.shift()
    const next = this.sent.peek()
    if (next) this.arm(next)
    else { clearTimeout(this.timer); this.timer = undefined }
    this.holdWhileBusy()
    if (isValue) job.resolve(value)
    else job.reject(new TransformFailed(boundedLine(payload) || 'failed', kind === ANSWER.invalid))
  }

  stop(): Promise<void> | undefined {
    this.closed = true
    const c = this.child
    if (c) this.forget(c, new TransformFailed('the transform pool closed'))
    return c?.kill()
  }
}

/** The children of one transform module: the mappings that list the same env names share them. */
class Group {
  readonly slots: Slot[]
  readonly waiting = new Fifo<() => void>()

  constructor(spec: ChildSpec, size: number) {
    this.slots = Array.from({ length: Math.max(1, size) }, () => new Slot(spec))
  }

  /** The least loaded slot, once one has room in its pipeline (an idle child first). */
  async acquire(): Promise<Slot> {
    for (;;) {
      let best: Slot | undefined
      for (const s of this.slots) if (s.load < PIPELINE_DEPTH && (best === undefined || s.load < best.load)) best = s
      if (best) {
        best.load++
        return best
      }
      await new Promise<void>((r) => this.waiting.push(r))
    }
  }

  release(slot: Slot): void {
    slot.load--
    this.waiting.shift()?.()
  }

  get busy(): boolean {
    return this.waiting.length > 0 || this.slots.some((s) => s.load > 0)
  }
}

/** What a call needs of its caller: a mapping, or a workflow step (its id is its key in the transforms module). */
export type TransformCaller = Pick<BundleRoute, 'id' | 'transform'>

export interface PoolOptions {
  /** children per transform module, default 2 */
  size?: number
  /** how long a child may take to load its module, default DEFAULT_START_DEADLINE_MS */
  startDeadlineMs?: number
  /** where the variables a mapping lists are read from, default process.env */
  env?: NodeJS.ProcessEnv
}

export class TransformPool {
  private readonly groups = new Map<string, Group>()
  private nextId = 1

  /** The pool for a bundle's transforms, or null when it has none. */
  static forBundle(bundle: LoadedBundle, options: PoolOptions = {}): TransformPool | null {
    const withTransform: TransformCaller[] = [...bundle.routeTable.values()].flat().filter((r) => r.transform)
    // workflow steps with action transform run in the same children as the mappings of their env group
    for (const wf of bundle.workflows.values()) for (const step of wf.steps) if (step.transform) withTransform.push({ id: step.transform.id, transform: step.transform })
    return withTransform.length > 0 ? new TransformPool(bundle, withTransform, options) : null
  }

  private constructor(bundle: LoadedBundle, routes: TransformCaller[], options: PoolOptions) {
    // The transform modules lie beside the real bundle file, also when it is served through a symlink.
    const dir = dirname(realpath(bundle.file))
    const source = options.env ?? process.env
    for (const route of routes) {
      const t = route.transform!
      if (this.groups.has(t.file)) continue
      const env: Record<string, string> = {}
      for (const name of t.env) if (source[name] !== undefined) env[name] = source[name]!
      this.groups.set(t.file, new Group({
        transformsFile: join(dir, t.file),
        env,
        memoryMiB: bundle.config.server.transformMemoryMiB ?? 128,
        startDeadlineMs: options.startDeadlineMs ?? DEFAULT_START_DEADLINE_MS,
      }, options.size ?? 2))
    }
  }

  /**
   * Starts every child now (each imports its module within the start deadline): a reload does, so
   * that a module that does not load refuses the new bundle. At start-up children start at first use.
   */
  async warm(): Promise<void> {
    await Promise.all([...this.groups.values()].flatMap((g) => g.slots.map((s) => s.started())))
  }

  async run(route: TransformCaller, input: TransformInput): Promise<unknown> {
    const group = route.transform && this.groups.get(route.transform.file)
    if (!group) throw new TransformFailed(`no transform process for mapping ${route.id}`)
    const slot = await group.acquire()
    try {
      return await slot.call(this.nextId++, route.id, input, route.transform!.timeoutMs)
    } finally {
      group.release(slot)
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.groups.values()].flatMap((g) => g.slots.map((s) => s.stop())))
  }

  /** After a reload: let calls in flight on the old bundle finish, then stop the children. */
  async closeWhenIdle(): Promise<void> {
    const busy = () => [...this.groups.values()].some((g) => g.busy)
    while (busy()) await new Promise((r) => setTimeout(r, 50).unref())
    await this.close()
  }
}
