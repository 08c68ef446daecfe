// One mailbox's sync, one at a time: the history since the cursor (or, when Gmail forgot that far
// back, the recent window less what was already posted), each new message fetched, batches planned
// into the outbox on disk, then posted to the gmail hook until every one is accepted; and the watch
// that makes Gmail publish, started when there is no cursor and renewed before it expires.
import { request } from 'undici'
import type { HelperConfig } from './config.js'
import { GoogleError, googleRetries, retryAfterMs, type CallOptions, type GoogleBases, type TokenSource } from './google.js'
import { retry } from '../runtime/lib/retry.js'
import { addedSince, fetchMessage, profile, recentMessageIds, startWatch, type MailItem } from './mailbox.js'
import { planBatches, presetBodyLimit, readCursor, remember, splitBatch, writeCursor, type Batch, type Cursor } from './outbox.js'
import { topicName } from './pubsub.js'

export const RESYNC_DAYS = 7

export type Log = (event: string, fields?: Record<string, unknown>) => void

export interface SyncDeps {
  config: HelperConfig
  account: string
  tokens: TokenSource
  bases: GoogleBases
  hookToken: string
  log: Log
  /** attempts per batch on 429/5xx or no answer from the hook (default 4) */
  hookAttempts?: number
  /** longest wait between them (default 30 s) */
  hookMaxWaitMs?: number
  now?: () => number
}

/** A sync that could not finish; the message is for logs and health, never holds a secret. */
export class SyncError extends Error {
  override name = 'SyncError'
}

export interface SyncOutcome { messages: number; batches: number; replayed: number; resynced: boolean }

export class MailSync {
  cursor: Cursor
  lastSyncAt?: string
  lastSyncError?: string
  lastRenewalError?: string
  private tail: Promise<unknown> = Promise.resolve()
  private pending: Promise<SyncOutcome> | undefined
  private readonly now: () => number

  constructor(private readonly deps: SyncDeps) {
    this.now = deps.now ?? Date.now
    this.cursor = readCursor(deps.config.helperDir)
    if (this.cursor.mailbox && this.cursor.mailbox.toLowerCase() !== deps.account.toLowerCase()) {
      // A cursor of another mailbox says nothing about this one (its outbox is that mailbox's mail).
      deps.log('cursor_reset', { reason: `the cursor was for another mailbox (${this.cursor.mailbox})` })
      this.cursor = { version: 1, posted: [] }
    }
  }

  private get google(): CallOptions {
    return { onRetry: ({ status, waitMs, attempt }) => this.deps.log('google_retry', { status, waitMs, attempt }) }
  }

  private save(): void {
    this.cursor.mailbox = this.deps.account
    writeCursor(this.deps.config.helperDir, this.cursor)
  }

  get hasCursor(): boolean {
    return this.cursor.historyId !== undefined
  }

  /** The watch is unknown, or expires within `withinMs`. */
  watchDue(withinMs: number): boolean {
    const at = Number(this.cursor.watchExpiration)
    return !Number.isFinite(at) || at <= 0 || at - this.now() <= withinMs
  }

  /** Starts (or renews) the watch; with no cursor yet, its history id becomes the cursor: nothing older is posted. */
  async renewWatch(): Promise<void> {
    const g = this.deps.config.gmail
    if (!g.project && !g.topic.startsWith('projects/')) throw new SyncError('hooks.gmail.project is not set: the watch needs the topic\'s project')
    try {
      const r = await startWatch(this.deps.tokens, this.deps.bases, this.deps.account, topicName(g.project ?? '', g.topic), g.labels)
      this.cursor.watchExpiration = r.expiration
      this.cursor.lastRenewalAt = new Date(this.now()).toISOString()
      if (!this.cursor.historyId && r.historyId) this.cursor.historyId = r.historyId
      this.save()
      this.lastRenewalError = undefined
      this.deps.log('renewal', { watchExpiration: new Date(Number(r.expiration)).toISOString(), historyId: r.historyId })
    } catch (err) {
      this.lastRenewalError = (err as Error).message
      this.deps.log('error', { during: 'renewal', error: this.lastRenewalError })
      throw err
    }
  }

  /** A sync after the one running (pushes during a sync share the next one). */
  requestSync(reason: string): Promise<SyncOutcome> {
    if (this.pending) return this.pending
    const p: Promise<SyncOutcome> = this.tail.then(() => {
      if (this.pending === p) this.pending = undefined
      return this.syncOnce(reason)
    })
    this.pending = p
    this.tail = p.catch(() => {})
    return p
  }

  /** Resolves once no sync is running or waiting. */
  async idle(): Promise<void> {
    for (;;) {
      const t = this.tail
      await t
      if (t === this.tail) return
    }
  }

  private async syncOnce(reason: string): Promise<SyncOutcome> {
    const started = this.now()
    try {
      const outcome = await this.sync()
      this.lastSyncAt = new Date(this.now()).toISOString()
      this.lastSyncError = undefined
      this.deps.log('sync', { reason, ...outcome, historyId: this.cursor.historyId, ms: this.now() - started })
      return outcome
    } catch (err) {
      this.lastSyncError = (err as Error).message
      this.deps.log('error', { during: 'sync', reason, error: this.lastSyncError, pendingBatches: this.cursor.outbox?.batches.length ?? 0 })
      throw err
    }
  }

  private async sync(): Promise<SyncOutcome> {
    const outcome: SyncOutcome = { messages: 0, batches: 0, replayed: 0, resynced: false }
    // What a crash or a failed post left planned goes out first, the same bytes under the same keys.
    if (this.cursor.outbox) await this.drainOutbox(outcome)
    if (!this.cursor.historyId) await this.renewWatch()
    const { account, tokens, bases, config } = this.deps
    const label = config.gmail.labels[0]
    let ids: string[]
    let historyId: string
    try {
      const added = await addedSince(tokens, bases, account, this.cursor.historyId!, label, this.google)
      ids = added.ids
      historyId = added.historyId
    } catch (err) {
      if (!(err instanceof GoogleError) || err.status !== 404) throw err
      // Gmail no longer has history that far back. The profile's history id is taken before the
      // listing, so mail that arrives meanwhile is in both and the posted set drops the repeat.
      outcome.resynced = true
      historyId = (await profile(tokens, bases, account, this.google)).historyId
      ids = await recentMessageIds(tokens, bases, account, RESYNC_DAYS, label, this.google)
      this.deps.log('resync', { reason: 'the history id expired', days: RESYNC_DAYS, listed: ids.length })
    }
    const posted = new Set(this.cursor.posted)
    const items: MailItem[] = []
    for (const id of ids) {
      if (posted.has(id)) continue
      const item = await fetchMessage(tokens, bases, account, id, { includeBody: config.gmail.includeBody, maxBytes: config.gmail.maxBytes }, this.google)
      if (item) items.push(item)
    }
    const batches = planBatches(items, presetBodyLimit(config.gmail.maxBytes))
    if (batches.length === 0) {
      if (historyId && historyId !== this.cursor.historyId) { this.cursor.historyId = historyId; this.save() }
      return outcome
    }
    this.cursor.outbox = { historyId, batches }
    this.save()
    await this.drainOutbox(outcome)
    return outcome
  }

  /** Posts every outbox batch; the cursor advances only once all are accepted. */
  private async drainOutbox(outcome: SyncOutcome): Promise<void> {
    const outbox = this.cursor.outbox!
    while (outbox.batches.length > 0) {
      const batch = outbox.batches[0]!
      const answer = await this.post(batch)
      if (answer.kind === 'too_large') {
        if (batch.ids.length === 1) throw new SyncError(`the hook refused message ${batch.ids[0]} as too large (413) even alone: raise the gmail mapping's maxBodyBytes or lower hooks.gmail.maxBytes`)
        // Two halves under new keys, on disk before either is posted.
        outbox.batches.splice(0, 1, ...splitBatch(batch))
        this.save()
        this.deps.log('batch_split', { messages: batch.ids.length, into: 2 })
        continue
      }
      outbox.batches.shift()
      remember(this.cursor, batch.ids)
      this.save()
      outcome.batches++
      outcome.messages += batch.ids.length
      if (answer.replayed) outcome.replayed++
    }
    this.cursor.historyId = outbox.historyId
    delete this.cursor.outbox
    this.save()
  }

  private post(batch: Batch): Promise<{ kind: 'accepted'; replayed: boolean } | { kind: 'too_large' }> {
    const url = this.deps.config.gmail.hookUrl
    type Refused = { status: number; code?: string; message: string }
    return retry<{ kind: 'accepted'; replayed: boolean } | { kind: 'too_large' }, Refused>({
      ...googleRetries(this.deps.hookAttempts ?? 4),
      maxWaitMs: this.deps.hookMaxWaitMs ?? 30_000,
      fail: (refused) => new SyncError(refused.message),
      // a hook that answered is logged before each wait; one that could not be reached is not
      waiting: (refused, attempt, waitMs) => { if (refused.status !== 0) this.deps.log('hook_retry', { status: refused.status, code: refused.code, waitMs, attempt }) },
    }, async () => {
      let res
      try {
        res = await request(url, {
          method: 'POST',
          headers: { authorization: `Bearer ${this.deps.hookToken}`, 'content-type': 'application/json', 'idempotency-key': batch.key },
          body: batch.body,
          headersTimeout: 60_000,
          bodyTimeout: 60_000,
        })
      } catch (err) {
        return { ok: false, retryable: true, failure: { status: 0, message: `cannot reach the hook at ${new URL(url).origin}: ${(err as Error).message}` } }
      }
      const status = res.statusCode
      const text = await res.body.text()
      if (status >= 200 && status < 300) return { ok: true, value: { kind: 'accepted', replayed: res.headers['idempotent-replayed'] === 'true' } }
      if (status === 413) return { ok: true, value: { kind: 'too_large' } }
      const { code, error } = errorOf(text)
      const message = `the hook at ${url} answered ${status}${code ? ` ${code}` : ''}${error ? `: ${error}` : ''}${hint(status, code)}`
      return { ok: false, retryable: status === 429 || status >= 500, retryAfterMs: retryAfterMs(res.headers['retry-after']) ?? null, failure: { status, ...(code ? { code } : {}), message } }
    })
  }
}

/** The runtime's error body's code and sentence (both free of secrets by its contract). */
function errorOf(text: string): { code?: string; error?: string } {
  try {
    const v = JSON.parse(text)
    return { ...(typeof v?.code === 'string' ? { code: v.code } : {}), ...(typeof v?.error === 'string' ? { error: v.error.slice(0, 200) } : {}) }
  } catch {
    return {}
  }
}

function hint(status: number, code: string | undefined): string {
  if (status === 401) return ' (the helper posts with hooks.token: is the runtime serving this config?)'
  if (status === 404) return ' (is the gmail preset in hooks.presets, and hooks.enabled true?)'
  return ''
}
