// The helper's cursor file (<state>/gmail/cursor.json) and the batches it plans from it. The file
// holds where the mailbox was read up to, the watch's expiration, the ids already posted (a bounded
// set, so a resync never posts one twice), and the outbox: the exact bodies and Idempotency-Keys
// of batches planned but not yet accepted, with the history id they lead to. The outbox is written
// before anything is posted, so after a crash or a redelivered push the same bytes go out under the
// same keys and the runtime answers them from its Idempotency-Key memory instead of starting runs.
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { CURSOR_FILE, readJsonFile, writeSecretFile } from './config.js'
import { cutUtf8, type MailItem } from './mailbox.js'

export interface Batch {
  /** the Idempotency-Key: 'gmail-' + sha256 of the message ids */
  key: string
  ids: string[]
  /** the JSON body exactly as posted (the runtime fingerprints the bytes) */
  body: string
}

export interface Cursor {
  version: 1
  mailbox?: string
  historyId?: string
  /** ms since the epoch, as Gmail's watch answers it */
  watchExpiration?: string
  lastRenewalAt?: string
  /** the last POSTED_KEPT message ids posted and accepted, oldest first */
  posted: string[]
  outbox?: { historyId: string; batches: Batch[] }
}

export const POSTED_KEPT = 5000
export const MAX_BATCH_MESSAGES = 100
/** room left under the preset's limit for what we do not count exactly */
const MARGIN_BYTES = 16 * 1024

export function cursorPath(helperDir: string): string {
  return join(helperDir, CURSOR_FILE)
}

/** The cursor on disk; setup may have written only part of it (a history id, a watch expiration). */
export function readCursor(helperDir: string): Cursor {
  const raw = readJsonFile<Record<string, any>>(cursorPath(helperDir)) ?? {}
  const str = (v: unknown) => (typeof v === 'string' && v !== '') || typeof v === 'number' ? String(v) : undefined
  const cursor: Cursor = { version: 1, posted: Array.isArray(raw.posted) ? raw.posted.filter((x: unknown) => typeof x === 'string') : [] }
  const mailbox = str(raw.mailbox ?? raw.account)
  const historyId = str(raw.historyId)
  const watchExpiration = str(raw.watchExpiration ?? raw.expiration)
  const lastRenewalAt = str(raw.lastRenewalAt)
  if (mailbox) cursor.mailbox = mailbox
  if (historyId) cursor.historyId = historyId
  if (watchExpiration) cursor.watchExpiration = watchExpiration
  if (lastRenewalAt) cursor.lastRenewalAt = lastRenewalAt
  if (raw.outbox && typeof raw.outbox.historyId === 'string' && Array.isArray(raw.outbox.batches)) cursor.outbox = raw.outbox
  return cursor
}

export function writeCursor(helperDir: string, cursor: Cursor): void {
  writeSecretFile(cursorPath(helperDir), JSON.stringify(cursor) + '\n')
}

/** Adds accepted ids to the posted set, keeping the newest POSTED_KEPT. */
export function remember(cursor: Cursor, ids: string[]): void {
  const seen = new Set(cursor.posted)
  for (const id of ids) if (!seen.has(id)) { seen.add(id); cursor.posted.push(id) }
  if (cursor.posted.length > POSTED_KEPT) cursor.posted.splice(0, cursor.posted.length - POSTED_KEPT)
}

/** The gmail preset's body limit, computed as the preset computes it. */
export function presetBodyLimit(maxBytes: number): number {
  return Math.max(1024 * 1024, maxBytes + 64 * 1024)
}

export function batchOf(items: MailItem[]): Batch {
  const ids = items.map((m) => m.id)
  return { key: 'gmail-' + createHash('sha256').update(ids.join('\n')).digest('hex'), ids, body: JSON.stringify({ messages: items }) }
}

/**
 * Splits messages into batches whose bodies fit `limitBytes` (less a margin) with at most
 * MAX_BATCH_MESSAGES each. A message that does not fit alone (a body cut to maxBytes can still
 * grow when JSON escapes it) has its body cut further until it does.
 */
export function planBatches(items: MailItem[], limitBytes: number): Batch[] {
  const budget = limitBytes - MARGIN_BYTES
  const overhead = Buffer.byteLength('{"messages":[]}')
  const batches: Batch[] = []
  let current: MailItem[] = []
  let size = overhead
  for (let item of items) {
    let bytes = Buffer.byteLength(JSON.stringify(item))
    if (overhead + bytes > budget) {
      item = fitAlone(item, budget - overhead)
      bytes = Buffer.byteLength(JSON.stringify(item))
    }
    const extra = bytes + (current.length > 0 ? 1 : 0)
    if (current.length > 0 && (size + extra > budget || current.length >= MAX_BATCH_MESSAGES)) {
      batches.push(batchOf(current))
      current = []
      size = overhead
    }
    size += bytes + (current.length > 0 ? 1 : 0)
    current.push(item)
  }
  if (current.length > 0) batches.push(batchOf(current))
  return batches
}

function fitAlone(item: MailItem, budget: number): MailItem {
  const cut = { ...item, truncated: true }
  let bodyBytes = Buffer.byteLength(item.body)
  while (bodyBytes > 0 && Buffer.byteLength(JSON.stringify(cut)) > budget) {
    bodyBytes = Math.floor(bodyBytes * 0.8)
    cut.body = cutUtf8(item.body, bodyBytes)
  }
  return cut
}

/** A batch the hook refused as too large, as two halves with their own keys. */
export function splitBatch(batch: Batch): [Batch, Batch] {
  const items = (JSON.parse(batch.body) as { messages: MailItem[] }).messages
  const half = Math.ceil(items.length / 2)
  return [batchOf(items.slice(0, half)), batchOf(items.slice(half))]
}
