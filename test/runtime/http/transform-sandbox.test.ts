// Transforms against the real `hookgate serve` process, as a hostile transform would try to reach
// the server (issue 23): its environment (/proc/self/environ, /proc/<ppid>/environ), its state
// directory (<state>/token), a process of its own, a signal to the server, its priority, memory
// beyond the cap in Buffers the heap limit does not see. Each attempt must fail its request with
// 500 and leave the server, its token and its secrets where they were. Also: what a transform
// threw reaches the operator (the run row, the error log line), not the client; and transform
// processes never outlive the server, even one stuck in a loop when the server is SIGKILLed.
import { existsSync, readFileSync } from 'node:fs'
import { getPriority } from 'node:os'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { readRows } from '../../helpers/history.js'
import { serveStoreArgs } from '../../helpers/stores.js'
import { hookgateBin } from '../../helpers/paths.js'
import { cpuSecondsOf, processGone, transformProcesses } from '../../helpers/processes.js'
import { assertError, compileProject, post, scratchDir, spawnServer, until, type Project, type ServeProcess } from './harness.js'

/** A secret only the server's environment holds (as a provider key would be). */
const SECRET = `sk-server-only-${process.pid}-0123456789abcdef`

const CONFIG = `
server:
  transformMemoryMiB: 64
hooks:
  enabled: true
  token: { generate: true }
  transformsDir: transforms
  mappings:
${['selfEnviron', 'parentEnviron', 'stateToken', 'spawnShell', 'kill', 'rawKill', 'debugServer', 'renice', 'v8Flags', 'traceFile', 'hoard', 'throws', 'plain', 'spin']
  .map((name) => `    - id: ${name}
      match: { path: ${name} }
      action: agent
      messageTemplate: ${name}
      transform: { module: hostile.mjs, export: ${name}, timeoutMs: ${name === 'spin' ? 30000 : 10000} }`).join('\n')}
`

// What each transform returns would end up as the run's name (and so on disk and in `hookgate runs`).
const HOSTILE = `
import { readFileSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { setPriority } from 'node:os'
import { setFlagsFromString } from 'node:v8'
import { createTracing } from 'node:trace_events'

export function selfEnviron() { return { name: readFileSync('/proc/self/environ', 'latin1') } }
export function parentEnviron() { return { name: readFileSync('/proc/' + process.ppid + '/environ', 'latin1') } }
export function stateToken({ payload }) { return { name: readFileSync(payload.stateDir + '/token', 'utf8') } }
export function spawnShell({ payload }) {
  execFileSync('/bin/sh', ['-c', 'echo escaped > "$0"', payload.marker])
  return { name: 'spawned' }
}
// payload.serverPid is the server's pid: process.ppid of a transform process
export function kill({ payload }) { process.kill(payload.serverPid, 'SIGKILL'); return { name: 'signalled' } }
export function rawKill({ payload }) { process._kill(payload.serverPid, 9); return { name: 'signalled' } }
// SIGUSR1: the server would open its inspector, which runs any code sent to it
export function debugServer({ payload }) { process._debugProcess(payload.serverPid); return { name: 'inspector opened' } }
export function renice({ payload }) { setPriority(payload.serverPid, 19); return { name: 'reniced' } }
// native syntax (%-functions) is a way to corrupt memory, and from there around every check
export function v8Flags() { setFlagsFromString('--allow-natives-syntax'); return { name: 'flags set' } }
// trace files are written to the working directory, past the permission model
export function traceFile() { createTracing({ categories: ['node.perf'] }).enable(); return { name: 'tracing' } }
const held = []
export function hoard() {
  // 400 MiB outside the JS heap, every page written
  for (let i = 0; i < 400; i++) held.push(Buffer.alloc(1024 * 1024, i))
  return { name: 'held ' + held.length + ' MiB' }
}
export function throws() { throw new TypeError('the payload has no repository\\n    at hostile.mjs:1:1 (a second line)') }
export function plain() { return { name: 'plain' } }
export function spin() { for (;;) {} }
`

/** `started`: the stdout lines of start-up, which print the generated token once */
interface Ctx { project: Project; server: ServeProcess; token: string; started: number }

/** The serve process, with SECRET in its environment. */
async function start(project: Project): Promise<ServeProcess> {
  return spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--host', '127.0.0.1', '--state', project.stateDir, ...await serveStoreArgs(project.stateDir), '--grace-seconds', '1'],
    { cwd: project.dir, env: { ...process.env, SERVER_SECRET: SECRET } })
}

function alive(server: ServeProcess): boolean {
  return server.child.exitCode === null && server.child.signalCode === null
}

/** The failed run row the mapping's last request left, with its error. */
async function failedRow(project: Project, mapping: string): Promise<{ error?: string; name?: string } | undefined> {
  return (await readRows(project.stateDir)).filter((r) => r.definitionId === mapping && r.status === 'failed').at(-1)
}

const sandbox = suite<Ctx>('a transform cannot reach the server\'s secrets or process')

sandbox.before(async (ctx) => {
  ctx.project = await compileProject(CONFIG, { 'transforms/hostile.mjs': HOSTILE })
  ctx.server = await start(ctx.project)
  ctx.token = readFileSync(join(ctx.project.stateDir, 'token'), 'utf8').trim()
  ctx.started = ctx.server.stdout.length
})
sandbox.after(async (ctx) => {
  if (ctx.server && alive(ctx.server)) {
    ctx.server.child.kill('SIGTERM')
    await ctx.server.exited
  }
})

/** Sends the attack, which must answer 500 transform_failed and leave the server up, its secrets nowhere. */
async function attack(ctx: Ctx, mapping: string, payload: Record<string, unknown> = {}): Promise<string> {
  const reply = await post(ctx.server.origin, `/hooks/${mapping}`, ctx.token, { serverPid: ctx.server.child.pid, stateDir: ctx.project.stateDir, ...payload })
  assertError(reply, 500, 'transform_failed')
  assert.is(reply.json.error, 'the mapping transform failed', 'the client gets the generic sentence, not the transform\'s error')
  assert.ok(alive(ctx.server), 'the server died')
  assert.not.match(ctx.server.stderr(), 'Warning', 'a transform process\'s warnings reach the server\'s stderr')
  const row = await failedRow(ctx.project, mapping)
  assert.ok(row, `no failed run row for ${mapping}`)
  const everything = JSON.stringify((await readRows(ctx.project.stateDir))) + ctx.server.stdout.slice(ctx.started).join('\n') + ctx.server.stderr()
  for (const secret of [ctx.token, SECRET]) assert.not.ok(everything.includes(secret), `a secret reached the runs or the log after ${mapping}`)
  // the server still runs transforms
  assert.is((await post(ctx.server.origin, '/hooks/plain', ctx.token, {})).status, 202)
  return row!.error ?? ''
}

sandbox('a transform reading /proc/self/environ gets no environment of the server\'s', async (ctx) => {
  assert.match(await attack(ctx, 'selfEnviron'), 'Access to this API has been restricted')
})

sandbox('a transform reading /proc/<ppid>/environ (the server\'s environment) is refused', async (ctx) => {
  await attack(ctx, 'parentEnviron')
})

sandbox('a transform reading <state>/token (the generated hook token) is refused', async (ctx) => {
  await attack(ctx, 'stateToken')
})

sandbox('a transform cannot start a process', async (ctx) => {
  const marker = join(scratchDir('escape-'), 'escaped')
  await attack(ctx, 'spawnShell', { marker })
  assert.not.ok(existsSync(marker), 'the shell ran')
})

sandbox('a transform cannot signal the server: process.kill(process.ppid) and process._kill', async (ctx) => {
  assert.match(await attack(ctx, 'kill'), 'process.kill is not allowed in a transform')
  assert.match(await attack(ctx, 'rawKill'), 'process._kill is not allowed in a transform')
})

sandbox('a transform cannot open the server\'s inspector (process._debugProcess sends SIGUSR1)', async (ctx) => {
  await attack(ctx, 'debugServer')
  assert.not.match(ctx.server.stderr(), 'Debugger listening')
})

sandbox('a transform cannot lower the server\'s priority (os.setPriority)', async (ctx) => {
  const before = getPriority(ctx.server.child.pid!)
  await attack(ctx, 'renice')
  assert.is(getPriority(ctx.server.child.pid!), before)
})

sandbox('a transform cannot set V8 flags or write trace files', async (ctx) => {
  assert.match(await attack(ctx, 'v8Flags'), 'v8.setFlagsFromString is not allowed in a transform')
  assert.match(await attack(ctx, 'traceFile'), 'trace_events.createTracing is not allowed in a transform')
})

sandbox('a transform holding 400 MiB of Buffers under a 64 MiB cap is stopped', async (ctx) => {
  assert.match(await attack(ctx, 'hoard'), 'more than its 64 MiB of memory')
})

sandbox('what a transform threw is on its run row and in the error log line, first line only, and not in the answer', async (ctx) => {
  const error = await attack(ctx, 'throws')
  const line = 'transform of mapping "throws" failed: TypeError: the payload has no repository'
  assert.is(error, line)
  const logged = ctx.server.stderr().split('\n').filter((l) => l.includes('"throws"')).map((l) => JSON.parse(l) as { level: string; msg: string })
  assert.equal(logged.map((l) => [l.level, l.msg]), [['error', line]])
  assert.not.match(ctx.server.stdout.join('\n') + ctx.server.stderr(), 'a second line')
})

sandbox.run()

// ---------------------------------------------------------------------------------------------
const lifetime = suite<{ project: Project }>('transform processes end with the server')

lifetime.before(async (ctx) => { ctx.project = await compileProject(CONFIG, { 'transforms/hostile.mjs': HOSTILE }) })

/** A fresh server (its own state dir and token) of the same bundle. */
async function startedServer(project: Project): Promise<{ server: ServeProcess; token: string; stateDir: string }> {
  const stateDir = join(scratchDir('state-'), 'state')
  const server = await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--host', '127.0.0.1', '--state', stateDir, ...await serveStoreArgs(stateDir), '--grace-seconds', '1'], { cwd: project.dir })
  return { server, token: readFileSync(join(stateDir, 'token'), 'utf8').trim(), stateDir }
}

lifetime('SIGTERM to the server ends its transform processes', async ({ project }) => {
  const { server, token } = await startedServer(project)
  assert.is((await post(server.origin, '/hooks/plain', token, {})).status, 202)
  const children = transformProcesses(server.child.pid!)
  assert.is(children.length, 1, 'one call started one transform process')
  server.child.kill('SIGTERM')
  await server.exited
  await until('the transform process to exit', () => children.every(processGone) || undefined, 5000)
})

lifetime('SIGKILL to the server ends its idle transform processes', async ({ project }) => {
  const { server, token } = await startedServer(project)
  assert.is((await post(server.origin, '/hooks/plain', token, {})).status, 202)
  const children = transformProcesses(server.child.pid!)
  assert.is(children.length, 1)
  server.kill()
  await server.exited
  await until('the transform process to exit', () => children.every(processGone) || undefined, 5000)
})

lifetime('SIGKILL to the server ends a transform process stuck in a synchronous loop', async ({ project }) => {
  const { server, token } = await startedServer(project)
  const stuck = post(server.origin, '/hooks/spin', token, {}).catch(() => undefined)
  const [child] = await until('a transform process', () => {
    const found = transformProcesses(server.child.pid!)
    return found.length > 0 ? found : undefined
  }, 5000)
  // spinning: it has used far more CPU than starting takes
  await until('the transform to spin', () => (cpuSecondsOf(child!) > 1 ? true : undefined), 10_000)
  server.kill()
  await server.exited
  await stuck
  await until('the spinning transform process to exit', () => (processGone(child!) ? true : undefined), 5000)
})

lifetime('a transform process killed from outside is replaced: the next call runs on a fresh one', async ({ project }) => {
  const { server, token } = await startedServer(project)
  try {
    assert.is((await post(server.origin, '/hooks/plain', token, {})).status, 202)
    const [first] = transformProcesses(server.child.pid!)
    process.kill(first!, 'SIGKILL')
    await until('the transform process to exit', () => (processGone(first!) ? true : undefined), 5000)
    // The server hears of the death when its event loop handles the child's exit: a call sent to the
    // dead process before then fails alone (500, as a call whose process dies under it does), and
    // the next one starts a fresh process. Never more than that one.
    const next = await post(server.origin, '/hooks/plain', token, {})
    if (next.status !== 202) {
      assert.is(next.status, 500, next.text)
      assert.is((await post(server.origin, '/hooks/plain', token, {})).status, 202)
    }
    const now = transformProcesses(server.child.pid!)
    assert.is(now.length, 1)
    assert.is.not(now[0], first)
  } finally {
    server.child.kill('SIGTERM')
    await server.exited
  }
})

lifetime.run()
