// The process that runs one transform module, apart from the server (runtime/transforms/child.ts
// starts it): a child process under Node's permission model that may read only its own file and
// the transform module, with an empty environment. Before any transform code is imported, this
// file takes away what the permission model leaves open and that would reach the server: signals
// (process.kill, process._kill, process._debugProcess, which sends SIGUSR1 and opens the server's
// inspector), the priority of other processes (os.setPriority), trace files written to the
// working directory (trace_events) and V8 flags set at run time (v8.setFlagsFromString). Then it
// reports it has booted (the pool measures its memory from there), takes the names its mappings
// list as process.env, imports the module and answers calls.
//
// Calls come on fd 0, each frame a 4-byte little-endian length, a kind (1 byte: JSON or v8) and
// the array of calls. Answers go on fd 3, each frame a 4-byte length, then a kind (1 byte) and the
// call's id (a float64), then the value (serialized once, here, where it was measured) or a line
// of text. Values go as JSON when JSON carries them exactly (plain objects and arrays, strings,
// finite numbers, booleans, null: what a payload is), else v8-serialized: Node's v8.serialize and
// deserialize cost about three times JSON's CPU, on the server's main thread at each call. An
// answer over the size cap never leaves this process. The pool trusts none of this: a transform
// can write to these fds too, and the pool checks every frame it reads.
import { writevSync } from 'node:fs'
import { syncBuiltinESMExports } from 'node:module'
import { Socket } from 'node:net'
import os from 'node:os'
import traceEvents from 'node:trace_events'
import v8, { deserialize, serialize } from 'node:v8'
import type { TransformInput, TransformsModule } from '../bundle/format.js'

/** The most a transform may return: bytes as serialized, and values (array elements, object members) counted. */
export const MAX_OUTPUT_BYTES = 1024 * 1024
export const MAX_OUTPUT_VALUES = 10_000
/** A thrown error is reported as its first line, at most this many characters (never its stack). */
export const MAX_ERROR_CHARS = 200

interface Call { id: number; routeId: string; input: TransformInput }
interface Init { env: Record<string, string>; transformsUrl: string }

// ---- taken before any transform code runs ---------------------------------------------------
// the binding process.kill calls (looked up on `process` at each call, so taken as it is now)
const rawKill = (process as unknown as { _kill(pid: number, signal: number): number })._kill.bind(process)
const selfPid = process.pid
const SIGKILL = os.constants.signals.SIGKILL
/** Ends this process at once: no 'exit' handler a transform added can hold it. */
function die(): never {
  rawKill(selfPid, SIGKILL)
  for (;;) { /* the signal is on its way */ }
}
const hasOwn = Object.hasOwn
const keysOf = Object.keys
const isArray = Array.isArray
const errorToString = Error.prototype.toString

function denied(what: string): () => never {
  return () => {
    throw Object.assign(new Error(`${what} is not allowed in a transform`), { code: 'ERR_ACCESS_DENIED' })
  }
}
function lock(target: object, name: string, value: unknown): void {
  Object.defineProperty(target, name, { value, writable: false, configurable: false, enumerable: false })
}
for (const name of ['kill', '_kill', '_debugProcess', '_debugEnd']) lock(process, name, denied(`process.${name}`))
lock(os, 'setPriority', denied('os.setPriority'))
lock(traceEvents, 'createTracing', denied('trace_events.createTracing'))
// V8 flags at run time (native syntax, say) are a way around everything above
lock(v8, 'setFlagsFromString', denied('v8.setFlagsFromString'))
// `import { setPriority } from 'node:os'` in a transform gets the locked function too
syncBuiltinESMExports()

/** What a frame on fd 3 says: the same numbers as ANSWER in child.ts (this file imports no module of ours). */
const Kind = { Booted: 1, Ready: 2, Fatal: 3, Value: 4, Threw: 5, Invalid: 6, ValueV8: 7 } as const
type Kind = (typeof Kind)[keyof typeof Kind]
const ANSWERS_FD = 3
const head = Buffer.alloc(13)

function send(kind: Kind, id: number, payload?: Buffer | string): void {
  const bytes = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload
  head.writeUInt32LE(9 + (bytes?.length ?? 0), 0)
  head.writeUInt8(kind, 4)
  head.writeDoubleLE(id, 5)
  try {
    // blocking: the pool reads as long as it lives
    writevSync(ANSWERS_FD, bytes ? [head, bytes] : [head])
  } catch {
    die() // the server is gone
  }
}

/** A thrown value as one bounded line: `TypeError: x is not a function`, never a stack. */
function firstLine(err: unknown): string {
  let text: string
  try {
    text = err instanceof Error ? String(errorToString.call(err)) : String(err)
    // what the permission model refused, which its message does not say
    const { code, permission, resource } = err instanceof Error ? err as { code?: unknown; permission?: unknown; resource?: unknown } : {}
    if (code === 'ERR_ACCESS_DENIED' && typeof permission === 'string') text = `${text.split('\n', 1)[0]} (${permission}${typeof resource === 'string' ? ` ${resource}` : ''})`
  } catch {
    text = 'a thrown value that cannot be shown'
  }
  const line = text.split('\n', 1)[0]!.trim()
  return line.length > MAX_ERROR_CHARS ? `${line.slice(0, MAX_ERROR_CHARS - 1)}…` : line || 'an empty error'
}

// A transform that throws outside a call (a timer, a promise nobody awaited) ends this process;
// the pool fails the call it was running with this line. Node would print the stack instead.
process.on('uncaughtException', (err) => {
  send(Kind.Fatal, 0, firstLine(err))
  die()
})

// ---- the transform module ------------------------------------------------------------------
let transforms: TransformsModule['transforms'] | undefined

const objectPrototype = Object.prototype
const getPrototypeOf = Object.getPrototypeOf
const isFiniteNumber = Number.isFinite
const stringify = JSON.stringify
const parse = JSON.parse

/**
 * Why `value` may not leave this process, or how it goes: its bytes, and whether they are JSON
 * (every value in it one JSON carries exactly) or v8-serialized.
 */
function outputProblem(value: unknown): string | { bytes: Buffer; json: boolean } {
  let count = 0
  let json = true
  const seen = new Set<object>()
  const stack: unknown[] = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (json) {
      const type = typeof v
      // -0, NaN and Infinity, undefined (a member JSON would drop), bigint, functions, symbols: v8
      if (type === 'number' ? !isFiniteNumber(v) || Object.is(v, -0) : type !== 'string' && type !== 'boolean' && type !== 'object') json = false
    }
    if (v === null || typeof v !== 'object') continue
    if (seen.has(v)) {
      json = false // shared or cyclic: v8 keeps it as it is
      continue
    }
    seen.add(v)
    const array = isArray(v)
    if (json && !array) {
      const proto = getPrototypeOf(v) as unknown
      if (proto !== objectPrototype && proto !== null) json = false // a Date, a Map, a class instance
    }
    const keys = array ? undefined : keysOf(v)
    count += keys ? keys.length : (v as unknown[]).length
    if (count > MAX_OUTPUT_VALUES) return `more than ${MAX_OUTPUT_VALUES} values`
    if (keys) for (const k of keys) stack.push((v as Record<string, unknown>)[k])
    else for (const x of v as unknown[]) stack.push(x) // a hole reads as undefined: v8
  }
  let bytes: Buffer
  try {
    bytes = json ? Buffer.from(stringify(value), 'utf8') : serialize(value)
  } catch {
    return 'a value that cannot be copied (a function, a class instance with methods, …)'
  }
  if (bytes.length > MAX_OUTPUT_BYTES) return `a value of ${bytes.length} bytes (at most ${MAX_OUTPUT_BYTES})`
  return { bytes, json }
}

// One call at a time, in the order sent: the pool sends several at once, in one frame, and counts
// on the first unanswered call being the one running. Each answer goes out as soon as it is ready,
// so that when a call gets stuck, every call before it has been answered.
const queue: Call[] = []
let running = false

async function runQueued(): Promise<void> {
  running = true
  for (let call = queue.shift(); call !== undefined; call = queue.shift()) await answer(call)
  running = false
}

async function answer(call: Call): Promise<void> {
  const fn = transforms && hasOwn(transforms, call.routeId) ? transforms[call.routeId] : undefined
  try {
    if (typeof fn !== 'function') throw new Error(`no transform for mapping ${call.routeId}`)
    const value = await fn(Object.freeze(call.input))
    const checked = outputProblem(value)
    if (typeof checked === 'string') send(Kind.Invalid, call.id, checked)
    else send(checked.json ? Kind.Value : Kind.ValueV8, call.id, checked.bytes)
  } catch (err) {
    send(Kind.Threw, call.id, firstLine(err))
  }
}

async function start(init: Init): Promise<void> {
  for (const name of keysOf(init.env)) process.env[name] = init.env[name]
  try {
    ;({ transforms } = (await import(init.transformsUrl)) as TransformsModule)
  } catch (err) {
    send(Kind.Fatal, 0, `the transform module did not load: ${firstLine(err)}`)
    die()
  }
  send(Kind.Ready, 0)
}

// ---- calls from the pool -------------------------------------------------------------------
// A socket of its own on fd 0: a transform that reads process.stdin competes for the same bytes,
// which can only break its own calls (the pool then replaces this process).
const calls = new Socket({ fd: 0, readable: true, writable: false })
let chunks: Buffer[] = []
let buffered = 0
let initialised = false

calls.on('data', (chunk: Buffer) => {
  chunks.push(chunk)
  buffered += chunk.length
  while (buffered >= 4) {
    const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, buffered)
    const length = all.readUInt32LE(0)
    if (buffered < 4 + length) { chunks = [all]; return }
    // kind 1: JSON (what the pool sends when it can), 2: v8-serialized
    const body = all.subarray(5, 4 + length)
    const message = (all[4] === 1 ? parse(body.toString('utf8')) : deserialize(body)) as Init | Call[]
    const rest = all.subarray(4 + length)
    chunks = rest.length > 0 ? [rest] : []
    buffered = rest.length
    if (!initialised) {
      initialised = true
      void start(message as Init)
      continue
    }
    for (const call of message as Call[]) queue.push(call)
    if (!running) void runQueued()
  }
})
// The server closed its end, or ended: nothing will ever be asked of this process again.
calls.on('end', die)
calls.on('error', die)

send(Kind.Booted, 0)
