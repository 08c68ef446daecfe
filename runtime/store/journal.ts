// An append-only JSON-lines file with group commit: the durability primitive under the run
// history. A record is acknowledged (its append() resolves) only once its bytes were written
// and, unless `fsync: false`, fdatasync'ed. Appends that arrive while a flush is on disk wait
// for the next one, which writes all of them with one write call and one fdatasync, so many
// concurrent requests pay for one disk round trip between them (latency, not throughput).
//
// Failure model: a failed write or fdatasync rejects every append of that flush and fails the
// journal for good (every later append rejects with the same cause). After a failed fsync the
// kernel may already have dropped the dirty pages, so retrying could acknowledge records that
// are not on disk; restarting the process re-reads the file and repairs a torn tail on open.
import { close, closeSync, existsSync, fdatasync, fstatSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readSync, renameSync, rmSync, write, writeSync } from 'node:fs'
import { dirname, resolve } from 'node:path'

/** One record's line (JSON text plus its newline) may not exceed this. */
export const MAX_LINE_BYTES = 1024 * 1024

const NEWLINE = 0x0a
const READ_CHUNK_BYTES = 1024 * 1024

export interface JournalOptions {
  /** default true; false = no fdatasync (benchmarks, throwaway state): a crash of the machine may lose acknowledged records */
  fsync?: boolean
}

export interface JournalStats {
  /** append() calls that were accepted (queued) */
  appends: number
  /** batches written (one write call each) */
  flushes: number
  /** fdatasync calls */
  fsyncs: number
}

export interface JournalReadResult<R> {
  records: R[]
  /** 1 when the last line was incomplete or not JSON (a write cut short by a crash), else 0 */
  torn: number
  /** lines before the last one that were not a JSON object (skipped) */
  corrupt: number
}

export type JournalErrorCode = 'record_too_large' | 'record_not_serialisable' | 'journal_closed' | 'journal_failed'

export class JournalError extends Error {
  readonly code: JournalErrorCode
  constructor(code: JournalErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'JournalError'
    this.code = code
  }
}

/** The appends waiting for the next flush: their lines, and one promise they all share. */
interface Batch {
  lines: string[]
  promise: Promise<void>
  resolve: () => void
  reject: (err: Error) => void
}

function newBatch(): Batch {
  let resolve!: () => void
  let reject!: (err: Error) => void
  const promise = new Promise<void>((res, rej) => { resolve = res; reject = rej })
  // A caller that gave up on its append must not turn a failed flush into an unhandled rejection.
  promise.catch(() => {})
  return { lines: [], promise, resolve, reject }
}

export class Journal<R extends object> {
  readonly path: string
  readonly stats: JournalStats = { appends: 0, flushes: 0, fsyncs: 0 }
  /** bytes of a torn last line that open() cut off (0 when the file ended cleanly) */
  readonly repairedBytes: number

  private readonly fd: number
  private readonly fsync: boolean
  /** the appends since the last flush started; null when there are none */
  private queue: Batch | null = null
  /** the current flush loop, awaited by close() */
  private flushing: Promise<void> = Promise.resolve()
  private flushActive = false
  private flushScheduled = false
  private failure: Error | null = null
  private closing = false
  private closed: Promise<void> | null = null

  private constructor(path: string, fd: number, fsync: boolean, repairedBytes: number) {
    this.path = path
    this.fd = fd
    this.fsync = fsync
    this.repairedBytes = repairedBytes
  }

  /** Opens (creating if needed) the journal at `path` and cuts a torn last line back to the last newline. */
  static open<R extends object>(path: string, options: JournalOptions = {}): Journal<R> {
    const fsync = options.fsync !== false
    const file = resolve(path)
    const dir = dirname(file)
    const firstCreatedDir = mkdirSync(dir, { recursive: true, mode: 0o700 })
    const existed = existsSync(file)
    const fd = openSync(file, 'a+', 0o600)
    let repairedBytes = 0
    try {
      repairedBytes = repairTornTail(fd, fsync)
      if (fsync && !existed) syncDirectories(dir, firstCreatedDir)
    } catch (err) {
      closeSync(fd)
      throw err
    }
    return new Journal<R>(file, fd, fsync, repairedBytes)
  }

  /**
   * Queues the records and resolves once all of them are written (and fdatasync'ed). The records
   * of one call are written together or not at all: a record that cannot be serialised or whose
   * line exceeds MAX_LINE_BYTES rejects the whole call before anything is queued.
   */
  append(...records: R[]): Promise<void> {
    if (this.closing) return Promise.reject(new JournalError('journal_closed', `journal ${this.path} is closed`))
    if (this.failure) return Promise.reject(this.failedError())
    let lines: string[]
    try {
      lines = records.map(serialise)
    } catch (err) {
      return Promise.reject(err)
    }
    this.stats.appends += 1
    if (lines.length === 0) return Promise.resolve()
    // Appends between two flushes share one batch, one write, one fdatasync and one promise: the
    // hot path allocates a line per record and nothing per append.
    const batch = this.queue ?? (this.queue = newBatch())
    for (const line of lines) batch.lines.push(line)
    this.scheduleFlush()
    return batch.promise
  }

  /** Waits for every queued append, then closes the file. Safe to call more than once. */
  close(): Promise<void> {
    if (this.closed) return this.closed
    this.closing = true
    this.closed = (async () => {
      while (this.flushActive || this.queue !== null) {
        if (this.flushActive) await this.flushing
        else this.scheduleFlush(true)
      }
      await new Promise<void>((res, rej) => close(this.fd, (err) => (err && !this.failure ? rej(err) : res())))
    })()
    return this.closed
  }

  /**
   * Reads every complete record. Never throws for bad content: a last line without its newline,
   * or one that is not a JSON object, counts as `torn`; such a line anywhere else as `corrupt`.
   * A missing file reads as empty. Memory stays bounded per line even for a garbage file.
   */
  static read<R>(path: string): JournalReadResult<R> {
    const out: JournalReadResult<R> = { records: [], torn: 0, corrupt: 0 }
    let fd: number
    try {
      fd = openSync(path, 'r')
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return out
      throw err
    }
    try {
      const chunk = Buffer.allocUnsafe(READ_CHUNK_BYTES)
      let pieces: Buffer[] = []
      let pieceBytes = 0
      let oversized = false
      // An unparsable complete line is torn if it turns out to be the last one, corrupt otherwise.
      let pendingBad = false
      const takeLine = (line: Buffer | null): void => {
        if (pendingBad) { out.corrupt += 1; pendingBad = false }
        const record = line === null ? undefined : parseRecord<R>(line)
        if (record === undefined) {
          if (line === null || !isBlank(line)) pendingBad = true
        } else {
          out.records.push(record)
        }
      }
      for (;;) {
        const n = readSync(fd, chunk, 0, chunk.length, null)
        if (n === 0) break
        const view = chunk.subarray(0, n)
        let start = 0
        for (let nl = view.indexOf(NEWLINE, start); nl !== -1; nl = view.indexOf(NEWLINE, start)) {
          const segment = view.subarray(start, nl)
          if (oversized || pieceBytes + segment.length > MAX_LINE_BYTES) takeLine(null)
          else takeLine(pieces.length === 0 ? segment : Buffer.concat([...pieces, segment]))
          pieces = []
          pieceBytes = 0
          oversized = false
          start = nl + 1
        }
        if (start < n) {
          pieceBytes += n - start
          if (pieceBytes > MAX_LINE_BYTES) { oversized = true; pieces = [] }
          if (!oversized) pieces.push(Buffer.from(view.subarray(start))) // copy: the chunk is reused
        }
      }
      if (pieceBytes > 0) {
        // the file ends without a newline: whatever precedes it was complete
        if (pendingBad) out.corrupt += 1
        out.torn += 1
      } else if (pendingBad) {
        out.torn += 1
      }
    } finally {
      closeSync(fd)
    }
    return out
  }

  /**
   * Replaces the file at `path` with `records`, whole or not at all: written beside it, fsync'ed,
   * renamed over it, the directory fsync'ed. For compaction at start-up, before a journal holds the
   * file open. Sync: start-up only. Returns the new size in bytes.
   */
  static rewrite(path: string, records: Iterable<object>, options: JournalOptions = {}): number {
    const sync = options.fsync !== false
    const tmp = `${path}.rewriting`
    let fd: number | undefined
    let size = 0
    try {
      fd = openSync(tmp, 'w', 0o600)
      let lines: string[] = []
      let chars = 0
      const flush = (): void => {
        const bytes = Buffer.from(lines.join(''), 'utf8')
        for (let off = 0; off < bytes.length;) off += writeSync(fd!, bytes, off, bytes.length - off)
        size += bytes.length
        lines = []
        chars = 0
      }
      for (const record of records) {
        const line = serialise(record)
        lines.push(line)
        chars += line.length
        if (chars >= READ_CHUNK_BYTES) flush()
      }
      flush()
      if (sync) fsyncSync(fd)
      closeSync(fd)
      fd = undefined
      renameSync(tmp, path)
    } catch (err) {
      if (fd !== undefined) closeSync(fd)
      rmSync(tmp, { force: true })
      throw err
    }
    if (sync) syncDirectories(dirname(path), undefined)
    return size
  }

  private failedError(): JournalError {
    return new JournalError('journal_failed', `journal ${this.path} failed earlier and accepts no more records (${this.failure!.message}); restart to recover`, { cause: this.failure })
  }

  /** Starts a flush on the next microtask, so that a synchronous burst of appends shares the first one. */
  private scheduleFlush(now = false): void {
    if (this.flushActive || (this.flushScheduled && !now)) return
    this.flushScheduled = true
    const start = (): void => {
      this.flushScheduled = false
      if (this.flushActive || this.queue === null) return
      this.flushActive = true
      this.flushing = this.flushLoop()
    }
    if (now) start()
    else queueMicrotask(start)
  }

  /**
   * Writes batches until the queue is empty. `flushActive` drops in the same tick as the loop sees
   * an empty queue, so an append that lands right after always schedules a new flush.
   */
  private async flushLoop(): Promise<void> {
    try {
      while (this.queue !== null) await this.flushBatch()
    } finally {
      this.flushActive = false
    }
  }

  private async flushBatch(): Promise<void> {
    const batch = this.queue!
    this.queue = null
    if (this.failure) {
      batch.reject(this.failedError())
      return
    }
    try {
      const bytes = Buffer.from(batch.lines.length === 1 ? batch.lines[0]! : batch.lines.join(''), 'utf8')
      this.stats.flushes += 1
      await writeAll(this.fd, bytes)
      if (this.fsync) {
        this.stats.fsyncs += 1
        await new Promise<void>((res, rej) => fdatasync(this.fd, (err) => (err ? rej(err) : res())))
      }
    } catch (cause) {
      this.failure = cause instanceof Error ? cause : new Error(String(cause))
      batch.reject(new JournalError('journal_failed', `could not write to journal ${this.path}: ${this.failure.message}`, { cause }))
      return
    }
    batch.resolve()
  }
}

function serialise(record: unknown): string {
  let json: string | undefined
  try {
    json = JSON.stringify(record)
  } catch (err) {
    throw new JournalError('record_not_serialisable', `a journal record cannot be written as JSON: ${(err as Error).message}`)
  }
  if (json === undefined || record === null || typeof record !== 'object') {
    throw new JournalError('record_not_serialisable', 'a journal record must be a JSON object')
  }
  const line = json + '\n'
  // A UTF-16 unit is at most 3 bytes of UTF-8: short lines need no byte count.
  const size = line.length * 3 <= MAX_LINE_BYTES ? 0 : Buffer.byteLength(line, 'utf8')
  if (size > MAX_LINE_BYTES) {
    throw new JournalError('record_too_large', `a journal record of ${size} bytes exceeds the limit of ${MAX_LINE_BYTES} bytes per line`)
  }
  return line
}

function parseRecord<R>(line: Buffer): R | undefined {
  try {
    const value: unknown = JSON.parse(line.toString('utf8'))
    return value !== null && typeof value === 'object' ? (value as R) : undefined
  } catch {
    return undefined
  }
}

function isBlank(line: Buffer): boolean {
  for (const b of line) if (b !== 0x20 && b !== 0x09 && b !== 0x0d) return false
  return true
}

/** Writes the whole buffer; one write call unless the kernel accepts fewer bytes. */
function writeAll(fd: number, bytes: Buffer): Promise<void> {
  return new Promise((res, rej) => {
    let offset = 0
    const step = (): void => {
      write(fd, bytes, offset, bytes.length - offset, null, (err, written) => {
        if (err) return rej(err)
        if (written === 0) return rej(new Error('the file accepted no more bytes'))
        offset += written
        if (offset >= bytes.length) res()
        else step()
      })
    }
    step()
  })
}

/** Cuts a partial last line (a write cut short by a crash) so the next append starts a fresh line. */
function repairTornTail(fd: number, fsync: boolean): number {
  const size = fstatSync(fd).size
  if (size === 0) return 0
  const last = Buffer.alloc(1)
  readSync(fd, last, 0, 1, size - 1)
  if (last[0] === NEWLINE) return 0
  const keep = lastNewlineOffset(fd, size) + 1
  ftruncateSync(fd, keep)
  if (fsync) fsyncSync(fd)
  return size - keep
}

/** Offset of the last newline in the file, or -1 when there is none. */
function lastNewlineOffset(fd: number, size: number): number {
  const chunk = Buffer.allocUnsafe(64 * 1024)
  let end = size
  while (end > 0) {
    const start = Math.max(0, end - chunk.length)
    const n = readSync(fd, chunk, 0, end - start, start)
    const i = chunk.subarray(0, n).lastIndexOf(NEWLINE)
    if (i !== -1) return start + i
    end = start
  }
  return -1
}

/** Makes a new file's directory entry (and any directories created for it) survive a power cut. */
function syncDirectories(dir: string, firstCreatedDir: string | undefined): void {
  const dirs = [dir]
  if (firstCreatedDir !== undefined) {
    for (let d = dir; d !== firstCreatedDir && dirname(d) !== d; d = dirname(d)) dirs.push(dirname(d))
  }
  for (const d of dirs) {
    let dfd: number | undefined
    try {
      dfd = openSync(d, 'r')
      fsyncSync(dfd)
    } catch {
      // some platforms and file systems cannot fsync a directory; the file's own data is still synced
    } finally {
      if (dfd !== undefined) closeSync(dfd)
    }
  }
}
