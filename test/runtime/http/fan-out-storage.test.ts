// Regression: a fan-out stored its request once per element. One 245 KiB request with the default
// 200 items (forEach on a mapping) appended 47.9 MiB to runs.jsonl, each run's row carrying the
// whole received request (and a workflow run's render context the whole payload again). Now a
// request is stored once (storeReceivedOnce in runtime/store/rows.ts): the first run's row keeps
// it, the others name that run, and a workflow run's context keeps no payload of its own. What
// reads the request (a replay, `runs show`, the run's page, a resume) finds it through the row
// holding it.
//
// store: file only — it counts the bytes appended to runs.jsonl and its blobs; the same regression
// on PostgreSQL is test/runtime/store/postgres/serve.test.ts (the rows' bytes in the table).
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI } from '../../fakes/openai.js'
import { Journal } from '../../../runtime/store/file/journal.js'
import { RUNS_FILE, RunStore, type RunRow } from '../../../runtime/store/file/runs.js'
import { FileHistory } from '../../../runtime/store/file/history.js'
import { compileProject, post, runReaches, serveProject, setTestToken, until, type Harness, type Project } from './harness.js'

const TOKEN = setTestToken()
const model = await startFakeOpenAI()

/** A project of its own for each test: runs one test leaves unfinished are not resumed in another. */
const newProject = (): Promise<Project> => compileProject(`
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: wide
      match: { path: wide }
      action: agent
      agentId: asker
      deliver: false
      wakeMode: next-heartbeat
      forEach: "{{payload.items}}"
      sessionKey: "hook:wide:{{item.n}}"
      messageTemplate: "{{payload.tag}} #{{item.n}}"
    - id: flows
      match: { path: flows }
      action: workflow
      workflow: each
      forEach: "{{payload.items}}"
providers:
  - { id: fake, type: openai, baseUrl: ${model.url}, maxRetries: 0, timeoutSeconds: 60 }
agents:
  - { id: main, default: true, model: builtin/echo, heartbeat: { every: "off" } }
  - { id: asker, model: fake/m, heartbeat: { every: "off" } }
workflows:
  - id: each
    steps:
      - id: ask
        action: agent
        agentId: asker
        messageTemplate: "{{payload.tag}}, {{payload.items.length}} items"
`)

/** A request of about 245 KiB whose 200 elements (the default maxItems) each start a run. */
function wideRequest(tag: string): { body: object; bytes: number } {
  const body = { tag, items: Array.from({ length: 200 }, (_, n) => ({ n })), pad: 'p'.repeat(240 * 1024) }
  return { body, bytes: Buffer.byteLength(JSON.stringify(body)) }
}

const diskBytes = (h: Harness): number => Journal.diskBytes(join(h.stateDir, RUNS_FILE))
const runsOf = (h: Harness, ids: string[]): RunRow[] => {
  const all = new Map(RunStore.readRows(h.stateDir).map((r) => [r.id, r]))
  return ids.map((id) => all.get(id)!)
}

const once = suite('a request fanned out to many runs is stored once')

once('an agent fan-out: the bytes appended are about one copy of the request, and each run reads the request back whole', async () => {
  // The runs wait on the model meanwhile, so what the acceptance wrote is all there is to count.
  model.setDefault('hang')
  const h = await serveProject(await newProject())
  try {
    const { body, bytes } = wideRequest('agent-fan')
    const before = diskBytes(h)
    const r = await post(h.origin, '/hooks/wide', TOKEN, body)
    assert.is(r.status, 202)
    const appended = diskBytes(h) - before
    // one copy, plus a row (ids, times, the rendered message) of well under 1 KiB per run
    assert.ok(appended >= bytes, `appended ${appended} bytes for a ${bytes}-byte request`)
    assert.ok(appended < bytes + 200 * 1024, `appended ${appended} bytes for a ${bytes}-byte request: more than one copy`)
    const rows = runsOf(h, r.json.runIds)
    assert.is(rows.filter((row) => row.received !== undefined).length, 1, 'one row holds the request')
    const history = new FileHistory(h.stateDir)
    for (const [i, row] of rows.entries()) {
      assert.is((row.request as { message: string }).message, `agent-fan #${i}`)
      const received = await history.received(row)
      assert.equal(received?.payload, body, `run ${i} reads the whole request back`)
      assert.is(received?.path, '/hooks/wide')
    }
    await history.close()
  } finally {
    await h.close()
    model.setDefault('ok')
  }
})

once('a workflow fan-out: the runs\' contexts keep no copy of the payload, and runs resumed after a restart still render it', async () => {
  model.setDefault('hang')
  const project = await newProject()
  let h = await serveProject(project)
  let ids: string[]
  try {
    const { body, bytes } = wideRequest('flow-fan')
    const before = diskBytes(h)
    const r = await post(h.origin, '/hooks/flows', TOKEN, body)
    assert.is(r.status, 202)
    ids = r.json.runIds
    const appended = diskBytes(h) - before
    assert.ok(appended < bytes + 200 * 1024, `appended ${appended} bytes for a ${bytes}-byte request: more than one copy`)
    for (const row of runsOf(h, ids)) {
      const context = (row.request as { context: Record<string, unknown> }).context
      assert.not.ok('payload' in context, 'the payload is stored once, with the received request')
    }
    // Stopped while every run is unfinished (four asking the model, the rest queued).
    await until('the first runs to ask the model', () => (model.requests.length >= 1 ? true : undefined), 5000)
  } finally {
    await h.close()
  }
  model.setDefault('ok')
  const asked = model.requests.length
  h = await serveProject(project)
  try {
    for (const id of ids) await runReaches(h.stateDir, id, 'succeeded', 30_000)
    const messages = model.requests.slice(asked).map((q) => String(q.body?.messages?.at(-1)?.content ?? ''))
    assert.ok(messages.length >= 200, `${messages.length} model calls after the restart`)
    for (const m of messages) assert.ok(m.includes('flow-fan, 200 items'), `a resumed run renders the payload read back from the stored request: ${m.slice(0, 300)}`)
  } finally {
    await h.close()
  }
})

once.after(() => model.close())
once.run()
