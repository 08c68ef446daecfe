// Runs a bundle's transforms off the main thread, so that a transform stuck in a loop can be
// stopped (the pool terminates this worker) without stalling the server.
import { parentPort, workerData } from 'node:worker_threads'
import type { BundleModule, TransformInput } from '../bundle-format.js'

interface Call { id: number; routeId: string; input: TransformInput }

const { bundleUrl } = workerData as { bundleUrl: string }
const mod = (await import(bundleUrl)) as BundleModule
const transforms = new Map(mod.routes.filter((r) => r.transform).map((r) => [r.id, r.transform!.fn]))

parentPort!.on('message', async (call: Call) => {
  const fn = transforms.get(call.routeId)
  try {
    if (!fn) throw new Error(`no transform for mapping ${call.routeId}`)
    const value = await fn(Object.freeze(call.input))
    try {
      parentPort!.postMessage({ id: call.id, ok: true, value })
    } catch {
      parentPort!.postMessage({ id: call.id, ok: false, invalid: true, error: 'a value that cannot be copied (a function, a class instance with methods, …)' })
    }
  } catch (err) {
    parentPort!.postMessage({ id: call.id, ok: false, error: err instanceof Error ? err.message : String(err) })
  }
})
parentPort!.postMessage({ ready: true })
