// A notify policy on a workflow Trigger tells about the run the operator started (the workflow
// run), never about its steps: `done` is one message per POST, `state` the workflow's own state
// changes. Through the real server and notifier, to a local Standard Webhooks receiver; the
// server is closed before counting, so every notification the notifier queued has been sent or
// recorded by then (its stop waits for them).
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeReceiver } from '../../fakes/channels.js'
import { post, rowOf, serve, setTestToken, until } from './harness.js'
import { readRows } from '../../helpers/history.js'

const token = setTestToken()
const receiver = await startFakeReceiver(null)
process.env.NOTIFY_WF_URL = receiver.url

const CONFIG = `
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
channels:
  - { id: notes, type: webhook, url: "\${NOTIFY_WF_URL}", maxAttempts: 1 }
  - { id: log, type: file, path: delivered.jsonl }
agents:
  - id: main
    default: true
    model: builtin/echo
    heartbeat: { every: "off" }
    triggers:
      - { name: graph-done, path: graph-done, target: workflow, workflow: four, channel: notes, notify: done }
      - { name: graph-state, path: graph-state, target: workflow, workflow: four, channel: notes, notify: state }
workflows:
  - id: four
    steps:
      - { id: think, action: agent, messageTemplate: "think {{payload.n}}" }
      - { id: note, action: wake, needs: [think], textTemplate: "noted {{payload.n}}" }
      - { id: tell, action: deliver, needs: [think], channel: log, textTemplate: "{{steps.think.output.text}}" }
      - { id: last, action: agent, needs: [note, tell], messageTemplate: "done {{payload.n}}" }
`

const policy = suite('notify on a workflow trigger')

policy('done sends one message per POST (the workflow run), and state only the workflow run\'s own changes: none for its four steps', async () => {
  const h = await serve(CONFIG)
  const started: Record<string, { runId: string; correlationId: string }> = {}
  try {
    for (const path of ['graph-done', 'graph-state']) {
      const answer = await post(h.origin, `/hooks/${path}`, token, { n: path })
      assert.is(answer.status, 202, answer.text)
      started[path] = answer.json
    }
    for (const [path, { runId }] of Object.entries(started)) {
      await until(`the ${path} workflow to finish and be told about`, async () => {
        const row = (await rowOf(h.stateDir, runId))
        return row?.status === 'succeeded' && row.notifications?.some((n) => n.state === 'succeeded') ? row : undefined
      }, 20_000)
    }
  } finally {
    await h.close()
  }
  const rows = (await readRows(h.stateDir))
  for (const [path, { runId, correlationId }] of Object.entries(started)) {
    const steps = rows.filter((r) => r.parentRunId === runId)
    assert.is(steps.length, 4, `${path}: four step rows`)
    for (const step of steps) assert.is(step.notifications, undefined, `${path}: step ${step.stepId} was told about`)
    const told = receiver.requests.filter((r) => r.json?.data?.correlationId === correlationId)
    assert.ok(told.every((r) => r.json.data.runId === runId), `${path}: a message about another run than the workflow's`)
    const expected = path === 'graph-done' ? ['succeeded'] : ['queued', 'running', 'succeeded']
    assert.equal(told.map((r) => r.json.data.status), expected, path)
    assert.equal((await rowOf(h.stateDir, runId))!.notifications!.map((n) => n.state), expected, path)
  }
})

policy.after(async () => { await receiver.close() })
policy.run()
