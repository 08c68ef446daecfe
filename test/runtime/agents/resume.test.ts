// Resuming an agent run a crash cut short, from state written as a kill -9 would leave it (no
// timing race: the files are laid out by hand, then the engine starts on them). Whatever the run
// had already done before the crash — asked the model, delivered the reply, queued the summary for
// the main session — is not done again; what it had not done is done exactly once.
//
// store: file only — it lays out the file store's files as a kill -9 leaves them, and compacts its
// session logs; a dead runtime's runs on PostgreSQL are taken over and resumed in test/multihost/.
import { openStore, storeOptionsOf } from '../../../runtime/store/open.js'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { loadBundle } from '../../../runtime/bundle/load.js'
import { Engine, type Deliverer } from '../../../runtime/agents/engine.js'
import type { ModelProvider } from '../../../runtime/agents/models.js'
import { RunStore } from '../../../runtime/store/file/runs.js'
import { compileProject, setTestToken } from '../http/harness.js'
import { scratchDir } from '../../helpers/paths.js'

setTestToken()
const project = await compileProject(`
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
agents:
  - { id: main, model: builtin/echo, heartbeat: { every: "off" } }
`)
const bundle = await loadBundle(project.outDir)

const RUN = 'r-0001'
const AT = '2026-01-01T00:00:00.000Z'
const REPLY = 'the reply the model gave before the crash'

/** What the agent run was asked to do: reply, deliver to channel "out", summarise into main. */
const REQUEST = {
  source: 'hook /hooks/agent', external: true, message: 'summarise the deploy', name: 'deploy summary', agentId: 'main', sessionKey: 'hook:s1',
  wakeMode: 'next-heartbeat', deliver: true, channel: 'out', to: 'ops', model: null, thinking: null, timeoutSeconds: null,
}

interface Left { reply?: boolean; delivered?: boolean; summary?: boolean }

/** A state directory as a crash left it: the run `running`, and whichever of its steps were on disk. */
function stateAfterCrash(left: Left): string {
  const dir = scratchDir('resume-')
  const row = { id: RUN, definitionKind: 'hook', definitionId: 'agent', correlationId: 'corr-1', action: 'agent', status: 'running', createdAt: AT, updatedAt: AT, startedAt: AT, agentId: 'main', sessionKey: 'hook:s1', name: 'deploy summary', request: REQUEST }
  writeFileSync(join(dir, 'runs.jsonl'), JSON.stringify({ type: 'run', row }) + '\n')
  mkdirSync(join(dir, 'sessions', 'main'), { recursive: true })
  const isolated = []
  if (left.reply) isolated.push({ type: 'isolated', runId: RUN, sessionKey: 'hook:s1', at: AT, prompt: 'summarise the deploy', reply: REPLY })
  if (left.delivered) isolated.push({ type: 'delivered', runId: RUN, at: AT, note: ' (delivered via out: 200)' })
  writeFileSync(join(dir, 'sessions', 'isolated.jsonl'), isolated.map((r) => JSON.stringify(r) + '\n').join(''))
  const main = left.summary ? [{ type: 'event', id: `summary:${RUN}`, runId: '', text: `Hook "deploy summary" (run ${RUN}) finished: ${REPLY}`, external: true, source: 'hook /hooks/agent', at: AT }] : []
  writeFileSync(join(dir, 'sessions', 'main', 'main.jsonl'), main.map((r) => JSON.stringify(r) + '\n').join(''))
  return dir
}

/**
 * A model that answers `text` and records what it was asked: the run's own turns in `asked`, the
 * main session's heartbeat turns (which read queued summaries; not the run asking again) apart.
 */
function countingModel(asked: string[], text: string): { model: ModelProvider; heartbeats: string[] } {
  const heartbeats: string[] = []
  const model: ModelProvider = {
    async complete(call) {
      const heartbeat = call.messages.some((m) => m.role === 'system' && m.content.startsWith('Heartbeat for agent'))
      ;(heartbeat ? heartbeats : asked).push(call.messages.at(-1)!.content)
      return { text }
    },
  }
  return { model, heartbeats }
}

/** Starts an engine on `dir` with a counting model and a counting channel; resolves once the run is final. */
async function resume(dir: string) {
  const asked: string[] = []
  const delivered: Array<{ text: string; to: string | null }> = []
  const { model, heartbeats } = countingModel(asked, 'a fresh reply')
  const out: Deliverer = { async deliver(d) { delivered.push({ text: d.text, to: d.to }); return { attempts: 1, detail: '200' } } }
  const engine = Engine.open(openStore(dir, storeOptionsOf(bundle.config, false)), bundle.config, bundle.workflows, { models: { providerFor: () => model }, channels: new Map([['out', out]]) })
  assert.is(engine.resumeUnfinished(), 1, 'one unfinished run found')
  assert.ok(await engine.drain(5000), 'the resumed run finished')
  await engine.close()
  const row = RunStore.readRows(dir).find((r) => r.id === RUN)!
  const session = readFileSync(join(dir, 'sessions', 'main', 'main.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; id?: string; text?: string })
  const summaries = session.filter((r) => r.type === 'event' && r.id === `summary:${RUN}`)
  const records = readFileSync(join(dir, 'sessions', 'isolated.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; runId: string })
  const finals = readFileSync(join(dir, 'runs.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; id?: string; status?: string })
    .filter((r) => r.type === 'status' && r.id === RUN && r.status === 'succeeded')
  return { asked, heartbeats, delivered, row, summaries, deliveredRecords: records.filter((r) => r.type === 'delivered' && r.runId === RUN), finals }
}

const resumed = suite('resuming an agent run after kill -9')

resumed('killed after the delivery and the summary, before the final status: nothing is sent or asked again', async () => {
  const r = await resume(stateAfterCrash({ reply: true, delivered: true, summary: true }))
  assert.equal(r.asked, [], 'the model is not asked again')
  assert.equal(r.delivered, [], 'the reply is not delivered twice')
  assert.is(r.summaries.length, 1, 'the summary is queued once')
  assert.is(r.row.status, 'succeeded')
  assert.ok(r.row.result?.startsWith(REPLY), r.row.result)
  assert.ok(r.row.result?.includes('delivered via out'), r.row.result)
  assert.is(r.finals.length, 1, 'one final status record')
  assert.is(r.heartbeats.length, 1, 'the main session reads the summary in one heartbeat turn')
  assert.ok(r.heartbeats[0]!.includes(`(run ${RUN}) finished: ${REPLY}`))
})

resumed('killed after the delivery, before the summary: the summary is queued once, nothing is sent again', async () => {
  const r = await resume(stateAfterCrash({ reply: true, delivered: true }))
  assert.equal(r.asked, [])
  assert.equal(r.delivered, [])
  assert.is(r.summaries.length, 1)
  assert.ok(r.summaries[0]!.text!.includes(REPLY))
  assert.is(r.row.status, 'succeeded')
  assert.is(r.deliveredRecords.length, 1, 'no second delivered record')
})

resumed('killed after the model answered, before the delivery: the stored reply is delivered once, the model not asked', async () => {
  const r = await resume(stateAfterCrash({ reply: true }))
  assert.equal(r.asked, [])
  assert.equal(r.delivered, [{ text: REPLY, to: 'ops' }])
  assert.is(r.deliveredRecords.length, 1, 'the delivery is recorded, so a second crash would not repeat it')
  assert.is(r.summaries.length, 1)
  assert.is(r.row.status, 'succeeded')
  assert.is(r.finals.length, 1)
})

resumed('killed before the model answered: the turn runs once, then delivers once', async () => {
  const r = await resume(stateAfterCrash({}))
  assert.is(r.asked.length, 1, 'the model is asked once')
  assert.ok(r.asked[0]!.includes('summarise the deploy'))
  assert.equal(r.delivered, [{ text: 'a fresh reply', to: 'ops' }])
  assert.is(r.summaries.length, 1)
  assert.is(r.row.status, 'succeeded')
})

resumed.run()

// ---------------------------------------------------------------------------------------------

const compacted = suite('session journals compacted at start')

compacted('only what unfinished runs and unread events need is kept; the resumed run still finds its reply', async () => {
  const dir = stateAfterCrash({ reply: true })
  // fifty finished runs before it: rows, transcripts, summaries read by a turn, and one summary still unread
  const done = Array.from({ length: 50 }, (_, i) => `done-${String(i).padStart(2, '0')}`)
  const rows = done.map((id) => ({ type: 'run', row: { id, definitionKind: 'hook', definitionId: 'agent', correlationId: id, action: 'agent', status: 'succeeded', createdAt: AT, updatedAt: AT, finishedAt: AT } }))
  const runsFile = join(dir, 'runs.jsonl')
  writeFileSync(runsFile, rows.map((r) => JSON.stringify(r) + '\n').join('') + readFileSync(runsFile, 'utf8'))
  const isolatedFile = join(dir, 'sessions', 'isolated.jsonl')
  const oldTranscripts = done.flatMap((id) => [
    { type: 'isolated', runId: id, sessionKey: 'hook:old', at: AT, prompt: 'p', reply: `reply of ${id}` },
    { type: 'delivered', runId: id, at: AT, note: ' (delivered)' },
  ])
  writeFileSync(isolatedFile, oldTranscripts.map((r) => JSON.stringify(r) + '\n').join('') + readFileSync(isolatedFile, 'utf8'))
  const mainFile = join(dir, 'sessions', 'main', 'main.jsonl')
  const summary = (id: string) => ({ type: 'event', id: `summary:${id}`, runId: '', text: `Hook (run ${id}) finished`, external: true, source: 'hook /hooks/agent', at: AT })
  const main = [
    ...done.map(summary),
    { type: 'turn', id: 'turn:1', at: AT, events: done.slice(0, 49).map((id) => `summary:${id}`), reply: 'read them' },
    { type: 'route', at: AT, channel: 'out', to: 'ops' },
  ]
  writeFileSync(mainFile, main.map((r) => JSON.stringify(r) + '\n').join(''))

  const asked: string[] = []
  const delivered: string[] = []
  const { model, heartbeats } = countingModel(asked, 'fresh')
  const out: Deliverer = { async deliver(d) { delivered.push(d.text); return { attempts: 1, detail: '200' } } }
  const engine = Engine.open(openStore(dir, { ...storeOptionsOf(bundle.config, false), logCompactAboveBytes: 1 }), bundle.config, bundle.workflows, { models: { providerFor: () => model }, channels: new Map([['out', out]]) })

  const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>)
  // the transcript file: the unfinished run's reply only
  assert.equal(lines(isolatedFile).map((r) => [r.type, r.runId]), [['isolated', RUN]])
  // the main session: the last route, and the one summary no turn has read
  assert.equal(lines(mainFile).map((r) => [r.type, r.id ?? r.channel]), [['route', 'out'], ['event', 'summary:done-49']])

  assert.is(engine.resumeUnfinished(), 1)
  assert.ok(await engine.drain(5000))
  await engine.close()
  assert.equal(asked, [], 'the stored reply is used: the compaction kept it')
  assert.equal(delivered, [REPLY])
  assert.is(heartbeats.length, 1, 'one turn reads what is unread')
  assert.ok(heartbeats[0]!.includes('(run done-49) finished'), 'the unread summary of a finished run is still read')
  assert.not.ok(heartbeats[0]!.includes('(run done-48)'), 'a summary already read is not read again')
  assert.is(RunStore.readRows(dir).find((r) => r.id === RUN)!.status, 'succeeded')
})

compacted('under the size bound nothing is rewritten', async () => {
  const dir = stateAfterCrash({ reply: true, delivered: true, summary: true })
  const before = readFileSync(join(dir, 'sessions', 'isolated.jsonl'), 'utf8') + readFileSync(join(dir, 'sessions', 'main', 'main.jsonl'), 'utf8')
  const engine = Engine.open(openStore(dir, storeOptionsOf(bundle.config, false)), bundle.config, bundle.workflows)
  await engine.close()
  assert.is(readFileSync(join(dir, 'sessions', 'isolated.jsonl'), 'utf8') + readFileSync(join(dir, 'sessions', 'main', 'main.jsonl'), 'utf8'), before)
})

compacted.run()
