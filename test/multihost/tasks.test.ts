// Scenario 4 of the scale-out design (design/scale-out.md §7), issue 17: a task slot fires once
// across runtimes, with no leader. Three `hookgate serve` runtimes on one PostgreSQL all keep a task
// that fires every second; one is SIGKILLed midway and a new one started. Every slot in the window
// fired exactly once (no slot twice, none missed while at least one runtime was up), several
// runtimes took turns winning slots, and every firing's run finished, the dead runtime's too.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { sleep } from '../helpers/async.js'
import { scenarioYaml, startHosts, type Hosts } from '../helpers/hosts.js'
import { startPostgres } from '../helpers/pg.js'
import { setTestToken, until } from '../runtime/http/harness.js'

setTestToken()
const pg = await startPostgres()
const tasks = suite('a task slot fires once across runtimes')

const CONFIG = scenarioYaml({
  hostTtlSeconds: 2, sweepSeconds: 0.5,
  agents: '  - id: main\n    default: true\n    model: builtin/echo\n    heartbeat: { every: "off" }\n    tasks:\n      - { name: tick, every: 1s, target: agent, prompt: tick }',
})

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  let hosts: Hosts | undefined
  tasks.after(async () => {
    hosts?.killAll()
    await pg.destroy()
  })

  tasks('three runtimes, one killed midway: every slot fired exactly once, by whichever runtime came first', async () => {
    const url = await pg.createDatabase('tasks')
    hosts = await startHosts({ storeUrl: url, count: 3, yaml: CONFIG, env: { HOOKGATE_STORE_URL: url } })
    const h = hosts
    const from = Date.now()
    await sleep(5000)
    await h.kill(h.live()[0]!)
    await h.add()
    await sleep(6000)
    const to = Date.now()
    const exits = await h.stopAll()
    assert.ok(Object.values(exits).every((e) => e === 0), JSON.stringify(exits))

    const rows = (await pg.sql("SELECT row->>'scheduledFor' || ' ' || id || ' ' || status || ' ' || owner FROM hookgate_runs WHERE definition_kind = 'task' ORDER BY 1", url)).split('\n').filter(Boolean)
    const slots = rows.map((r) => r.split(' ')[0]!)
    assert.is(new Set(slots).size, slots.length, `a slot fired twice:\n${rows.join('\n')}`)
    // every whole second between the first runtime's start and the last stop, give or take the edges
    const expected: string[] = []
    for (let t = Math.ceil((from + 1500) / 1000) * 1000; t <= to - 1500; t += 1000) expected.push(new Date(t).toISOString())
    const missed = expected.filter((slot) => !slots.includes(slot))
    assert.equal(missed, [], `slots with no firing:\n${rows.join('\n')}`)
    // no leader: the slots went to whichever runtime's timer came first
    const firstOwners = new Set(rows.map((r) => r.split(' ')[3]!.replace(/-[0-9a-f]{8}$/, '')))
    assert.ok(firstOwners.size >= 2, `several runtimes fired slots: ${[...firstOwners].join(', ')}`)
    // and every firing's run finished: a dead runtime's were taken over (or were done already)
    await until('every firing to finish', async () => (await pg.sql("SELECT count(*) FROM hookgate_runs WHERE definition_kind = 'task' AND status <> 'succeeded'", url) === '0' ? true : undefined), 1000)
  })

  tasks.run()
}
