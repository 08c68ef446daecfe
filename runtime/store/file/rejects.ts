// The rejected-request log of the file store: every refused request (a 4xx answer: 400, 401,
// 404, 405, 408, 413, 415, 429, 431, …) as a record in the state directory, so an operator can see
// why a sender is refused (`hookgate rejects`). The per-minute aggregation is the stores' common
// one (runtime/store/refusals.ts); this is where its records go, and how they are read back.
//
// Not an acknowledgement, so no fsync (Journal `fsync: false`): a power cut may lose the last
// seconds of it, which is worth more than a disk round trip competing with the run store's group
// commit. A write never fails or slows a request: errors are counted and reported once.
//
// Bounded on disk by two segments: `rejects.jsonl` is appended to until it passes `segmentBytes`
// (default 4 MiB), then renamed over `rejects.1.jsonl`, dropping the older segment's records.
import { renameSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { Journal } from './journal.js'
import { RefusalBuckets, foldRejects, type RefusalOptions } from '../refusals.js'
import type { RejectRecord } from '../store.js'

export type { RejectRecord } from '../store.js'
export { DEFAULT_FLUSH_MS, DEFAULT_MAX_BUCKETS, MAX_HEADER_NAME_CHARS, MAX_HEADER_VALUE_CHARS, MAX_HEADERS, MAX_PATH_CHARS, redactHeaders } from '../refusals.js'

export const REJECTS_FILE = 'rejects.jsonl'
/** the older segment: the newest records are always in REJECTS_FILE */
export const REJECTS_OLDER_FILE = 'rejects.1.jsonl'
/** a segment is rotated once it passes this; the log holds at most two (plus one batch) */
export const DEFAULT_SEGMENT_BYTES = 4 * 1024 * 1024

export interface RejectLogOptions extends RefusalOptions {
  segmentBytes?: number
}

export class RejectLog extends RefusalBuckets {
  readonly path: string
  protected readonly where: string
  private journal: Journal<RejectRecord>
  private readonly olderPath: string
  private readonly segmentBytes: number

  private constructor(stateDir: string, options: RejectLogOptions) {
    super(options)
    this.path = join(stateDir, REJECTS_FILE)
    this.where = this.path
    this.olderPath = join(stateDir, REJECTS_OLDER_FILE)
    this.segmentBytes = options.segmentBytes ?? DEFAULT_SEGMENT_BYTES
    // A segment left over size (a smaller bound since, or a crash before rotating) rotates first.
    if (fileSize(this.path) > this.segmentBytes) renameSync(this.path, this.olderPath)
    this.journal = Journal.open<RejectRecord>(this.path, { fsync: false })
  }

  /** Opens (creating) the log in the state directory; the caller owns the state lock. */
  static open(stateDir: string, options: RejectLogOptions = {}): RejectLog {
    return new RejectLog(stateDir, options)
  }

  /**
   * Every record in the log, newest (last seen) first, one per bucket. Read-only: works while a
   * server appends. A torn last line is skipped. A rotation between reading the two segments may
   * miss or repeat a segment's records once; the next read is whole again.
   */
  static read(stateDir: string): { records: RejectRecord[]; torn: number; corrupt: number } {
    let torn = 0
    let corrupt = 0
    const all: unknown[] = []
    for (const file of [REJECTS_OLDER_FILE, REJECTS_FILE]) {
      const read = Journal.read<unknown>(join(stateDir, file))
      torn += read.torn
      corrupt += read.corrupt
      for (const r of read.records) all.push(r)
    }
    const folded = foldRejects(all)
    return { records: folded.records, torn, corrupt: corrupt + folded.corrupt }
  }

  protected async writeRecords(records: RejectRecord[]): Promise<void> {
    await this.journal.append(...records)
    if (fileSize(this.path) > this.segmentBytes) await this.rotate()
  }

  /**
   * A journal failed for good, or closed by a rotation that could not open the next segment (the
   * state directory refused a new file), accepts nothing more: a fresh one for the next batch.
   */
  protected override afterWriteError(): void {
    if (!this.journal.health.ok || this.journal.isClosed) this.reopen()
  }

  protected override abandonStuckWrite(): void {
    if (!this.journal.health.ok) void this.journal.close().catch(() => {})
  }

  protected closeSink(): Promise<void> {
    return this.journal.close()
  }

  /** The current segment becomes the older one (whose records are dropped); a new one starts. */
  private async rotate(): Promise<void> {
    await this.journal.close()
    try {
      renameSync(this.path, this.olderPath)
      this.stats.rotations++
    } catch {
      // not rotated (the directory refused the rename): the segment goes on growing until it can
    }
    // when this throws too, the closed journal stays until a later write's error reopens it
    this.journal = Journal.open<RejectRecord>(this.path, { fsync: false })
  }

  private reopen(): void {
    const old = this.journal
    try {
      this.journal = Journal.open<RejectRecord>(this.path, { fsync: false })
      void old.close().catch(() => {})
    } catch { /* still failing: the next write tries again */ }
  }
}

function fileSize(path: string): number {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}
