// On PostgreSQL, the store's own loops (the prune, the session leases, the takeover sweep) are
// duties like the others, started by the supervisor each in its place (the takeover sweep once
// resuming listens for what it takes over, the session leases before resuming reads the wakes), and
// all of them stopped before the store closes: a clean stop hands the sessions over at once.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { scenarioYaml } from '../../helpers/hosts.js'
import { startPostgres } from '../../helpers/pg.js'
import { compileProject, setTestToken } from '../http/harness.js'
import { startService, type Service } from '../../../runtime/serve/service.js'

setTestToken()
const pg = await startPostgres()
const duties = suite('the duties of a runtime on PostgreSQL')

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  let service: Service | undefined
  duties.after(async () => {
    await service?.close().catch(() => {})
    await pg.destroy()
  })

  duties('the store\'s loops run among the duties in their places: the sweep after resume, all stopped before the store closes', async () => {
    const url = await pg.createDatabase('duties')
    const project = await compileProject(scenarioYaml({ hostTtlSeconds: 2, sweepSeconds: 0.5, agents: '  - { id: main, default: true, model: builtin/echo, heartbeat: { every: "off" } }' }))
    service = await startService({ bundle: project.outDir, port: 0, host: '127.0.0.1', stateDir: project.stateDir, store: url, watch: false, graceMs: 1000, write: () => {} })
    const names = service.duties.names
    assert.equal(names, ['retention', 'workflow runner', 'notifier', 'session ownership', 'resume', 'transform processes', 'takeover sweep', 'lock-out sharing', 'scheduler'])
    assert.ok(service.duties.report().every((d) => d.running && d.health.ok), JSON.stringify(service.duties.report()))
    // its session lease is held and renewed by the session-ownership duty
    const owner = () => pg.sql("SELECT owner FROM hookgate_session_leases WHERE agent_id = 'main' AND expires_at > now()", url)
    const until = Date.now() + 20_000
    while (!(await owner()).includes(`-${process.pid}-`) && Date.now() < until) await new Promise((r) => setTimeout(r, 100))
    assert.match(await owner(), `-${process.pid}-`)
    await service.close()
    service = undefined
    // a clean stop hands the session over at once and leaves no host row for others to wait out
    assert.is(await owner(), '')
    assert.is(await pg.sql('SELECT count(*) FROM hookgate_hosts', url), '0')
  })
}

duties.run()
