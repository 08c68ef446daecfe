// Which store a runtime (or a CLI reading the history) opens: the only module above the stores
// that names their implementations.
import { FileStore, type FileStoreOptions } from './file/index.js'
import { FileHistory } from './file/history.js'
import { Journal, type FlushEvent } from './file/journal.js'
import { RunStore } from './file/runs.js'
import type { HistoryReader, RunAction, RunStatus, Store } from './store.js'

// The state directory's lock: one server per state directory (the Gmail helper locks its own too).
export { acquireStateLock, type StateLock } from './file/state-lock.js'
// The history defaults the compiler writes into a bundle's server.history.
export { DEFAULT_COMPACT_ABOVE_BYTES, DEFAULT_KEEP_HISTORY, DEFAULT_KEEP_REQUEST_BYTES } from './file/runs.js'
import type { BundleConfig } from '../bundle-format.js'

export type StoreOptions = FileStoreOptions

/** What a bundle's config says of its state: server.history and the idempotency window. */
export function storeOptionsOf(config: BundleConfig, fsync = true): StoreOptions {
  const h = config.server.history
  return { fsync, keepKeysForMs: config.server.idempotencyWindowMs, ...(h ? { keepHistory: h.keepRuns, compactAboveBytes: h.compactAboveBytes, keepRequestBytes: h.keepRequestBytes } : {}) }
}

/** The file store in `stateDir`. */
export function openStore(stateDir: string, options: StoreOptions = {}): Store {
  return FileStore.open(stateDir, options)
}

/** The history in `stateDir`, for the CLIs and the operator page. */
export function openHistory(stateDir: string): HistoryReader {
  return new FileHistory(stateDir)
}

/** What the metrics count of the store: every flush of a log, every status a run enters once durable. */
export function observeStore(hooks: { onFlush?: (e: FlushEvent) => void; onDurable?: (action: RunAction, status: RunStatus) => void }): void {
  Journal.onFlush = hooks.onFlush
  RunStore.onDurable = hooks.onDurable
}

/** Whether `spec` names a PostgreSQL store (postgres:// or postgresql://). */
export function isPostgresUrl(spec: string): boolean {
  return /^postgres(?:ql)?:\/\//i.test(spec)
}

/** A store URL as it may be shown: without its password (in the authority or a password= parameter). */
export function shownStoreUrl(url: string): string {
  // not new URL(): a libpq URL may have an empty host (postgres://user@/db?host=/socket/dir)
  return url.replace(/^(postgres(?:ql)?:\/\/[^:/@?#]*):[^@/?#]*@/i, '$1:***@').replace(/([?&]password=)[^&#]*/gi, '$1***')
}

/** `hookgate store migrate`: brings a PostgreSQL store's schema up to date, or with dryRun says how. */
export async function migrateStore(url: string, options: { dryRun?: boolean } = {}): Promise<{ from: number; to: number; migrations: Array<{ version: number; title: string }> }> {
  const { openPool } = await import('./postgres/client.js')
  const { migrate } = await import('./postgres/migrate.js')
  const db = await openPool(url, { max: 1 })
  try {
    return await migrate(db, options)
  } finally {
    await db.close()
  }
}
