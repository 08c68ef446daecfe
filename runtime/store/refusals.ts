// The rejected-request log's aggregation, the same for every store: refusals are gathered per
// (client address, path, status, code) and minute. The first of a minute creates a bucket, whose
// record is written within FLUSH_MS; repeats only bump the bucket's count, written once when the
// minute closes, the bucket is evicted (at most `maxBuckets` live), or the log is flushed or
// closed. Each write is the whole record again under the bucket's id; the reader keeps the last one
// per id. So 100,000 refusals from one address in one minute cost two records, and a flood never
// becomes a flood of writes. Where the records go is the store's (a file, a table).
import { randomBytes } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { isJwtValue, isSecretHeader } from '../bundle/template-helpers.js'
import type { RefusalRecorder, RejectRecord } from './store.js'

/** buckets held in memory at once; the oldest is written and dropped to make room */
export const DEFAULT_MAX_BUCKETS = 1024
/** how long the first refusal of a bucket waits to be written with others */
export const DEFAULT_FLUSH_MS = 200
/** records waiting while a write is stuck (a full disk); past it the oldest are dropped */
const MAX_PENDING = 4096
export const MAX_PATH_CHARS = 256
export const MAX_HEADERS = 32
export const MAX_HEADER_NAME_CHARS = 64
export const MAX_HEADER_VALUE_CHARS = 256
const MAX_METHOD_CHARS = 16
const REDACTED = '[redacted]'
const MINUTE_MS = 60_000

/** A value that carries a credential whatever its header is called (`X-Upstream: Bearer …`). */
const CREDENTIAL_VALUE = /^\s*(?:bearer|basic|digest|token|negotiate)\s/i

export interface RefusalOptions {
  maxBuckets?: number
  flushMs?: number
  /** the clock (tests) */
  now?: () => number
  /** told once about the first write error (the log keeps trying) */
  warn?: (message: string) => void
}

export interface RefusalStats {
  /** refusals noted */
  noted: number
  /** records written */
  written: number
  /** records dropped because writes were stuck */
  dropped: number
  writeErrors: number
  /** file store: segments rotated */
  rotations: number
}

/** What the handler hands over: only the refusal path calls it (see createHandler's `fail`). */

interface Bucket {
  key: string
  id: string
  minute: number
  firstMs: number
  lastMs: number
  count: number
  /** the count last handed to a write */
  written: number
  queued: boolean
  method: string
  path: string
  client: string
  status: number
  code: string
  headers: Record<string, string>
  headersOmitted: number
  body: string | undefined
}

export abstract class RefusalBuckets implements RefusalRecorder {
  readonly stats: RefusalStats = { noted: 0, written: 0, dropped: 0, writeErrors: 0, rotations: 0 }
  private readonly maxBuckets: number
  private readonly flushMs: number
  private readonly now: () => number
  private readonly warn: (message: string) => void
  private readonly buckets = new Map<string, Bucket>()
  private pending: Bucket[] = []
  private flushTimer: NodeJS.Timeout | null = null
  private minuteTimer: NodeJS.Timeout | null = null
  private writing: Promise<void> | null = null
  private warned = false
  protected closed = false
  /** ids are this process's random prefix and a counter: unique across restarts, cheap to make */
  private readonly idPrefix = randomBytes(4).toString('hex')
  private nextId = 0

  protected constructor(options: RefusalOptions) {
    this.maxBuckets = Math.max(1, options.maxBuckets ?? DEFAULT_MAX_BUCKETS)
    this.flushMs = options.flushMs ?? DEFAULT_FLUSH_MS
    this.now = options.now ?? Date.now
    this.warn = options.warn ?? (() => {})
  }

  /** aggregation buckets held in memory now (at most maxBuckets) */
  get heldBuckets(): number {
    return this.buckets.size
  }

  /**
   * Counts one refusal. Hot path under a flood: a repeat costs a key, a Map lookup and a count.
   * Do not add header walks, JSON or date formatting for repeats here.
   */
  note(client: string, path: string, status: number, code: string, method: string, headers: IncomingHttpHeaders | undefined, body: string | undefined): void {
    if (this.closed) return
    this.stats.noted++
    const now = this.now()
    const minute = Math.floor(now / MINUTE_MS)
    const cut = path.length > MAX_PATH_CHARS ? path.slice(0, MAX_PATH_CHARS) : path
    const key = `${client}\u0000${cut}\u0000${status}\u0000${code}`
    const found = this.buckets.get(key)
    if (found !== undefined) {
      if (found.minute === minute) {
        found.count++
        found.lastMs = now
        return
      }
      this.retire(found)
    }
    if (this.buckets.size >= this.maxBuckets) this.retire(this.buckets.values().next().value!)
    const { kept, omitted } = redactHeaders(headers)
    const bucket: Bucket = {
      key, id: `${this.idPrefix}-${(this.nextId++).toString(36)}`, minute, firstMs: now, lastMs: now, count: 1, written: 0, queued: false,
      method: method.length > MAX_METHOD_CHARS ? method.slice(0, MAX_METHOD_CHARS) : method,
      path: cut, client, status, code, headers: kept, headersOmitted: omitted, body,
    }
    this.buckets.set(key, bucket)
    this.enqueue(bucket)
    this.armMinuteTimer(now)
  }

  /** Writes what is waiting: new buckets and the counts of minutes that closed. Never rejects. */
  async flush(): Promise<void> {
    this.closeMinutes(this.now())
    if (this.flushTimer) { clearTimeout(this.flushTimer); this.flushTimer = null }
    while (this.writing) await this.writing
    if (this.pending.length === 0) return
    const batch = this.pending
    this.pending = []
    const records = batch.map((b) => {
      b.queued = false
      b.written = b.count
      return toRecord(b)
    })
    this.writing = this.write(records).finally(() => {
      this.writing = null
      if (this.pending.length > 0) this.scheduleFlush()
    })
    await this.writing
  }

  /** Writes every count still held (the current minute's too), then closes the file. */
  async close(): Promise<void> {
    if (this.closed) return
    for (const b of this.buckets.values()) if (b.count > b.written) this.enqueue(b)
    this.buckets.clear()
    this.closed = true
    if (this.minuteTimer) { clearTimeout(this.minuteTimer); this.minuteTimer = null }
    // A write stuck retrying (a full disk) would hold the flush below forever: closing gives it up.
    this.abandonStuckWrite()
    await this.flush()
    await this.closeSink().catch(() => {})
  }

  /** A bucket leaves memory: its unwritten count is queued for the next write. */
  private retire(b: Bucket): void {
    this.buckets.delete(b.key)
    if (b.count > b.written) this.enqueue(b)
  }

  private enqueue(b: Bucket): void {
    if (b.queued) return
    if (this.pending.length >= MAX_PENDING) {
      const dropped = this.pending.shift()!
      dropped.queued = false
      this.stats.dropped++
    }
    b.queued = true
    this.pending.push(b)
    this.scheduleFlush()
  }

  private scheduleFlush(): void {
    if (this.flushTimer || this.closed) return
    this.flushTimer = setTimeout(() => { this.flushTimer = null; void this.flush() }, this.flushMs)
    this.flushTimer.unref()
  }

  private closeMinutes(now: number): void {
    const minute = Math.floor(now / MINUTE_MS)
    for (const b of this.buckets.values()) if (b.minute < minute) this.retire(b)
  }

  private armMinuteTimer(now: number): void {
    if (this.minuteTimer || this.closed) return
    this.minuteTimer = setTimeout(() => {
      this.minuteTimer = null
      this.closeMinutes(this.now())
      if (this.buckets.size > 0) this.armMinuteTimer(this.now())
    }, MINUTE_MS - (now % MINUTE_MS) + 50)
    this.minuteTimer.unref()
  }

  private async write(records: RejectRecord[]): Promise<void> {
    try {
      await this.writeRecords(records)
      this.stats.written += records.length
    } catch (err) {
      this.stats.writeErrors++
      this.stats.dropped += records.length
      if (!this.warned) {
        this.warned = true
        this.warn(`cannot write the rejected-request log ${this.where}: ${(err as Error).message} (refusals still answer; records are dropped until it can write)`)
      }
      if (!this.closed) this.afterWriteError()
    }
  }

  /** Writes the records (the whole record again for a bucket already written); rejects when it cannot. */
  protected abstract writeRecords(records: RejectRecord[]): Promise<void>
  /** Where the log is, for the one warning about a write that failed. */
  protected abstract readonly where: string
  /** After a failed write: whatever lets the next one try afresh. */
  protected afterWriteError(): void {}
  /** At close, a write that cannot finish (a full disk) is given up rather than waited for. */
  protected abandonStuckWrite(): void {}
  protected abstract closeSink(): Promise<void>
}

/** The first request's headers as recorded: secrets redacted by name (and by a credential-looking value), all cut to bounds. */
export function redactHeaders(headers: IncomingHttpHeaders | undefined): { kept: Record<string, string>; omitted: number } {
  const kept: Record<string, string> = Object.create(null)
  let n = 0
  let omitted = 0
  if (headers === undefined) return { kept, omitted }
  for (const name in headers) {
    const raw = headers[name]
    if (raw === undefined) continue
    if (n >= MAX_HEADERS) { omitted++; continue }
    n++
    const value = Array.isArray(raw) ? raw.join(', ') : String(raw)
    const shown = isSecretHeader(name) || CREDENTIAL_VALUE.test(value) || isJwtValue(value) ? REDACTED : value.length > MAX_HEADER_VALUE_CHARS ? `${value.slice(0, MAX_HEADER_VALUE_CHARS)}…` : value
    kept[name.length > MAX_HEADER_NAME_CHARS ? name.slice(0, MAX_HEADER_NAME_CHARS) : name] = shown
  }
  return { kept, omitted }
}

function toRecord(b: Bucket): RejectRecord {
  const r: RejectRecord = {
    id: b.id, firstAt: new Date(b.firstMs).toISOString(), lastAt: new Date(b.lastMs).toISOString(), count: b.count,
    method: b.method, path: b.path, client: b.client, status: b.status, code: b.code, headers: b.headers,
  }
  if (b.headersOmitted > 0) r.headersOmitted = b.headersOmitted
  if (b.body !== undefined) r.body = b.body
  return r
}

/** Records as a log holds them (the whole record again per write), folded to the last per bucket, newest first. */
export function foldRejects(all: readonly unknown[]): { records: RejectRecord[]; corrupt: number } {
  const byId = new Map<string, RejectRecord>()
  let corrupt = 0
  for (const r of all) {
    if (!isRecord(r)) { corrupt++; continue }
    const before = byId.get(r.id)
    if (before === undefined || before.count <= r.count) byId.set(r.id, r)
  }
  // later in the log is newer: reversed first, so the stable sort keeps that order among equal times
  const records = [...byId.values()].reverse().sort((a, b) => (a.lastAt === b.lastAt ? cmp(b.firstAt, a.firstAt) : cmp(b.lastAt, a.lastAt)))
  return { records, corrupt }
}

function isRecord(r: unknown): r is RejectRecord {
  if (r === null || typeof r !== 'object') return false
  const o = r as Record<string, unknown>
  return typeof o.id === 'string' && typeof o.count === 'number' && typeof o.firstAt === 'string' && typeof o.lastAt === 'string' && typeof o.status === 'number'
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}
