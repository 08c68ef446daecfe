// `hookgate try wake` and `try agent`: the dry run of the built-in endpoints shows the parsed
// request, the resolved agent (and session key) and the enveloped text, with the status the server
// gives; each answer is held against a real server's answer to the same payload.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { post, serveProject, compileProject, setTestToken } from '../runtime/http/harness.js'
import { describeRun, hookgate, stdoutJson, type CliResult } from './cli-helpers.js'

const CONFIG = `hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  allowedAgentIds: [main, ops]
  allowRequestSessionKey: true
  allowedSessionKeyPrefixes: ["hook:"]
agents:
  - id: main
    default: true
    model: builtin/echo
  - id: ops
    model: builtin/echo
  - id: blocked
    model: builtin/echo
`

const token = setTestToken()
const project = await compileProject(CONFIG)

let payloads = 0
function tryBuiltin(name: string, payload: unknown): Promise<CliResult> {
  const file = join(project.dir, `payload-${++payloads}.json`)
  writeFileSync(file, typeof payload === 'string' ? payload : JSON.stringify(payload))
  return hookgate(['try', name, '--payload', file, '--bundle', project.outDir], { cwd: project.dir })
}

interface Answer { status: number; endpoint?: string; code?: string; agentId?: string; sessionKey?: string; request?: Record<string, any>; action?: Record<string, any>; external?: boolean }

async function answer(started: Promise<CliResult>): Promise<Answer> {
  const run = await started
  const out = stdoutJson<Answer>(run)
  assert.is(run.code, out.status < 300 ? 0 : 1, `exit code for status ${out.status}\n${describeRun(run)}`)
  return out
}

/** The text between the envelope's `---` line and its end marker. */
function enveloped(text: string): string {
  const lines = text.split('\n')
  assert.match(lines[0]!, /^<<<EXTERNAL_UNTRUSTED_CONTENT id="[0-9a-f]+">>>$/)
  return lines.slice(lines.indexOf('---') + 1, -1).join('\n')
}

const CASES: Array<[string, 'wake' | 'agent', unknown]> = [
  ['a wake', 'wake', { text: 'disk full', mode: 'next-heartbeat' }],
  ['a wake for another agent', 'wake', { text: 'x', agentId: 'ops' }],
  ['a wake without text', 'wake', {}],
  ['a wake with a sessionKey', 'wake', { text: 'x', sessionKey: 'hook:a' }],
  ['a wake for a blocked agent', 'wake', { text: 'x', agentId: 'blocked' }],
  ['an agent turn', 'agent', { message: 'summarise', name: 'deploy', sessionKey: 'hook:deploy-1', agentId: 'ops' }],
  ['an agent turn without a message', 'agent', { name: 'x' }],
  ['an agent turn for a blocked agent', 'agent', { message: 'x', agentId: 'blocked' }],
  ['an agent turn for an unknown agent (the default, allowed)', 'agent', { message: 'x', agentId: 'nobody' }],
  ['an agent turn with a key outside the prefixes', 'agent', { message: 'x', sessionKey: 'other:1' }],
  ['an agent turn asking for thinking on the built-in model', 'agent', { message: 'x', thinking: 'high' }],
  ['an agent turn with a model the agent does not have', 'agent', { message: 'x', model: 'openai/gpt-4o' }],
  ['a body that is not an object', 'agent', [1, 2]],
]
const runs = CASES.map(([label, name, payload]) => ({ label, name, payload, run: tryBuiltin(name, payload) }))
const byLabel = (label: string) => runs.find((r) => r.label === label)!.run
const viaBasePath = tryBuiltin('/hooks/agent', { message: 'hi' })

const dry = suite('hookgate try wake and try agent')

dry('try wake answers 200 with the parsed request, the default agent and the text in the envelope', async () => {
  const out = await answer(byLabel('a wake'))
  assert.is(out.status, 200)
  assert.is(out.endpoint, 'wake')
  assert.equal(out.request, { text: 'disk full', mode: 'next-heartbeat', agentId: null, sessionKey: null })
  assert.is(out.agentId, 'main')
  assert.is(out.action!.kind, 'wake')
  assert.is(out.action!.mode, 'next-heartbeat')
  assert.is(enveloped(out.action!.text), 'disk full')
  assert.is(out.external, true)
})

dry('try wake resolves an allowed agentId', async () => {
  assert.is((await answer(byLabel('a wake for another agent'))).agentId, 'ops')
})

dry('try agent answers 202 with the resolved agent, the session key and the message in the envelope', async () => {
  const out = await answer(byLabel('an agent turn'))
  assert.is(out.status, 202)
  assert.is(out.endpoint, 'agent')
  assert.is(out.request!.message, 'summarise')
  assert.is(out.agentId, 'ops')
  assert.is(out.sessionKey, 'hook:deploy-1')
  assert.is(out.action!.kind, 'agent')
  assert.is(out.action!.name, 'deploy')
  assert.is(out.action!.sessionKey, 'hook:deploy-1')
  assert.is(enveloped(out.action!.message), 'summarise')
})

dry('try /hooks/agent is try agent, and a missing key gets a fresh hook: key', async () => {
  const out = await answer(viaBasePath)
  assert.is(out.status, 202)
  assert.match(out.sessionKey!, /^hook:[0-9a-f-]{36}$/)
})

dry('refusals exit 1 with the code the server gives', async () => {
  assert.is((await answer(byLabel('a wake without text'))).code, 'invalid_payload')
  assert.is((await answer(byLabel('a wake with a sessionKey'))).code, 'session_key_not_allowed')
  assert.is((await answer(byLabel('an agent turn for a blocked agent'))).code, 'agent_not_allowed')
  assert.is((await answer(byLabel('an agent turn asking for thinking on the built-in model'))).code, 'thinking_unsupported')
})

dry('every case answers the status and code a real server gives for the same payload', async () => {
  const harness = await serveProject(project)
  try {
    for (const { label, name, payload, run } of runs) {
      const out = await answer(run)
      const real = await post(harness.origin, `/hooks/${name}`, token, payload as object)
      assert.is(out.status, real.status, `${label}: try ${out.status} ${out.code ?? ''}, server ${real.status} ${real.text}`)
      assert.is(out.code, real.json?.code, label)
      // a key the request gives must come back the same; a generated one is fresh on each side
      if (real.status === 202 && (payload as { sessionKey?: string }).sessionKey) assert.is(out.sessionKey, real.json.sessionKey, `${label}: session key`)
      else if (real.status === 202) assert.match(out.sessionKey!, /^hook:/)
    }
  } finally {
    await harness.close()
  }
})

dry.run()
