// The supervisor (runtime/duties/supervisor.ts): the background duties start in the order they were
// registered and stop in reverse, so that none runs without what it depends on (the takeover sweep
// without resuming, the scheduler without the runner its runs go to); and what hookgate serve
// registers keeps that order.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { Duty } from '../../../runtime/duties/duty.js'
import { Supervisor } from '../../../runtime/duties/supervisor.js'
import { createLogger } from '../../../runtime/observe/log.js'
import { serve, setTestToken, type Harness } from '../http/harness.js'

/** A duty that records its starts and stops in `seen`, optionally failing or taking a while. */
function duty(name: string, seen: string[], behaviour: { startFails?: boolean; stopFails?: boolean; startTakes?: Promise<void>; unwell?: string } = {}): Duty {
  return {
    name,
    start() {
      seen.push(`start ${name}`)
      if (behaviour.startFails) throw new Error(`${name} cannot start`)
      if (behaviour.startTakes) return behaviour.startTakes.then(() => { seen.push(`started ${name}`) })
    },
    async stop() {
      seen.push(`stop ${name}`)
      if (behaviour.stopFails) throw new Error(`${name} cannot stop`)
    },
    health: () => (behaviour.unwell ? { ok: false, reason: behaviour.unwell } : { ok: true }),
  }
}

function supervisor(logs: string[] = []): Supervisor {
  return new Supervisor(createLogger((line) => logs.push(line)))
}

const order = suite('Supervisor')

order('starts the duties in the order registered and stops them in reverse', async () => {
  const seen: string[] = []
  const s = supervisor().add(duty('a', seen)).add(duty('b', seen)).add(duty('c', seen))
  await s.start()
  await s.stop()
  assert.equal(seen, ['start a', 'start b', 'start c', 'stop c', 'stop b', 'stop a'])
})

order('a duty that cannot start stops those already started, in reverse, and the start fails with its error; the rest never start', async () => {
  const seen: string[] = []
  const logs: string[] = []
  const s = supervisor(logs).add(duty('a', seen)).add(duty('b', seen)).add(duty('broken', seen, { startFails: true })).add(duty('d', seen))
  const err = await s.start().catch((e: Error) => e)
  assert.is((err as Error).message, 'broken cannot start')
  assert.equal(seen, ['start a', 'start b', 'start broken', 'stop b', 'stop a'])
  assert.ok(logs.some((l) => l.includes('could not start') && l.includes('"duty":"broken"')), logs.join('\n'))
})

order('a duty that fails to stop is logged, and the duties started before it still stop', async () => {
  const seen: string[] = []
  const logs: string[] = []
  const s = supervisor(logs).add(duty('a', seen)).add(duty('stuck', seen, { stopFails: true })).add(duty('c', seen))
  await s.start()
  await s.stop()
  assert.equal(seen, ['start a', 'start stuck', 'start c', 'stop c', 'stop stuck', 'stop a'])
  assert.ok(logs.some((l) => l.includes('did not stop cleanly') && l.includes('stuck cannot stop')), logs.join('\n'))
})

order('duties whose start is synchronous are all running when start() returns, before anything else can run (a request cannot be read in between)', () => {
  const seen: string[] = []
  let release!: () => void
  const slow = new Promise<void>((r) => { release = r })
  const s = supervisor().add(duty('a', seen)).add(duty('b', seen)).add(duty('catch-up', seen, { startTakes: slow }))
  const starting = s.start()
  // nothing awaited yet: every start has been called, the slow one is under way
  assert.equal(seen, ['start a', 'start b', 'start catch-up'])
  release()
  return starting.then(() => assert.equal(seen.at(-1), 'started catch-up'))
})

order('a stop that comes while a duty is starting stops it too once it has started, and starts no later one', async () => {
  const seen: string[] = []
  let release!: () => void
  const slow = new Promise<void>((r) => { release = r })
  const s = supervisor().add(duty('a', seen)).add(duty('slow', seen, { startTakes: slow })).add(duty('c', seen))
  const starting = s.start()
  const stopping = s.stop()
  release()
  await starting
  await stopping
  assert.equal(seen.filter((x) => x.startsWith('start ') || x.startsWith('stop ')).sort(), ['start a', 'start slow', 'stop a', 'stop slow'])
  assert.not.ok(seen.includes('start c'), 'a duty started after the stop')
})

order('health: the running duties that are not well say why, each by name', async () => {
  const seen: string[] = []
  const s = supervisor().add(duty('fine', seen)).add(duty('retention', seen, { unwell: 'the last prune failed: connection refused' }))
  await s.start()
  assert.equal(s.unhealthy(), ['retention: the last prune failed: connection refused'])
  assert.equal(s.report().map((r) => [r.name, r.running, r.health.ok]), [['fine', true, true], ['retention', true, false]])
  await s.stop()
  assert.equal(s.unhealthy(), [])
})

order('a duty registered after the start, or twice under one name, is refused', async () => {
  const seen: string[] = []
  const s = supervisor().add(duty('a', seen))
  assert.throws(() => s.add(duty('a', seen)), /two duties are named "a"/)
  await s.start()
  assert.throws(() => s.add(duty('late', seen)), /registered after the duties started/)
  await s.stop()
})

order.run()

// ---------------------------------------------------------------------------------------------

setTestToken()
const registered = suite<{ h: Harness }>('the duties hookgate serve registers')

registered.before(async (ctx) => {
  ctx.h = await serve(`
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
`)
})
registered.after(async (ctx) => { await ctx.h.close() })

registered('run in their one order: the runner and the notifier before resuming, the scheduler last (on the file store, without the database\'s loops)', ({ h }) => {
  assert.equal(h.service.duties.names, ['workflow runner', 'notifier', 'resume', 'transform processes', 'lock-out sharing', 'scheduler'])
  assert.ok(h.service.duties.report().every((d) => d.running), JSON.stringify(h.service.duties.report()))
})

registered.run()
