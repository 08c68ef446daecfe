// The Scheduler with in-memory fakes and its own clock: what it fires at start (catchUp once or
// skip), that a late wake runs the latest passed slot once rather than each one, and that stop()
// leaves nothing armed.
//
// store: none — the scheduler over in-memory fakes: the PostgreSQL pass leaves it out.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { BundleTask } from '../../../runtime/bundle/format.js'
import { Scheduler } from '../../../runtime/scheduler/scheduler.js'
import { sleep } from '../../helpers/async.js'

const DAY = 86_400_000
const T = Date.parse('2026-11-24T06:00:00Z')

function task(catchUp: 'skip' | 'once'): BundleTask {
  return { id: 'task:main:1', agentId: 'main', name: 'daily', schedule: 'every 1d', when: { kind: 'every', everyMs: DAY }, catchUp, target: 'wake', notify: 'done' }
}

function fake(history: Map<string, number>) {
  const clock = { now: T }
  const fired: string[] = []
  const logs: string[] = []
  const scheduler = new Scheduler({
    fire: async (_t, slot) => { fired.push(new Date(slot).toISOString()); return true },
    lastFired: () => history,
    log: (_level, msg) => { logs.push(msg) },
    now: () => clock.now,
  })
  return { clock, fired, logs, scheduler }
}

const start = suite('Scheduler.start')

start('with catchUp once, a task last fired ten days ago runs once, for the latest missed slot', async () => {
  const f = fake(new Map([['task:main:1', T - 10 * DAY]]))
  await f.scheduler.start([task('once')])
  assert.equal(f.fired, ['2026-11-24T00:00:00.000Z'])
  assert.equal(f.scheduler.upcoming(), [{ id: 'task:main:1', next: Date.parse('2026-11-25T00:00:00Z') }])
  await f.scheduler.stop()
})

start('with catchUp skip, nothing runs until the next slot', async () => {
  const f = fake(new Map([['task:main:1', T - 10 * DAY]]))
  await f.scheduler.start([task('skip')])
  assert.equal(f.fired, [])
  await f.scheduler.stop()
})

start('a task with no firing in the history starts from now: nothing to catch up', async () => {
  const f = fake(new Map())
  await f.scheduler.start([task('once')])
  assert.equal(f.fired, [])
  await f.scheduler.stop()
})

start('a task without a compiled schedule (an older bundle) is not scheduled, and the log says to recompile', async () => {
  const f = fake(new Map())
  const { when: _when, ...old } = task('once')
  await f.scheduler.start([old])
  assert.equal(f.scheduler.upcoming(), [])
  assert.match(f.logs.join('\n'), 'recompile')
  await f.scheduler.stop()
})

const late = suite('Scheduler woken late')

late('five slots passed while the host was suspended: the latest runs once, not five times', async () => {
  const f = fake(new Map())
  await f.scheduler.start([task('once')])
  f.clock.now = T + 5 * DAY
  f.scheduler.configure([task('once')]) // re-arms: the slot is due, so the timer is set to 0
  await sleep(50)
  assert.equal(f.fired, ['2026-11-29T00:00:00.000Z'])
  assert.equal(f.scheduler.upcoming(), [{ id: 'task:main:1', next: Date.parse('2026-11-30T00:00:00Z') }])
  await f.scheduler.stop()
})

late('after stop() nothing fires, even with slots due', async () => {
  const f = fake(new Map())
  await f.scheduler.start([task('once')])
  await f.scheduler.stop()
  f.clock.now = T + 5 * DAY
  f.scheduler.configure([task('once')])
  await sleep(50)
  assert.equal(f.fired, [])
})

start.run()
late.run()
