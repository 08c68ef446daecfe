// Regression: a permission error on the state directory (EACCES, EPERM, EROFS) failed the run
// journal for good. Every request got 503 and /healthz stayed degraded after the permission was
// given back, until a restart, and a run acknowledged before it stayed `running`. A full disk
// (ENOSPC) already recovered by itself. The rule now (runtime/store/file/journal.ts): any write
// error is transient until proven otherwise: degraded while it lasts, then writing resumes by
// itself and the acknowledged runs finish.
//
// store: file only — write errors on the state directory's files (the journal).
import { request } from 'node:http'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI } from '../../fakes/openai.js'
import { lockableDir } from '../../helpers/immutable-dir.js'
import { assertError, compileProject, post, runReaches, send, serveProject, setTestToken, until, type Reply } from './harness.js'

const TOKEN = setTestToken()
const model = await startFakeOpenAI()

const errors = suite('a write error other than a full disk')

errors('a permission taken from the state directory degrades the service only while it lasts, and the acknowledged runs finish', async () => {
  const project = await compileProject(`
server: { concurrency: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: big
      match: { path: big }
      action: agent
      maxBodyBytes: 1048576
      messageTemplate: "size {{payload.n}}"
      deliver: false
providers:
  - { id: gated, type: openai, baseUrl: ${model.url}, maxRetries: 0 }
agents:
  - { id: main, model: gated/m, heartbeat: { every: "off" } }
`)
  const h = await serveProject(project)
  const dir = lockableDir(h.stateDir)
  if (!dir) { console.log('  (skipped: no chattr +i on this file system)'); await h.close(); return }
  let open!: () => void
  const gate = new Promise<void>((resolve) => { open = resolve })
  try {
    // A run acknowledged before the trouble, its model call held open until the test lets it answer.
    model.queue({ after: gate })
    const held = await post(h.origin, '/hooks/agent', TOKEN, { message: 'acknowledged before', deliver: false })
    assert.is(held.status, 202)
    await until('the held run to be asking its model', () => (model.requests.length >= 1 ? true : undefined), 5000)

    // No new file in the state directory: the request's large body goes into a blob beside runs.jsonl, which cannot be created (EPERM).
    dir.lock()
    const big = postSlowly(h.origin, '/hooks/big', { n: 7, pad: 'x'.repeat(600 * 1024) })
    const degraded = await until('healthz to say degraded', async () => {
      const r = await send(h.origin, '/healthz', { method: 'GET' })
      return r.status === 503 ? r : undefined
    }, 10_000)
    assert.match(degraded.json.reasons.join(' '), 'EPERM')
    assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 'refused meanwhile', deliver: false }), 503, 'store_unavailable')
    // The held run's turn ends while nothing can be written: its status waits behind the blocked write.
    open()

    // The permission is given back: no restart.
    dir.unlock()
    const accepted = await big
    assert.is(accepted.status, 202, 'the request that waited is acknowledged once its row is on disk')
    await runReaches(h.stateDir, held.json.runId, 'succeeded', 10_000)
    await runReaches(h.stateDir, accepted.json.runId, 'succeeded', 10_000)
    await until('healthz to be ok again', async () => ((await send(h.origin, '/healthz', { method: 'GET' })).status === 200 ? true : undefined), 10_000)
    const after = await post(h.origin, '/hooks/agent', TOKEN, { message: 'after', deliver: false })
    assert.is(after.status, 202)
    await runReaches(h.stateDir, after.json.runId, 'succeeded', 10_000)
  } finally {
    open()
    dir.unlock()
    await h.close()
  }
})

errors.after(() => model.close())
errors.run()

/** A POST that may wait a long time for its answer (send() gives up after 5 s). */
function postSlowly(origin: string, path: string, body: object): Promise<Reply> {
  const bytes = Buffer.from(JSON.stringify(body))
  return new Promise((resolve, reject) => {
    const req = request(`${origin}${path}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': bytes.length } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json: unknown
        try { json = JSON.parse(text) } catch { json = undefined }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json })
      })
    })
    req.setTimeout(60_000, () => req.destroy(new Error('no answer within 60 s')))
    req.on('error', reject)
    req.end(bytes)
  })
}
