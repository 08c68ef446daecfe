// A workflow through the real server: an HTTP call to a local server → a transform → an agent on
// builtin/echo leaves one row per step under the trigger's correlation id, and a kill -9 of
// `hookgate serve` during the transform resumes at that step without calling the HTTP server again.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileProject, post, runReaches, serve, setTestToken, spawnServe, until } from '../http/harness.js'
import { hookgate, stdoutJson } from '../../cli/cli-helpers.js'
import type { RunRow } from '../../../runtime/store/store.js'
import { readRows } from '../../helpers/history.js'
import { fileStoreOnly } from '../../helpers/stores.js'

const token = setTestToken()
process.env.HOOKGATE_TEST_STEP_KEY = 'step-key-123'

// The outside system the http step calls: it counts its calls, so a repeat would show.
const calls: Array<{ method: string; url: string; headers: IncomingHttpHeaders; body: string }> = []
let flaky = 0
// The transform step says it has started, then waits for the test's go-ahead (a transform may not
// touch files, but it may call out): the kill lands inside it.
let transformStarted = false
let goAhead = false
const api = createServer((req, res) => {
  let body = ''
  req.setEncoding('utf8').on('data', (d: string) => { body += d }).on('end', () => {
    if (req.url === '/transform-started') { transformStarted = true; res.end(); return }
    if (req.url === '/go') { res.end(goAhead ? 'go' : 'wait'); return }
    // /flaky fails its first two calls: a step with retries gets through on the third
    if (req.url === '/flaky') {
      flaky++
      res.writeHead(flaky <= 2 ? 503 : 200, { 'content-type': 'application/json' }).end(JSON.stringify({ call: flaky }))
      return
    }
    calls.push({ method: req.method!, url: req.url!, headers: req.headers, body })
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 42, name: 'widget' }))
  })
})
await new Promise<void>((r) => api.listen(0, '127.0.0.1', r))
const apiOrigin = `http://127.0.0.1:${(api.address() as AddressInfo).port}`

const project = await compileProject(`
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  transformsDir: transforms
  mappings:
    - { id: pipe, match: { path: pipe }, action: workflow, workflow: pipeline }
agents:
  - { id: main, model: builtin/echo, heartbeat: { every: "off" } }
workflows:
  - id: pipeline
    steps:
      - id: fetch
        action: http
        method: POST
        url: "${apiOrigin}/items/{{payload.id}}?tag={{payload.tag}}"
        headers: { x-api-key: "\${HOOKGATE_TEST_STEP_KEY}", x-trace: "t-{{payload.id}}" }
        body: '{"id": {{payload.id}}}'
      - id: enrich
        action: transform
        needs: [fetch]
        transform: { module: enrich.mjs, timeoutMs: 60000 }
      - id: tell
        action: agent
        needs: [enrich]
        messageTemplate: "item {{steps.enrich.output.label}} is a {{steps.fetch.output.body.name}}"
`, {
  'transforms/enrich.mjs': `
import { request } from 'node:http'
const ask = (path) => new Promise((resolve, reject) => {
  const req = request(${JSON.stringify(apiOrigin)} + path, { method: 'POST', agent: false }, (res) => {
    let text = ''
    res.setEncoding('utf8').on('data', (d) => { text += d }).on('end', () => resolve(text))
  })
  req.on('error', reject)
  req.end()
})
export default async function ({ steps }) {
  await ask('/transform-started')
  while ((await ask('/go')) !== 'go') await new Promise((r) => setTimeout(r, 20))
  return { label: 'L' + steps.fetch.output.body.id }
}
`,
})

async function rowsOf(correlationId: string): Promise<RunRow[]> {
  return (await readRows(project.stateDir)).filter((r) => r.correlationId === correlationId)
}

const e2e = suite('a three-step workflow through hookgate serve')

// on the file store: it counts the run records in runs.jsonl, and looks for the secret in it
fileStoreOnly(e2e)('leaves four rows under one correlation id and resumes after kill -9 without repeating the HTTP call', async () => {
  const first = await spawnServe(project.outDir, project.stateDir)
  const answer = await post(first.origin, '/hooks/pipe', token, { id: 42, tag: 'a b&c' })
  assert.is(answer.status, 202, answer.text)
  const { runId, correlationId } = answer.json as { runId: string; correlationId: string }
  await until('the transform step to start', () => (transformStarted ? true : undefined), 10_000)
  first.child.kill('SIGKILL')
  await first.exited

  const atKill = await rowsOf(correlationId)
  assert.is(atKill.find((r) => r.stepId === 'fetch')?.status, 'succeeded', 'the http step had finished before the kill')
  assert.is(atKill.find((r) => r.stepId === 'enrich')?.status, 'running', 'the kill came during the transform step')
  assert.is(calls.length, 1)

  goAhead = true
  const second = await spawnServe(project.outDir, project.stateDir)
  try {
    await until('the workflow to finish', async () => ((await readRows(project.stateDir)).find((r) => r.id === runId)?.status === 'succeeded' ? true : undefined), 15_000)
  } finally {
    second.child.kill('SIGTERM')
    await second.exited
  }

  assert.is(calls.length, 1, 'the http step ran again after the restart')
  const rows = await rowsOf(correlationId)
  assert.is(rows.length, 4, JSON.stringify(rows.map((r) => [r.action, r.stepId, r.status])))
  const steps = new Map(rows.filter((r) => r.stepId).map((r) => [r.stepId!, r]))
  for (const id of ['fetch', 'enrich', 'tell']) {
    assert.is(steps.get(id)?.status, 'succeeded', id)
    assert.is(steps.get(id)?.parentRunId, runId)
  }
  assert.equal(steps.get('enrich')!.output, { label: 'L42' })
  assert.match((steps.get('tell')!.output as { text: string }).text, 'item L42 is a widget')
  // the step resumed on its own row: each step was created once
  const created = readFileSync(join(project.stateDir, 'runs.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((r) => r.type === 'run' && r.row.stepId)
  assert.is(created.length, 3)

  // the call: templated path and query (percent-encoded), the secret header, the templated body
  assert.is(calls[0]!.method, 'POST')
  assert.is(calls[0]!.url, '/items/42?tag=a%20b%26c')
  assert.is(calls[0]!.headers['x-api-key'], 'step-key-123')
  assert.is(calls[0]!.headers['x-trace'], 't-42')
  assert.is(calls[0]!.body, '{"id": 42}')
  assert.not.match(readFileSync(join(project.stateDir, 'runs.jsonl'), 'utf8'), 'step-key-123')

  // hookgate runs --json lists the step rows like any other, with their new fields
  const listed = stdoutJson<RunRow[]>(await hookgate(['runs', '--json', '--state', project.stateDir], { cwd: project.dir }))
  const fetch = listed.find((r) => r.correlationId === correlationId && r.stepId === 'fetch')!
  assert.is(fetch.parentRunId, runId)
  assert.is(fetch.action, 'http')
  assert.equal((fetch.output as { status: number; body: unknown }).body, { id: 42, name: 'widget' })
})

e2e.run()

const steps = suite('workflow steps in a served bundle')

steps('a failing http step is retried with backoff until it succeeds, and an if: that renders false skips its step', async () => {
  const h = await serve(`
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  mappings:
    - { id: flow, match: { path: flow }, action: workflow, workflow: flow }
channels:
  - { id: log, type: file, path: delivered.jsonl }
workflows:
  - id: flow
    steps:
      - { id: call, action: http, url: "${apiOrigin}/flaky", retries: 3, backoffSeconds: 0.05 }
      - { id: tell, action: deliver, needs: [call], channel: log, if: "{{payload.notify}}", textTemplate: "call {{steps.call.output.body.call}}" }
      - { id: note, action: agent, needs: [call], messageTemplate: "answered on call {{steps.call.output.body.call}}" }
`)
  try {
    const answer = await post(h.origin, '/hooks/flow', token, { notify: false })
    assert.is(answer.status, 202, answer.text)
    const { runId, correlationId } = answer.json as { runId: string; correlationId: string }
    const workflow = await runReaches(h.stateDir, runId, 'succeeded', 8000)
    const rows = (await readRows(h.stateDir)).filter((r) => r.correlationId === correlationId)
    const byStep = new Map(rows.filter((r) => r.stepId).map((r) => [r.stepId!, r]))
    assert.is(byStep.get('call')!.status, 'succeeded')
    assert.is(byStep.get('call')!.attempts, 3, 'two failed attempts, then one that succeeded')
    assert.is(flaky, 3)
    assert.is(byStep.get('tell')!.status, 'skipped')
    assert.match(byStep.get('tell')!.result ?? '', 'if: condition was false')
    assert.not.ok(existsSync(join(h.dir, 'delivered.jsonl')), 'the skipped step delivered nothing')
    assert.match((byStep.get('note')!.output as { text: string }).text, 'answered on call 3')
    assert.match(workflow.result ?? '', 'tell: skipped')
  } finally {
    await h.close()
  }
})

steps.after(() => { api.close() })
steps.run()
