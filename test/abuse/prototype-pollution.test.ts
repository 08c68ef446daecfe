// Prototype pollution: `__proto__`, `constructor` and `prototype` keys in JSON and form bodies, sent
// to a mapping whose template reads {{payload.polluted}} and whose transform (in a worker thread)
// returns { name: String(({}).polluted) }. Neither the server's objects nor the worker's may pick
// up a `polluted` property: the stored run shows message "polluted=" and name "undefined", for
// the hostile requests and for a clean one sent after them.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { RunStore, type RunRow } from '../../runtime/store/file/runs.js'
import { setTestToken } from '../runtime/http/harness.js'
import { assertStillServing, postJson, startTarget, stopTarget, wakeTextOf, type Answer, type Target } from './target.js'

const TOKEN = setTestToken()

const CONFIG = `
server:
  bodyTimeoutSeconds: 2
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: pollute
      match: { path: pollute }
      action: agent
      name: "from the template"
      messageTemplate: "polluted={{payload.polluted}}"
      transform: { module: probe.mjs }
    - id: plain
      match: { path: plain }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "polluted={{payload.polluted}} source={{payload.source}}"
`

const TRANSFORMS = {
  'transforms/probe.mjs': 'export default function probe() { return { name: String(({}).polluted) } }\n',
}

const JSON_ATTACKS = [
  '{"__proto__":{"polluted":"yes"}}',
  '{"constructor":{"prototype":{"polluted":"yes"}}}',
  '{"prototype":{"polluted":"yes"}}',
  '{"__proto__":{"__proto__":{"polluted":"yes"}},"a":{"__proto__":{"polluted":"yes"}}}',
  '{"a":[{"__proto__":{"polluted":"yes"}}],"constructor":{"__proto__":{"polluted":"yes"}}}',
  '{"__proto__":{"polluted":"yes","source":"yes","toString":"yes","valueOf":"yes","hasOwnProperty":"yes"}}',
  '{"__proto__":null,"x":{"__proto__":{"polluted":"yes"}}}',
]

const FORM_ATTACKS = [
  '__proto__[polluted]=yes',
  '__proto__.polluted=yes',
  'constructor[prototype][polluted]=yes',
  '__proto__=yes&constructor=yes&prototype=yes',
]

function rowOf(stateDir: string, id: string): RunRow | undefined {
  return RunStore.readRows(stateDir).find((r) => r.id === id)
}

/** The stored run of a 202 from /hooks/pollute shows no pollution, in the template nor in the worker. */
function assertClean(stateDir: string, reply: Answer, sent: string): void {
  assert.is(reply.status, 202, `${sent}: ${reply.status} ${reply.text}`)
  assert.not.match(reply.text, /yes/, `${sent}: the answer shows the payload`)
  const request = rowOf(stateDir, reply.json.runId)?.request as { message?: string; name?: string } | undefined
  assert.ok(request, `${sent}: no stored run ${reply.json.runId}`)
  assert.is(request.message, 'polluted=', `${sent}: the template read an inherited property`)
  assert.is(request.name, 'undefined', `${sent}: Object.prototype in the transform worker is polluted`)
}

const pollution = suite<{ t: Target }>('prototype pollution')

pollution.before(async (ctx) => { ctx.t = await startTarget(TOKEN, CONFIG, TRANSFORMS) })
pollution.after(async (ctx) => { await stopTarget(ctx.t) })

pollution('__proto__ / constructor / prototype JSON payloads reach neither the template nor the transform worker', async ({ t }) => {
  for (const body of JSON_ATTACKS) assertClean(t.stateDir, await postJson(t, '/hooks/pollute', body), body)
  await assertStillServing(t, 'prototype-pollution JSON payloads')
})

pollution('__proto__ / constructor / prototype form fields reach neither the template nor the transform worker', async ({ t }) => {
  for (const body of FORM_ATTACKS) assertClean(t.stateDir, await postJson(t, '/hooks/pollute', body, { 'content-type': 'application/x-www-form-urlencoded' }), body)
  await assertStillServing(t, 'prototype-pollution form payloads')
})

pollution('a clean payload after the attacks shows nothing inherited, in the server or in the worker', async ({ t }) => {
  for (let i = 0; i < 4; i++) assertClean(t.stateDir, await postJson(t, '/hooks/pollute', '{}'), `clean payload ${i}`)
  // and a route chosen by match.source is not fooled by an inherited "source"
  const plain = await postJson(t, '/hooks/plain', '{"__proto__":{"polluted":"yes","source":"yes"}}')
  assert.is(plain.status, 200, plain.text)
  assert.is(wakeTextOf(t.stateDir, plain.json.runId), 'polluted= source=')
  await assertStillServing(t, 'clean payloads after the attacks')
})

pollution.run()
