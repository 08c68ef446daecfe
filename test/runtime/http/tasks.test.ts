// Scheduled Tasks through the real server: an `every: 2s` task fires and writes task rows that
// name their slot; a restart on the same state never fires a slot twice; a slot missed while the
// server was down is caught up once with catchUp: once (the default) and not with skip.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileProject, recompile, serveProject, setTestToken, until, type Harness } from './harness.js'
import type { RunRow } from '../../../runtime/store/store.js'
import { openTestStore } from '../../helpers/stores.js'
import { fireTask, taskRunId } from '../../../runtime/scheduler/fire.js'
import { sleep } from '../../helpers/async.js'
import { readRows } from '../../helpers/history.js'

setTestToken()

function config(task: string): string {
  return `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
agents:
  - id: main
    model: builtin/echo
    tasks:
      - name: tick
        target: wake
        prompt: scheduled tick
${task.split('\n').map((l) => `        ${l}`).join('\n')}
`
}

const TASK_ID = 'task:main:tick'

async function taskRows(stateDir: string): Promise<RunRow[]> {
  return (await readRows(stateDir)).filter((r) => r.definitionKind === 'task' && r.definitionId === TASK_ID)
}

function slotsOf(rows: RunRow[]): string[] {
  return rows.map((r) => r.scheduledFor!).sort()
}

/** Each slot has one row: the history never holds a slot twice. */
function assertNoSlotTwice(rows: RunRow[]): void {
  const slots = slotsOf(rows)
  assert.equal([...new Set(slots)], slots, `a slot fired twice: ${slots.join(', ')}`)
}

const fires = suite('a task with every: 2s, served')

fires('fires on its 2 s slots and writes task rows with scheduledFor, which then succeed, and a reload fires no slot twice', async () => {
  const project = await compileProject(config('every: 2s'))
  const h = await serveProject(project)
  try {
    const rows = await until('two task rows', async () => { const r = (await taskRows(h.stateDir)); return r.length >= 2 ? r : undefined }, 7000)
    for (const row of rows) {
      assert.is(row.action, 'wake')
      assert.is(row.agentId, 'main')
      assert.match(row.scheduledFor!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/)
      assert.is(Date.parse(row.scheduledFor!) % 2000, 0, 'slots count from the epoch in 2 s steps')
      assert.is(row.id, taskRunId(TASK_ID, row.scheduledFor!), 'the run id is the claim on the slot')
    }
    assertNoSlotTwice(rows)
    const first = rows[rows.length - 1]!
    await until('the first firing to succeed', async () => ((await readRows(h.stateDir)).find((r) => r.id === first.id)?.status === 'succeeded' ? true : undefined), 4000)
    // A reload (here: another task added) keeps the task's place: no slot fires twice.
    await recompile(project, config('every: 2s') + '      - name: later\n        schedule: "@yearly"\n        target: wake\n')
    assert.is(await h.service.reload(), true)
    const seen = (await taskRows(h.stateDir)).length
    await until('two more task rows after the reload', async () => ((await taskRows(h.stateDir)).length >= seen + 2 ? true : undefined), 7000)
    assertNoSlotTwice((await taskRows(h.stateDir)))
  } finally {
    await h.close()
  }
})

fires('a slot already claimed is refused by the run store: firing it again writes no second row', async () => {
  const project = await compileProject(config('every: 1d'))
  const h = await serveProject(project)
  try {
    const task = h.service.current().bundle.config.tasks[0]!
    const slot = Date.parse('2026-01-01T00:00:00Z')
    assert.is(await fireTask(h.service.engine, task, slot), true)
    assert.is(await fireTask(h.service.engine, task, slot), false)
    assert.is((await taskRows(h.stateDir)).filter((r) => r.scheduledFor === '2026-01-01T00:00:00.000Z').length, 1)
  } finally {
    await h.close()
  }
})

const restart = suite('a task across restarts of the server on the same state')

restart('a restart does not fire a slot twice, and the slot passed while down is caught up once, as the latest', async () => {
  const project = await compileProject(config('every: 2s'))
  let h: Harness = await serveProject(project)
  await until('a first task row', async () => ((await taskRows(h.stateDir)).length >= 1 ? true : undefined), 5000)
  await h.close()
  const before = slotsOf((await taskRows(project.stateDir)))
  const lastBefore = Date.parse(before[before.length - 1]!)
  // Down across at least two slots.
  await sleep(4500)
  h = await serveProject(project)
  const startedAt = Date.now()
  try {
    // The catch-up is written before the service is handed back.
    const afterStart = slotsOf((await taskRows(h.stateDir)))
    const caughtUp = afterStart.filter((s) => !before.includes(s))
    const latestMissed = Math.floor(startedAt / 2000) * 2000
    assert.equal(caughtUp.map(Date.parse).filter((t) => t < latestMissed - 2000), [], `only the latest missed slot runs, not each one: ${caughtUp.join(', ')}`)
    assert.ok(caughtUp.length >= 1, 'the missed slot was caught up at start')
    assert.ok(Date.parse(caughtUp[0]!) > lastBefore + 2000, 'the slots between were not run one by one')
    await until('the next slot to fire after the restart', async () => ((await taskRows(h.stateDir)).length > afterStart.length ? true : undefined), 5000)
    assertNoSlotTwice((await taskRows(h.stateDir)))
  } finally {
    await h.close()
  }
})

/** A state directory whose history says the task last fired at `scheduledFor`. */
async function stateWithLastFiring(stateDir: string, scheduledFor: string): Promise<void> {
  const store = await openTestStore(stateDir, { fsync: false })
  await store.runs.create({ id: taskRunId(TASK_ID, scheduledFor), definitionKind: 'task', definitionId: TASK_ID, correlationId: 'c', action: 'wake', agentId: 'main', status: 'succeeded', scheduledFor })
  await store.close()
}

const catchUp = suite('a daily task whose last firing was ten days ago, at start')

const DAY = 86_400_000
const tenDaysAgo = () => new Date(Math.floor(Date.now() / DAY) * DAY - 10 * DAY).toISOString()

catchUp('with catchUp: once (the default) runs once, for today\'s midnight slot, not ten times', async () => {
  const project = await compileProject(config('schedule: "@daily"'))
  await stateWithLastFiring(project.stateDir, tenDaysAgo())
  const h = await serveProject(project)
  try {
    const rows = (await taskRows(h.stateDir))
    const today = new Date(Math.floor(Date.now() / DAY) * DAY).toISOString()
    assert.equal(slotsOf(rows), [tenDaysAgo(), today])
    assert.ok(h.logs.some((l) => l.includes('task caught up a slot missed while stopped')), h.logs.join('\n'))
  } finally {
    await h.close()
  }
  // and a second start does not catch up the same slot again
  const again = await serveProject(project)
  try {
    assert.is((await taskRows(again.stateDir)).length, 2)
  } finally {
    await again.close()
  }
})

catchUp('with catchUp: skip runs nothing until the next slot', async () => {
  const project = await compileProject(config('schedule: "@daily"\ncatchUp: skip'))
  await stateWithLastFiring(project.stateDir, tenDaysAgo())
  const h = await serveProject(project)
  try {
    await sleep(200)
    assert.equal(slotsOf((await taskRows(h.stateDir))), [tenDaysAgo()])
    const next = h.service.scheduler.upcoming()
    assert.equal(next, [{ id: TASK_ID, next: Math.floor(Date.now() / DAY) * DAY + DAY }])
  } finally {
    await h.close()
  }
})

fires.run()
restart.run()
catchUp.run()
