// The file store's compaction at open: a runs.jsonl grown past `compactAboveBytes` is rewritten to
// the runs worth keeping, one `run` record per kept row (the row as the history folds it), and the
// blobs no kept row names are swept. Kept: every unfinished run (with its request, to resume it),
// the newest `keepHistory` finished runs, finished runs started with an Idempotency-Key within
// `keepKeysForMs` (so a retry still gets its first answer), a request a fan-out's runs share as long
// as one of them is kept, and finished runs' request blobs newest first within `keepRequestBytes`.
import { Journal } from './journal.js'
import { fold, type RunRecord } from './run-records.js'
import { DEFAULT_KEEP_HISTORY, DEFAULT_KEY_WINDOW_MS, withoutReceived } from '../rows.js'
import { FINAL_STATUSES, type Compaction, type RunRow } from '../store.js'

/** At open, a runs.jsonl (with its blobs) larger than this is compacted. */
export const DEFAULT_COMPACT_ABOVE_BYTES = 64 * 1024 * 1024
/** A compaction keeps the request blobs of finished runs up to this many bytes, newest first. */
export const DEFAULT_KEEP_REQUEST_BYTES = 32 * 1024 * 1024

export interface CompactionOptions {
  fsync?: boolean
  /** the clock (tests) */
  now?: () => Date
  compactAboveBytes?: number
  keepHistory?: number
  keepKeysForMs?: number
  keepRequestBytes?: number
}

/** The row fields that name a blob beside the file, and the field a small one stays in. */
export const BLOB_FIELDS = [['request', 'requestBlob'], ['received', 'receivedBlob']] as const

const FINAL = FINAL_STATUSES

/**
 * Rewrites the file at `path` when it has grown past `compactAboveBytes` (see the header).
 * Journal.rewrite replaces the file whole or not at all. Returns null when the file is small enough
 * (or missing); a failure leaves the old file.
 */
export function compactIfLarge(path: string, options: CompactionOptions): Compaction | null {
  const bytesBefore = Journal.diskBytes(path)
  if (bytesBefore === 0 || bytesBefore <= (options.compactAboveBytes ?? DEFAULT_COMPACT_ABOVE_BYTES)) return null
  const read = Journal.read<unknown>(path)
  const rows = new Map<string, RunRow>()
  fold(read.records, rows)
  const keepHistory = options.keepHistory ?? DEFAULT_KEEP_HISTORY
  const keysSince = (options.now ?? (() => new Date()))().getTime() - (options.keepKeysForMs ?? DEFAULT_KEY_WINDOW_MS)
  let finishedLeft = 0
  for (const row of rows.values()) if (FINAL.has(row.status)) finishedLeft++
  const kept: RunRow[] = []
  for (const row of rows.values()) {
    if (FINAL.has(row.status)) {
      // the oldest finished runs go first, unless their Idempotency-Key may still be retried
      const recentKey = row.idempotency !== undefined && Date.parse(row.createdAt) >= keysSince
      if (finishedLeft-- > keepHistory && !recentKey) continue
    }
    kept.push(row)
  }
  const needed = keepSharedRequests(kept, rows)
  // Request blobs (and received-request blobs): every unfinished run's, and finished runs' newest
  // first within one byte budget. A request a fan-out's runs share counts once, where it is kept,
  // and as unfinished while any of its runs is.
  let requestBytesLeft = options.keepRequestBytes ?? DEFAULT_KEEP_REQUEST_BYTES
  const blobsKept = new Set<string>()
  for (let i = kept.length - 1; i >= 0; i--) {
    // a kept step's output is kept whole: a resumed workflow reads it instead of running the step again
    const outputBlob = kept[i]!.outputBlob
    if (outputBlob) blobsKept.add(outputBlob.name)
    const done = FINAL.has(kept[i]!.status) && !needed.has(kept[i]!.id)
    // A received request small enough to sit in its line counts against the same budget: without
    // that, every kept run (up to keepRuns) kept one of up to REQUEST_INLINE_MAX_CHARS.
    if (kept[i]!.received !== undefined && done) {
      requestBytesLeft -= JSON.stringify(kept[i]!.received).length
      if (requestBytesLeft < 0) kept[i] = withoutReceived(kept[i]!)
    }
    for (const [, blobField] of BLOB_FIELDS) {
      const row = kept[i]!
      const blob = row[blobField]
      if (!blob) continue
      if (done) {
        if (blobsKept.has(blob.name)) continue
        requestBytesLeft -= blob.bytes
        if (requestBytesLeft < 0) {
          const rest: RunRow = { ...row }
          delete rest[blobField]
          kept[i] = rest
          continue
        }
      }
      blobsKept.add(blob.name)
    }
  }
  // a run whose fan-out's request went over the budget says it has none, as its holder does
  const keptById = new Map(kept.map((row, i) => [row.id, i]))
  for (let i = 0; i < kept.length; i++) {
    const ref = kept[i]!.receivedIn
    if (ref === undefined) continue
    const holder = kept[keptById.get(ref) ?? -1]
    if (holder === undefined || (holder.received === undefined && !holder.receivedBlob)) {
      const { receivedIn: _ref, ...rest } = kept[i]!
      kept[i] = rest
    }
  }
  let bytesAfter: number
  try {
    Journal.rewrite(path, (function* (): Generator<RunRecord> { for (const row of kept) yield { type: 'run', row } })(), options)
    Journal.sweepBlobs(path, blobsKept)
    bytesAfter = Journal.diskBytes(path)
  } catch {
    return null // the old file stays as it was
  }
  return { records: read.records.length, bytesBefore, bytesAfter, keptRuns: kept.length, droppedRuns: rows.size - kept.length }
}

/**
 * A request stored once for a fan-out (receivedIn) outlives the run that held it: when that run is
 * not kept, the oldest kept run of the same request takes the request over and the other kept ones
 * name it instead. Rewrites `kept` in place; returns the ids of the runs holding a request that an
 * unfinished run names (kept whatever the budget, as an unfinished run's own request is).
 */
function keepSharedRequests(kept: RunRow[], folded: ReadonlyMap<string, RunRow>): Set<string> {
  const keptIds = new Set(kept.map((row) => row.id))
  const heirs = new Map<string, string>()
  const needed = new Set<string>()
  for (let i = 0; i < kept.length; i++) {
    const row = kept[i]!
    const ref = row.receivedIn
    if (ref === undefined) continue
    if (keptIds.has(ref)) continue
    const heir = heirs.get(ref)
    const { receivedIn: _ref, ...rest } = row
    if (heir !== undefined) {
      ;(rest as RunRow).receivedIn = heir
    } else {
      const holder = folded.get(ref)
      if (holder?.received !== undefined) rest.received = holder.received
      else if (holder?.receivedBlob) rest.receivedBlob = holder.receivedBlob
      else { kept[i] = Object.freeze(rest); continue } // gone already: nothing to name
      heirs.set(ref, row.id)
    }
    kept[i] = Object.freeze(rest)
  }
  for (const row of kept) if (row.receivedIn !== undefined && !FINAL.has(row.status)) needed.add(row.receivedIn)
  return needed
}
