// A small pool of worker threads that run transforms with a hard time limit: a transform that
// does not answer in time has its worker terminated (stopping even a synchronous endless loop) and
// a fresh worker takes its place. One call per worker at a time, so a timeout is always its own.
import { Worker } from 'node:worker_threads'
import { pathToFileURL } from 'node:url'
import type { TransformInput } from '../bundle-format.js'

export class TransformTimeout extends Error {}
export class TransformFailed extends Error {
  constructor(message: string, readonly invalidOutput = false) {
    super(message)
  }
}

interface Pending { resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout }

class Slot {
  worker: Worker | undefined
  ready: Promise<void> | undefined
  busy = false
  current: { id: number; pending: Pending } | undefined

  constructor(private readonly bundleUrl: string) {}

  start(): Promise<void> {
    const worker = new Worker(new URL('./worker.js', import.meta.url), { workerData: { bundleUrl: this.bundleUrl } })
    worker.unref()
    this.worker = worker
    this.ready = new Promise<void>((ok, fail) => {
      const onMessage = (m: { ready?: boolean }) => { if (m.ready) { worker.off('error', fail); ok() } }
      worker.once('message', onMessage)
      worker.once('error', fail)
    })
    worker.on('message', (m: { id?: number; ok?: boolean; value?: unknown; error?: string; invalid?: boolean }) => {
      if (m.id === undefined || !this.current || m.id !== this.current.id) return
      const { pending } = this.current
      this.current = undefined
      clearTimeout(pending.timer)
      if (m.ok) pending.resolve(m.value)
      else pending.reject(new TransformFailed(m.error ?? 'failed', m.invalid === true))
    })
    worker.on('error', (err) => this.fail(new TransformFailed(err.message)))
    worker.on('exit', () => {
      if (this.worker === worker) { this.worker = undefined; this.ready = undefined }
      this.fail(new TransformFailed('the transform worker stopped'))
    })
    return this.ready
  }

  private fail(err: Error): void {
    if (!this.current) return
    const { pending } = this.current
    this.current = undefined
    clearTimeout(pending.timer)
    pending.reject(err)
  }

  async call(id: number, routeId: string, input: TransformInput, timeoutMs: number): Promise<unknown> {
    if (!this.worker) await this.start()
    else await this.ready
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.current = undefined
        const w = this.worker
        this.worker = undefined
        this.ready = undefined
        void w?.terminate()
        reject(new TransformTimeout(`did not finish within ${timeoutMs} ms`))
      }, timeoutMs)
      this.current = { id, pending: { resolve, reject, timer } }
      try {
        this.worker!.postMessage({ id, routeId, input })
      } catch {
        // The input could not be copied to the worker: this call ends here, and its timer must
        // not fire later against whatever the worker is running by then.
        clearTimeout(timer)
        this.current = undefined
        reject(new TransformFailed('an input the transform worker cannot receive'))
      }
    })
  }

  stop(): Promise<number> | undefined {
    return this.worker?.terminate()
  }
}

export class TransformPool {
  private readonly slots: Slot[]
  private readonly waiting: Array<() => void> = []
  private nextId = 1

  constructor(bundleFile: string, size = 2) {
    const url = `${pathToFileURL(bundleFile).href}?transforms=${Date.now()}`
    this.slots = Array.from({ length: Math.max(1, size) }, () => new Slot(url))
  }

  /** Starts the workers now, so the first request does not pay for it. */
  async warm(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.worker ? s.ready : s.start()))
  }

  async run(routeId: string, input: TransformInput, timeoutMs: number): Promise<unknown> {
    const slot = await this.acquire()
    try {
      return await slot.call(this.nextId++, routeId, input, timeoutMs)
    } finally {
      slot.busy = false
      this.waiting.shift()?.()
    }
  }

  private async acquire(): Promise<Slot> {
    for (;;) {
      const free = this.slots.find((s) => !s.busy)
      if (free) {
        free.busy = true
        return free
      }
      await new Promise<void>((r) => this.waiting.push(r))
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.stop()))
  }

  /** After a reload: let calls in flight on the old bundle finish, then stop the workers. */
  async closeWhenIdle(): Promise<void> {
    while (this.slots.some((s) => s.busy) || this.waiting.length > 0) await new Promise((r) => setTimeout(r, 50).unref())
    await this.close()
  }
}
