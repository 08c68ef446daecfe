// `hookgate try` on a mapped name runs the action it renders through the same policy the server does
// (agent allowlist, session-key prefixes, model override, thinking), because both run the mapped
// endpoint's one prepare. Each case is held against a real server's answer to the same payload.
// Regression: the dry run checked only the session key of a mapped action and answered 202 for an
// action the server refuses with 400 (a transform choosing a model, an agent or a thinking level).
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileProject, post, serveProject, setTestToken } from '../runtime/http/harness.js'
import { describeRun, hookgate, stdoutJson, type CliResult } from './cli-helpers.js'

const CONFIG = `hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  allowedAgentIds: [main]
  allowedSessionKeyPrefixes: ["hook:"]
  transformsDir: transforms
  mappings:
    - id: chosen
      match: { path: chosen }
      action: agent
      messageTemplate: "{{payload.msg}}"
      transform: { module: choose.ts }
agents:
  - id: main
    default: true
    model: builtin/echo
  - id: blocked
    model: builtin/echo
`

/** The transform hands back whatever the payload carries under "override". */
const CHOOSE_TS = `export default function choose({ payload }: { payload: { override?: unknown } }) {
  return payload.override
}
`

const token = setTestToken()
const project = await compileProject(CONFIG, { 'transforms/choose.ts': CHOOSE_TS })

let payloads = 0
function tryChosen(payload: unknown): Promise<CliResult> {
  const file = join(project.dir, `payload-${++payloads}.json`)
  writeFileSync(file, JSON.stringify(payload))
  return hookgate(['try', 'chosen', '--payload', file, '--bundle', project.outDir], { cwd: project.dir })
}

const CASES: Array<[string, unknown, number, string | undefined]> = [
  ['a transform that overrides nothing', { msg: 'x' }, 202, undefined],
  ['a transform choosing a model the agent does not have', { msg: 'x', override: { model: 'openai/gpt-4o' } }, 400, 'model_not_allowed'],
  ['a transform choosing an agent outside allowedAgentIds', { msg: 'x', override: { agentId: 'blocked' } }, 400, 'agent_not_allowed'],
  ['a transform asking for thinking on the built-in model', { msg: 'x', override: { thinking: 'high' } }, 400, 'thinking_unsupported'],
  ['a transform choosing a session key outside the prefixes', { msg: 'x', override: { sessionKey: 'other:1' } }, 400, 'session_key_not_allowed'],
]
const runs = CASES.map(([label, payload, status, code]) => ({ label, payload, status, code, run: tryChosen(payload) }))

const policy = suite('hookgate try holds a mapped action to the server\'s policy')

policy('a mapped action the policy refuses is refused by the dry run with the server\'s status and code', async () => {
  const harness = await serveProject(project)
  try {
    for (const { label, payload, status, code, run } of runs) {
      const r = await run
      const out = stdoutJson<{ status: number; code?: string; mapping?: string }>(r)
      assert.is(r.code, out.status < 300 ? 0 : 1, `${label}: exit code for status ${out.status}\n${describeRun(r)}`)
      const real = await post(harness.origin, '/hooks/chosen', token, payload as object)
      assert.is(real.status, status, `${label}: the server answered ${real.status} ${real.text}`)
      assert.is(out.status, status, `${label}: try ${out.status} ${out.code ?? ''}, server ${real.status} ${real.text}`)
      assert.is(out.code, code, label)
      assert.is(out.mapping, 'chosen', `${label}: the answer names the mapping`)
    }
  } finally {
    await harness.close()
  }
})

policy.run()
