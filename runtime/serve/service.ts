// `hookgate serve` as a library: load the bundle, resolve secrets, open the state, listen; swap in
// a new bundle on SIGHUP or when the file changes (a broken one is refused, the old one kept); on
// SIGTERM stop accepting, let in-flight requests and running turns finish, and exit.
import { randomBytes } from 'node:crypto'
import { rmSync, watch, writeFileSync, type FSWatcher } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { basename, dirname, join, resolve } from 'node:path'
import type { AddressInfo, Socket } from 'node:net'
import { loadBundle, bundleFileOf, readBundleHash, type LoadedBundle } from '../bundle/load.js'
import { resolveSecretValue, resolveToken } from '../bundle/secrets.js'
import type { TransformInput } from '../bundle/format.js'
import { Engine, type EngineWiring } from '../agents/engine.js'
import { createModelRegistry } from '../agents/models.js'
import { createChannels } from '../channels/index.js'
import { AddressMatcher, AuthLimiter, resolveClientAddress, TokenCheck } from '../http/auth.js'
import { createHandler, maxPendingBytes, type RequestLog, type Serving } from '../http/server.js'
import { HttpError, sendError } from '../http/errors.js'
import { TransformPool } from '../transforms/pool.js'
import { IdempotencyIndex } from '../http/idempotency.js'
import { prepareSignatures } from '../http/signatures.js'
import { isoNow } from '../observe/clock.js'
import { ADDRESS_FILE } from '../lib/address-file.js'
import { acquireStateLock, connectStore, openStore, shownStoreUrl, storeOptionsOf, storeUrlOf } from '../store/open.js'
import type { RefusalRecorder, Store } from '../store/store.js'
import { Scheduler } from '../scheduler/scheduler.js'
import { fireTask, lastFiredSlots } from '../scheduler/fire.js'
import { countReload, installMetricHooks, metricsRenderer } from '../observe/service-metrics.js'

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
  /** where log lines go, default stdout */
  write?: (line: string) => void
  /** a reload not done within this (transform modules loading included) is abandoned, default 15 s */
  reloadDeadlineMs?: number
  /** a postgres:// URL: the runs and logs live there instead of in the state directory */
  store?: string
}

const DEFAULT_RELOAD_DEADLINE_MS = 15_000

export interface Service {
  url: string
  port: number
  stateDir: string
  server: Server
  engine: Engine
  scheduler: Scheduler
  current(): Serving
  /** reloads the bundle file; resolves true when a new bundle was swapped in */
  reload(): Promise<boolean>
  /** stop accepting, drain, close the state; resolves when done */
  close(): Promise<void>
}

export async function startService(options: ServeOptions): Promise<Service> {
  const out = options.write ? null : batchedStdout()
  const write = options.write ?? out!.write
  const info = (msg: string, extra: Record<string, unknown> = {}) => write(JSON.stringify({ t: new Date().toISOString(), level: 'info', msg, ...extra }))
  const generatedSigningSecret = (routeId: string, file: string): void => info(`generated a signing secret for mapping "${routeId}" (saved in ${file}, mode 0600): give it to the sender as its webhook secret`)
  const bundleFile = bundleFileOf(options.bundle)
  const first = await loadBundle(bundleFile)
  const stateDir = options.stateDir ? resolve(options.stateDir) : resolve(first.configDir, first.config.server.stateDir)

  // Nothing in the state is opened, written or resumed before this process owns it and its
  // listener is bound: a second server on the same state or a busy port stops here, having
  // touched nothing, and start-up failures leave no workers or files behind.
  const lock = acquireStateLock(stateDir)
  const server = createServer({
    // Node's own timers answer without our JSON body, so they sit behind the body timeout.
    requestTimeout: first.config.server.bodyTimeoutMs + 5000,
    headersTimeout: Math.min(first.config.server.bodyTimeoutMs + 2000, 60_000),
    keepAliveTimeout: 5000,
    // Node checks the two timeouts above only this often (30 s by default): a client dripping its
    // headers would hold its connection far past headersTimeout.
    connectionsCheckingInterval: 1000,
  })
  let firstServing: ReturnType<typeof prepare> | undefined
  let opened: Engine | undefined
  let limiter: AuthLimiter
  let sharedLockout: { close(): Promise<void> } | undefined
  let idempotency: IdempotencyIndex
  let store: Store | undefined
  let storeUrl: string | undefined
  let rejects: RefusalRecorder | undefined
  let firedAtStart: ReadonlyMap<string, number> = new Map()
  const host = options.host ?? first.config.server.host
  const port = options.port ?? first.config.server.port
  try {
    // A database store is connected (and its schema brought up to date) before the port is bound:
    // once it listens, everything to the handler is synchronous.
    // --store on the command line wins over server.store (whose timings apply to either URL).
    storeUrl = options.store ?? (first.config.server.store ? storeUrlOf(first.config.server.store, first.configDir) : undefined)
    if (storeUrl !== undefined) store = await connectStore(storeUrl, stateDir, storeOptionsOf(first.config, options.fsync ?? true), (message) => info(message))
    // A shared store's runs are not all in this runtime's memory: each task's last firing is asked for.
    if (store?.lastFiredSlots) firedAtStart = await store.lastFiredSlots()
    await new Promise<void>((ok, fail) => {
      server.once('error', fail)
      server.listen(port, host, () => { server.off('error', fail); ok() })
    })
    // From here to the handler everything is synchronous: no request is read before it is wired.
    // A generated signing secret is shared with the sender by hand: say where it is, not what.
    installMetricHooks()
    firstServing = prepare(first, stateDir, (token, where) => {
      write(`generated a hook token (saved in ${where}, mode 0600; it is printed only this once):\n  ${token}`)
    }, undefined, generatedSigningSecret)
    store ??= openStore(stateDir, storeOptionsOf(first.config, options.fsync ?? true))
    opened = Engine.open(store, first.config, first.workflows, firstServing.wiring)
    const compacted = opened.runs.compaction
    if (compacted) info('run history compacted', { keptRuns: compacted.keptRuns, droppedRuns: compacted.droppedRuns, bytesBefore: compacted.bytesBefore, bytesAfter: compacted.bytesAfter })
    const resumed = opened.resumeUnfinished()
    if (resumed > 0) info('resumed unfinished runs', { runs: resumed })
    limiter = new AuthLimiter(first.config.server.authFailures)
    // several runtimes on one store count failures together (the limiter is never replaced, not even by a reload)
    sharedLockout = store.shareLockout?.(limiter)
    idempotency = new IdempotencyIndex(first.config.server.idempotencyWindowMs)
    idempotency.load(opened.runs.list())
    // Before the trim: the whole history is in memory, so a task's last firing is found however old.
    if (!store.lastFiredSlots) firedAtStart = lastFiredSlots(opened.runs.list())
    // After the keys are loaded, keep only the recent history in memory.
    opened.runs.trim()
    rejects = store.openRejects((error) => write(JSON.stringify({ t: new Date().toISOString(), level: 'error', msg: 'rejected-request log', error })))
  } catch (err) {
    await new Promise<void>((ok) => server.close(() => ok()))
    await firstServing?.pool?.close()
    if (opened) await opened.close().catch(() => {})
    else await store?.close().catch(() => {})
    lock.release()
    throw err
  }
  let serving = firstServing
  const engine = opened
  const refusals = rejects!
  const scheduler = new Scheduler({
    fire: (task, slot) => fireTask(engine, task, slot),
    lastFired: () => lastFiredSlots(engine.runs.list()),
    log: (level, msg, fields) => write(JSON.stringify({ t: new Date().toISOString(), level, msg, ...fields })),
  })
  const startedAt = Date.now()
  const handler = createHandler({
    current: () => serving,
    limiter,
    engine,
    idempotency,
    startedAt,
    logBodies: options.logBodies === true,
    rejects: refusals,
    log: (entry: RequestLog) => write(requestLine(entry)),
    degraded: () => {
      const reasons: string[] = []
      const store = engine.storeHealth()
      if (!store.ok) reasons.push(store.reason)
      if (reloadFailure) reasons.push(`the last bundle reload failed (still serving the previous bundle): ${reloadFailure}`)
      const limit = serving.bundle.config.server.maxPendingRuns
      if (engine.backlog >= limit) reasons.push(`the backlog is full: ${engine.backlog} accepted runs waiting (server.maxPendingRuns ${limit})`)
      const bytes = maxPendingBytes(serving.bundle.config)
      if (engine.backlogBytes >= bytes) reasons.push(`the backlog is full: the accepted runs waiting hold ${engine.backlogBytes} bytes (server.maxPendingBytes ${bytes})`)
      return reasons
    },
    metrics: metricsRenderer({
      backlog: () => engine.backlog,
      backlogLimit: () => serving.bundle.config.server.maxPendingRuns ?? 10_000,
      backlogBytes: () => engine.backlogBytes,
      backlogLimitBytes: () => maxPendingBytes(serving.bundle.config),
      queuedEvents: () => engine.queuedEvents(),
      bundle: () => serving.bundle.manifest,
    }),
  })
  server.on('request', handler)
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy()
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
    const code = status === 431 ? 'headers_too_large' : status === 408 ? 'request_timeout' : 'bad_request'
    // No request was parsed: no path, method or headers, and the peer is the address (no X-Forwarded-For to read).
    refusals.note(resolveClientAddress((socket as Socket).remoteAddress, undefined, serving.trusted), '', status, code, '', undefined, undefined)
    const body = JSON.stringify({ ok: false, error: status === 431 ? 'the request headers are too large' : status === 408 ? 'the request did not arrive in time' : 'the request is not valid HTTP', code })
    socket.end(`HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
  })
  // What Node would answer by itself without our JSON body: an Expect other than 100-continue (a bare
  // 417), and CONNECT (the socket closed without a word). Both are refusals like any other.
  server.on('checkExpectation', (req, res) => {
    refusals.note(resolveClientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for'], serving.trusted), (req.url ?? '').slice(0, 512), 417, 'expectation_failed', req.method ?? '', req.headers, undefined)
    res.setHeader('connection', 'close')
    sendError(res, new HttpError(417, 'expectation_failed', 'only Expect: 100-continue is understood'))
  })
  server.on('connect', (req, socket) => {
    refusals.note(resolveClientAddress((socket as Socket).remoteAddress, req.headers['x-forwarded-for'], serving.trusted), (req.url ?? '').slice(0, 512), 405, 'method_not_allowed', 'CONNECT', req.headers, undefined)
    const body = JSON.stringify({ ok: false, error: 'CONNECT is not accepted here', code: 'method_not_allowed' })
    socket.end(`HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
  })
  // Transform processes start at the first call that needs one (that call waits for its process;
  // its timeout counts from the process being ready): started here they competed with the first
  // requests for the CPU and held memory (~7 MiB of their own each) in a server that may never run a transform.

  const address = server.address() as AddressInfo
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address
  const url = `http://${shownHost}:${address.port}`
  write(`hookgate listening on ${url}${first.config.basePath} (bundle ${first.manifest.inputsHash.slice(0, 19)}…, ${first.manifest.routes.length} routes, state ${stateDir}${storeUrl !== undefined ? `, store ${shownStoreUrl(storeUrl)}` : ''})`)
  if (!first.config.enabled) write(disabledNotice(first.config.basePath))

  /** why the last reload was refused, until one succeeds (or finds the bundle unchanged) */
  let reloadFailure: string | null = null
  const reloadDeadlineMs = options.reloadDeadlineMs ?? DEFAULT_RELOAD_DEADLINE_MS
  const logError = (msg: string, error: string) => write(JSON.stringify({ t: new Date().toISOString(), level: 'error', msg, error }))
  // Where this server listens, for the operator page (hookgate admin) to show endpoint URLs and to
  // ask for the bundle it serves; removed when the server stops.
  const addressFile = join(stateDir, ADDRESS_FILE)
  try {
    writeFileSync(addressFile, JSON.stringify({ url, basePath: first.config.basePath, pid: process.pid }) + '\n')
  } catch (err) {
    logError('cannot write the address file', (err as Error).message)
  }

  /** One reload; `attempt.abandoned` turns true when its deadline passed, and then it must swap nothing in. */
  const reloadOnce = async (attempt: { abandoned: boolean; pool?: TransformPool | null }): Promise<boolean> => {
    // Compared before anything is imported: Node never frees an imported module, so importing an
    // unchanged bundle on every SIGHUP would only grow the heap.
    const onDisk = readBundleHash(bundleFile)
    if (onDisk !== undefined && onDisk === serving.bundle.manifest.inputsHash) {
      info('bundle unchanged; nothing to reload', { bundle: onDisk })
      reloadFailure = null
      countReload('unchanged')
      return false
    }
    const next = await loadBundle(bundleFile)
    if (next.manifest.inputsHash === serving.bundle.manifest.inputsHash) {
      info('bundle unchanged; nothing to reload', { bundle: next.manifest.inputsHash })
      reloadFailure = null
      countReload('unchanged')
      return false
    }
    if (attempt.abandoned) return false
    const prepared = prepare(next, stateDir, () => {}, reloadDeadlineMs, generatedSigningSecret)
    attempt.pool = prepared.pool
    if (next.config.server.host !== host || next.config.server.port !== serving.bundle.config.server.port) {
      info('server.host and server.port changes take effect at the next start')
    }
    // The store is opened once: a changed server.store (another database, its timings, the file store
    // instead) would otherwise go unnoticed until a restart happened to apply it.
    if (JSON.stringify(next.config.server.store ?? null) !== JSON.stringify(first.config.server.store ?? null)) {
      info('server.store changes take effect at the next start; this runtime keeps the store it opened')
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
    const old = serving
    serving = prepared
    void old.pool?.closeWhenIdle()
    engine.configure(next.config, next.workflows, prepared.wiring)
    scheduler.configure(next.config.tasks)
    idempotency.setWindow(next.config.server.idempotencyWindowMs)
    info('bundle reloaded', { bundle: next.manifest.inputsHash, routes: next.manifest.routes.length })
    if (!next.config.enabled) write(disabledNotice(next.config.basePath))
    reloadFailure = null
    countReload('reloaded')
    return true
  }

  let reloading: Promise<boolean> | undefined
  const reload = (): Promise<boolean> => {
    reloading ??= (async () => {
      const attempt: { abandoned: boolean; pool?: TransformPool | null } = { abandoned: false }
      let timer: NodeJS.Timeout | undefined
      const deadline = new Promise<never>((_, fail) => {
        timer = setTimeout(() => fail(new Error(`the reload did not finish within ${reloadDeadlineMs} ms (a transform module that does not finish loading?)`)), reloadDeadlineMs)
      })
      try {
        // A reload that hangs (a transform whose top-level await never settles) is abandoned, so
        // that it cannot hold `reloading` and block every later one.
        return await Promise.race([reloadOnce(attempt), deadline])
      } catch (err) {
        attempt.abandoned = true
        void attempt.pool?.close()
        logError('bundle reload refused; still serving the previous bundle', (err as Error).message)
        reloadFailure = (err as Error).message
        countReload('refused')
        return false
      } finally {
        clearTimeout(timer)
        reloading = undefined
      }
    })()
    return reloading
  }

  let watcher: FSWatcher | undefined
  if (options.watch !== false) {
    let debounce: NodeJS.Timeout | undefined
    // The compiler replaces the file by rename, so watch the directory for the file's name.
    watcher = watch(dirname(bundleFile), (_event, file) => {
      if (file !== basename(bundleFile)) return
      clearTimeout(debounce)
      debounce = setTimeout(() => void reload(), 150)
    })
    watcher.unref()
  }

  let closing: Promise<void> | undefined
  const close = (): Promise<void> => {
    closing ??= (async () => {
      watcher?.close()
      const stopped = new Promise<void>((ok) => server.close(() => ok()))
      server.closeIdleConnections()
      const grace = options.graceMs ?? 10_000
      const timer = setTimeout(() => server.closeAllConnections(), grace)
      await stopped
      clearTimeout(timer)
      await scheduler.stop()
      await serving.pool?.close()
      const drained = await engine.drain(grace)
      if (!drained) info('grace period over; unfinished runs resume at the next start')
      await sharedLockout?.close()
      await engine.close()
      rmSync(addressFile, { force: true })
      lock.release()
      out?.flush()
    })()
    return closing
  }

  // Last, once everything it fires into is open: a missed slot is caught up before start resolves.
  await scheduler.start(first.config.tasks, firedAtStart)
  return { url, port: address.port, stateDir, server, engine, scheduler, current: () => serving, reload, close }
}

/**
 * One request's log line, the same JSON as JSON.stringify({ t, level, msg, ...entry }) would give,
 * written field by field: the generic object spread and stringify showed in the profile.
 */
export function requestLine(e: RequestLog): string {
  let line = `{"t":"${isoNow()}","level":"info","msg":"request","method":${JSON.stringify(e.method)},"path":${JSON.stringify(e.path)},"status":${e.status},"ms":${e.ms},"client":${JSON.stringify(e.client)}`
  if (e.runId !== undefined) line += `,"runId":${JSON.stringify(e.runId)}`
  if (e.code !== undefined) line += `,"code":${JSON.stringify(e.code)}`
  if (e.body !== undefined) line += `,"body":${JSON.stringify(e.body)}`
  return line + '}'
}

/**
 * Log lines to stdout, gathered and written together once per turn of the event loop (a write
 * call per request line showed in the profile). A long burst is written every 256 lines.
 */
/** Said at start (and on a reload) so an operator need not guess why every hook is refused. */
function disabledNotice(basePath: string): string {
  return `hooks are disabled (hooks.enabled is false): ingress is off, every path under ${basePath} answers 404 hooks_disabled`
}

function batchedStdout(): { write(line: string): void; flush(): void } {
  let lines: string[] = []
  let scheduled = false
  const flush = (): void => {
    scheduled = false
    if (lines.length === 0) return
    const text = lines.join('')
    lines = []
    process.stdout.write(text)
  }
  return {
    write(line: string): void {
      lines.push(line + '\n')
      if (lines.length >= 256) flush()
      else if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    },
    flush,
  }
}

/**
 * Everything a bundle needs before it can serve, built once per load: secrets resolved (a missing
 * one is an error naming the reference; signing secrets included), model providers and channels created, transform processes.
 */
function prepare(bundle: LoadedBundle, stateDir: string, onGenerated: (token: string, where: string) => void, startDeadlineMs?: number, onGeneratedSecret?: (routeId: string, file: string) => void): Serving & { pool: TransformPool | null; wiring: EngineWiring } {
  const wiring: EngineWiring = {
    models: createModelRegistry(bundle.config.providers ?? [], bundle.configDir),
    channels: createChannels(bundle.config.channels ?? [], bundle.configDir),
    routes: [...bundle.routeTable.values()].flat(),
  }
  // With hooks disabled and no token, no presented token can match a random digest.
  const token = bundle.config.token === null && !bundle.config.enabled
    ? { digest: randomBytes(32), describe: 'none' }
    : resolveToken(bundle.config.token, bundle.configDir, stateDir)
  if (token.generated) onGenerated(token.generated, token.describe)
  const signatures = bundle.signed ? prepareSignatures(bundle.routeTable.values(), bundle.configDir, stateDir, (routeId, file) => onGeneratedSecret?.(routeId, file)) : new Map()
  const pool = TransformPool.forBundle(bundle, startDeadlineMs !== undefined ? { startDeadlineMs } : {})
  wiring.transforms = pool && ((caller, input) => pool.run(caller, input as unknown as TransformInput))
  wiring.stepSecrets = resolveStepSecrets(bundle)
  return {
    bundle,
    token: new TokenCheck(token.digest, 'value' in token ? token.value : undefined),
    trusted: new AddressMatcher(bundle.config.server.trustedProxies),
    signatures,
    transforms: pool && ((route, input) => pool.run(route, input)),
    pool,
    wiring,
  }
}

/** http steps' secret headers, read once per load like every other secret (a missing one fails the load, naming it). */
function resolveStepSecrets(bundle: LoadedBundle): Map<string, Record<string, string>> {
  const out = new Map<string, Record<string, string>>()
  for (const wf of bundle.workflows.values()) {
    for (const step of wf.steps) {
      const specs = Object.entries(step.secretHeaders ?? {})
      if (specs.length === 0) continue
      const values: Record<string, string> = {}
      for (const [name, spec] of specs) values[name] = resolveSecretValue(spec, bundle.configDir)
      out.set(`${wf.id}\0${step.id}`, values)
    }
  }
  return out
}
