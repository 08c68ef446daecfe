// The workflow runner over in-memory fakes: the graph order, one row per step, retries with backoff,
// if: skips, deadlines, and a resume that reuses what finished instead of running it again.
//
// store: none — the runner over in-memory fakes: the PostgreSQL pass leaves it out.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { WorkflowRunner, retryDelayMs, isFalsyCondition, type StepActions, type StepStore, type WorkflowRequest } from '../../../runtime/workflows/runner.js'
import type { BundleWorkflow, BundleWorkflowStep } from '../../../runtime/bundle/format.js'
import type { NewRun, RunRow, RunStatus, TransitionExtra } from '../../../runtime/store/file/runs.js'

const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'skipped'])

/** The run history as a Map: every move is checked against the store's rules that matter here. */
class FakeStore implements StepStore {
  readonly rows = new Map<string, RunRow>()
  readonly moves: Array<[string, RunStatus]> = []
  add(row: Partial<RunRow> & Pick<RunRow, 'id' | 'status'>): void {
    this.rows.set(row.id, { definitionKind: 'hook', definitionId: 'm', correlationId: 'corr', action: 'workflow', createdAt: '', updatedAt: '', ...row } as RunRow)
  }
  stepsOf(parentRunId: string): RunRow[] { return [...this.rows.values()].filter((r) => r.parentRunId === parentRunId) }
  async createStep(run: NewRun): Promise<RunRow> {
    const row = { ...run, status: 'queued', createdAt: '', updatedAt: '' } as RunRow
    this.rows.set(row.id, row)
    return row
  }
  async moveStep(id: string, status: RunStatus, extra: TransitionExtra = {}): Promise<RunRow> {
    const row = this.rows.get(id)!
    assert.ok(!FINAL.has(row.status), `row ${id} moved from final ${row.status} to ${status}`)
    const next = { ...row, status, ...extra } as RunRow
    this.rows.set(id, next)
    this.moves.push([row.stepId ?? 'workflow', status])
    return next
  }
  outputOf(row: RunRow): unknown { return row.output }
  step(stepId: string): RunRow | undefined { return [...this.rows.values()].find((r) => r.stepId === stepId) }
}

/** Actions that record their calls; each kind answers through a function a test may replace. */
function fakeActions() {
  const calls: string[] = []
  const sleeps: number[] = []
  const impl = {
    http: async (_url: string): Promise<{ status: number; headers: Record<string, string>; body: unknown }> => ({ status: 200, headers: {}, body: { id: 7, name: 'widget' } }),
    transform: async (input: Record<string, unknown>): Promise<unknown> => ({ label: `L${(input.steps as any).fetch.output.body.id}` }),
    agent: async (message: string): Promise<{ text: string }> => ({ text: `echo: ${message}` }),
  }
  const actions: StepActions = {
    agent: async (_a, message) => { calls.push(`agent ${message}`); return impl.agent(message) },
    wake: async (_a, id) => { calls.push(`wake ${id}`) },
    http: async (call) => { calls.push(`http ${call.method} ${call.url}`); return impl.http(call.url) },
    transform: async (_s, input) => { calls.push('transform'); return impl.transform(input) },
    deliver: async (channel, d) => { calls.push(`deliver ${channel} ${d.text}`); return { attempts: 1, detail: 'ok' } },
    sleep: async (ms) => { sleeps.push(ms); return true },
  }
  return { calls, sleeps, impl, actions }
}

const text = (f: (c: any) => string) => (c: any) => f(c)

function step(s: Partial<BundleWorkflowStep> & Pick<BundleWorkflowStep, 'id' | 'action'>): BundleWorkflowStep {
  return { agentId: null, needs: [], timeoutSeconds: null, render: {}, ...s }
}

/** http → transform → agent, the shape of the done-when workflow. */
const pipeline: BundleWorkflow = {
  id: 'pipeline',
  steps: [
    step({ id: 'fetch', action: 'http', render: { url: text((c) => `http://api.test/items/${c.payload.id}`) } }),
    step({ id: 'enrich', action: 'transform', needs: ['fetch'], transform: { id: 'workflow:pipeline/enrich', exportName: 'default', module: 'e.mjs', timeoutMs: 1000, file: 'x.mjs', env: [] } }),
    step({ id: 'tell', action: 'agent', needs: ['enrich'], render: { message: text((c) => `item ${c.steps.enrich.output.label} is ${c.steps.fetch.output.body.name}`) } }),
  ],
}

const request: WorkflowRequest = { agentId: 'main', workflow: 'pipeline', name: null, context: { payload: { id: 7 }, headers: {}, query: {}, path: 'p', now: '' }, source: 'hook /hooks/p', external: false }

function runnerWith(workflows: BundleWorkflow[], store = new FakeStore(), fakes = fakeActions()) {
  const runner = new WorkflowRunner(store, fakes.actions)
  runner.start(new Map(workflows.map((w) => [w.id, w])))
  store.add({ id: 'wf-1', status: 'queued' })
  return { runner, store, fakes, parent: () => store.rows.get('wf-1')! }
}

const run = suite('WorkflowRunner.run')

run('runs the steps in needs order, each with its own row under the workflow\'s correlation id', async () => {
  const { runner, store, fakes, parent } = runnerWith([pipeline])
  await runner.run(parent(), request)
  assert.equal(fakes.calls, ['http GET http://api.test/items/7', 'transform', 'agent item L7 is widget'])
  assert.is(parent().status, 'succeeded')
  for (const id of ['fetch', 'enrich', 'tell']) {
    const row = store.step(id)!
    assert.is(row.status, 'succeeded', id)
    assert.is(row.parentRunId, 'wf-1')
    assert.is(row.correlationId, 'corr')
  }
  assert.equal(store.step('fetch')!.output, { status: 200, headers: {}, body: { id: 7, name: 'widget' } })
  assert.is(store.step('fetch')!.action, 'http')
  assert.equal(store.step('tell')!.output, { text: 'echo: item L7 is widget' })
})

run('retries a failing step with doubling backoff and records its attempts', async () => {
  const wf: BundleWorkflow = { id: 'pipeline', steps: [{ ...pipeline.steps[0]!, retries: 3, backoffSeconds: 0.5 }] }
  const { runner, store, fakes, parent } = runnerWith([wf])
  let n = 0
  fakes.impl.http = async () => (++n < 3 ? { status: 503, headers: {}, body: '' } : { status: 200, headers: {}, body: 'ok' })
  await runner.run(parent(), request)
  assert.equal(fakes.sleeps, [500, 1000])
  assert.is(store.step('fetch')!.status, 'succeeded')
  assert.is(store.step('fetch')!.attempts, 3)
  assert.is(parent().status, 'succeeded')
})

run('a step that still fails after its retries fails the workflow, and no step after it runs', async () => {
  const wf: BundleWorkflow = { ...pipeline, steps: [{ ...pipeline.steps[0]!, retries: 1, expect: [201] }, ...pipeline.steps.slice(1)] }
  const { runner, store, fakes, parent } = runnerWith([wf])
  await runner.run(parent(), request)
  assert.is(store.step('fetch')!.status, 'failed')
  assert.match(store.step('fetch')!.error!, 'the call answered 200, expected 201')
  assert.is(store.step('fetch')!.attempts, 2)
  assert.is(store.step('enrich'), undefined)
  assert.is(parent().status, 'failed')
  assert.match(parent().error!, 'step "fetch" failed')
  assert.equal(fakes.calls.filter((c) => c !== 'http GET http://api.test/items/7'), [])
})

run('a step whose if: renders false is skipped, and so is every step that needs it', async () => {
  const wf: BundleWorkflow = { ...pipeline, steps: [pipeline.steps[0]!, { ...pipeline.steps[1]!, render: { if: text((c) => String(c.payload.enrich ?? '')) } }, pipeline.steps[2]!] }
  const { runner, store, fakes, parent } = runnerWith([wf])
  await runner.run(parent(), request)
  assert.is(store.step('enrich')!.status, 'skipped')
  assert.is(store.step('tell')!.status, 'skipped')
  assert.equal(fakes.calls, ['http GET http://api.test/items/7'])
  assert.is(parent().status, 'succeeded')
})

run('a step past its timeoutSeconds times out', async () => {
  const wf: BundleWorkflow = { id: 'pipeline', steps: [{ ...pipeline.steps[0]!, timeoutSeconds: 0.05 }] }
  const { runner, store, fakes, parent } = runnerWith([wf])
  fakes.impl.http = () => new Promise(() => {})
  await runner.run(parent(), request)
  assert.is(store.step('fetch')!.status, 'timed_out')
  assert.is(parent().status, 'timed_out')
})

run('a resumed workflow reuses the stored output of a succeeded step and runs only the unfinished ones', async () => {
  const store = new FakeStore()
  store.add({ id: 's-fetch', status: 'succeeded', parentRunId: 'wf-1', stepId: 'fetch', action: 'http', output: { status: 200, headers: {}, body: { id: 9, name: 'stored' } } })
  store.add({ id: 's-enrich', status: 'running', parentRunId: 'wf-1', stepId: 'enrich', action: 'transform' })
  const { runner, fakes, parent } = runnerWith([pipeline], store)
  store.rows.set('wf-1', { ...parent(), status: 'running' })
  // the fake store lets running → running pass; the engine's moveStep re-queues first
  await runner.run(parent(), request)
  assert.equal(fakes.calls, ['transform', 'agent item L9 is stored'])
  assert.is(store.rows.get('s-enrich')!.status, 'succeeded', 'the interrupted step finished on its own row')
  assert.is(store.stepsOf('wf-1').length, 3)
  assert.is(parent().status, 'succeeded')
})

run('a stopped runner starts no further step and leaves the workflow to be resumed', async () => {
  const { runner, store, fakes, parent } = runnerWith([pipeline])
  fakes.impl.http = async () => { runner.stop(); return { status: 200, headers: {}, body: { id: 7 } } }
  await runner.run(parent(), request)
  assert.is(store.step('enrich'), undefined)
  assert.is(parent().status, 'running')
})

run.run()

const delays = suite('retryDelayMs')

delays('doubles the backoff per retry and caps it at five minutes', () => {
  assert.is(retryDelayMs({ backoffSeconds: 2 }, 1), 2000)
  assert.is(retryDelayMs({ backoffSeconds: 2 }, 3), 8000)
  assert.is(retryDelayMs({ backoffSeconds: 200 }, 2), 300_000)
  assert.is(retryDelayMs({}, 1), 1000)
})

delays.run()

const falsy = suite('isFalsyCondition')

falsy('takes "", false, 0 and null (trimmed, any case) as false and anything else as true', () => {
  for (const t of ['', ' ', 'false', 'FALSE', '0', 'null', ' null\n']) assert.ok(isFalsyCondition(t), JSON.stringify(t))
  for (const t of ['true', '1', 'no', '[]', '{}', 'x']) assert.not.ok(isFalsyCondition(t), JSON.stringify(t))
})

falsy.run()
