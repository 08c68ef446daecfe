// Regression: two `hookgate serve` on one state directory both ran (the second resumed the first's
// in-flight runs and answered the same Idempotency-Key again), and `serve` on a busy port printed
// "address already in use" and then hung when the bundle had transforms — after resuming runs.
//
// store: file only — the state directory's lock and files are the file store's (several runtimes
// on one PostgreSQL store are test/multihost/).
import { spawn } from 'node:child_process'
import { readFileSync, statSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { RunStore } from '../../../runtime/store/file/runs.js'
import { hookgateBin } from '../../helpers/paths.js'
import { compileProject, post, setTestToken, spawnServe, until, type Project } from './harness.js'

const TOKEN = setTestToken()

const CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: shaped
      match: { path: shaped }
      action: wake
      textTemplate: "shaped"
      transform: { module: shape.ts }
agents:
  - id: main
    model: builtin/echo
    heartbeat: { every: 1h }
`
const FILES = { 'transforms/shape.ts': 'export default function (input: any) { return { text: String(input.payload.x) } }\n' }

/** Runs `hookgate serve` expecting it to fail: its exit status, stderr and how long it took. */
function serveExpectingFailure(project: Project, extra: string[] = []): Promise<{ code: number | string; stderr: string; ms: number }> {
  const started = Date.now()
  const child = spawn(process.execPath, [hookgateBin, 'serve', '--bundle', project.outDir, '--host', '127.0.0.1', '--state', project.stateDir, ...extra], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env })
  let stderr = ''
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { stderr += d })
  child.stdout!.resume()
  const killer = setTimeout(() => child.kill('SIGKILL'), 15_000)
  return new Promise((resolve) => child.on('exit', (code, signal) => { clearTimeout(killer); resolve({ code: code ?? signal ?? 'unknown', stderr, ms: Date.now() - started }) }))
}

const owner = suite('one owner per state directory')

owner('a second serve on the same state exits 1 at once, naming the first one\'s pid, and touches nothing', async () => {
  const project = await compileProject(CONFIG, FILES)
  const first = await spawnServe(project.outDir, project.stateDir)
  try {
    const accepted = await post(first.origin, '/hooks/agent', TOKEN, { message: 'hello' }, { 'idempotency-key': 'k1' })
    assert.is(accepted.status, 202)
    const runsFile = join(project.stateDir, 'runs.jsonl')
    const before = readFileSync(runsFile, 'utf8')
    const second = await serveExpectingFailure(project, ['--port', '0'])
    assert.is(second.code, 1)
    assert.match(second.stderr, `pid ${first.child.pid}`)
    assert.ok(second.ms < 10_000, `took ${second.ms} ms`)
    // The second process resumed nothing and wrote nothing.
    assert.is(readFileSync(runsFile, 'utf8').length >= before.length, true)
    assert.not.match(second.stderr, 'resumed')
    // The first still owns it and still serves.
    assert.is((await post(first.origin, '/hooks/shaped', TOKEN, { x: 1 })).status, 200)
  } finally {
    first.child.kill('SIGTERM')
    await first.exited
  }
})

owner('after kill -9 of the owner, the next serve takes the stale lock over and resumes', async () => {
  const project = await compileProject(CONFIG, FILES)
  const first = await spawnServe(project.outDir, project.stateDir)
  first.kill()
  await first.exited
  const second = await spawnServe(project.outDir, project.stateDir)
  try {
    assert.is((await post(second.origin, '/hooks/shaped', TOKEN, { x: 2 })).status, 200)
  } finally {
    second.child.kill('SIGTERM')
    await second.exited
  }
})

owner('serve on a busy port exits 1 promptly with a bundle that has transforms, having resumed nothing', async () => {
  const project = await compileProject(CONFIG, FILES)
  // An unfinished run left in the state: a start that resumes it would move it on.
  const store = RunStore.open(project.stateDir)
  await store.create({ id: 'left-over', definitionKind: 'hook', definitionId: 'agent', correlationId: 'c', action: 'agent', agentId: 'main', sessionKey: 'hook:x', request: { message: 'left over', external: true, source: 'hook /hooks/agent', agentId: 'main', sessionKey: 'hook:x', name: null, wakeMode: 'now', deliver: false, channel: 'last', to: null, model: null, thinking: null, timeoutSeconds: null } })
  await store.close()
  const runsFile = join(project.stateDir, 'runs.jsonl')
  const sizeBefore = statSync(runsFile).size
  const busy = createServer()
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r))
  const port = (busy.address() as { port: number }).port
  try {
    const result = await serveExpectingFailure(project, ['--port', String(port)])
    assert.is(result.code, 1)
    assert.match(result.stderr, 'already in use')
    // its one line is a log line as the running server's are: JSON with the time and the level
    const line = JSON.parse(result.stderr.trimEnd()) as { t: string; level: string; msg: string }
    assert.is(line.level, 'error')
    assert.ok(!Number.isNaN(Date.parse(line.t)), result.stderr)
    assert.match(line.msg, /^hookgate serve: cannot start: the address is already in use/)
    assert.ok(result.ms < 10_000, `took ${result.ms} ms`)
    assert.is(statSync(runsFile).size, sizeBefore, 'the left-over run was not touched')
    assert.is(RunStore.readRows(project.stateDir).find((r) => r.id === 'left-over')?.status, 'queued')
  } finally {
    busy.close()
  }
  // The failed start released the lock: the next one resumes the run.
  const next = await spawnServe(project.outDir, project.stateDir)
  try {
    await until('the left-over run to finish', () => RunStore.readRows(project.stateDir).find((r) => r.id === 'left-over' && r.status === 'succeeded'), 8000)
  } finally {
    next.child.kill('SIGTERM')
    await next.exited
  }
})

owner.run()
