// kill -9 while runs are queued and in flight: after a restart on the same state directory, every
// 202-acknowledged run reaches a final state exactly once.
//
// store: file only — it counts the final status records in runs.jsonl; a PostgreSQL runtime killed
// with its runs in flight is test/multihost/store-crash.test.ts and takeover.test.ts.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI } from '../../fakes/openai.js'
import { compileProject, post, setTestToken, spawnServe, until } from '../http/harness.js'
import { RunStore } from '../../../runtime/store/file/runs.js'

const token = setTestToken()
const model = await startFakeOpenAI()
// Each turn takes a while, so at the kill some runs are running and most are still queued.
model.setDefault({ delayMs: 250 })

const project = await compileProject(`
server: { concurrency: 2 }
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
providers:
  - { id: slow, type: openai, baseUrl: ${model.url}, maxRetries: 0, timeoutSeconds: 10 }
agents:
  - { id: main, model: slow/model, heartbeat: { every: "off" } }
`)

const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'skipped'])

const crash = suite('kill -9 with runs queued and in flight')

crash('every acknowledged run finishes exactly once after the restart', async () => {
  const first = await spawnServe(project.outDir, project.stateDir)
  const acknowledged: string[] = []
  const sends = Array.from({ length: 24 }, (_, i) => post(first.origin, '/hooks/agent', token, { message: `job ${i}`, deliver: false, wakeMode: 'next-heartbeat' })
    .then((r) => { if (r.status === 202) acknowledged.push(r.json.runId) }, () => { /* cut off by the kill: never acknowledged */ }))
  await until('some turns to be running', () => (model.requests.length >= 3 ? true : undefined), 8000)
  first.child.kill('SIGKILL')
  await first.exited
  await Promise.all(sends)
  assert.ok(acknowledged.length >= 3, `only ${acknowledged.length} runs were acknowledged before the kill`)
  const atKill = new Map(RunStore.readRows(project.stateDir).map((r) => [r.id, r.status]))
  for (const id of acknowledged) assert.ok(atKill.has(id), `run ${id} was acknowledged but is not on disk`)
  assert.ok([...atKill.values()].some((s) => s === 'queued' || s === 'running'), 'the kill came after every run had finished; the test proves nothing')

  model.setDefault('ok')
  const second = await spawnServe(project.outDir, project.stateDir)
  try {
    await until('every acknowledged run to finish', () => {
      const rows = new Map(RunStore.readRows(project.stateDir).map((r) => [r.id, r.status]))
      return acknowledged.every((id) => FINAL.has(rows.get(id) ?? '')) ? true : undefined
    }, 15_000)
    const rows = new Map(RunStore.readRows(project.stateDir).map((r) => [r.id, r]))
    for (const id of acknowledged) assert.is(rows.get(id)!.status, 'succeeded', `run ${id}: ${rows.get(id)!.error ?? ''}`)
    // Exactly once: one final status record per run in the journal.
    const records = readFileSync(join(project.stateDir, 'runs.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
    for (const id of acknowledged) {
      const finals = records.filter((r) => r.type === 'status' && r.id === id && FINAL.has(r.status))
      assert.is(finals.length, 1, `run ${id} reached a final state ${finals.length} times`)
    }
  } finally {
    second.child.kill('SIGTERM')
    await second.exited
  }
})

crash.after(() => model.close())
crash.run()
