// The Test button's dry runs, each in a worker thread that is ended and replaced once the bundles it
// imported add up to RECYCLE_AFTER_BYTES: importing a bundle is the only way to run it, and Node never
// frees an imported module, so in the admin process every Test of a 200 KB Trigger kept ~0.4 MiB
// for good (70–115 MiB per 200). A worker's whole heap goes when it ends. One dry run at a time, in
// the order asked; one that takes longer than DRY_RUN_DEADLINE_MS ends its worker and fails.
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { BUNDLE_FILE } from '../runtime/bundle/format.js'
import type { DryRunAnswer } from '../runtime/endpoints/try.js'
import type { DryRunReply, DryRunRequest } from './try-worker.js'

/** A worker is replaced once the bundles it imported reach this many bytes (or RECYCLE_AFTER_RUNS runs). */
export const RECYCLE_AFTER_BYTES = 16 * 1024 * 1024
export const RECYCLE_AFTER_RUNS = 200
/** A dry run's transform has its own timeout (in its worker); this bounds the whole run. */
const DRY_RUN_DEADLINE_MS = 60_000
/** The try worker's heap: the bundles it keeps until it is recycled, plus the run. */
const WORKER_HEAP_MIB = 256

const WORKER_URL = new URL('./try-worker.js', import.meta.url)

export class DryRunFailed extends Error {
  override name = 'DryRunFailed'
}

export class DryRuns {
  private worker: Worker | undefined
  private importedBytes = 0
  private runs = 0
  private nextId = 0
  private queue: Promise<unknown> = Promise.resolve()
  private closed = false
  /** workers started so far */
  started = 0

  /** What the server would answer for `payload` on `name` of the bundle compiled into `bundleDir`. */
  run(bundleDir: string, name: string, payload: unknown, headers: Record<string, string>): Promise<DryRunAnswer> {
    const next = this.queue.then(() => this.runNow({ id: ++this.nextId, bundleDir, name, payload, headers }))
    this.queue = next.catch(() => {})
    return next
  }

  /** Ends the worker; dry runs asked for after this fail. */
  async close(): Promise<void> {
    this.closed = true
    await this.retire()
  }

  private async runNow(request: DryRunRequest): Promise<DryRunAnswer> {
    if (this.closed) throw new DryRunFailed('the admin server is stopping')
    if (this.importedBytes >= RECYCLE_AFTER_BYTES || this.runs >= RECYCLE_AFTER_RUNS) await this.retire()
    const worker = this.worker ?? this.start()
    this.importedBytes += statSync(join(request.bundleDir, BUNDLE_FILE)).size
    this.runs++
    const reply = await new Promise<DryRunReply | string>((resolve) => {
      const done = (outcome: DryRunReply | string) => {
        clearTimeout(timer)
        worker.off('message', onMessage)
        worker.off('exit', onExit)
        resolve(outcome)
      }
      const onMessage = (r: DryRunReply) => { if (r.id === request.id) done(r) }
      const onExit = (code: number) => done(`the dry run's worker stopped (exit ${code})`)
      const timer = setTimeout(() => done(`the dry run did not finish within ${DRY_RUN_DEADLINE_MS / 1000} s`), DRY_RUN_DEADLINE_MS)
      worker.on('message', onMessage)
      worker.once('exit', onExit)
      worker.postMessage(request)
    })
    if (typeof reply === 'string') {
      // a worker that stopped or got stuck is not given the next run
      await this.retire()
      throw new DryRunFailed(reply)
    }
    if (!reply.ok) throw new DryRunFailed(reply.error)
    return { status: reply.status, body: reply.body }
  }

  private start(): Worker {
    const worker = new Worker(WORKER_URL, { resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MIB } })
    worker.unref()
    // an error in the worker also ends it: the run waiting on it fails by its exit
    worker.on('error', () => {})
    this.worker = worker
    this.importedBytes = 0
    this.runs = 0
    this.started++
    return worker
  }

  private async retire(): Promise<void> {
    const worker = this.worker
    this.worker = undefined
    if (worker) await worker.terminate()
  }
}
