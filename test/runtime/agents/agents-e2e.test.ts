// Agents for real, end to end: the server runs turns on model providers and delivers replies
// through channels, all of them local servers that speak the real protocols (test/fakes).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI } from '../../fakes/openai.js'
import { startFakeAnthropic } from '../../fakes/anthropic.js'
import { startFakeSlack } from '../../fakes/channels.js'
import { assertError, compileProject, post, runReaches, serveProject, setTestToken, until, type Harness } from '../http/harness.js'
import { startService } from '../../../runtime/serve/service.js'
import { sessionLogName } from '../../../runtime/store/store.js'
import { readLogText } from '../../helpers/history.js'
import { storeUrlFor } from '../../helpers/stores.js'

const token = setTestToken()
const openai = await startFakeOpenAI({ apiKey: 'sk-test-openai-key-0123456789' })
const anthropic = await startFakeAnthropic({ apiKey: 'sk-ant-test-key-0123456789' })
const slack = await startFakeSlack()
process.env.FAKE_OPENAI_KEY = 'sk-test-openai-key-0123456789'
process.env.FAKE_ANTHROPIC_KEY = 'sk-ant-test-key-0123456789'
process.env.FAKE_SLACK_URL = slack.webhookUrl

const CONFIG = `
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  mappings:
    - id: deploys
      match: { path: deploys }
      action: agent
      messageTemplate: "deploy {{payload.service}}"
      wakeMode: next-heartbeat
      channel: ops
providers:
  - id: fake
    type: openai
    baseUrl: ${openai.url}
    apiKey: \${FAKE_OPENAI_KEY}
    timeoutSeconds: 2
    maxRetries: 2
  - id: claude
    type: anthropic
    baseUrl: ${anthropic.url}
    apiKey: \${FAKE_ANTHROPIC_KEY}
    maxRetries: 0
channels:
  - id: ops
    type: slack
    url: \${FAKE_SLACK_URL}
    maxAttempts: 1
  - id: audit
    type: file
    path: deliveries.jsonl
agents:
  - id: main
    default: true
    model: fake/gpt-test
    fallbackModels: [claude/claude-test]
    heartbeat: { every: "off" }
  - id: solo
    model: fake/gpt-solo
    heartbeat: { every: "off" }
`

const project = await compileProject(CONFIG)
const h: Harness = await serveProject(project)
const call = (path: string, body: unknown, headers: Record<string, string> = {}) => post(h.origin, path, token, body as Record<string, unknown>, headers)
// Summaries wait for the next heartbeat (off here), so the provider sees only the isolated turns.
const accepted = async (path: string, body: Record<string, unknown>) => {
  const r = await call(path, { wakeMode: 'next-heartbeat', ...body })
  assert.is(r.status, 202, JSON.stringify(r.json))
  return r.json.runId as string
}
const reset = () => {
  openai.requests.length = 0
  anthropic.requests.length = 0
  slack.requests.length = 0
}

const turns = suite('isolated agent turns on a real provider protocol')

turns('an /agent call runs on the OpenAI-compatible provider and is delivered to Slack', async () => {
  reset()
  const runId = await accepted('/hooks/agent', { message: 'summarise the deploy', channel: 'ops' })
  const row = await runReaches(h.stateDir, runId, 'succeeded')
  assert.is(openai.requests.length, 1)
  const sent = openai.requests[0]!
  assert.is(sent.path, '/v1/chat/completions')
  assert.is(sent.headers.authorization, 'Bearer sk-test-openai-key-0123456789')
  assert.is(sent.body.model, 'gpt-test', 'the provider prefix is not sent')
  assert.match(sent.body.messages[0].content, 'summarise the deploy')
  assert.match(sent.body.messages[0].content, 'EXTERNAL_UNTRUSTED_CONTENT', 'the message reaches the model inside the envelope')
  assert.is(slack.requests.length, 1)
  assert.match(slack.requests[0]!.json.text, 'summarise the deploy')
  assert.match(row.result ?? '', 'delivered via ops')
})

turns('a mapped agent path delivers through the channel its mapping names', async () => {
  reset()
  const runId = await accepted('/hooks/deploys', { service: 'api' })
  await runReaches(h.stateDir, runId, 'succeeded')
  assert.match(slack.requests[0]!.json.text, 'deploy api')
})

turns('channel last uses the route the main session used before', async () => {
  reset()
  const runId = await accepted('/hooks/agent', { message: 'to the last route', channel: 'last' })
  const row = await runReaches(h.stateDir, runId, 'succeeded')
  assert.is(slack.requests.length, 1, 'the earlier delivery to ops became the last route')
  assert.match(row.result ?? '', 'delivered via ops')
})

turns('a 429 from the provider is retried and the run succeeds', async () => {
  reset()
  openai.queue({ status: 429, retryAfter: 0 })
  const runId = await accepted('/hooks/agent', { message: 'rate limited once', deliver: false })
  await runReaches(h.stateDir, runId, 'succeeded')
  assert.is(openai.requests.length, 2)
})

turns('a provider that keeps failing falls back to the next model (Anthropic Messages API)', async () => {
  reset()
  openai.queue({ status: 500 }, { status: 500 }, { status: 500 })
  const runId = await accepted('/hooks/agent', { message: 'fall back please', deliver: false })
  const row = await runReaches(h.stateDir, runId, 'succeeded')
  assert.is(openai.requests.length, 3, 'two retries on the primary model')
  assert.is(anthropic.requests.length, 1)
  assert.is(anthropic.requests[0]!.headers['x-api-key'], 'sk-ant-test-key-0123456789')
  assert.is(anthropic.requests[0]!.body.model, 'claude-test')
  assert.match(row.result ?? '', 'fall back please')
})

turns('every model failing ends the run failed with a readable reason and no key in it', async () => {
  reset()
  openai.queue({ status: 500 }, { status: 500 }, { status: 500 })
  anthropic.queue({ status: 401, message: 'invalid x-api-key' })
  const runId = await accepted('/hooks/agent', { message: 'doomed', deliver: false })
  const row = await runReaches(h.stateDir, runId, 'failed')
  assert.match(row.error ?? '', '500')
  assert.match(row.error ?? '', '401')
  assert.not.match(row.error ?? '', 'sk-test-openai-key')
  assert.not.match(row.error ?? '', 'sk-ant-test-key')
})

turns('a malformed provider answer fails the run and says so', async () => {
  reset()
  openai.queue('malformed')
  anthropic.queue('malformed')
  const runId = await accepted('/hooks/agent', { message: 'garbled', deliver: false })
  const row = await runReaches(h.stateDir, runId, 'failed')
  assert.match(row.error ?? '', 'malformed')
})

turns('timeoutSeconds aborts a turn that does not answer and the run ends timed_out', async () => {
  reset()
  openai.queue('hang') // the turn's 0.5 s deadline comes before the provider's 2 s attempt timeout
  const runId = await accepted('/hooks/agent', { message: 'slow', deliver: false, timeoutSeconds: 0.5, agentId: 'solo' })
  const row = await runReaches(h.stateDir, runId, 'timed_out')
  assert.match(row.error ?? '', 'within 0.5 s')
})

turns('thinking is sent as the provider\'s reasoning setting', async () => {
  reset()
  const runId = await accepted('/hooks/agent', { message: 'think', thinking: 'low', deliver: false })
  await runReaches(h.stateDir, runId, 'succeeded')
  assert.is(openai.requests[0]!.body.reasoning_effort, 'low')
})

turns('a model override the agent is not configured with is refused with 400', async () => {
  assertError(await call('/hooks/agent', { message: 'x', model: 'fake/other' }), 400, 'model_not_allowed')
})

turns.run()

const delivery = suite('delivery failures')

delivery('a delivery that fails fails the run, keeps the reply, and tells the main session', async () => {
  reset()
  slack.queue({ status: 404, body: 'no_service' })
  const runId = await accepted('/hooks/agent', { message: 'undeliverable', channel: 'ops', name: 'undeliverable' })
  const row = await runReaches(h.stateDir, runId, 'failed')
  assert.match(row.error ?? '', 'delivery via ops failed')
  assert.match(row.result ?? '', 'undeliverable', 'the reply is kept in history')
  const main = await readLogText(h.stateDir, sessionLogName('main'))
  assert.match(main, `(run ${runId}) finished, but delivery via ops failed`)
})

delivery('the file channel appends the reply', async () => {
  const runId = await accepted('/hooks/agent', { message: 'for the record', channel: 'audit' })
  await runReaches(h.stateDir, runId, 'succeeded')
  const lines = readFileSync(join(project.dir, 'deliveries.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  assert.ok(lines.some((l) => l.runId === runId && String(l.text).includes('for the record')))
})

delivery.run()

const summaries = suite('the main session after an isolated turn')

summaries('gets a summary line marked as coming from the hook', async () => {
  const runId = await accepted('/hooks/agent', { message: 'summarise me', deliver: false, name: 'nightly' })
  await runReaches(h.stateDir, runId, 'succeeded')
  const main = await until('the summary event', async () => {
    const text = await readLogText(h.stateDir, sessionLogName('main'))
    return text.includes(`Hook \\"nightly\\" (run ${runId}) finished`) ? text : undefined
  })
  const event = main.split('\n').filter(Boolean).map((l) => JSON.parse(l)).find((r) => r.type === 'event' && String(r.text).includes(runId))
  assert.is(event.external, true, 'the summary quotes hook output, so it is untrusted')
  assert.is(event.source, 'hook /hooks/agent')
})

summaries.run()

const secrets = suite('start-up with provider and channel secrets')

secrets('a missing provider key stops the start with an error naming the reference, not a value', async () => {
  const p = await compileProject(CONFIG.replace('${FAKE_OPENAI_KEY}', '${HOOKGATE_TEST_MISSING_KEY}'))
  delete process.env.HOOKGATE_TEST_MISSING_KEY
  try {
    const store = await storeUrlFor(p.stateDir)
    await startService({ bundle: p.outDir, port: 0, stateDir: p.stateDir, ...(store !== undefined ? { store } : {}), watch: false, write: () => {} })
    assert.unreachable('the service started without its provider key')
  } catch (err) {
    assert.match((err as Error).message, '${HOOKGATE_TEST_MISSING_KEY}')
  }
})

secrets.after(async () => {
  await h.close()
  await openai.close()
  await anthropic.close()
  await slack.close()
})

secrets.run()
