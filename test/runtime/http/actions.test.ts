// The two built-in endpoints and the routing policy every agent-bound request passes: /wake and
// /agent answers and payload checks, the sessionKey policy with request keys refused and allowed,
// and allowedAgentIds in every form (omitted, ["*"], [], a list), unknown ids resolving to the
// default agent before the allowlist is checked.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertError, assertOk, post, rowOf, serve, setTestToken, type Harness } from './harness.js'

const TOKEN = setTestToken()

const WAKE_KEYS = ['ok', 'action', 'runId', 'mode']
const AGENT_KEYS = ['ok', 'action', 'runId', 'correlationId', 'sessionKey']
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** A config with agents main (default) and ops, and the given extra lines under hooks:. */
function config(hooksExtra = ''): string {
  return `
server:
  bodyTimeoutSeconds: 0.5
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
${hooksExtra}
  mappings:
    - id: mapped-agent
      match: { path: mapped-agent }
      action: agent
      messageTemplate: "mapped {{payload.x}}"
agents:
  - id: main
    default: true
    model: builtin/echo
  - id: ops
    model: builtin/echo
`
}

// ---------------------------------------------------------------------------------------------

const wake = suite<{ h: Harness }>('POST /hooks/wake')

wake.before(async (ctx) => { ctx.h = await serve(config()) })
wake.after(async (ctx) => { await ctx.h.close() })

wake('answers 200 {"ok":true,"action":"wake","runId":…,"mode":…} with exactly these keys', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/wake', TOKEN, { text: 'deploy done', mode: 'next-heartbeat' }), 200, WAKE_KEYS)
  assert.is(body.action, 'wake')
  assert.is(body.mode, 'next-heartbeat')
  assert.type(body.runId, 'string')
  assert.ok(body.runId.length > 0)
})

wake('mode defaults to now', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/wake', TOKEN, { text: 'no mode given' }), 200, WAKE_KEYS)
  assert.is(body.mode, 'now')
})

wake('every call gets its own runId', async ({ h }) => {
  const a = assertOk(await post(h.origin, '/hooks/wake', TOKEN, { text: 'a' }), 200, WAKE_KEYS)
  const b = assertOk(await post(h.origin, '/hooks/wake', TOKEN, { text: 'b' }), 200, WAKE_KEYS)
  assert.is.not(a.runId, b.runId)
})

wake('an invalid mode is 400 invalid_payload', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 'x', mode: 'later' }), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 'x', mode: 1 }), 400, 'invalid_payload')
})

wake('a missing, empty or non-string text is 400 invalid_payload', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/wake', TOKEN, {}), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: '' }), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: '   ' }), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 42 }), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: ['a'] }), 400, 'invalid_payload')
})

wake('a body that is not a JSON object is 400 invalid_payload', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/wake', TOKEN, ['text']), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/wake', TOKEN, '"text"', { 'content-type': 'application/json' }), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/wake', TOKEN, 'null', { 'content-type': 'application/json' }), 400, 'invalid_payload')
})

// Regression: /wake dropped agentId (every wake went to the default agent) and ignored a sessionKey
wake('agent routing: agentId ops wakes the main session of ops, and the run row says so', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/wake', TOKEN, { text: 'for ops', mode: 'next-heartbeat', agentId: 'ops' }), 200, WAKE_KEYS)
  assert.is((await rowOf(h.stateDir, body.runId))?.agentId, 'ops')
})

wake('an unknown agentId wakes the default agent, as on /agent', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/wake', TOKEN, { text: 'for nobody', mode: 'next-heartbeat', agentId: 'ghost' }), 200, WAKE_KEYS)
  assert.is((await rowOf(h.stateDir, body.runId))?.agentId, 'main')
})

wake('session hijack via /wake: a sessionKey is 400 session_key_not_allowed, not silently dropped', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 'x', sessionKey: 'agent:main:main' }), 400, 'session_key_not_allowed')
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 'x', sessionKey: '' }), 400, 'session_key_not_allowed')
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 'x', sessionKey: 5 }), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 'x', agentId: 5 }), 400, 'invalid_payload')
})

wake.run()

// ---------------------------------------------------------------------------------------------

const agent = suite<{ h: Harness }>('POST /hooks/agent')

agent.before(async (ctx) => { ctx.h = await serve(config()) })
agent.after(async (ctx) => { await ctx.h.close() })

agent('answers 202 with ok, action agent, runId, correlationId and sessionKey, exactly these keys', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'summarise the incident' }), 202, AGENT_KEYS)
  assert.is(body.action, 'agent')
  assert.type(body.runId, 'string')
  assert.type(body.correlationId, 'string')
  assert.ok(body.correlationId.length > 0)
})

agent('without a sessionKey it generates hook:<uuid>, a new one per call', async ({ h }) => {
  const a = assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'a' }), 202, AGENT_KEYS)
  const b = assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'b' }), 202, AGENT_KEYS)
  assert.match(a.sessionKey, /^hook:/)
  assert.match(a.sessionKey.slice('hook:'.length), UUID)
  assert.is.not(a.sessionKey, b.sessionKey)
})

agent('an X-Correlation-Id header becomes the correlationId', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'traced' }, { 'x-correlation-id': 'deploy-4711' }), 202, AGENT_KEYS)
  assert.is(body.correlationId, 'deploy-4711')
  assert.is((await rowOf(h.stateDir, body.runId))?.correlationId, 'deploy-4711')
})

agent('log injection: an X-Correlation-Id with unsafe characters is replaced by a generated one', async ({ h }) => {
  for (const given of ['has space', 'semi;colon', 'x'.repeat(200), '{"json":1}']) {
    const body = assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'traced' }, { 'x-correlation-id': given }), 202, AGENT_KEYS)
    assert.is.not(body.correlationId, given)
    assert.match(body.correlationId, UUID)
  }
})

agent('a missing or empty message is 400 invalid_payload', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/agent', TOKEN, {}), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { name: 'no message' }), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: '' }), 400, 'invalid_payload')
})

agent('fields of the wrong type are 400 invalid_payload', async ({ h }) => {
  const wrong: Array<Record<string, unknown>> = [
    { message: 7 },
    { message: 'x', name: { a: 1 } },
    { message: 'x', agentId: 5 },
    { message: 'x', wakeMode: 'soon' },
    { message: 'x', deliver: 'yes' },
    { message: 'x', channel: false },
    { message: 'x', to: 12 },
    { message: 'x', thinking: 'maximal' },
    { message: 'x', timeoutSeconds: '30' },
    { message: 'x', timeoutSeconds: -1 },
  ]
  for (const body of wrong) assertError(await post(h.origin, '/hooks/agent', TOKEN, body), 400, 'invalid_payload')
})

agent('a model override the agent is not configured with is refused with 400', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', model: 'openai/gpt-4o' }), 400, 'model_not_allowed')
  assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', model: 'builtin/echo' }), 202, AGENT_KEYS)
})

agent.run()

// ---------------------------------------------------------------------------------------------

const keysRefused = suite<{ h: Harness }>('sessionKey policy with allowRequestSessionKey false')

keysRefused.before(async (ctx) => { ctx.h = await serve(config('  allowRequestSessionKey: false\n  defaultSessionKey: "hook:default"')) })
keysRefused.after(async (ctx) => { await ctx.h.close() })

keysRefused('session hijack: a sessionKey in the request is 400 session_key_not_allowed', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', sessionKey: 'hook:x' }), 400, 'session_key_not_allowed')
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', sessionKey: 'main' }), 400, 'session_key_not_allowed')
})

keysRefused('without a sessionKey the defaultSessionKey is used', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x' }), 202, AGENT_KEYS)
  assert.is(body.sessionKey, 'hook:default')
  assert.is((await rowOf(h.stateDir, body.runId))?.sessionKey, 'hook:default')
})

keysRefused('a mapped agent action without a sessionKey template uses the defaultSessionKey', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/mapped-agent', TOKEN, { x: 1 }), 202, AGENT_KEYS)
  assert.is(body.sessionKey, 'hook:default')
})

keysRefused.run()

// ---------------------------------------------------------------------------------------------

const keysAllowed = suite<{ h: Harness }>('sessionKey policy with allowRequestSessionKey true and prefixes ["hook:"]')

keysAllowed.before(async (ctx) => { ctx.h = await serve(config('  allowRequestSessionKey: true\n  allowedSessionKeyPrefixes: ["hook:"]')) })
keysAllowed.after(async (ctx) => { await ctx.h.close() })

keysAllowed('a key with an allowed prefix is accepted and echoed in the 202', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', sessionKey: 'hook:x' }), 202, AGENT_KEYS)
  assert.is(body.sessionKey, 'hook:x')
  assert.is((await rowOf(h.stateDir, body.runId))?.sessionKey, 'hook:x')
})

keysAllowed('session hijack: a key without an allowed prefix is 400 session_key_not_allowed', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', sessionKey: 'other:x' }), 400, 'session_key_not_allowed')
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', sessionKey: 'main' }), 400, 'session_key_not_allowed')
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', sessionKey: 'HOOK:x' }), 400, 'session_key_not_allowed')
})

keysAllowed('without a key (and no defaultSessionKey) a hook:<uuid> is generated', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x' }), 202, AGENT_KEYS)
  assert.match(body.sessionKey, /^hook:/)
  assert.match(body.sessionKey.slice('hook:'.length), UUID)
})

keysAllowed.run()

const keysDefault = suite<{ h: Harness }>('sessionKey policy with allowRequestSessionKey true and a defaultSessionKey')

keysDefault.before(async (ctx) => { ctx.h = await serve(config('  allowRequestSessionKey: true\n  allowedSessionKeyPrefixes: ["hook:"]\n  defaultSessionKey: "hook:fallback"')) })
keysDefault.after(async (ctx) => { await ctx.h.close() })

keysDefault('without a key the defaultSessionKey is used; with one, the given key', async ({ h }) => {
  assert.is(assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x' }), 202, AGENT_KEYS).sessionKey, 'hook:fallback')
  assert.is(assertOk(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', sessionKey: 'hook:mine' }), 202, AGENT_KEYS).sessionKey, 'hook:mine')
})

keysDefault.run()

// ---------------------------------------------------------------------------------------------
// allowedAgentIds

/** POSTs /hooks/agent with this agentId (or none) and returns the reply and, on 202, the run row's agentId. */
async function routeTo(h: Harness, agentId: string | undefined): Promise<{ status: number; agentId?: string; reply: Awaited<ReturnType<typeof post>> }> {
  const reply = await post(h.origin, '/hooks/agent', TOKEN, { message: 'route me', ...(agentId !== undefined ? { agentId } : {}) })
  if (reply.status !== 202) return { status: reply.status, reply }
  const row = (await rowOf(h.stateDir, reply.json.runId))
  return { status: 202, reply, ...(row?.agentId !== undefined ? { agentId: row.agentId } : {}) }
}

const anyAgent = suite<{ h: Harness }>('allowedAgentIds omitted')

anyAgent.before(async (ctx) => { ctx.h = await serve(config()) })
anyAgent.after(async (ctx) => { await ctx.h.close() })

anyAgent('any declared agent id is accepted and the run goes to it', async ({ h }) => {
  assert.equal(await routeTo(h, 'ops').then((r) => [r.status, r.agentId]), [202, 'ops'])
  assert.equal(await routeTo(h, 'main').then((r) => [r.status, r.agentId]), [202, 'main'])
})

anyAgent('an unknown agent id resolves to the default agent', async ({ h }) => {
  assert.equal(await routeTo(h, 'ghost').then((r) => [r.status, r.agentId]), [202, 'main'])
})

anyAgent('no agent id goes to the default agent', async ({ h }) => {
  assert.equal(await routeTo(h, undefined).then((r) => [r.status, r.agentId]), [202, 'main'])
})

anyAgent.run()

const star = suite<{ h: Harness }>('allowedAgentIds ["*"]')

star.before(async (ctx) => { ctx.h = await serve(config('  allowedAgentIds: ["*"]')) })
star.after(async (ctx) => { await ctx.h.close() })

star('any declared agent id is accepted and the run goes to it', async ({ h }) => {
  assert.equal(await routeTo(h, 'ops').then((r) => [r.status, r.agentId]), [202, 'ops'])
  assert.equal(await routeTo(h, 'main').then((r) => [r.status, r.agentId]), [202, 'main'])
})

star('an unknown agent id resolves to the default agent', async ({ h }) => {
  assert.equal(await routeTo(h, 'ghost').then((r) => [r.status, r.agentId]), [202, 'main'])
})

star.run()

const none = suite<{ h: Harness }>('allowedAgentIds []')

none.before(async (ctx) => { ctx.h = await serve(config('  allowedAgentIds: []')) })
none.after(async (ctx) => { await ctx.h.close() })

none('agent routing escape: any explicit agentId is 400 agent_not_allowed, the default one included', async ({ h }) => {
  for (const id of ['ops', 'main', 'ghost']) {
    const r = await routeTo(h, id)
    assertError(r.reply, 400, 'agent_not_allowed')
  }
})

none('payload validation comes before policy, and the agentId policy before the sessionKey policy', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 5, agentId: 'ops', sessionKey: 'hook:x' }), 400, 'invalid_payload')
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', agentId: 'ops', sessionKey: 'hook:x' }), 400, 'agent_not_allowed')
  assertError(await post(h.origin, '/hooks/agent', TOKEN, { message: 'x', sessionKey: 'hook:x' }), 400, 'session_key_not_allowed')
})

none('agent routing escape via /wake: any explicit agentId is 400 agent_not_allowed; none wakes the default agent', async ({ h }) => {
  for (const agentId of ['ops', 'main', 'ghost']) assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 'x', mode: 'next-heartbeat', agentId }), 400, 'agent_not_allowed')
  const body = assertOk(await post(h.origin, '/hooks/wake', TOKEN, { text: 'x', mode: 'next-heartbeat' }), 200, WAKE_KEYS)
  assert.is((await rowOf(h.stateDir, body.runId))?.agentId, 'main')
})

none('no agentId is accepted and goes to the default agent', async ({ h }) => {
  assert.equal(await routeTo(h, undefined).then((r) => [r.status, r.agentId]), [202, 'main'])
})

none.run()

const list = suite<{ h: Harness }>('allowedAgentIds ["ops"]')

list.before(async (ctx) => { ctx.h = await serve(config('  allowedAgentIds: ["ops"]')) })
list.after(async (ctx) => { await ctx.h.close() })

list('agentId ops is accepted and the run goes to ops', async ({ h }) => {
  assert.equal(await routeTo(h, 'ops').then((r) => [r.status, r.agentId]), [202, 'ops'])
})

list('agent routing escape: agentId main (the default, not listed) is 400 agent_not_allowed', async ({ h }) => {
  assertError((await routeTo(h, 'main')).reply, 400, 'agent_not_allowed')
})

list('agent routing escape: an unknown id resolves to the default main before the allowlist, so it is 400 too', async ({ h }) => {
  assertError((await routeTo(h, 'ghost')).reply, 400, 'agent_not_allowed')
})

list('the allowlist governs explicit routing only: no agentId goes to the default agent', async ({ h }) => {
  assert.equal(await routeTo(h, undefined).then((r) => [r.status, r.agentId]), [202, 'main'])
})

list('agent routing escape via /wake: main and an unknown id are 400 agent_not_allowed, ops is woken', async ({ h }) => {
  for (const agentId of ['main', 'ghost']) assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 'x', mode: 'next-heartbeat', agentId }), 400, 'agent_not_allowed')
  const body = assertOk(await post(h.origin, '/hooks/wake', TOKEN, { text: 'x', mode: 'next-heartbeat', agentId: 'ops' }), 200, WAKE_KEYS)
  assert.is((await rowOf(h.stateDir, body.runId))?.agentId, 'ops')
})

list.run()
