// A throwaway PostgreSQL server for tests: initdb into a temp directory, a postmaster that listens
// on a unix socket only (so parallel test processes never fight over a TCP port), and ways to stop
// it cleanly or crash it and start it again on the same data, to test what a store does when its
// database goes away. It needs the server binaries (Debian's `postgresql` package, which .ci/run
// installs) and psql, and no Node client library: it checks itself, and sets up databases, with
// psql, so it does not depend on the client the runtime uses.
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { accessSync, chownSync, closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'

export interface TestPostgres {
  /** connection URL over the unix socket, e.g. postgres://hookgate@/hookgate?host=/tmp/…&port=5432 (database and user `hookgate`) */
  url: string
  socketDir: string
  port: number
  dataDir: string
  /** the server's stderr, kept for error messages */
  logFile: string
  /** the psql binary beside the server (for tests that want to drive it themselves) */
  psql: string
  /** a fresh database on this server (CREATE DATABASE), its URL — so suites can isolate */
  createDatabase(name: string): Promise<string>
  /** runs `sql` with psql (against `url`, or this server's `hookgate` database) and returns its unaligned, tuples-only output */
  sql(sql: string, url?: string): Promise<string>
  /** stop: 'fast' (SIGINT) or 'immediate' (SIGQUIT: a crash, WAL replay at the next start) */
  stop(mode?: 'fast' | 'immediate'): Promise<void>
  /** start again on the same data dir and socket (after stop) */
  start(): Promise<void>
  /** stop and remove everything */
  destroy(): Promise<void>
}

interface Binaries { initdb: string; postgres: string; pgIsready: string; psql: string }

export const PG_USER = 'hookgate'
const PG_DATABASE = 'hookgate'
// The port only names the socket file (.s.PGSQL.<port>): no TCP listener, so any number will do.
const PORT = 5432
const NOBODY = 65534
// Crash recovery after an immediate stop, on a machine whose cores other processes keep busy, took
// longer than 15 s: a bound for a server that will not come up, not a measure of how fast it does.
const READY_TIMEOUT_MS = 60_000
const STOP_TIMEOUT_MS = 15_000
// How long an immediate shutdown may take before its stragglers are killed (it takes ~10 ms).
const IMMEDIATE_GRACE_MS = 1_000
// sun_path is 108 bytes on Linux, including the terminating NUL.
const MAX_SOCKET_PATH = 107
const TEMP_PREFIX = 'hookgate-pg-'

/** A throwaway server, started and ready, or null when this machine has no PostgreSQL server binaries. */
export async function startPostgres(): Promise<TestPostgres | null> {
  const bin = findBinaries()
  if (!bin) return null
  reapLeftovers()
  const root = makeRoot()
  const cleanup = (): void => { killNow(server.child); rmSync(root, { recursive: true, force: true, maxRetries: 3 }) }
  const server: Server = { bin, root, socketDir: join(root, 'sock'), dataDir: join(root, 'data'), logFile: join(root, 'postgres.log'), child: undefined, exited: undefined }
  // A test that throws, or forgets destroy(), must not leave a postmaster and its data behind.
  process.on('exit', cleanup)
  try {
    await initdb(server)
    await startServer(server)
    await psql(bin, urlFor(server, 'postgres'), `CREATE DATABASE ${PG_DATABASE}`)
  } catch (err) {
    process.off('exit', cleanup)
    cleanup()
    throw err
  }
  let destroyed = false
  return {
    url: urlFor(server, PG_DATABASE),
    socketDir: server.socketDir,
    port: PORT,
    dataDir: server.dataDir,
    logFile: server.logFile,
    psql: bin.psql,
    async createDatabase(name) {
      // Quoted, so that a keyword (group, create) is a name too; only plain lowercase names, which
      // also need no escaping in the URL.
      if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`createDatabase: ${JSON.stringify(name)} is not a plain lowercase identifier`)
      await psql(bin, urlFor(server, 'postgres'), `CREATE DATABASE "${name}"`)
      return urlFor(server, name)
    },
    sql: (sql, url = urlFor(server, PG_DATABASE)) => psql(bin, url, sql),
    stop: (mode = 'fast') => stopServer(server, mode),
    start: () => startServer(server),
    async destroy() {
      if (destroyed) return
      destroyed = true
      // Nothing is kept, so there is nothing to checkpoint: the quick way down.
      await stopServer(server, 'immediate')
      process.off('exit', cleanup)
      cleanup()
    },
  }
}

interface Server {
  bin: Binaries
  root: string
  socketDir: string
  dataDir: string
  logFile: string
  child: ChildProcess | undefined
  /** settles when `child` has exited */
  exited: Promise<void> | undefined
}

// --- finding the binaries ----------------------------------------------------------------------

/** initdb on PATH (followed to its real directory, where its siblings are), else the newest /usr/lib/postgresql/N/bin. */
function findBinaries(): Binaries | null {
  const candidates = [...binDirsOnPath(), ...debianBinDirs()]
  for (const dir of candidates) {
    const bin = binariesIn(dir)
    if (bin) return bin
  }
  return null
}

function binDirsOnPath(): string[] {
  const dirs: string[] = []
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const initdb = join(dir, 'initdb')
    // A symlink such as /usr/local/bin/initdb → /usr/lib/postgresql/15/bin/initdb: its siblings are over there.
    if (dir && isExecutable(initdb)) dirs.push(dirname(realpathSync(initdb)))
  }
  return dirs
}

function debianBinDirs(): string[] {
  const base = '/usr/lib/postgresql'
  if (!existsSync(base)) return []
  return readdirSync(base)
    .filter((v) => /^\d+(\.\d+)?$/.test(v))
    .sort((a, b) => Number(b) - Number(a))
    .map((v) => join(base, v, 'bin'))
}

function binariesIn(dir: string): Binaries | null {
  const at = (name: string): string | undefined => (isExecutable(join(dir, name)) ? join(dir, name) : undefined)
  const initdb = at('initdb'), postgres = at('postgres'), pgIsready = at('pg_isready')
  if (!initdb || !postgres || !pgIsready) return null
  // Debian's server package depends on the client, which puts psql beside the server; else PATH's.
  const psql = at('psql') ?? onPath('psql')
  if (!psql) throw new Error(`found the PostgreSQL server in ${dir} but no psql (install the PostgreSQL client)`)
  return { initdb, postgres, pgIsready, psql }
}

function onPath(name: string): string | undefined {
  return (process.env.PATH ?? '').split(delimiter).map((d) => join(d, name)).find((p) => isExecutable(p))
}

function isExecutable(path: string): boolean {
  try { accessSync(path, constants.X_OK); return statSync(path).isFile() } catch { return false }
}

// --- the temp directory ------------------------------------------------------------------------

/** initdb and postgres refuse to run as root: as root they run as nobody, who must own the directory. */
function runAs(): { uid: number; gid: number } | Record<string, never> {
  return process.getuid?.() === 0 ? { uid: NOBODY, gid: NOBODY } : {}
}

function makeRoot(): string {
  const root = mkdtempSync(join(tempBase(), TEMP_PREFIX))
  // Who made it, so that a later run can clean up after a test process that was SIGKILLed.
  writeFileSync(join(root, 'owner.pid'), String(process.pid))
  mkdirSync(join(root, 'sock'), { mode: 0o755 })
  if (process.getuid?.() === 0) for (const p of [root, join(root, 'sock')]) chownSync(p, NOBODY, NOBODY)
  return root
}

/**
 * os.tmpdir(), unless the socket path would not fit in sun_path there, or (as root) nobody could
 * not reach into it (a TMPDIR under /root): then /tmp.
 */
function tempBase(): string {
  const base = tmpdir()
  const socketPath = join(base, `${TEMP_PREFIX}XXXXXX`, 'sock', `.s.PGSQL.${PORT}`)
  if (socketPath.length > MAX_SOCKET_PATH) return '/tmp'
  if (process.getuid?.() === 0 && !traversableByOthers(base)) return '/tmp'
  return base
}

function traversableByOthers(dir: string): boolean {
  for (let d = realpathSync(dir); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false
    if (dirname(d) === d) return true
  }
}

/**
 * Temp directories whose test process died without its exit handler (SIGKILL from the runner's
 * timeout, a Ctrl-C): kill their postmaster, which takes its backends with it, and remove them.
 */
function reapLeftovers(): void {
  for (const base of new Set([tmpdir(), '/tmp'])) {
    let names: string[]
    try { names = readdirSync(base) } catch { continue }
    for (const name of names) {
      if (!name.startsWith(TEMP_PREFIX)) continue
      const root = join(base, name)
      const owner = readPid(join(root, 'owner.pid'))
      if (owner === undefined || isAlive(owner)) continue
      const postmaster = readPid(join(root, 'data', 'postmaster.pid'))
      if (postmaster !== undefined && isPostgres(postmaster)) killNow(postmaster)
      // Another user's leftovers (EACCES) are theirs to clean.
      try { rmSync(root, { recursive: true, force: true, maxRetries: 3 }) } catch { /* not ours */ }
    }
  }
}

function readPid(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, 'utf8').split('\n')[0])
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
  } catch { return undefined }
}

function isAlive(pid: number): boolean {
  try { process.kill(pid, 0); return true } catch (err) { return (err as NodeJS.ErrnoException).code === 'EPERM' }
}

/** Guards against a reused pid: only a process running a postgres binary is killed. */
function isPostgres(pid: number): boolean {
  try { return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres') } catch { return false }
}

/**
 * SIGKILL the postmaster and its children, synchronously (the exit handler cannot wait). Its
 * backends would exit when they see it gone, but not the ones still waiting for a startup packet.
 */
function killNow(target: ChildProcess | number | undefined): void {
  const pid = typeof target === 'number' ? target : running(target) ? target!.pid : undefined
  if (pid === undefined) return
  // Listed first: once the postmaster is gone its children belong to init and cannot be told apart.
  const children = childrenOf(pid)
  for (const p of [pid, ...children]) {
    try { process.kill(p, 'SIGKILL') } catch { /* already gone */ }
  }
}

// --- the server --------------------------------------------------------------------------------

function childEnv(): NodeJS.ProcessEnv {
  // PGHOST, PGPORT, PGOPTIONS… in the developer's environment must not steer the throwaway server or psql.
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PG')))
}

async function initdb(server: Server): Promise<void> {
  // --no-sync: the data directory is thrown away, so initdb's own fsyncs only cost time (the
  // running server keeps fsync on). The C locale: a LANG naming a locale this machine lacks would
  // make initdb fail, and tests must not depend on the developer's locale.
  const args = ['--no-sync', '-A', 'trust', '-U', PG_USER, '-D', server.dataDir, '--locale=C', '-E', 'UTF8']
  try {
    // cwd: run as nobody from the caller's directory (often under /root), initdb cannot find itself.
    await run(server.bin.initdb, args, { cwd: server.root, ...runAs() })
  } catch (err) {
    throw new Error(`initdb failed: ${(err as Error).message}`)
  }
}

async function startServer(server: Server): Promise<void> {
  if (running(server.child)) return
  const args = [
    '-D', server.dataDir, '-k', server.socketDir, '-p', String(PORT),
    '-c', 'listen_addresses=', '-c', 'fsync=on', '-c', 'max_connections=100', '-c', 'logging_collector=off',
    // A connection that never sends its startup packet holds a shutdown for this long (60 s by
    // default, longer than stop('fast') waits; see stopServer); clients here authenticate at once (trust).
    '-c', 'authentication_timeout=5s',
  ]
  // The log is a file, not a pipe to this process: a postmaster that outlives a killed test must
  // not hold the test runner's stdout open (it waits for 'close').
  const log = openSync(server.logFile, 'a')
  let child: ChildProcess
  try {
    child = spawn(server.bin.postgres, args, { cwd: server.root, env: childEnv(), stdio: ['ignore', log, log], ...runAs() })
  } finally {
    closeSync(log)
  }
  server.child = child
  server.exited = new Promise((resolve) => child.once('exit', () => resolve()))
  child.once('error', () => { /* reported by waitReady through the exit and the log */ })
  // An idle server must not keep the test process alive; the exit handler kills it.
  child.unref()
  await waitReady(server, child)
}

function running(child: ChildProcess | undefined): boolean {
  return child !== undefined && child.pid !== undefined && child.exitCode === null && child.signalCode === null
}

/** Polls pg_isready until the server accepts connections (after crash recovery, on a restart). */
async function waitReady(server: Server, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS
  for (;;) {
    if (!running(child)) throw new Error(`postgres exited (${child.exitCode ?? child.signalCode}) before it was ready\n${logTail(server)}`)
    if (await isReady(server)) return
    if (Date.now() > deadline) {
      killNow(child)
      throw new Error(`postgres was not ready after ${READY_TIMEOUT_MS / 1000} s\n${logTail(server)}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

async function isReady(server: Server): Promise<boolean> {
  try {
    await run(server.bin.pgIsready, ['-q', '-h', server.socketDir, '-p', String(PORT), '-U', PG_USER, '-d', 'postgres', '-t', '2'])
    return true
  } catch {
    return false
  }
}

async function stopServer(server: Server, mode: 'fast' | 'immediate'): Promise<void> {
  const child = server.child
  if (!running(child)) return
  const pid = child!.pid!
  child!.kill(mode === 'fast' ? 'SIGINT' : 'SIGQUIT')
  if (await exitedWithin(server, mode === 'immediate' ? IMMEDIATE_GRACE_MS : STOP_TIMEOUT_MS)) return
  if (mode === 'immediate') {
    // Still up: it waits for children it does not signal. A connection that arrives during the
    // shutdown gets a "dead-end" child that waits up to authentication_timeout for a startup
    // packet; a client that opened the socket and sent nothing (postgres.js does, after a crash)
    // holds the postmaster with it. A crash does not wait: kill them, and the postmaster finishes.
    for (const orphan of childrenOf(pid)) { try { process.kill(orphan, 'SIGKILL') } catch { /* gone */ } }
    if (await exitedWithin(server, STOP_TIMEOUT_MS)) return
  }
  killNow(child)
  await server.exited
  throw new Error(`postgres did not stop (${mode}) within ${STOP_TIMEOUT_MS / 1000} s and was killed\n${logTail(server)}`)
}

/** Whether the postmaster exits within `ms`; the timer also keeps this process alive while it waits (the child is unref'd). */
async function exitedWithin(server: Server, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), ms) })
  const outcome = await Promise.race([server.exited!.then(() => true), late])
  clearTimeout(timer)
  return outcome
}

/** The pids whose parent is `pid`, from /proc (none where there is no /proc). */
function childrenOf(pid: number): number[] {
  let entries: string[]
  try { entries = readdirSync('/proc') } catch { return [] }
  const out: number[] = []
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue
    try {
      // Fields after the parenthesised command (which may hold spaces): state, then ppid.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(name))
    } catch { /* exited meanwhile */ }
  }
  return out
}

function urlFor(server: Server, database: string): string {
  // '/' may stand unescaped in a query: the URL stays readable in error messages.
  return `postgres://${PG_USER}@/${database}?host=${encodeURIComponent(server.socketDir).replace(/%2F/g, '/')}&port=${PORT}`
}

/** The last lines of the server's log, for an error message. */
function logTail(server: Server, lines = 30): string {
  try {
    const text = readFileSync(server.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
    return `--- ${server.logFile} (tail) ---\n${text}`
  } catch {
    return `(no server log at ${server.logFile})`
  }
}

// --- psql and friends --------------------------------------------------------------------------

/** psql -X (no ~/.psqlrc), stopping at the first error, output as bare values. */
async function psql(bin: Binaries, url: string, sql: string): Promise<string> {
  const out = await run(bin.psql, ['-X', '-q', '-t', '-A', '-v', 'ON_ERROR_STOP=1', '-d', url, '-c', sql])
  return out.trim()
}

/** execFile with the PG* environment removed; rejects with the command's stderr in the message. */
function run(cmd: string, args: string[], opts: { cwd?: string; uid?: number; gid?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { env: childEnv(), timeout: 30_000, maxBuffer: 64 * 1024 * 1024, ...opts }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout)
      const detail = String(stderr).trim() || String(stdout).trim() || err.message
      reject(new Error(`${cmd.split('/').pop()} ${args.join(' ')}: ${detail}`))
    })
  })
}
