// `npm start` (scripts/start.mjs) stops everything it started on any stop signal: SIGTERM, SIGINT
// or SIGHUP sent to the npm process alone (a service manager, `kill`, a closed terminal) once left
// start.mjs, `serve` and `admin` running, holding both ports and the state lock, so that the next
// `npm start` failed. Each case runs the real `npm start` (or start.mjs) on free ports in its own
// process group, signals only the top process, and waits (bounded) until no process of the group
// is left, both ports refuse connections and the state lock can be taken.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { connect } from 'node:net'
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

/** Starts `command` in a new process group in a temp project and waits for "hookgate is up". */
async function startUp(command: string, args: string[]): Promise<Started> {
  const dir = scratchDir('npm-start-')
  writeTree(dir, { 'hooks.yaml': CONFIG })
  const child = spawn(command, args, {
    cwd: repoRoot,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, HOOKGATE_CONFIG: join(dir, 'hooks.yaml'), HOOKGATE_OUT: join(dir, 'dist'), HOOKGATE_ADMIN_PORT: '0', npm_config_update_notifier: 'false', NO_COLOR: '1' },
  })
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { output += d })
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { output += d })
  const pgid = child.pid!
  const deadline = Date.now() + 60_000
  for (;;) {
    const up = /hookgate is up:\n\s+webhooks\s+(\S+)\n\s+operator page\s+(\S+)/.exec(output)
    if (up) return { pgid, state: join(dir, 'state'), serve: new URL(up[1]!), admin: new URL(up[2]!), output: () => output }
    if (child.exitCode !== null || Date.now() > deadline) {
      killGroup(pgid)
      throw new Error(`${command} ${args.join(' ')} did not come up:\n${output}`)
    }
    await sleep(50)
  }
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

start.run()
