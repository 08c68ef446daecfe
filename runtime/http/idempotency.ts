// Idempotency-Key: a repeat of a request with the same key and the same body, within the window,
// gets the original answer (Idempotent-Replayed: true) and starts nothing; the same key with another
// body is a 409. The keys live in the run rows themselves, so they survive a restart with the runs,
// and concurrent duplicates wait for the first one instead of starting a second run.
import { createHash } from 'node:crypto'
import type { RunRow } from '../store/store.js'
import { HttpError } from './errors.js'

export interface StoredResponse { status: number; body: Record<string, unknown> }

interface Entry { fingerprint: string; at: number; response?: StoredResponse; pending?: Promise<StoredResponse | null> }

export type IdempotencyDecision =
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'new'; fingerprint: string; finish(response: StoredResponse | null): void }

const KEY = /^[\x21-\x7e]{1,255}$/

export class IdempotencyIndex {
  private readonly entries = new Map<string, Entry>()

  constructor(private windowMs: number) {}

  setWindow(ms: number): void {
    this.windowMs = ms
  }

  get size(): number {
    return this.entries.size
  }

  /** Rebuilds the index from run history at start. */
  load(rows: Iterable<RunRow>, now = Date.now()): void {
    for (const row of rows) {
      if (!row.idempotency || !row.response) continue
      const at = Date.parse(row.createdAt)
      if (now - at < this.windowMs) this.entries.set(row.idempotency.key, { fingerprint: row.idempotency.fingerprint, at, response: row.response })
    }
  }

  /**
   * For a request with key `key` on hook `name` with raw `body`: replay the stored answer, refuse a
   * reuse, or let the caller run it and `finish` with the answer (null: nothing stored, e.g. an error).
   */
  async begin(key: string, name: string, body: Buffer, now = Date.now()): Promise<IdempotencyDecision> {
    if (!KEY.test(key)) throw new HttpError(400, 'invalid_idempotency_key', 'Idempotency-Key must be 1 to 255 visible ASCII characters')
    const fingerprint = createHash('sha256').update(name).update('\0').update(body).digest('hex')
    this.prune(now)
    for (;;) {
      const entry = this.entries.get(key)
      if (!entry) break
      if (entry.fingerprint !== fingerprint) throw new HttpError(409, 'idempotency_key_reused', 'this Idempotency-Key was already used with a different request')
      if (entry.response) return { kind: 'replay', response: entry.response }
      const first = await entry.pending
      if (first) return { kind: 'replay', response: first }
      // The first attempt stored nothing (it failed): this one may try again.
      if (this.entries.get(key) === entry) this.entries.delete(key)
    }
    let settle!: (r: StoredResponse | null) => void
    const entry: Entry = { fingerprint, at: now, pending: new Promise((r) => { settle = r }) }
    this.entries.set(key, entry)
    return {
      kind: 'new',
      fingerprint,
      finish: (response) => {
        if (response) {
          entry.response = response
          delete entry.pending
        } else if (this.entries.get(key) === entry) {
          this.entries.delete(key)
        }
        settle(response)
      },
    }
  }

  /** Keys older than the window are forgotten; at most one sweep per second. */
  private lastPrune = 0
  private prune(now: number): void {
    if (now - this.lastPrune < 1000) return
    this.lastPrune = now
    for (const [key, e] of this.entries) if (!e.pending && now - e.at >= this.windowMs) this.entries.delete(key)
  }
}
