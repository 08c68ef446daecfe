// Stack exhaustion: bodies nested 100,000 deep ([[[[…]]]] is 200 KB, under the default 256 KiB
// limit; {"a":{"a":…}} is 600 KB, so this file raises maxBodyBytes to 1 MiB). V8's JSON.parse
// takes any depth, but everything after it that walks the payload recursively does not: the
// template's JSON.stringify, the structured clone that hands the payload to a transform worker, and
// the JSON that stores a workflow's context. A payload too deep to process is the client's fault:
// the contract's answer is 400 (body.ts already words it "nested too deeply"), never a 500, a
// silently dropped payload, or harm to other requests.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { RunStore } from '../../runtime/store/file/runs.js'
import { setTestToken } from '../runtime/http/harness.js'
import { assertContractError, assertStillServing, postJson, sleep, startTarget, stopTarget, wakeTextOf, type Target } from './target.js'

const TOKEN = setTestToken()
const DEPTH = 100_000

const CONFIG = `
server:
  bodyTimeoutSeconds: 2
  maxBodyBytes: 1048576
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: whole
      match: { path: whole }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "all={{payload}}"
    - id: field
      match: { path: field }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "a={{payload.a}}"
    - id: flow
      match: { path: flow }
      action: workflow
      workflow: triage
    - id: transformed
      match: { path: transformed }
      action: agent
      messageTemplate: "transformed"
      transform: { module: keep.mjs, timeoutMs: 800 }
    - id: slow
      match: { path: slow }
      action: agent
      messageTemplate: "slow"
      transform: { module: slow.mjs, timeoutMs: 2000 }
workflows:
  - id: triage
    steps:
      - id: look
        action: agent
        messageTemplate: "triage {{payload.x}}"
`

const TRANSFORMS = {
  'transforms/keep.mjs': 'export default function keep() { return {} }\n',
  'transforms/slow.mjs': 'export default async function slow() { await new Promise((r) => setTimeout(r, 1200)); return { name: "slow but fine" } }\n',
}

const deepArray = (n: number) => '['.repeat(n) + ']'.repeat(n)
const deepObject = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)


const deep = suite<{ t: Target }>('stack exhaustion by deep nesting')

deep.before(async (ctx) => { ctx.t = await startTarget(TOKEN, CONFIG, TRANSFORMS) })
deep.after(async (ctx) => { await stopTarget(ctx.t) })

deep('100,000-deep arrays [[[[…]]]] (200 KB, under the default limit) on /hooks/wake are 400 and the server stays up', async ({ t }) => {
  const body = deepArray(DEPTH)
  assert.ok(body.length < 262_144)
  assertContractError(await postJson(t, '/hooks/wake', body), 400, ['invalid_json', 'invalid_payload'])
  await assertStillServing(t, '100,000-deep arrays on /hooks/wake')
})

deep('100,000-deep objects {"a":{"a":…}} (600 KB) on /hooks/wake are 400 and the server stays up', async ({ t }) => {
  assertContractError(await postJson(t, '/hooks/wake', deepObject(DEPTH)), 400, ['invalid_json', 'invalid_payload'])
  await assertStillServing(t, '100,000-deep objects on /hooks/wake')
})

deep('100,000-deep nesting on a mapping that reads one field is answered without crashing the server', async ({ t }) => {
  for (const body of [deepObject(DEPTH), deepArray(DEPTH)]) {
    const reply = await postJson(t, '/hooks/field', body)
    assert.ok(reply.status === 200 || reply.status === 400, `${reply.status} ${reply.text.slice(0, 300)}`)
    if (reply.status === 400) assertContractError(reply, 400, 'invalid_json')
  }
  await assertStillServing(t, '100,000-deep nesting on a one-field mapping')
})

deep('100,000-deep objects on a mapping that renders {{payload}} are refused with 400, not accepted with the payload silently dropped', async ({ t }) => {
  const body = deepObject(DEPTH)
  const reply = await postJson(t, '/hooks/whole', body)
  if (reply.status === 200) {
    // Regression: accepted with 200, and the wake text is "all=": {{payload}} must insert the payload as
    // JSON, but JSON.stringify overflows the stack and template-helpers' json() swallows it into "".
    const text = wakeTextOf(t.stateDir, reply.json.runId)
    assert.ok(text === `all=${body}`, `the payload was accepted (200) but {{payload}} rendered as ${JSON.stringify(text?.slice(0, 40))}`)
  }
  assertContractError(reply, 400, 'invalid_json')
  await assertStillServing(t, '100,000-deep objects on a {{payload}} mapping')
})

deep('100,000-deep objects on a workflow mapping are 400, not 500 internal_error', async ({ t }) => {
  // Regression: 500 internal_error ("run … cannot be stored as JSON: Maximum call stack size exceeded"):
  // the workflow context (with the payload) is stored as JSON, which overflows. 5,000 deep (10 KB,
  // far under the default limit) is enough.
  assertContractError(await postJson(t, '/hooks/flow', JSON.stringify({ x: 1 }).slice(0, -1) + `,"d":${deepObject(DEPTH)}}`), 400, 'invalid_json')
  assertContractError(await postJson(t, '/hooks/flow', `{"x":1,"d":${deepArray(5000)}}`), 400, 'invalid_json')
  const ok = await postJson(t, '/hooks/flow', '{"x":1}')
  assert.is(ok.status, 202, ok.text)
  await assertStillServing(t, 'deep nesting on a workflow mapping')
})

deep('100,000-deep objects on a transform mapping are 400, not 500 transform_failed', async ({ t }) => {
  // Regression: 500 transform_failed: the transform never ran; postMessage's structured clone overflowed
  // the stack handing it the payload. 5,000 deep (10 KB) is enough.
  const hundredThousand = await postJson(t, '/hooks/transformed', deepObject(DEPTH))
  await sleep(900) // let the stale timer of that call go off (see the next test) before going on
  const fiveThousand = await postJson(t, '/hooks/transformed', `{"d":${deepArray(5000)}}`)
  await sleep(900)
  assertContractError(hundredThousand, 400, 'invalid_json')
  assertContractError(fiveThousand, 400, 'invalid_json')
  await assertStillServing(t, 'deep nesting on a transform mapping')
})

deep('a too-deep payload on a transform mapping does not kill the worker running an innocent request after it', async ({ t }) => {
  // The deep call throws inside TransformPool's Slot.call after its timer is armed; the slot is
  // freed, the timer is not cleared, and when it fires (timeoutMs 800 later) it terminates the
  // worker, whoever is using it by then.
  const hostile = await postJson(t, '/hooks/transformed', `{"d":${deepArray(5000)}}`)
  assert.ok(hostile.ms < 700, `the hostile call took ${Math.round(hostile.ms)} ms: too slow for this test to mean anything`)
  // right after its answer: takes 1.2 s in the same (first free) worker, with 2 s to do it
  const victim = await postJson(t, '/hooks/slow', '{}')
  // Regression: the innocent request is 500 transform_timeout after 2 s: its worker was terminated by
  // the hostile call's stale timer 800 ms after that call started, long after it was answered.
  assert.is(victim.status, 202, `the innocent transform request got ${victim.status} ${victim.text}`)
  const row = RunStore.readRows(t.stateDir).find((r) => r.id === victim.json.runId)
  assert.is((row?.request as { name?: string } | undefined)?.name, 'slow but fine')
  await assertStillServing(t, 'a deep payload next to an innocent transform')
})

deep.run()
