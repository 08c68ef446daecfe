// Issue 23: waiting for a wake's outcome (what waitForCompletion does, Engine.whenFinished) on a
// runtime that does not own the wake's agent's main session got nothing: the owner runs the turn,
// and the runtime that accepted the wake only looked at the runs it holds. One PostgreSQL, a real
// `hookgate serve` (B, serving agent `other` only, so it owns that session) and an in-process
// runtime on the same database (A, serving `main` and `other`: it owns `main`'s session). A accepts
// a wake for each agent over HTTP; waiting on A gets each one's outcome, the same for both.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgateBin } from '../helpers/paths.js'
import { scenarioYaml } from '../helpers/hosts.js'
import { startPostgres } from '../helpers/pg.js'
import { compileProject, post, setTestToken, spawnServer, until } from '../runtime/http/harness.js'
import { startService, type Service } from '../../runtime/serve/service.js'

const TOKEN = setTestToken()
const pg = await startPostgres()
const waits = suite('waiting for a run another runtime runs')

const yaml = (agents: string[]) => scenarioYaml({
  hostTtlSeconds: 2, sweepSeconds: 0.5,
  agents: agents.map((id, i) => `  - { id: ${id},${i === 0 ? ' default: true,' : ''} model: builtin/echo, heartbeat: { every: "off" } }`).join('\n'),
})

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  let service: Service | undefined
  const kills: Array<() => void> = []
  waits.after(async () => {
    await service?.close().catch(() => {})
    for (const k of kills) k()
    await pg.destroy()
  })

  waits('a wake accepted by a runtime that does not own its agent\'s session is waited for to its outcome, as one whose session it owns', async () => {
    const url = await pg.createDatabase('waits')
    const onlyOther = await compileProject(yaml(['other']))
    const b = await spawnServer([hookgateBin, 'serve', '--bundle', onlyOther.outDir, '--port', '0', '--host', '127.0.0.1', '--state', onlyOther.stateDir, '--store', url],
      { cwd: onlyOther.dir, env: { ...process.env, HOOKGATE_STORE_URL: url }, lifetimeMs: 120_000 })
    kills.push(() => b.kill())
    const ownerOf = (agent: string) => pg.sql(`SELECT owner FROM hookgate_session_leases WHERE agent_id = '${agent}' AND expires_at > now()`, url)
    await until('B to own other\'s session', async () => ((await ownerOf('other')).includes(`-${b.child.pid}-`) ? true : undefined), 20_000, 100)

    const both = await compileProject(yaml(['main', 'other']))
    service = await startService({ bundle: both.outDir, port: 0, host: '127.0.0.1', stateDir: both.stateDir, store: url, watch: false, graceMs: 1000, write: () => {} })
    const a = service
    const origin = `http://127.0.0.1:${a.port}`
    await until('A to own main\'s session', async () => ((await ownerOf('main')).includes(`-${process.pid}-`) ? true : undefined), 20_000, 100)
    assert.ok((await ownerOf('other')).includes(`-${b.child.pid}-`), 'B still owns other\'s session')

    const outcomes: Record<string, unknown> = {}
    for (const agentId of ['main', 'other']) {
      const r = await post(origin, '/hooks/wake', TOKEN, { text: `wake ${agentId}`, agentId, mode: 'now' })
      assert.is(r.status, 200, r.text)
      const runId = r.json.runId as string
      const outcome = await a.engine.whenFinished(runId, 20_000)
      assert.ok(outcome !== null, `waiting on A for the wake of ${agentId} got no outcome`)
      assert.is(outcome.row.id, runId)
      outcomes[agentId] = { status: outcome.row.status, action: outcome.row.action, agentId: outcome.row.agentId, final: outcome.row.finishedAt !== undefined }
    }
    assert.equal(outcomes.other, { status: 'succeeded', action: 'wake', agentId: 'other', final: true })
    assert.equal(outcomes.main, { status: 'succeeded', action: 'wake', agentId: 'main', final: true })
    // the turn that read other's wake was B's
    assert.ok((await pg.sql("SELECT count(*) FROM hookgate_logs WHERE log = 'other/main' AND kind = 'turn'", url)) !== '0')
  })

  waits.run()
}
