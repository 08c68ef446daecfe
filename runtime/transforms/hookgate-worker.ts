// Runs one transform module off the main thread, so that a transform stuck in a loop can be
// stopped (the pool terminates this worker) without stalling the server, and so that nothing a
// transform does at load or at call time reaches the server's memory or environment. Calls and
// answers go over a private port handed to the pool before any transform code is imported.
// An answer over the size cap never leaves this thread: the main thread would have to copy it.
import { serialize } from 'node:v8'
import { MessageChannel, parentPort, workerData } from 'node:worker_threads'
import type { TransformInput, TransformsModule } from '../bundle-format.js'

/** The most a transform may return: bytes as structured-cloned, and values (array elements, object members) counted. */
export const MAX_OUTPUT_BYTES = 1024 * 1024
export const MAX_OUTPUT_VALUES = 10_000

interface Call { id: number; routeId: string; input: TransformInput }

const channel = new MessageChannel()
const port = channel.port1
// Kept before any transform code runs: a transform that patches these later changes nothing here.
const post = port.postMessage.bind(port)
const hasOwn = Object.hasOwn
const keysOf = Object.keys
const isArray = Array.isArray
parentPort!.postMessage({ port: channel.port2 }, [channel.port2])

const { transformsUrl } = workerData as { transformsUrl: string }
const { transforms } = (await import(transformsUrl)) as TransformsModule

/** Why `value` may not leave this thread, or undefined when it may. */
function outputProblem(value: unknown): string | undefined {
  let count = 0
  const seen = new Set<object>()
  const stack: unknown[] = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (v === null || typeof v !== 'object' || seen.has(v)) continue
    seen.add(v)
    const keys = isArray(v) ? undefined : keysOf(v)
    count += keys ? keys.length : (v as unknown[]).length
    if (count > MAX_OUTPUT_VALUES) return `more than ${MAX_OUTPUT_VALUES} values`
    if (keys) for (const k of keys) stack.push((v as Record<string, unknown>)[k])
    else for (const x of v as unknown[]) stack.push(x)
  }
  let bytes: number
  try {
    bytes = serialize(value).byteLength
  } catch {
    return 'a value that cannot be copied (a function, a class instance with methods, …)'
  }
  if (bytes > MAX_OUTPUT_BYTES) return `a value of ${bytes} bytes (at most ${MAX_OUTPUT_BYTES})`
  return undefined
}

// One call at a time, in the order posted: the pool posts several at once, in one message (one
// wake-up of this thread for a few calls), and counts on the first unanswered call being the one running.
const queue: Call[] = []
let running = false

async function runQueued(): Promise<void> {
  running = true
  for (let call = queue.shift(); call !== undefined; call = queue.shift()) await answer(call)
  running = false
}

async function answer(call: Call): Promise<void> {
  const fn = hasOwn(transforms, call.routeId) ? transforms[call.routeId] : undefined
  try {
    if (typeof fn !== 'function') throw new Error(`no transform for mapping ${call.routeId}`)
    const value = await fn(Object.freeze(call.input))
    const problem = outputProblem(value)
    if (problem !== undefined) post({ id: call.id, ok: false, invalid: true, error: problem })
    else post({ id: call.id, ok: true, value })
  } catch (err) {
    let error = 'failed'
    try { error = err instanceof Error ? err.message : String(err) } catch { /* a thrown value that cannot even be shown */ }
    post({ id: call.id, ok: false, error })
  }
}

port.on('message', (calls: Call[]) => {
  for (const call of calls) queue.push(call)
  if (!running) void runQueued()
})
post({ ready: true })
