// Worker threads that run transforms, isolated from the server: each worker imports only the
// transform module it serves (transform code never runs on the main thread), gets an empty
// environment plus the names its mappings list, and a heap limit. A transform that does not answer
// in time has its worker terminated (stopping even a synchronous endless loop) and a fresh worker
// takes its place.
//
// A worker runs its calls one at a time, in the order they were posted, but up to PIPELINE_DEPTH
// of them are posted to it at once: handing a call to a thread and its answer back costs a wake-up
// of that thread each way, and with a short queue on the worker one wake-up carries several calls
// and several answers (under load the round trips were most of the transform path's cost). Because
// the worker runs them in order, the first call posted is the one running and the ones behind it
// have not started: a call's deadline starts when the call before it answers, and when a worker
// dies or is terminated only the running call fails; the ones behind it go to a fresh worker.
import { realpathSync } from 'node:fs'
import { Fifo } from '../fifo.js'
import { dirname, extname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Worker, type MessagePort } from 'node:worker_threads'
import { WORKER_MODULE, type BundleRoute, type TransformInput } from '../bundle-format.js'
import type { LoadedBundle } from '../bundle.js'

export class TransformTimeout extends Error {}
export class TransformFailed extends Error {
  constructor(message: string, readonly invalidOutput = false) {
    super(message)
  }
}

/** How long a worker may take to import its transform module (its top-level code) before it is given up. */
export const DEFAULT_START_DEADLINE_MS = 10_000

/** The most calls posted to one worker at once (the one it runs and those queued behind it). */
export const PIPELINE_DEPTH = 8

/**
 * The worker module sits beside this one with the same extension: build/runtime/transforms/ in the
 * package (.js), or beside dist/hookgate-serve.mjs when the runtime was bundled into it (.mjs).
 */
const WORKER_URL = new URL(`./${WORKER_MODULE}${extname(fileURLToPath(import.meta.url))}`, import.meta.url)

interface WorkerSpec {
  transformsUrl: string
  env: Record<string, string>
  memoryMiB: number
  startDeadlineMs: number
}

interface Job { id: number; routeId: string; input: TransformInput; timeoutMs: number; resolve(v: unknown): void; reject(e: Error): void }

interface Result { id?: number; ok?: boolean; value?: unknown; error?: string; invalid?: boolean; ready?: boolean }

class Slot {
  private worker: Worker | undefined
  /** the worker's private port: calls and results go over it, never over parentPort */
  private port: MessagePort | undefined
  private ready: Promise<void> | undefined
  /** calls not yet posted (the worker is starting), in order */
  private unsent: Job[] = []
  /** calls posted to the worker, in order: the first is the one it is running */
  private readonly posted = new Fifo<Job>()
  /** the running call's deadline */
  private timer: NodeJS.Timeout | undefined
  /** calls given to this slot and not yet answered (the group balances on it) */
  load = 0
  private closed = false

  constructor(private readonly spec: WorkerSpec) {}

  /** Starts a worker unless one is running or starting; settles when it has imported its module. */
  started(): Promise<void> {
    if (this.worker) return this.ready!
    const worker = new Worker(WORKER_URL, {
      workerData: { transformsUrl: this.spec.transformsUrl },
      // a copy of exactly these variables: not the hook token, not provider keys
      env: { ...this.spec.env },
      resourceLimits: { maxOldGenerationSizeMb: this.spec.memoryMiB, maxYoungGenerationSizeMb: Math.max(4, Math.min(32, Math.floor(this.spec.memoryMiB / 8))) },
    })
    worker.unref()
    this.worker = worker
    this.ready = new Promise<void>((ok, fail) => {
      let timer: NodeJS.Timeout | undefined
      let loaded = false
      const gone = (reason: string) => {
        clearTimeout(timer)
        if (!loaded) fail(new TransformFailed(reason))
        this.forget(worker, new TransformFailed(reason), loaded)
      }
      // The first message is the private port, posted before any transform code was imported;
      // anything a transform posts on parentPort later is ignored.
      worker.once('message', (m: { port?: MessagePort }) => {
        if (!m?.port || this.worker !== worker) return
        this.port = m.port
        m.port.on('message', (r: Result) => {
          if (r.ready) { clearTimeout(timer); loaded = true; ok(); this.sendUnsent(); return }
          this.settle(worker, r)
        })
      })
      worker.on('error', () => gone('the transform worker failed'))
      worker.once('exit', () => gone('the transform worker stopped'))
      timer = setTimeout(() => {
        gone(`the transform module did not load within ${this.spec.startDeadlineMs} ms`)
        void worker.terminate()
      }, this.spec.startDeadlineMs)
      timer.unref()
    })
    // A start nobody waits for (warm-up that failed elsewhere) must not be an unhandled rejection.
    this.ready.catch(() => {})
    return this.ready
  }

  /** Runs one call on this slot's worker (started if need be), after the calls posted before it. */
  call(id: number, routeId: string, input: TransformInput, timeoutMs: number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.unsent.push({ id, routeId, input, timeoutMs, resolve, reject })
      // Calls that arrive in the same turn of the event loop go over in one message.
      if (this.port) { if (this.unsent.length === 1) setImmediate(this.sendUnsent) }
      else this.started().catch(() => {})
    })
  }

  /** Posts the calls waiting for the worker, in one message; the first one posted to an idle worker starts its deadline. */
  private readonly sendUnsent = (): void => {
    const port = this.port
    if (!port || this.unsent.length === 0) return
    let jobs = this.unsent
    this.unsent = []
    try {
      port.postMessage(jobs.map((j) => ({ id: j.id, routeId: j.routeId, input: j.input })))
    } catch {
      // An input could not be copied to the worker: each call is tried on its own, so that only
      // the one that cannot be copied fails.
      jobs = jobs.filter((job) => {
        try {
          port.postMessage([{ id: job.id, routeId: job.routeId, input: job.input }])
          return true
        } catch {
          job.reject(new TransformFailed('an input the transform worker cannot receive'))
          return false
        }
      })
    }
    const idle = this.posted.length === 0
    for (const job of jobs) this.posted.push(job)
    if (idle && jobs.length > 0) this.arm(jobs[0]!)
  }

  private arm(job: Job): void {
    clearTimeout(this.timer)
    const worker = this.worker!
    this.timer = setTimeout(() => {
      if (this.posted.peek() !== job || this.worker !== worker) return
      // Its late events (exit, a last message) are ignored: they name a worker no call runs on.
      this.forget(worker, new TransformTimeout(`did not finish within ${job.timeoutMs} ms`))
      void worker.terminate()
    }, job.timeoutMs)
  }

  /**
   * The worker has ended (or was given up): drop it and fail the call it was running, if any. The
   * calls queued behind that one had not started: they go to a fresh worker. When the worker never
   * loaded its module, nothing will: every call waiting for it fails.
   */
  private forget(worker: Worker, error: Error, loaded = true): void {
    if (this.worker !== worker) return
    this.worker = undefined
    this.port = undefined
    this.ready = undefined
    clearTimeout(this.timer)
    this.timer = undefined
    this.posted.shift()?.reject(error)
    const behind: Job[] = []
    for (let job = this.posted.shift(); job; job = this.posted.shift()) behind.push(job)
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

  private settle(worker: Worker, r: Result): void {
    const job = this.posted.peek()
    if (!job || this.worker !== worker || r.id !== job.id) return
    this.posted.shift()
    const next = this.posted.peek()
    if (next) this.arm(next)
    else { clearTimeout(this.timer); this.timer = undefined }
    if (r.ok) job.resolve(r.value)
    else job.reject(new TransformFailed(r.error ?? 'failed', r.invalid === true))
  }

  stop(): Promise<number> | undefined {
    this.closed = true
    const w = this.worker
    if (w) this.forget(w, new TransformFailed('the transform pool closed'))
    return w?.terminate()
  }
}

/** The workers of one transform module: the mappings that list the same env names share them. */
class Group {
  readonly slots: Slot[]
  readonly waiting = new Fifo<() => void>()

  constructor(spec: WorkerSpec, size: number) {
    this.slots = Array.from({ length: Math.max(1, size) }, () => new Slot(spec))
  }

  /** The least loaded slot, once one has room in its pipeline (an idle worker first). */
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
  /** workers per transform module, default 2 */
  size?: number
  /** how long a worker may take to load its module, default DEFAULT_START_DEADLINE_MS */
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
    // workflow steps with action transform run in the same workers as the mappings of their env group
    for (const wf of bundle.workflows.values()) for (const step of wf.steps) if (step.transform) withTransform.push({ id: step.transform.id, transform: step.transform })
    return withTransform.length > 0 ? new TransformPool(bundle, withTransform, options) : null
  }

  private constructor(bundle: LoadedBundle, routes: TransformCaller[], options: PoolOptions) {
    // The transform modules lie beside the real bundle file, also when it is served through a symlink.
    let dir = dirname(bundle.file)
    try { dir = dirname(realpathSync(bundle.file)) } catch { /* the file went away: the workers report it */ }
    const source = options.env ?? process.env
    for (const route of routes) {
      const t = route.transform!
      if (this.groups.has(t.file)) continue
      const env: Record<string, string> = {}
      for (const name of t.env) if (source[name] !== undefined) env[name] = source[name]!
      this.groups.set(t.file, new Group({
        transformsUrl: pathToFileURL(join(dir, t.file)).href,
        env,
        memoryMiB: bundle.config.server.transformMemoryMiB ?? 128,
        startDeadlineMs: options.startDeadlineMs ?? DEFAULT_START_DEADLINE_MS,
      }, options.size ?? 2))
    }
  }

  /**
   * Starts every worker now (each imports its module within the start deadline): a reload does, so
   * that a module that does not load refuses the new bundle. At start-up workers start at first use.
   */
  async warm(): Promise<void> {
    await Promise.all([...this.groups.values()].flatMap((g) => g.slots.map((s) => s.started())))
  }

  async run(route: TransformCaller, input: TransformInput): Promise<unknown> {
    const group = route.transform && this.groups.get(route.transform.file)
    if (!group) throw new TransformFailed(`no transform worker for mapping ${route.id}`)
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

  /** After a reload: let calls in flight on the old bundle finish, then stop the workers. */
  async closeWhenIdle(): Promise<void> {
    const busy = () => [...this.groups.values()].some((g) => g.busy)
    while (busy()) await new Promise((r) => setTimeout(r, 50).unref())
    await this.close()
  }
}
