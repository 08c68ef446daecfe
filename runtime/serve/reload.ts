// Reloading the bundle (on SIGHUP, or when the bundle watcher sees the file change): an unchanged
// bundle is told by the inputs hash on its first line before anything is imported (Node never
// frees an imported module); a changed one is loaded and prepared (secrets, providers, channels,
// its transform processes warmed) and only then swapped in; one that fails, or does not finish
// within the deadline, is refused and the old one keeps serving. One reload at a time.
import type { BundleConfig } from '../bundle/format.js'
import { loadBundle, readBundleHash } from '../bundle/load.js'
import type { Logger } from '../observe/log.js'
import { countReload } from '../observe/service-metrics.js'
import type { TransformPool } from '../transforms/pool.js'
import { sayDisabled } from './logging.js'
import { prepare, type Prepared, type PrepareHooks } from './prepare.js'

export const DEFAULT_RELOAD_DEADLINE_MS = 15_000

export interface ReloadTarget {
  bundleFile: string
  stateDir: string
  /** a reload not done within this (transform modules loading included) is abandoned */
  deadlineMs: number
  log: Logger
  /** the bundle being served */
  current(): Prepared
  /** puts a prepared bundle in service: every part takes it (the composition root says which) */
  swap(next: Prepared): void
  /** what a reload cannot change: the address it listens on, the store it opened */
  fixed: { host: string; store: BundleConfig['server']['store'] | undefined }
  generatedSecret: PrepareHooks['generatedSecret']
}

export interface Reloader {
  /** reloads the bundle file; resolves true when a new bundle was swapped in */
  reload(): Promise<boolean>
  /** why the last reload was refused, until one succeeds (or finds the bundle unchanged) */
  failure(): string | null
}

export function createReloader(target: ReloadTarget): Reloader {
  let failure: string | null = null
  let reloading: Promise<boolean> | undefined
  const { log } = target

  const unchanged = (hash: string): false => {
    log.info('bundle unchanged; nothing to reload', { bundle: hash })
    failure = null
    countReload('unchanged')
    return false
  }

  /** One reload; `attempt.abandoned` turns true when its deadline passed, and then it must swap nothing in. */
  const reloadOnce = async (attempt: { abandoned: boolean; pool?: TransformPool | null }): Promise<boolean> => {
    const serving = target.current()
    // Compared before anything is imported: Node never frees an imported module, so importing an
    // unchanged bundle on every SIGHUP would only grow the heap.
    const onDisk = readBundleHash(target.bundleFile)
    if (onDisk !== undefined && onDisk === serving.bundle.manifest.inputsHash) return unchanged(onDisk)
    const next = await loadBundle(target.bundleFile)
    if (next.manifest.inputsHash === serving.bundle.manifest.inputsHash) return unchanged(next.manifest.inputsHash)
    if (attempt.abandoned) return false
    const prepared = prepare(next, target.stateDir, { startDeadlineMs: target.deadlineMs, generatedSecret: target.generatedSecret })
    attempt.pool = prepared.pool
    if (next.config.server.host !== target.fixed.host || next.config.server.port !== serving.bundle.config.server.port) {
      log.info('server.host and server.port changes take effect at the next start')
    }
    // The store is opened once: a changed server.store (another database, its timings, the file store
    // instead) would otherwise go unnoticed until a restart happened to apply it.
    if (JSON.stringify(next.config.server.store ?? null) !== JSON.stringify(target.fixed.store ?? null)) {
      log.info('server.store changes take effect at the next start; this runtime keeps the store it opened')
    }
    try {
      // The transform modules' top-level code runs here, in the new transform processes, never in this one.
      await prepared.pool?.warm()
    } catch (err) {
      void prepared.pool?.close()
      throw err
    }
    if (attempt.abandoned) {
      void prepared.pool?.close()
      return false
    }
    target.swap(prepared)
    void serving.pool?.closeWhenIdle()
    log.info('bundle reloaded', { bundle: next.manifest.inputsHash, routes: next.manifest.routes.length })
    if (!next.config.enabled) sayDisabled(log, next.config.basePath)
    failure = null
    countReload('reloaded')
    return true
  }

  const reload = (): Promise<boolean> => {
    reloading ??= (async () => {
      const attempt: { abandoned: boolean; pool?: TransformPool | null } = { abandoned: false }
      let timer: NodeJS.Timeout | undefined
      const deadline = new Promise<never>((_, fail) => {
        timer = setTimeout(() => fail(new Error(`the reload did not finish within ${target.deadlineMs} ms (a transform module that does not finish loading?)`)), target.deadlineMs)
      })
      try {
        // A reload that hangs (a transform whose top-level await never settles) is abandoned, so
        // that it cannot hold `reloading` and block every later one.
        return await Promise.race([reloadOnce(attempt), deadline])
      } catch (err) {
        attempt.abandoned = true
        void attempt.pool?.close()
        log.error('bundle reload refused; still serving the previous bundle', { error: (err as Error).message })
        failure = (err as Error).message
        countReload('refused')
        return false
      } finally {
        clearTimeout(timer)
        reloading = undefined
      }
    })()
    return reloading
  }

  return { reload, failure: () => failure }
}
