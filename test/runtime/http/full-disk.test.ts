// Regression: after one failed write (a full disk) a session journal refused every record until
// restart, wakes kept getting 200 and stayed queued, and /healthz said ok. Now nothing is
// acknowledged that is not on disk, /healthz says degraded while writes fail, and writing resumes
// by itself once there is space again.
//
// store: file only — a full disk under the state directory's journals (a database that cannot be
// reached is test/runtime/store/postgres/outage.test.ts).
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { mountSmallDisk } from '../../helpers/full-disk.js'
import { assertError, compileProject, post, runReaches, send, serveProject, setTestToken, until } from './harness.js'

const TOKEN = setTestToken()
const CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
agents:
  - id: main
    model: builtin/echo
    heartbeat: { every: "off" }
`

const disk = suite('a full disk under the state directory')

disk('healthz says degraded and new work gets 503 while writes fail; both recover by themselves', async () => {
  const small = mountSmallDisk(4096)
  if (!small) { console.log('  (skipped: mounting a tmpfs needs root)'); return }
  const project = await compileProject(CONFIG)
  const h = await serveProject({ ...project, stateDir: small.dir + '/state' })
  try {
    assert.is((await post(h.origin, '/hooks/wake', TOKEN, { text: 'before', mode: 'now' })).status, 200)
    assert.is((await send(h.origin, '/healthz', { method: 'GET' })).status, 200)
    small.fill()
    // This run's row (larger than the slack left in the file's last page) cannot be written: it waits, unacknowledged.
    let answered = false
    const caught = post(h.origin, '/hooks/agent', TOKEN, { message: 'during '.repeat(2000), deliver: false }).then((r) => { answered = true; return r })
    const health = await until('healthz to say degraded', async () => {
      const r = await send(h.origin, '/healthz', { method: 'GET' })
      return r.status === 503 ? r : undefined
    }, 5000)
    assert.is(health.json.ok, false)
    assert.is(health.json.status, 'degraded')
    assert.match(health.json.reasons.join(' '), 'ENOSPC')
    assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 'refused', mode: 'now' }), 503, 'store_unavailable')
    assert.is(answered, false, 'nothing is acknowledged while it is not on disk')
    small.release()
    const late = await caught
    assert.is(late.status, 202, 'the waiting request is answered once its row is on disk')
    await runReaches(h.stateDir, late.json.runId, 'succeeded', 8000)
    await until('healthz to be ok again', async () => ((await send(h.origin, '/healthz', { method: 'GET' })).status === 200 ? true : undefined), 5000)
    const after = await post(h.origin, '/hooks/wake', TOKEN, { text: 'after', mode: 'now' })
    assert.is(after.status, 200)
    await runReaches(h.stateDir, after.json.runId, 'succeeded', 5000)
  } finally {
    await h.close()
    small.unmount()
  }
})

disk.run()
