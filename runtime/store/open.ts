// Which store a runtime (or a CLI reading the history) opens: the only module above the stores
// that names their implementations.
import { FileStore, type FileStoreOptions } from './file/index.js'
import { FileHistory } from './file/history.js'
import { Journal, type FlushEvent } from './file/journal.js'
import { RunMirror } from './run-log.js'
import type { HistoryReader, RunAction, RunStatus, Store } from './store.js'

// The state directory's lock (runtime/lib/state-lock.ts): one server per state directory.
export { acquireStateLock, type StateLock } from '../lib/state-lock.js'
import type { BundleConfig, BundleStore } from '../bundle/format.js'
import { resolveSecretValue, SecretError } from '../bundle/secrets.js'

/** The file store's options, and server.store's timings, which only a PostgreSQL store uses. */
export type StoreOptions = FileStoreOptions & { hostTtlMs?: number; sweepMs?: number; maxConnections?: number }

/** What a bundle's config says of its state: server.history, the idempotency window, server.store's timings. */
export function storeOptionsOf(config: BundleConfig, fsync = true): StoreOptions {
  const h = config.server.history
  const s = config.server.store
  return {
    fsync,
    keepKeysForMs: config.server.idempotencyWindowMs,
    ...(h ? { keepHistory: h.keepRuns, compactAboveBytes: h.compactAboveBytes, keepRequestBytes: h.keepRequestBytes } : {}),
    ...(s ? { hostTtlMs: s.hostTtlMs, sweepMs: s.sweepMs, maxConnections: s.maxConnections } : {}),
  }
}

/**
 * The URL server.store names, read from its reference once, at start. A missing variable or file,
 * or a value that is not a postgres:// URL, is a SecretError naming the reference, never the value.
 */
export function storeUrlOf(store: Pick<BundleStore, 'url'>, configDir: string): string {
  const ref = store.url.kind === 'env' ? `\${${store.url.name}}` : store.url.kind === 'file' ? store.url.path : 'its reference'
  let url: string
  try {
    url = resolveSecretValue(store.url, configDir)
  } catch (err) {
    throw new SecretError(`server.store: ${(err as Error).message}`)
  }
  if (!isPostgresUrl(url)) throw new SecretError(`server.store: ${ref} does not hold a postgres:// (or postgresql://) URL`)
  return url
}

/** The file store in `stateDir`. */
export function openStore(stateDir: string, options: StoreOptions = {}): Store {
  return FileStore.open(stateDir, options)
}

/**
 * The store `spec` names: a postgres:// URL (its client loaded now, its schema brought up to date),
 * else the file store in `stateDir`. A PostgreSQL store's background loops (`store.duties`) are left
 * for the caller to start: the runtime's supervisor starts each in its place.
 */
export async function connectStore(spec: string, stateDir: string, options: StoreOptions = {}, warn?: (message: string) => void): Promise<Store> {
  if (!isPostgresUrl(spec)) return openStore(stateDir, options)
  const { PgStore } = await import('./postgres/index.js')
  try {
    return await PgStore.open(spec, {
      ...(options.keepKeysForMs !== undefined ? { keepKeysForMs: options.keepKeysForMs } : {}),
      ...(options.retainFinished !== undefined ? { retainFinished: options.retainFinished } : {}),
      ...(options.keepHistory !== undefined ? { keepRuns: options.keepHistory } : {}),
      ...(options.hostTtlMs !== undefined ? { hostTtlMs: options.hostTtlMs } : {}),
      ...(options.sweepMs !== undefined ? { sweepMs: options.sweepMs } : {}),
      ...(options.maxConnections !== undefined ? { maxConnections: options.maxConnections } : {}),
      ...(warn ? { warn } : {}),
      supervised: true,
    })
  } catch (err) {
    // the URL may carry a password: the error names the store without it
    throw new Error(`cannot open the store ${shownStoreUrl(spec)}: ${(err as Error).message}`)
  }
}

/** The history in `stateDir`, or in the PostgreSQL store `url`, for the CLIs and the operator page. */
export function openHistory(stateDir: string, url?: string): HistoryReader {
  if (url === undefined || !isPostgresUrl(url)) return new FileHistory(stateDir)
  // connected at the first read: every read is a promise anyway
  let reader: Promise<HistoryReader> | undefined
  const get = (): Promise<HistoryReader> => (reader ??= (async () => {
    const [{ openPool }, { PgHistory }] = await Promise.all([import('./postgres/client.js'), import('./postgres/history.js')])
    return new PgHistory(await openPool(url, { max: 2 }), shownStoreUrl(url), true)
  })())
  return {
    where: shownStoreUrl(url),
    version: async () => (await get()).version(),
    read: async () => (await get()).read(),
    request: async (row) => (await get()).request(row),
    received: async (row) => (await get()).received(row),
    output: async (row) => (await get()).output(row),
    logRecords: async (name) => (await get()).logRecords(name),
    rejects: async () => (await get()).rejects(),
    close: async () => { if (reader) await (await reader).close() },
  }
}

/**
 * What the metrics count of the stores: every flush of a file log, and every status a run enters
 * once durable, on either store (the run log above both drivers tells it: run-log.ts).
 */
export function observeStore(hooks: { onFlush?: (e: FlushEvent) => void; onDurable?: (action: RunAction, status: RunStatus) => void }): void {
  Journal.onFlush = hooks.onFlush
  RunMirror.onDurable = hooks.onDurable
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
