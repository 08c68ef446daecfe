// One transform process (the pool, pool.ts, runs several): how it is started (node under the
// permission model, reading only hookgate-worker and its transform module, an empty environment,
// through setpriv's parent-death signal where there is one), the frames read from its answer pipe
// (each checked: the process is the transform's, and the transform can write to that pipe too),
// its memory (read every MEMORY_SAMPLE_MS, killed past the cap) and what it prints (forwarded to
// the server's stdout and stderr, without V8's out-of-memory report).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { closeSync, existsSync, openSync, readSync, realpathSync } from 'node:fs'
import { extname } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { DefaultSerializer } from 'node:v8'
import { WORKER_MODULE } from '../bundle/format.js'

/** How often each child's memory is read; what a transform allocates within one interval is the cap's slack. */
export const MEMORY_SAMPLE_MS = 10

/** The largest answer frame read: the worker's 1 MiB cap on a value (MAX_OUTPUT_BYTES) and its header, with room. */
const MAX_ANSWER_BYTES = 1024 * 1024 + 4096
/** An error line from a child is cut to this (the worker cuts it to 200 already; a transform may write its own frames). */
const MAX_ERROR_CHARS = 200
/** A frame's length (filled in once known) and its kind, v8-serialized. */
const FRAME_HEAD_V8 = Buffer.from([0, 0, 0, 0, 2])
/** What a frame from a child says: the same numbers as Kind in hookgate-worker.ts. */
export const ANSWER = { booted: 1, ready: 2, fatal: 3, value: 4, threw: 5, invalid: 6, valueV8: 7 } as const

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

export interface ChildSpec {
  transformsFile: string
  env: Record<string, string>
  memoryMiB: number
  startDeadlineMs: number
}

export function realpath(file: string): string {
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
export interface ChildEvents {
  booted(): void
  ready(): void
  answer(kind: number, id: number, payload: Buffer): void
  /** the child is gone (or broke the protocol and was killed): why, as a line for the error */
  gone(reason: string): void
}

/** One transform process: its pipes, its frames, its memory. */
export class Child {
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
export function boundedLine(payload: Buffer): string {
  const line = payload.toString('utf8', 0, Math.min(payload.length, MAX_ERROR_CHARS * 4)).split('\n', 1)[0]!.trim()
  return line.length > MAX_ERROR_CHARS ? `${line.slice(0, MAX_ERROR_CHARS - 1)}…` : line
}
