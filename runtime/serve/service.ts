// `hookgate serve` as a library, the runtime's composition root: load the bundle, take the state,
// open the store, listen, build the engine, the handler and the duties, and start them; swap in a
// new bundle on SIGHUP or when the file changes (reload.ts: a broken one is refused, the old one
// kept); on SIGTERM stop accepting, stop the duties in reverse (the runs under way finish within
// the grace), close the store, and let go of the state. What is not composition lives beside it:
// prepare.ts (a bundle made ready), listener.ts (the socket), duties.ts (the duties and their
// order), reload.ts, logging.ts (the address file is runtime/lib/address-file.ts).
import type { Server } from 'node:http'
import { resolve } from 'node:path'
import { loadBundle, bundleFileOf } from '../bundle/load.js'
import { Engine } from '../agents/engine.js'
import type { Supervisor } from '../duties/supervisor.js'
import { AuthLimiter } from '../http/auth.js'
import { createHandler, type Serving } from '../http/handler.js'
import { answerProtocolRefusals } from '../http/protocol.js'
import { DEFAULT_MAX_PENDING_BYTES, type BundleConfig } from '../bundle/format.js'
import { IdempotencyIndex } from '../http/idempotency.js'
import { Notifier } from '../notify/notifier.js'
import { createLogger, type Logger } from '../observe/log.js'
import { metricsRenderer, storeMetricHooks } from '../observe/service-metrics.js'
import { Scheduler } from '../scheduler/scheduler.js'
import { fireTask, lastFiredSlots } from '../scheduler/fire.js'
import { acquireStateLock, connectStore, observeStore, openStore, shownStoreUrl, storeOptionsOf, storeUrlOf } from '../store/open.js'
import type { RefusalRecorder, Store } from '../store/store.js'
import { removeAddressFile, writeAddressFile } from '../lib/address-file.js'
import { registerDuties } from './duties.js'
import { createListener, listen, listeningUrl, stopListening } from './listener.js'
import { requestLine, sayDisabled } from './logging.js'
import { prepare, type Prepared } from './prepare.js'
import { DEFAULT_RELOAD_DEADLINE_MS, createReloader } from './reload.js'

export { ADDRESS_FILE } from '../lib/address-file.js'
export { requestLine } from './logging.js'

export interface ServeOptions {
  bundle: string
  host?: string
  port?: number
  stateDir?: string
  /** how long SIGTERM waits for in-flight requests and running turns, default 10 s */
  graceMs?: number
  /** false: the store skips fsync (benchmarks only) */
  fsync?: boolean
  /** watch the bundle file and reload when it changes (default true) */
  watch?: boolean
  /** debugging: log the first 2 KiB of each request body (off by default: bodies may hold secrets) */
  logBodies?: boolean
  /** where log lines go, one JSON line per call (the CLI writes them to stdout: cli/log-output.ts) */
  write: (line: string) => void
  /**
   * where the lines of failures go: a request's that failed (500), a transform's, a run's in the
   * background, a notification's (the CLI writes them to stderr); default `write`
   */
  writeFaults?: (line: string) => void
  /** a reload not done within this (transform modules loading included) is abandoned, default 15 s */
  reloadDeadlineMs?: number
  /** a postgres:// URL: the runs and logs live there instead of in the state directory */
  store?: string
}

export interface Service {
  url: string
  port: number
  stateDir: string
  server: Server
  engine: Engine
  scheduler: Scheduler
  /** the background duties, in their order (runtime/serve/duties.ts) */
  duties: Supervisor
  current(): Serving
  /** reloads the bundle file; resolves true when a new bundle was swapped in */
  reload(): Promise<boolean>
  /** stop accepting, stop the duties (the runs under way drain), close the state; resolves when done */
  close(): Promise<void>
}

export async function startService(options: ServeOptions): Promise<Service> {
  const write = options.write
  const log: Logger = createLogger(write)
  const faults: Logger = options.writeFaults ? createLogger(options.writeFaults) : log
  const grace = options.graceMs ?? 10_000
  // A generated signing secret is shared with the sender by hand: say where it is, not what.
  const generatedSecret = (routeId: string, file: string): void => log.info(`generated a signing secret for mapping "${routeId}" (saved in ${file}, mode 0600): give it to the sender as its webhook secret`)
  const bundleFile = bundleFileOf(options.bundle)
  const first = await loadBundle(bundleFile)
  const stateDir = options.stateDir ? resolve(options.stateDir) : resolve(first.configDir, first.config.server.stateDir)

  // Nothing in the state is opened, written or resumed before this process owns it and its
  // listener is bound: a second server on the same state or a busy port stops here, having
  // touched nothing, and start-up failures leave no workers or files behind.
  const lock = acquireStateLock(stateDir)
  const server = createListener(first.config)
  const host = options.host ?? first.config.server.host
  const port = options.port ?? first.config.server.port
  let serving: Prepared | undefined
  let engine: Engine | undefined
  let store: Store | undefined
  let storeUrl: string | undefined
  let duties: Supervisor | undefined
  let scheduler!: Scheduler
  let notifier!: Notifier
  let idempotency!: IdempotencyIndex
  let starting!: Promise<void>
  const reloader = createReloader({
    bundleFile, stateDir, log, generatedSecret,
    deadlineMs: options.reloadDeadlineMs ?? DEFAULT_RELOAD_DEADLINE_MS,
    fixed: { host, store: first.config.server.store },
    current: () => serving!,
    swap: (next) => {
      serving = next
      engine!.configure(next.bundle.config, next.bundle.workflows, next.wiring)
      notifier.configure(next.bundle.config, next.wiring.routes, next.wiring.channels)
      scheduler.configure(next.bundle.config.tasks)
      idempotency.setWindow(next.bundle.config.server.idempotencyWindowMs)
    },
  })
  try {
    // A database store is connected (and its schema brought up to date) before the port is bound:
    // once it listens, everything to the handler is synchronous.
    // --store on the command line wins over server.store (whose timings apply to either URL).
    storeUrl = options.store ?? (first.config.server.store ? storeUrlOf(first.config.server.store, first.configDir) : undefined)
    if (storeUrl !== undefined) store = await connectStore(storeUrl, stateDir, storeOptionsOf(first.config, options.fsync ?? true), (message) => log.info(message))
    // A shared store's runs are not all in this runtime's memory: each task's last firing is asked for.
    let firedAtStart: ReadonlyMap<string, number> = store?.lastFiredSlots ? await store.lastFiredSlots() : new Map()
    await listen(server, port, host)
    // From here to the handler everything is synchronous: no request is read before it is wired.
    observeStore(storeMetricHooks)
    serving = prepare(first, stateDir, {
      generatedToken: (token, where) => log.info(`generated a hook token (saved in ${where}, mode 0600; it is printed only this once)`, { token }),
      generatedSecret,
    })
    store ??= openStore(stateDir, storeOptionsOf(first.config, options.fsync ?? true))
    engine = Engine.open(store, first.config, first.workflows, serving.wiring, faults)
    const compacted = engine.runs.compaction
    if (compacted) log.info('run history compacted', { keptRuns: compacted.keptRuns, droppedRuns: compacted.droppedRuns, bytesBefore: compacted.bytesBefore, bytesAfter: compacted.bytesAfter })
    // several runtimes on one store count failures together (the limiter is never replaced, not even by a reload)
    const limiter = new AuthLimiter(first.config.server.authFailures)
    idempotency = new IdempotencyIndex(first.config.server.idempotencyWindowMs)
    idempotency.load(engine.runs.list())
    // Before the trim: the whole history is in memory, so a task's last firing is found however old.
    if (!store.lastFiredSlots) firedAtStart = lastFiredSlots(engine.runs.list())
    // After the keys are loaded, keep only the recent history in memory.
    engine.runs.trim()
    const refusals: RefusalRecorder = store.openRejects((error) => log.error('rejected-request log', { error }))
    const running = engine
    notifier = new Notifier({ runs: running.runs, lastRoute: (agentId) => running.lastRoute(agentId), warn: (message) => faults.error('notification', { error: message }) })
    notifier.configure(first.config, serving.wiring.routes, serving.wiring.channels)
    scheduler = new Scheduler({
      fire: (task, slot) => fireTask(running, task, slot),
      lastFired: () => lastFiredSlots(running.runs.list()),
      log: (level, msg, fields) => log[level](msg, fields),
    })
    duties = registerDuties({
      store, engine, notifier, scheduler, lockout: limiter, graceMs: grace, log,
      current: () => serving!,
      firedAtStart: () => firedAtStart,
      watch: options.watch === false ? null : { bundleFile, changed: () => void reloader.reload() },
    })
    // The duties whose start is synchronous (resuming the runs a crash left among them) are
    // running when this returns, before the handler is wired; the scheduler's catch-up is awaited below.
    starting = duties.start()

    const startedAt = Date.now()
    const handler = createHandler({
      current: () => serving!,
      limiter,
      acceptor: engine,
      idempotency,
      startedAt,
      logBodies: options.logBodies === true,
      rejects: refusals,
      log: (entry) => write(requestLine(entry)),
      logger: faults,
      degraded: () => {
        const reasons: string[] = []
        const health = running.storeHealth()
        if (!health.ok) reasons.push(health.reason)
        const failure = reloader.failure()
        if (failure) reasons.push(`the last bundle reload failed (still serving the previous bundle): ${failure}`)
        const limit = serving!.bundle.config.server.maxPendingRuns
        if (running.backlog >= limit) reasons.push(`the backlog is full: ${running.backlog} accepted runs waiting (server.maxPendingRuns ${limit})`)
        const bytes = maxPendingBytes(serving!.bundle.config)
        if (running.backlogBytes >= bytes) reasons.push(`the backlog is full: the accepted runs waiting hold ${running.backlogBytes} bytes (server.maxPendingBytes ${bytes})`)
        return reasons
      },
      metrics: metricsRenderer({
        backlog: () => running.backlog,
        backlogLimit: () => serving!.bundle.config.server.maxPendingRuns ?? 10_000,
        backlogBytes: () => running.backlogBytes,
        backlogLimitBytes: () => maxPendingBytes(serving!.bundle.config),
        queuedEvents: () => running.queuedEvents(),
        bundle: () => serving!.bundle.manifest,
      }),
    })
    server.on('request', handler)
    answerProtocolRefusals(server, refusals, () => serving!.trusted)
  } catch (err) {
    await new Promise<void>((ok) => server.close(() => ok()))
    await duties?.stop()
    await serving?.pool?.close()
    if (engine) await engine.close().catch(() => {})
    else await store?.close().catch(() => {})
    lock.release()
    throw err
  }
  const engineOpen = engine
  const supervisor = duties

  const { url, port: boundPort } = listeningUrl(server)
  log.info(`hookgate listening on ${url}${first.config.basePath} (bundle ${first.manifest.inputsHash.slice(0, 19)}…, ${first.manifest.routes.length} routes, state ${stateDir}${storeUrl !== undefined ? `, store ${shownStoreUrl(storeUrl)}` : ''})`)
  if (!first.config.enabled) sayDisabled(log, first.config.basePath)
  const addressFile = writeAddressFile(stateDir, { url, basePath: first.config.basePath }, log)

  let closing: Promise<void> | undefined
  const close = (): Promise<void> => {
    closing ??= (async () => {
      await stopListening(server, grace)
      await supervisor.stop()
      await engineOpen.close()
      removeAddressFile(addressFile)
      lock.release()
    })()
    return closing
  }

  // Last, once everything it fires into is open: a missed slot is caught up before start resolves.
  try {
    await starting
  } catch (err) {
    // a duty that could not start: the supervisor stopped the others; the rest is let go here
    await close()
    throw err
  }
  return { url, port: boundPort, stateDir, server, engine: engineOpen, scheduler, duties: supervisor, current: () => serving!, reload: reloader.reload, close }
}

/** server.maxPendingBytes (older bundles carry none: the default). */
function maxPendingBytes(config: BundleConfig): number {
  return config.server.maxPendingBytes ?? DEFAULT_MAX_PENDING_BYTES
}
