// Backpressure: accepted agent and workflow runs wait in memory until they finish, so past
// server.maxPendingRuns new ones are refused with 503 and Retry-After instead of growing without
// bound; wakes are bounded by the session queue instead and still answer.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI } from '../../fakes/openai.js'
import { assertError, compileProject, post, runReaches, serveProject, setTestToken } from '../http/harness.js'

const token = setTestToken()
const model = await startFakeOpenAI()
model.setDefault({ delayMs: 800 })
const h = await serveProject(await compileProject(`
server: { concurrency: 1, maxPendingRuns: 2 }
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
providers:
  - { id: slow, type: openai, baseUrl: ${model.url}, maxRetries: 0 }
agents:
  - { id: main, model: slow/m, heartbeat: { every: "off" } }
`))

const pressure = suite('server.maxPendingRuns')

pressure('past the bound an agent call is refused with 503 and Retry-After, and accepted again once runs finish', async () => {
  const call = () => post(h.origin, '/hooks/agent', token, { message: 'work', deliver: false, wakeMode: 'next-heartbeat' })
  const first = await call()
  const second = await call()
  assert.is(first.status, 202)
  assert.is(second.status, 202)
  const third = await call()
  assertError(third, 503, 'too_many_pending_runs')
  assert.is(third.headers['retry-after'], '5')
  const wake = await post(h.origin, '/hooks/wake', token, { text: 'still answered', mode: 'next-heartbeat' })
  assert.is(wake.status, 200)
  await runReaches(h.stateDir, second.json.runId, 'succeeded', 5000)
  assert.is((await call()).status, 202)
})

pressure.after(async () => {
  await h.close()
  await model.close()
})
pressure.run()
