// What an accepted request leaves behind, as a user sees it: one run-history row per call, on disk
// by the time the answer arrives, readable with the store's history reader and the real `hookgate
// runs --json`; agent runs and `now` wakes finish, a `next-heartbeat` wake waits for the heartbeat.
import { spawn } from 'node:child_process'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { isFinalStatus, sessionLogName, type RunRow } from '../../../runtime/store/store.js'
import { readRows } from '../../helpers/history.js'
import { divergesOnPostgres, openTestStore, storeArgs, WAKES_BEFORE_SESSION } from '../../helpers/stores.js'
import { hookgateBin } from '../../helpers/paths.js'
import { assertOk, compileProject, post, rowOf, runReaches, serve, serveProject, setTestToken, sleep, until, type Harness } from './harness.js'

const TOKEN = setTestToken()

const CONFIG = `
server:
  bodyTimeoutSeconds: 0.5
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
agents:
  - id: main
    model: builtin/echo
    triggers:
      - name: Deploy finished
        path: deploys
        target: agent
        prompt: "deploy of {{payload.service}} finished"
`

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/

function runsCli(stateDir: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [hookgateBin, 'runs', '--state', stateDir, ...storeArgs(stateDir), '--json'], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d })
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }) })
  })
}

function assertRowShape(row: RunRow | undefined, expected: { id: string; action: string; definitionKind: string; correlationId?: string }): void {
  assert.ok(row, `no run-history row with id ${expected.id}`)
  assert.is(row!.id, expected.id)
  assert.is(row!.action, expected.action)
  assert.is(row!.definitionKind, expected.definitionKind)
  assert.type(row!.correlationId, 'string')
  assert.ok(row!.correlationId.length > 0)
  if (expected.correlationId !== undefined) assert.is(row!.correlationId, expected.correlationId)
  assert.ok(['queued', 'running', 'succeeded', 'failed', 'timed_out', 'skipped'].includes(row!.status), `status ${row!.status}`)
  assert.match(row!.createdAt, ISO)
}

// ---------------------------------------------------------------------------------------------

const history = suite<{ h: Harness; wakeId: string; agentId: string; agentCorrelation: string }>('run history of accepted calls')

history.before(async (ctx) => { ctx.h = await serve(CONFIG) })
history.after(async (ctx) => { await ctx.h.close() })

history('a wake and an agent call are each one row on disk by the time they are answered', async (ctx) => {
  const wake = assertOk(await post(ctx.h.origin, '/hooks/wake', TOKEN, { text: 'ping', mode: 'now' }), 200, ['ok', 'action', 'runId', 'mode'])
  assertRowShape((await rowOf(ctx.h.stateDir, wake.runId)), { id: wake.runId, action: 'wake', definitionKind: 'hook' })
  const agent = assertOk(await post(ctx.h.origin, '/hooks/agent', TOKEN, { message: 'summarise' }), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assertRowShape((await rowOf(ctx.h.stateDir, agent.runId)), { id: agent.runId, action: 'agent', definitionKind: 'hook', correlationId: agent.correlationId })
  ctx.wakeId = wake.runId
  ctx.agentId = agent.runId
  ctx.agentCorrelation = agent.correlationId
  const rows = await readRows(ctx.h.stateDir)
  assert.is(rows.filter((r) => r.id === wake.runId).length, 1)
  assert.is(rows.filter((r) => r.id === agent.runId).length, 1)
})

history('the agent run reaches succeeded', async ({ h, agentId }) => {
  const row = await runReaches(h.stateDir, agentId, 'succeeded')
  assert.match(row.result ?? '', /summarise/)
})

history('a wake with mode now reaches succeeded', async ({ h, wakeId }) => {
  await runReaches(h.stateDir, wakeId, 'succeeded')
})

history('hookgate runs --state DIR --json (the real CLI) shows both rows with id, definitionKind, correlationId, action, status, createdAt', async ({ h, wakeId, agentId, agentCorrelation }) => {
  const result = await runsCli(h.stateDir)
  assert.is(result.code, 0, result.stderr)
  const rows = JSON.parse(result.stdout) as RunRow[]
  assert.ok(Array.isArray(rows))
  const wake = rows.find((r) => r.id === wakeId)
  const agent = rows.find((r) => r.id === agentId)
  assertRowShape(wake, { id: wakeId, action: 'wake', definitionKind: 'hook' })
  assertRowShape(agent, { id: agentId, action: 'agent', definitionKind: 'hook', correlationId: agentCorrelation })
  assert.is(agent!.status, 'succeeded')
  assert.is(wake!.status, 'succeeded')
  // newest first
  assert.ok(rows.indexOf(agent!) < rows.indexOf(wake!), 'hookgate runs lists the newest run first')
})

history('a call to a Trigger definition path is one row with definitionKind trigger', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/deploys', TOKEN, { service: 'api' }), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assertRowShape((await rowOf(h.stateDir, body.runId)), { id: body.runId, action: 'agent', definitionKind: 'trigger', correlationId: body.correlationId })
  await runReaches(h.stateDir, body.runId, 'succeeded')
})

history('40 concurrent agent calls are 40 distinct rows, each on disk when answered', async ({ h }) => {
  const replies = await Promise.all(Array.from({ length: 40 }, (_, i) => post(h.origin, '/hooks/agent', TOKEN, { message: `burst ${i}` })))
  const ids = replies.map((r) => assertOk(r, 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey']).runId as string)
  assert.is(new Set(ids).size, 40)
  const onDisk = new Set((await readRows(h.stateDir)).map((r) => r.id))
  for (const id of ids) assert.ok(onDisk.has(id), `run ${id} was answered but is not on disk`)
})

history.run()

// ---------------------------------------------------------------------------------------------

const later = suite<{ h: Harness }>('a next-heartbeat wake')

// its own service: any `now` turn on the main session would read the queued event too
later.before(async (ctx) => { ctx.h = await serve(CONFIG) })
later.after(async (ctx) => { await ctx.h.close() })

divergesOnPostgres(later, WAKES_BEFORE_SESSION)('is stored and stays queued until the heartbeat', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/wake', TOKEN, { text: 'later', mode: 'next-heartbeat' }), 200, ['ok', 'action', 'runId', 'mode'])
  assert.is(body.mode, 'next-heartbeat')
  assertRowShape((await rowOf(h.stateDir, body.runId)), { id: body.runId, action: 'wake', definitionKind: 'hook' })
  await sleep(500)
  assert.is((await rowOf(h.stateDir, body.runId))?.status, 'queued')
})

later.run()

// ---------------------------------------------------------------------------------------------

const recovery = suite('an acknowledged wake after a crash')

divergesOnPostgres(recovery, WAKES_BEFORE_SESSION)('a kill -9 between the heartbeat turn and the status change does not leave the wake queued forever', async () => {
  const project = await compileProject(CONFIG)
  // 1. a wake is acknowledged and stored (next-heartbeat, so nothing runs it yet); the server stops
  const before = await serveProject(project)
  const body = assertOk(await post(before.origin, '/hooks/wake', TOKEN, { text: 'acknowledged before the crash', mode: 'next-heartbeat' }), 200, ['ok', 'action', 'runId', 'mode'])
  await before.close()
  // 2. the state a kill -9 leaves when it lands after the heartbeat turn that read the event was
  //    journaled and before the wake's run moved on (seen with the real CLI, see serve-cli.test.ts)
  const state = await openTestStore(project.stateDir)
  const session = state.openLog<object>(sessionLogName('main')).log
  await session.append({ type: 'turn', id: `turn:${Date.now()}:event:${body.runId}`, at: new Date().toISOString(), events: [`event:${body.runId}`], reply: 'echo: acknowledged before the crash' })
  await state.close()
  assert.is((await rowOf(project.stateDir, body.runId))?.status, 'queued')
  // 3. the restarted server must bring the acknowledged run to an end
  const after = await serveProject(project)
  try {
    const settled = await until('the wake to reach a final status', async () => {
      const row = (await rowOf(project.stateDir, body.runId))
      return row && isFinalStatus(row.status) ? row.status : undefined
    }, 2000).catch(async () => (await rowOf(project.stateDir, body.runId))?.status)
    // Regression: resumeUnfinished skips wake rows and the session treats the event as consumed, so the acknowledged wake stays queued forever
    assert.is(settled, 'succeeded')
  } finally {
    await after.close()
  }
})

recovery.run()
