// Idempotency-Key on /agent, mapped agent and workflow calls: replays, reuse, concurrent
// duplicates, and keys that outlive a restart.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertError, compileProject, post, serveProject, setTestToken, type Harness } from '../http/harness.js'
import { readRows } from '../../helpers/history.js'

const token = setTestToken()
const project = await compileProject(`
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  mappings:
    - id: deploys
      match: { path: deploys }
      action: agent
      messageTemplate: "deploy {{payload.service}}"
    - id: graph
      match: { path: graph }
      action: workflow
      workflow: triage
workflows:
  - id: triage
    steps:
      - { id: read, action: agent, messageTemplate: "read {{payload.id}}" }
agents:
  - { id: main, model: builtin/echo, heartbeat: { every: "off" } }
`)
let h: Harness = await serveProject(project)
const call = (path: string, body: Record<string, unknown>, key: string) => post(h.origin, path, token, body, { 'idempotency-key': key })
/** runs started by requests: a workflow's step rows belong to its run */
const runCount = async () => (await readRows(project.stateDir)).filter((r) => r.parentRunId === undefined).length

const idem = suite('Idempotency-Key')

for (const [path, body] of [['/hooks/agent', { message: 'once' }], ['/hooks/deploys', { service: 'api' }], ['/hooks/graph', { id: 7 }]] as const) {
  idem(`a repeat on ${path} answers the original status and body and starts nothing`, async () => {
    const key = `key-${path}`
    const before = (await runCount())
    const first = await call(path, body, key)
    assert.is(first.status, 202)
    assert.is(first.headers['idempotent-replayed'], undefined)
    const again = await call(path, body, key)
    assert.is(again.status, first.status)
    assert.equal(again.json, first.json)
    assert.is(again.headers['idempotent-replayed'], 'true')
    assert.is((await runCount()), before + 1, 'one run for two requests')
  })
}

idem('the same key with a different request is a 409 idempotency_key_reused', async () => {
  await call('/hooks/agent', { message: 'first' }, 'reused')
  assertError(await call('/hooks/agent', { message: 'second' }, 'reused'), 409, 'idempotency_key_reused')
  assertError(await call('/hooks/deploys', { message: 'first' }, 'reused'), 409, 'idempotency_key_reused')
})

idem('concurrent duplicates start exactly one run and all get its answer', async () => {
  const before = (await runCount())
  const replies = await Promise.all(Array.from({ length: 12 }, () => call('/hooks/agent', { message: 'stampede' }, 'concurrent')))
  assert.ok(replies.every((r) => r.status === 202), replies.map((r) => r.status).join(','))
  assert.is(new Set(replies.map((r) => r.json.runId)).size, 1)
  assert.is(replies.filter((r) => r.headers['idempotent-replayed'] === 'true').length, 11)
  assert.is((await runCount()), before + 1)
})

idem('a malformed key is a 400', async () => {
  assertError(await call('/hooks/agent', { message: 'x' }, 'has space'), 400, 'invalid_idempotency_key')
})

idem('keys survive a restart on the same state directory', async () => {
  const first = await call('/hooks/agent', { message: 'before restart' }, 'durable-key')
  await h.close()
  h = await serveProject(project)
  const before = (await runCount())
  const again = await call('/hooks/agent', { message: 'before restart' }, 'durable-key')
  assert.is(again.headers['idempotent-replayed'], 'true')
  assert.equal(again.json, first.json)
  assert.is((await runCount()), before)
  assertError(await call('/hooks/agent', { message: 'changed' }, 'durable-key'), 409, 'idempotency_key_reused')
})

idem('a request without a key is never deduplicated', async () => {
  const a = await post(h.origin, '/hooks/agent', token, { message: 'same' })
  const b = await post(h.origin, '/hooks/agent', token, { message: 'same' })
  assert.is.not(a.json.runId, b.json.runId)
})

idem.after(() => h.close())
idem.run()
