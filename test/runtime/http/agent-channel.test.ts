// An /agent call naming a channel the config does not declare: the channels are known at load, so
// it is refused at admission (400 unknown_channel, no run written) instead of being accepted with a
// 202 whose run then fails to deliver. `last` and a declared channel are still accepted.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertError, assertOk, post, runReaches, serve, setTestToken, type Harness } from './harness.js'

const TOKEN = setTestToken()

const CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
channels:
  - { id: log, type: file, path: replies.jsonl }
agents:
  - { id: main, model: builtin/echo, heartbeat: { every: "off" } }
`

const agent = suite<{ h: Harness }>('the channel of an /agent call')
agent.before(async (ctx) => { ctx.h = await serve(CONFIG) })
agent.after(async (ctx) => { await ctx.h.close() })

agent('an unknown channel is refused with 400 unknown_channel at admission and starts no run', async ({ h }) => {
  const before = h.service.engine.runs.list().length
  const reply = await post(h.origin, '/hooks/agent', TOKEN, { message: 'hi', channel: 'slack-ops' })
  assertError(reply, 400, 'unknown_channel')
  assert.match(reply.json.error, 'channel "slack-ops" is not configured (configured: log, or last)')
  // also when the reply would not be delivered: the name is a mistake either way
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 'hi', channel: 'slack-ops', deliver: false }), 400, 'unknown_channel')
  assert.is(h.service.engine.runs.list().length, before, 'a refused call wrote a run')
})

agent('last, a declared channel, and no channel at all are accepted and the run succeeds', async ({ h }) => {
  for (const body of [{ message: 'a', channel: 'last' }, { message: 'b', channel: 'log' }, { message: 'c' }]) {
    const accepted = assertOk(await post(h.origin, '/hooks/agent', TOKEN, body), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
    await runReaches(h.stateDir, accepted.runId, 'succeeded', 10_000)
  }
})

agent.run()
