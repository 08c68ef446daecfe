// `npm start` (scripts/start.mjs) stops everything it started on any stop signal: SIGTERM, SIGINT
// or SIGHUP sent to the npm process alone (a service manager, `kill`, a closed terminal) once left
// start.mjs, `serve` and `admin` running, holding both ports and the state lock, so that the next
// `npm start` failed. Each case runs the real `npm start` (or start.mjs) on free ports in its own
// process group, signals only the top process, and waits (bounded) until no process of the group
// is left, both ports refuse connections and the state lock can be taken.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { connect, createServer, type AddressInfo, type Server } from 'node:net'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { acquireStateLock, LOCK_FILE } from '../../runtime/lib/state-lock.js'
import { repoRoot, scratchDir, writeTree } from '../helpers/paths.js'
import { sleep } from '../helpers/async.js'

const CONFIG = `hooks:
  enabled: true
  token: { generate: true }
server:
  port: 0
  stateDir: state
agents:
  - id: main
    default: true
    model: builtin/echo
`

/** How long the group may take to stop: serve drains for at most its 10 s grace; the rest is a busy machine. */
const STOP_WITHIN_MS = 25_000

interface Started { pgid: number; state: string; serve: URL; admin: URL; output: () => string }

interface LogLine { t: string; level: string; msg: string; [field: string]: unknown }

/** The JSON log lines in `output`; a line that is not one fails the test. */
function logLines(output: string): LogLine[] {
  return output.split('\n').filter((l) => l !== '').map((l) => {
    let parsed: LogLine
    try { parsed = JSON.parse(l) as LogLine } catch { throw new Error(`not a JSON log line: ${l}\nin:\n${output}`) }
    assert.ok(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(parsed.t), `no timestamp: ${l}`)
    assert.type(parsed.msg, 'string')
    return parsed
  })
}

/** Starts `command` in a new process group in a temp project and waits for its "hookgate is up" log line. */
async function startUp(command: string, args: string[], env: Record<string, string> = { HOOKGATE_ADMIN_PORT: '0' }): Promise<Started> {
  const dir = scratchDir('npm-start-')
  writeTree(dir, { 'hooks.yaml': CONFIG })
  const childEnv: NodeJS.ProcessEnv = { ...process.env, HOOKGATE_CONFIG: join(dir, 'hooks.yaml'), HOOKGATE_OUT: join(dir, 'dist'), npm_config_update_notifier: 'false', NO_COLOR: '1' }
  delete childEnv.HOOKGATE_PORT
  delete childEnv.HOOKGATE_ADMIN_PORT
  const child = spawn(command, args, { cwd: repoRoot, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...childEnv, ...env } })
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { output += d })
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { output += d })
  const pgid = child.pid!
  const deadline = Date.now() + 60_000
  for (;;) {
    const up = output.split('\n').find((l) => l.includes('"msg":"hookgate is up"'))
    if (up) {
      const line = JSON.parse(up) as { webhooks: string; page: string }
      return { pgid, state: join(dir, 'state'), serve: new URL(line.webhooks), admin: new URL(line.page), output: () => output }
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      killGroup(pgid)
      throw new Error(`${command} ${args.join(' ')} did not come up:\n${output}`)
    }
    await sleep(50)
  }
}

/** `n` different ports nothing listens on now (the kernel's picks, all held at once, then released). */
async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(Array.from({ length: n }, () => new Promise<Server>((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve(server))
  })))
  const ports = servers.map((s) => (s.address() as AddressInfo).port)
  await Promise.all(servers.map((s) => new Promise((done) => s.close(done))))
  return ports
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH'
  }
}

function killGroup(pgid: number): void {
  try { process.kill(-pgid, 'SIGKILL') } catch { /* gone */ }
}

function refused(url: URL): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname)
    socket.once('connect', () => { socket.destroy(); resolve(false) })
    socket.once('error', () => resolve(true))
  })
}

async function stopsEverything(command: string, args: string[], signal: NodeJS.Signals): Promise<void> {
  const s = await startUp(command, args)
  try {
    assert.ok(existsSync(join(s.state, LOCK_FILE)), 'serve holds the state lock')
    // the npm (or start.mjs) process only, not its group
    process.kill(s.pgid, signal)
    const deadline = Date.now() + STOP_WITHIN_MS
    while (groupAlive(s.pgid) && Date.now() < deadline) await sleep(100)
    assert.not.ok(groupAlive(s.pgid), `a process it started still runs ${STOP_WITHIN_MS / 1000} s after ${signal}:\n${s.output()}`)
    assert.ok(await refused(s.serve), `${s.serve.href} still answers`)
    assert.ok(await refused(s.admin), `${s.admin.href} still answers`)
    assert.not.ok(existsSync(join(s.state, LOCK_FILE)), 'the state lock was not released')
    acquireStateLock(s.state).release()
  } finally {
    killGroup(s.pgid)
  }
}

const start = suite('npm start')

for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
  start(`${signal} to the npm process alone stops start.mjs, serve and admin: the ports are free and the state lock released`, async () => {
    await stopsEverything('npm', ['start', '--silent'], signal)
  })
}

start('SIGHUP to start.mjs run without npm stops serve and admin too (serve is sent SIGTERM, not the SIGHUP that reloads it)', async () => {
  await stopsEverything(process.execPath, [join(repoRoot, 'scripts', 'start.mjs')], 'SIGHUP')
})

start('npm start -- --port N --admin-port M serves the webhooks and the page on those ports, and every line it prints is a JSON log line with a timestamp', async () => {
  const [port, adminPort] = await freePorts(2)
  const s = await startUp('npm', ['start', '--silent', '--', '--port', String(port), '--admin-port', String(adminPort)], {})
  try {
    assert.is(Number(s.serve.port), port, s.output())
    assert.is(Number(s.admin.port), adminPort, s.output())
    assert.is((await fetch(new URL('/healthz', s.serve))).status, 200)
    assert.is((await fetch(s.admin)).status, 200)
    const msgs = logLines(s.output()).map((l) => l.msg)
    for (const part of [/^compiled /, /^generated a hook token/, /^hookgate listening on /, /^generated an admin token/, /^hookgate admin on /, /^hookgate is up$/]) {
      assert.ok(msgs.some((m) => part.test(m)), `no log line ${part}:\n${s.output()}`)
    }
    // a successful compile's summary is news, not an error (compile prints it on stderr)
    assert.equal(logLines(s.output()).filter((l) => l.from === 'compile').map((l) => l.level), ['info'], s.output())
  } finally {
    killGroup(s.pgid)
  }
})

start('HOOKGATE_PORT and HOOKGATE_ADMIN_PORT choose the ports when no flag does; a flag wins over its variable', async () => {
  const [port, adminPort, flagPort] = await freePorts(3)
  const s = await startUp('npm', ['start', '--silent'], { HOOKGATE_PORT: String(port), HOOKGATE_ADMIN_PORT: String(adminPort) })
  try {
    assert.is(Number(s.serve.port), port, s.output())
    assert.is(Number(s.admin.port), adminPort, s.output())
  } finally {
    killGroup(s.pgid)
  }
  const f = await startUp(process.execPath, [join(repoRoot, 'scripts', 'start.mjs'), '--port', String(flagPort), '--admin-port', '0'], { HOOKGATE_PORT: '1', HOOKGATE_ADMIN_PORT: '1' })
  try {
    assert.is(Number(f.serve.port), flagPort, f.output())
    assert.is.not(Number(f.admin.port), 1, f.output())
  } finally {
    killGroup(f.pgid)
  }
})

start('a port that is not a number stops npm start before it compiles, with exit 2 and a JSON log line saying which', async () => {
  const dir = scratchDir('npm-start-bad-')
  const r = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'start.mjs'), '--port', '80a'], { cwd: repoRoot, encoding: 'utf8', env: { ...process.env, HOOKGATE_CONFIG: join(dir, 'hooks.yaml'), HOOKGATE_OUT: join(dir, 'dist') }, timeout: 30_000 })
  assert.is(r.status, 2, r.stderr)
  const [line] = logLines(r.stderr)
  assert.is(line!.level, 'error')
  assert.match(line!.msg, /--port takes a port number from 0 to 65535, not "80a"/)
  assert.not.ok(existsSync(join(dir, 'dist')), 'it compiled')
})

start.run()
