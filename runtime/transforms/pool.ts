// The processes that run transforms, isolated from the server (one is a Child, child.ts): each
// runs hookgate-worker (beside this file), which imports only the transform module it serves
// (transform code never runs in the server's process), under Node's permission model: it may read
// its own file and the transform module and nothing else, start no process or thread, load no
// addon; its environment is empty (the names its mappings list are handed over after start, so
// not even /proc/<pid>/environ holds more), and the worker takes away what the permission model
// leaves that could signal the server. Its memory is capped as a whole, heap and Buffers alike. A
// transform that does not answer in time has its process killed (stopping even a synchronous
// endless loop) and a fresh one takes its place.
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
import { deserialize } from 'node:v8'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Fifo } from '../lib/fifo.js'
import type { BundleRoute, TransformInput } from '../bundle/format.js'
import type { LoadedBundle } from '../bundle/load.js'
import { ANSWER, boundedLine, Child, realpath, type ChildSpec } from './child.js'

export { MEMORY_SAMPLE_MS } from './child.js'

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
