// Issue 23: a queued wake of an agent that no runtime serves any more stayed queued for ever (only
// the owner of the agent's main session reads wakes, and nobody owned it). Real `hookgate serve`
// runtimes on one PostgreSQL, with different bundles: A serves agents main and extra, B only main.
// Wakes for extra wait on A (mode next-heartbeat, no heartbeat). A replaced within the grace by a
// runtime with the same agents: the new one reads them, nothing fails. A killed with nobody to
// replace it: B ends extra's wakes failed, saying why, within hostTtl + the grace
// (STRANDED_WAKE_TTLS host leases) + a sweep.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgateBin } from '../helpers/paths.js'
import { scenarioYaml } from '../helpers/hosts.js'
import { startPostgres } from '../helpers/pg.js'
import { compileProject, post, setTestToken, spawnServer, until, type Project, type ServeProcess } from '../runtime/http/harness.js'
import { STRANDED_WAKE_TTLS } from '../../runtime/store/postgres/index.js'

const TOKEN = setTestToken()
const HOST_TTL_S = 3
const SWEEP_S = 0.5
const GRACE_MS = STRANDED_WAKE_TTLS * HOST_TTL_S * 1000
const pg = await startPostgres()
const stranded = suite('queued wakes of an agent no runtime serves')

const yaml = (agents: string[]) => scenarioYaml({
  hostTtlSeconds: HOST_TTL_S, sweepSeconds: SWEEP_S,
  agents: agents.map((id, i) => `  - { id: ${id},${i === 0 ? ' default: true,' : ''} model: builtin/echo, heartbeat: { every: "off" } }`).join('\n'),
})

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  const started: ServeProcess[] = []
  stranded.after(async () => {
    for (const s of started) s.kill()
    await pg.destroy()
  })

  stranded(`wakes of an agent whose runtime was replaced are read by the new one; once no runtime serves it, they end failed within hostTtl + ${STRANDED_WAKE_TTLS} host leases + a sweep`, async () => {
    const url = await pg.createDatabase('stranded')
    const both = await compileProject(yaml(['main', 'extra']))
    const mainOnly = await compileProject(yaml(['main']))
    let n = 0
    const serve = async (project: Project): Promise<ServeProcess> => {
      const s = await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--host', '127.0.0.1', '--state', `${project.stateDir}-${n++}`, '--store', url],
        { cwd: project.dir, env: { ...process.env, HOOKGATE_STORE_URL: url }, lifetimeMs: 180_000 })
      started.push(s)
      return s
    }
    const ownerOf = (agent: string) => pg.sql(`SELECT owner FROM hookgate_session_leases WHERE agent_id = '${agent}' AND expires_at > now()`, url)
    const statuses = (ids: string[]) => pg.sql(`SELECT string_agg(status, ',' ORDER BY status) FROM hookgate_runs WHERE id IN (${ids.map((id) => `'${id}'`).join(',')})`, url)
    const wake = async (s: ServeProcess, text: string, agentId: string): Promise<string> => {
      const r = await post(s.origin, '/hooks/wake', TOKEN, { text, agentId, mode: 'next-heartbeat' })
      assert.is(r.status, 200, r.text)
      return r.json.runId as string
    }

    const a = await serve(both)
    const b = await serve(mainOnly)
    await until('A to own extra\'s session', async () => ((await ownerOf('extra')).includes(`-${a.child.pid}-`) ? true : undefined), 20_000, 100)
    const first = [await wake(a, 'first 1', 'extra'), await wake(a, 'first 2', 'extra')]

    // A stops and a runtime with the same agents takes its place: it reads extra's wakes (a turn)
    a.child.kill('SIGTERM')
    assert.is(await a.exited, 0, a.stderr())
    const a2 = await serve(both)
    await until('the new runtime to read extra\'s first wakes', async () => ((await statuses(first)) === 'succeeded,succeeded' ? true : undefined), GRACE_MS, 100)

    // A2 dies with wakes queued for extra, and nobody else serves extra
    await until('A2 to own extra\'s session', async () => ((await ownerOf('extra')).includes(`-${a2.child.pid}-`) ? true : undefined), 20_000, 100)
    const later = [await wake(a2, 'later 1', 'extra'), await wake(a2, 'later 2', 'extra'), await wake(a2, 'later 3', 'extra')]
    a2.child.kill('SIGKILL')
    const killedAt = Date.now()
    await until('B to end extra\'s wakes', async () => ((await statuses(later)) === 'failed,failed,failed' ? true : undefined), 60_000, 200)
    const took = Date.now() - killedAt
    assert.ok(took >= GRACE_MS, `not before the grace (${took} ms after the kill, grace ${GRACE_MS} ms)`)
    const errors = await pg.sql(`SELECT DISTINCT row->>'error' FROM hookgate_runs WHERE id IN (${later.map((id) => `'${id}'`).join(',')})`, url)
    assert.match(errors, `no runtime serves agent "extra": no turn of its main session read this wake within ${GRACE_MS / 1000} s`)
    assert.ok(b.stderr().includes('queued wake(s) failed') || b.stdout.some((l) => l.includes('queued wake(s) failed')), 'B said so')
    assert.is(await statuses(first), 'succeeded,succeeded')
  })

  stranded.run()
}
