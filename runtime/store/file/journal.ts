// An append-only JSON-lines file with group commit: the durability primitive under the run
// history. A record is acknowledged (its append() resolves) only once its bytes were written
// and, unless `fsync: false`, fdatasync'ed. Appends that arrive while a flush is on disk wait
// for the next one, which writes all of them with one write call and one fdatasync, so many
// concurrent requests pay for one disk round trip between them (latency, not throughput).
// Over 400 lines because the group commit, the large-record blobs and the failure model are one
// state machine over one file descriptor: split, each part would reach into the others' state.
//
// Large records: a record whose line would pass INLINE_MAX_BYTES is written whole into a
// content-addressed file beside the journal (`<path>.blobs/<sha256>`, synced, then its directory)
// and the journal holds a one-line stub naming it; read() puts the record back in its place. So
// any record the process can hold is recorded, and the journal's own lines stay small. Callers
// may also attach a blob of their own (attach()) to name it from a record, to load it lazily.
//
// Failure model: a failed write or fdatasync does not acknowledge or drop anything. The batch
// stays queued, the file is cut back to the last durable byte, and the whole batch is written and
// synced again with backoff until it succeeds: rewriting the bytes (rather than retrying only the
// fsync) is what makes a retry after a failed fsync safe, since the kernel may have dropped the
// dirty pages. Meanwhile `health` reports the cause, so the server can refuse new work (503)
// instead of queueing it. The rule: any write error is transient until proven otherwise. A full
// disk, a permission taken away (EACCES, EPERM: a blob's file cannot be created), a file system
// remounted read-only (EROFS) or an I/O error all end when an operator mends them, and the journal
// goes on by itself then, without a restart; the only proof of the contrary is a descriptor that
// is gone (EBADF), which no retry brings back. That, or close() while it cannot write, fails what
// is queued: rejected, never acknowledged.
//
// Over 400 lines because group commit, blobs, retry and read-back repair are one mechanism over one
// file descriptor and one durable offset; split apart they would each need the others' state.
import { createHash } from 'node:crypto'
import { close, closeSync, existsSync, fdatasync, fstatSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, statSync, write, writeSync, writev } from 'node:fs'
import { open as openAsync } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'

/** A record whose line (JSON text plus its newline) is longer than this is written as a blob. */
export const INLINE_MAX_BYTES = 512 * 1024
/** Lines read back are never longer than this (a stub or an inline record is far shorter). */
export const MAX_LINE_BYTES = 1024 * 1024
/** Retries of a failed flush wait this long at first, doubling up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 50
const RETRY_MAX_MS = 2000
/**
 * The errors that prove a retry useless: this journal's own descriptor is gone. Every other error
 * (ENOSPC, EDQUOT, EIO, EACCES, EPERM, EROFS, …, and one without a code) is retried until it ends.
 */
const PERMANENT = new Set(['EBADF'])

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
  /** flush attempts that failed (each was retried or, past mending, rejected) */
  failures: number
  /** records written as blobs beside the journal */
  blobs: number
}

/** What one flush attempt did, for metrics (Journal.onFlush). */
import type { FlushEvent } from '../store.js'
export type { FlushEvent } from '../store.js'

/** Whether the journal is writing; while not, since when and why. */
export type JournalHealth = { ok: true } | { ok: false; since: number; reason: string }

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

/** A record or an attachment written as a content-addressed file beside the journal. */
interface Blob { name: string; bytes: Buffer }

/** The appends waiting for the next flush: their lines, their blobs, and one promise they all share. */
interface Batch {
  /** serialised lines; a Buffer is a line appended as bytes (appendLine) */
  lines: (string | Buffer)[]
  /** whether any line is a Buffer (then the batch is written by concatenating bytes) */
  bytesLines: boolean
  blobs: Blob[]
  records: number
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
  return { lines: [], bytesLines: false, blobs: [], records: 0, promise, resolve, reject }
}

export class Journal<R extends object> {
  /** called after every flush attempt (metrics); must not throw */
  static onFlush: ((e: FlushEvent) => void) | undefined

  readonly path: string
  readonly stats: JournalStats = { appends: 0, flushes: 0, fsyncs: 0, failures: 0, blobs: 0 }
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
  /** set when an error no retry can mend failed the journal for good */
  private failure: Error | null = null
  /** set while flushes fail and are being retried */
  private trouble: { since: number; reason: string } | null = null
  private closing = false
  private closed: Promise<void> | null = null
  /** bytes of the file known to be written and synced: a failed flush is cut back to here */
  private size: number
  private blobDirReady = false

  private constructor(path: string, fd: number, fsync: boolean, repairedBytes: number, size: number) {
    this.path = path
    this.fd = fd
    this.fsync = fsync
    this.repairedBytes = repairedBytes
    this.size = size
  }

  /** whether close() was called: a closed journal takes no more appends */
  get isClosed(): boolean {
    return this.closing
  }

  get health(): JournalHealth {
    if (this.failure) return { ok: false, since: 0, reason: `cannot write ${this.path}: ${this.failure.message}` }
    if (this.trouble) return { ok: false, since: this.trouble.since, reason: this.trouble.reason }
    return { ok: true }
  }

  /** The folder of this journal's blobs. */
  static blobDir(path: string): string {
    return `${resolve(path)}.blobs`
  }

  /** The content address of a blob's bytes. */
  static blobName(bytes: Buffer): string {
    return createHash('sha256').update(bytes).digest('hex')
  }

  /** A blob's bytes (sync: start-up and the CLI); throws when it is missing. */
  static readBlob(path: string, name: string): Buffer {
    if (!/^[0-9a-f]{64}$/.test(name)) throw new JournalError('record_not_serialisable', `not a blob name: ${name.slice(0, 80)}`)
    return readFileSync(join(Journal.blobDir(path), name))
  }

  /** Bytes on disk: the journal and its blobs (what start-up compaction weighs). */
  static diskBytes(path: string): number {
    let total = 0
    try { total += statSync(path).size } catch { return 0 }
    const dir = Journal.blobDir(path)
    let names: string[] = []
    try { names = readdirSync(dir) } catch { return total }
    for (const n of names) {
      try { total += statSync(join(dir, n)).size } catch { /* removed meanwhile */ }
    }
    return total
  }

  /**
   * Removes blobs no longer named (after a compaction rewrote the journal): `keep` holds the
   * names still in use beside the stubs of the file itself. Sync: start-up only.
   */
  static sweepBlobs(path: string, keep: ReadonlySet<string> = new Set()): number {
    const dir = Journal.blobDir(path)
    let names: string[]
    try { names = readdirSync(dir) } catch { return 0 }
    const named = new Set(keep)
    for (const stub of readStubNames(path)) named.add(stub)
    let removed = 0
    for (const n of names) {
      if (named.has(n)) continue
      rmSync(join(dir, n), { force: true })
      removed++
    }
    return removed
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
    let size = 0
    try {
      repairedBytes = repairTornTail(fd, fsync)
      size = fstatSync(fd).size
      if (fsync && !existed) syncDirectories(dir, firstCreatedDir)
    } catch (err) {
      closeSync(fd)
      throw err
    }
    return new Journal<R>(file, fd, fsync, repairedBytes, size)
  }

  /**
   * Queues the records and resolves once all of them are written (and fdatasync'ed). The records
   * of one call are written together or not at all: a record that cannot be serialised rejects
   * the whole call before anything is queued. A record too long for a line goes into a blob.
   */
  append(...records: R[]): Promise<void> {
    if (this.closing) return Promise.reject(new JournalError('journal_closed', `journal ${this.path} is closed`))
    if (this.failure) return Promise.reject(this.failedError())
    let lines: string[]
    let blobs: Blob[] | undefined
    try {
      lines = records.map(serialise)
      for (let i = 0; i < lines.length; i++) {
        const line = lines[i]!
        // A UTF-16 unit is at most 3 bytes of UTF-8: short lines need no byte count.
        if (line.length * 3 <= INLINE_MAX_BYTES || Buffer.byteLength(line, 'utf8') <= INLINE_MAX_BYTES) continue
        const bytes = Buffer.from(line, 'utf8')
        const name = Journal.blobName(bytes)
        ;(blobs ??= []).push({ name, bytes })
        lines[i] = `{"$blob":"${name}","bytes":${bytes.length}}\n`
      }
    } catch (err) {
      return Promise.reject(err)
    }
    this.stats.appends += 1
    if (lines.length === 0) return Promise.resolve()
    // Appends between two flushes share one batch, one write, one fdatasync and one promise: the
    // hot path allocates a line per record and nothing per append.
    const batch = this.queue ?? (this.queue = newBatch())
    for (const line of lines) batch.lines.push(line)
    if (blobs) for (const b of blobs) batch.blobs.push(b)
    batch.records += lines.length
    this.scheduleFlush()
    return batch.promise
  }

  /**
   * Queues one record given as its serialised JSON, in pieces (text and bytes) that concatenate to
   * one JSON object without a line break, and resolves like append(). For a record that holds a
   * large JSON text received as bytes (a request body): splicing those bytes in costs a copy, where
   * serialising the parsed value again cost a walk, an escape pass and a UTF-8 encoding of it. The
   * caller vouches for the pieces; a line too long goes into a blob as append() does.
   */
  appendLine(pieces: readonly (string | Buffer)[]): Promise<void> {
    if (this.closing) return Promise.reject(new JournalError('journal_closed', `journal ${this.path} is closed`))
    if (this.failure) return Promise.reject(this.failedError())
    const parts: Buffer[] = []
    let length = 0
    for (const p of pieces) {
      const b = typeof p === 'string' ? Buffer.from(p, 'utf8') : p
      parts.push(b)
      length += b.length
    }
    parts.push(NEWLINE_BYTES)
    length += 1
    const batch = this.queue ?? (this.queue = newBatch())
    if (length > INLINE_MAX_BYTES) {
      const line = Buffer.concat(parts, length)
      const name = Journal.blobName(line)
      batch.blobs.push({ name, bytes: line })
      batch.lines.push(`{"$blob":"${name}","bytes":${line.length}}\n`)
    } else {
      // the pieces go to the file as they are, with the batch's one writev
      for (const b of parts) batch.lines.push(b)
      batch.bytesLines = true
    }
    this.stats.appends += 1
    batch.records += 1
    this.scheduleFlush()
    return batch.promise
  }

  /**
   * Queues `bytes` as a blob written (and synced) no later than the records appended after it in
   * the same tick, and returns its name, for a record to refer to (RunStore's large requests).
   */
  attach(bytes: Buffer): string {
    const name = Journal.blobName(bytes)
    const batch = this.queue ?? (this.queue = newBatch())
    batch.blobs.push({ name, bytes })
    return name
  }

  /**
   * Waits for every queued append, then closes the file. Safe to call more than once. While the
   * journal cannot write, what is still queued is rejected rather than waited for.
   */
  close(): Promise<void> {
    if (this.closed) return this.closed
    this.closing = true
    this.wakeRetry?.()
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
    const blobDir = Journal.blobDir(path)
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
        const record = line === null ? undefined : resolveStub<R>(parseRecord<R>(line), blobDir)
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
        let line = serialise(record)
        if (line.length * 3 > INLINE_MAX_BYTES && Buffer.byteLength(line, 'utf8') > INLINE_MAX_BYTES) line = writeBlobSync(path, Buffer.from(line, 'utf8'), sync)
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

  /** ends the current retry wait early (close) */
  private wakeRetry: (() => void) | undefined

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
    const chunks = batchBytes(batch)
    let length = 0
    for (const c of chunks) length += c.length
    const bytes = { length }
    let delay = RETRY_FIRST_MS
    for (let attempt = 0; ; attempt++) {
      if (this.failure) {
        batch.reject(this.failedError())
        return
      }
      let writeSeconds = 0
      let fsyncSeconds = 0
      try {
        const t0 = performance.now()
        // Whatever part of a failed attempt reached the file is cut off: the batch is written whole.
        if (attempt > 0) ftruncateSync(this.fd, this.size)
        if (batch.blobs.length > 0) await this.writeBlobs(batch.blobs)
        this.stats.flushes += 1
        if (length > 0) await writeChunks(this.fd, chunks)
        const t1 = performance.now()
        if (this.fsync && bytes.length > 0) {
          this.stats.fsyncs += 1
          await new Promise<void>((res, rej) => fdatasync(this.fd, (err) => (err ? rej(err) : res())))
        }
        writeSeconds = (t1 - t0) / 1000
        fsyncSeconds = (performance.now() - t1) / 1000
      } catch (cause) {
        const err = cause instanceof Error ? cause : new Error(String(cause))
        this.stats.failures += 1
        Journal.onFlush?.({ path: this.path, writeSeconds, fsyncSeconds, bytes: bytes.length, records: batch.records, ok: false, error: (err as NodeJS.ErrnoException).code ?? err.message })
        const code = (err as NodeJS.ErrnoException).code ?? ''
        if (PERMANENT.has(code)) {
          this.failure = err
          batch.reject(new JournalError('journal_failed', `could not write to journal ${this.path}: ${err.message}`, { cause }))
          return
        }
        // since the first failure; why: the latest (a full disk mended may leave a permission to mend)
        this.trouble = { since: this.trouble?.since ?? Date.now(), reason: `cannot write ${this.path}: ${err.message}` }
        if (this.closing) {
          batch.reject(new JournalError('journal_failed', `journal ${this.path} closed while it could not write (${err.message}); nothing of this batch was acknowledged`, { cause }))
          return
        }
        await new Promise<void>((res) => {
          const timer = setTimeout(() => { this.wakeRetry = undefined; res() }, delay)
          this.wakeRetry = () => { clearTimeout(timer); this.wakeRetry = undefined; res() }
        })
        delay = Math.min(delay * 2, RETRY_MAX_MS)
        continue
      }
      this.size += bytes.length
      this.trouble = null
      Journal.onFlush?.({ path: this.path, writeSeconds, fsyncSeconds, bytes: bytes.length, records: batch.records, ok: true })
      batch.resolve()
      return
    }
  }

  /** Each blob whole in its own file (written beside, synced, renamed), then the folder synced once. */
  private async writeBlobs(blobs: Blob[]): Promise<void> {
    const dir = Journal.blobDir(this.path)
    if (!this.blobDirReady) {
      mkdirSync(dir, { recursive: true, mode: 0o700 })
      if (this.fsync) syncDirectories(dirname(dir), undefined)
      this.blobDirReady = true
    }
    for (const blob of blobs) {
      const file = join(dir, blob.name)
      try {
        if (statSync(file).size === blob.bytes.length) continue // the same content, written before
      } catch { /* not there yet */ }
      const tmp = `${file}.${process.pid}.tmp`
      const handle = await openAsync(tmp, 'w', 0o600)
      try {
        for (let off = 0; off < blob.bytes.length;) off += (await handle.write(blob.bytes, off, blob.bytes.length - off)).bytesWritten
        if (this.fsync) await handle.datasync()
      } catch (err) {
        await handle.close().catch(() => {})
        rmSync(tmp, { force: true })
        throw err
      }
      await handle.close()
      renameSync(tmp, file)
      this.stats.blobs += 1
    }
    if (this.fsync) syncDirectories(dir, undefined)
  }
}

const NEWLINE_BYTES = Buffer.from('\n')

/** A stub line's record, read back from its blob; anything else as it is. Unreadable → undefined. */
function resolveStub<R>(record: R | undefined, blobDir: string): R | undefined {
  if (record === undefined) return undefined
  const stub = record as { $blob?: unknown }
  if (typeof stub.$blob !== 'string') return record
  if (!/^[0-9a-f]{64}$/.test(stub.$blob)) return undefined
  try {
    return parseRecord<R>(readFileSync(join(blobDir, stub.$blob)))
  } catch {
    return undefined
  }
}

/** The blob names a journal's stub lines refer to. */
function readStubNames(path: string): string[] {
  const names: string[] = []
  let text: string
  try { text = readFileSync(path, 'utf8') } catch { return names }
  for (const m of text.matchAll(/^\{"\$blob":"([0-9a-f]{64})"/gm)) names.push(m[1]!)
  return names
}

/** For rewrite(): the blob written (sync) and the stub line that names it. */
function writeBlobSync(path: string, bytes: Buffer, sync: boolean): string {
  const dir = Journal.blobDir(path)
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const name = Journal.blobName(bytes)
  const file = join(dir, name)
  let present = false
  try { present = statSync(file).size === bytes.length } catch { /* not there */ }
  if (!present) {
    const tmp = `${file}.${process.pid}.tmp`
    const fd = openSync(tmp, 'w', 0o600)
    try {
      for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, bytes.length - off)
      if (sync) fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(tmp, file)
    if (sync) syncDirectories(dir, undefined)
  }
  return `{"$blob":"${name}","bytes":${bytes.length}}\n`
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
  return json + '\n'
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

/**
 * A batch's bytes: its text lines as one buffer, or, when some lines were appended as bytes, runs
 * of text lines as one buffer each between those (written with one writev, not copied together).
 */
function batchBytes(batch: Batch): Buffer[] {
  const lines = batch.lines
  if (lines.length === 0) return []
  if (!batch.bytesLines) return [Buffer.from(lines.length === 1 ? lines[0] as string : lines.join(''), 'utf8')]
  const out: Buffer[] = []
  let text: string[] = []
  for (const line of lines) {
    if (typeof line === 'string') { text.push(line); continue }
    if (text.length > 0) { out.push(Buffer.from(text.join(''), 'utf8')); text = [] }
    out.push(line)
  }
  if (text.length > 0) out.push(Buffer.from(text.join(''), 'utf8'))
  return out
}

/** Writes the buffers in order, with one writev unless the kernel accepts fewer bytes. */
function writeChunks(fd: number, chunks: Buffer[]): Promise<void> {
  if (chunks.length === 1) return writeAll(fd, chunks[0]!)
  return new Promise((res, rej) => {
    let left = chunks
    const step = (): void => {
      writev(fd, left, null, (err, written) => {
        if (err) return rej(err)
        if (written === 0) return rej(new Error('the file accepted no more bytes'))
        // drop what was written: whole buffers, then the front of a partly written one
        let i = 0
        while (i < left.length && written >= left[i]!.length) written -= left[i++]!.length
        if (i >= left.length) return res()
        left = [left[i]!.subarray(written), ...left.slice(i + 1)]
        step()
      })
    }
    step()
  })
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
