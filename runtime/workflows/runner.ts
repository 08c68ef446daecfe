// The workflow runner: runs a workflow's steps as a graph (a step starts once every step it needs
// has succeeded), each step with its own run-history row under the workflow's correlation id.
// The step rows are the durable record: a workflow resumed after a crash reuses the stored output
// of every step whose row succeeded and runs again only the steps that had not finished.
// It is handed narrow functions (StepStore, StepActions), never the store, so a test can run it
// over in-memory fakes.
import { randomUUID } from 'node:crypto'
import type { BundleWorkflow, BundleWorkflowStep, RenderContext } from '../bundle/format.js'
import type { NewRun, RunRow, RunStatus, TransitionExtra } from '../store/store.js'
import { templateHelpers } from '../bundle/template-helpers.js'

/** What the runner writes and reads of the run history. */
export interface StepStore {
  /** the step rows a workflow run has already (oldest first) */
  stepsOf(parentRunId: string): RunRow[]
  createStep(run: NewRun): Promise<RunRow>
  /** moves a row on; 'running' from 'running' (a step a crash interrupted) re-queues it first */
  moveStep(id: string, status: RunStatus, extra?: TransitionExtra): Promise<RunRow>
  /** a succeeded step's output (from its blob when large) */
  outputOf(row: RunRow): unknown
}

/** The workflow's own request, as the engine stored it. */
export interface WorkflowRequest {
  agentId: string
  workflow: string
  name: string | null
  context: RenderContext
  source: string
  external: boolean
}

/** What each step kind does; every call gets the step's deadline as an AbortSignal. */
export interface StepActions {
  /** `origin`: an external request's text is wrapped in the safety envelope by the engine before the model reads it */
  agent(agentId: string, message: string, timeoutSeconds: number, signal: AbortSignal, origin: { external: boolean; source: string }): Promise<{ text: string }>
  wake(agentId: string, eventId: string, text: string, origin: { external: boolean; source: string }): Promise<void>
  /** `scope`: the url's literal text before its first placeholder, which the call must stay in (null: a bundle from before it was emitted) */
  http(call: { method: string; url: string; scope: string | null; headers: Record<string, string>; body: string | null; stepKey: string }, signal: AbortSignal): Promise<{ status: number; headers: Record<string, string>; body: unknown }>
  transform(step: BundleWorkflowStep, input: Record<string, unknown>): Promise<unknown>
  deliver(channel: string, d: { runId: string; agentId: string; text: string; to: string | null; name: string | null; correlationId: string }, signal: AbortSignal): Promise<{ attempts: number; detail: string }>
  /** waits before a retry; resolves early (false) when the runner stops */
  sleep(ms: number, signal: AbortSignal): Promise<boolean>
}

export class StepTimeout extends Error {}

/** Default deadlines per step kind when a step sets no timeoutSeconds (a transform's is its own timeoutMs). */
export const DEFAULT_STEP_TIMEOUT_SECONDS: Readonly<Record<BundleWorkflowStep['action'], number>> = { agent: 120, wake: 30, http: 30, transform: 60, deliver: 300 }
export const DEFAULT_BACKOFF_SECONDS = 1
export const BACKOFF_CAP_SECONDS = 300

/** `if:` renders to one of these (trimmed, any case): the step is skipped. */
const FALSY = new Set(['', 'false', '0', 'null'])

export function isFalsyCondition(text: string): boolean {
  return FALSY.has(text.trim().toLowerCase())
}

/** The wait before retry number `retry` (1-based): backoffSeconds doubled per retry, capped. */
export function retryDelayMs(step: Pick<BundleWorkflowStep, 'backoffSeconds'>, retry: number): number {
  const base = step.backoffSeconds ?? DEFAULT_BACKOFF_SECONDS
  return Math.min(BACKOFF_CAP_SECONDS, base * 2 ** (retry - 1)) * 1000
}

type Settled = { status: 'succeeded'; output: unknown } | { status: 'skipped' } | { status: 'failed' | 'timed_out'; error: string }

export class WorkflowRunner {
  private workflows: ReadonlyMap<string, BundleWorkflow> = new Map()
  private readonly stopping = new AbortController()
  private started = false

  constructor(private readonly store: StepStore, private readonly actions: StepActions) {}

  /** Accepts workflows from now on. */
  start(workflows: ReadonlyMap<string, BundleWorkflow>): void {
    this.workflows = workflows
    this.started = true
  }

  /** A reload: workflows started later use the new definitions; running ones keep theirs. */
  configure(workflows: ReadonlyMap<string, BundleWorkflow>): void {
    this.workflows = workflows
  }

  /** Ends retry waits; steps not started yet are left for the next start to resume. */
  stop(): void {
    this.started = false
    this.stopping.abort()
  }

  /** Runs (or resumes) a workflow whose row is queued; the row ends final unless the runner stops first. */
  async run(row: RunRow, req: WorkflowRequest): Promise<void> {
    if (!this.started) return
    await this.store.moveStep(row.id, 'running')
    const wf = this.workflows.get(req.workflow)
    if (!wf) {
      await this.store.moveStep(row.id, 'failed', { error: `workflow "${req.workflow}" is not in the loaded bundle` })
      return
    }
    const existing = new Map<string, RunRow>()
    for (const r of this.store.stepsOf(row.id)) if (r.stepId !== undefined) existing.set(r.stepId, r)
    const settled = new Map<string, Settled>()
    const outputs: Record<string, { output: unknown }> = Object.create(null)
    let failure: { status: 'failed' | 'timed_out'; error: string } | undefined
    while (!failure && settled.size < wf.steps.length) {
      if (!this.started) return // left running: the next start resumes it
      const ready = wf.steps.filter((s) => !settled.has(s.id) && s.needs.every((n) => settled.has(n)))
      if (ready.length === 0) { failure = { status: 'failed', error: 'the workflow has steps that can never run' }; break }
      const results = await Promise.all(ready.map((step) => this.step(row, req, step, existing.get(step.id), settled, outputs)))
      ready.forEach((step, i) => {
        const r = results[i]!
        settled.set(step.id, r)
        if (r.status === 'succeeded') outputs[step.id] = { output: r.output }
        else if (r.status !== 'skipped' && !failure) failure = { status: r.status, error: `step "${step.id}" ${r.status.replace('_', ' ')}: ${r.error}` }
      })
    }
    if (!this.started && !failure) return
    // an agent step's reply reads better than its status (as the workflow's result did before steps had rows)
    const summary = wf.steps.map((s) => {
      const r = settled.get(s.id)
      const reply = r?.status === 'succeeded' && s.action === 'agent' ? (r.output as { text?: unknown } | null)?.text : undefined
      return `${s.id}: ${typeof reply === 'string' ? reply : r?.status ?? 'not run'}`
    }).join('\n')
    if (failure) await this.store.moveStep(row.id, failure.status, { error: failure.error, result: summary })
    else await this.store.moveStep(row.id, 'succeeded', { result: summary })
  }

  /** One step: its stored outcome when its row finished before, else run (and retried) now. */
  private async step(parent: RunRow, req: WorkflowRequest, step: BundleWorkflowStep, existing: RunRow | undefined, settled: ReadonlyMap<string, Settled>, outputs: Record<string, { output: unknown }>): Promise<Settled> {
    if (existing?.status === 'succeeded') return { status: 'succeeded', output: this.store.outputOf(existing) ?? null }
    if (existing?.status === 'skipped') return { status: 'skipped' }
    if (existing && (existing.status === 'failed' || existing.status === 'timed_out')) return { status: existing.status, error: existing.error ?? 'failed' }
    const agentId = step.agentId ?? req.agentId
    let row = existing ?? await this.store.createStep({
      id: randomUUID(), definitionKind: parent.definitionKind, definitionId: parent.definitionId, correlationId: parent.correlationId,
      action: step.action, parentRunId: parent.id, stepId: step.id, agentId, ...(req.name ? { name: req.name } : {}),
    })
    // A step whose needed step was skipped is skipped too: its inputs do not exist.
    const skippedNeed = step.needs.find((n) => settled.get(n)?.status === 'skipped')
    const ctx: RenderContext & { steps: unknown } = Object.assign(Object.create(null), req.context, { steps: outputs })
    const render = (field: keyof BundleWorkflowStep['render']): string | undefined => step.render[field]?.(ctx, templateHelpers)
    if (skippedNeed !== undefined || (step.render.if && isFalsyCondition(render('if')!))) {
      const why = skippedNeed !== undefined ? `needs "${skippedNeed}", which was skipped` : 'its if: condition was false'
      if (row.status === 'running') row = await this.store.moveStep(row.id, 'queued')
      await this.store.moveStep(row.id, 'skipped', { result: why })
      return { status: 'skipped' }
    }
    row = await this.store.moveStep(row.id, 'running')
    const retries = step.retries ?? 0
    let last: { status: 'failed' | 'timed_out'; error: string } = { status: 'failed', error: 'not run' }
    for (let attempt = 1; attempt <= retries + 1; attempt++) {
      if (attempt > 1 && !(await this.actions.sleep(retryDelayMs(step, attempt - 1), this.stopping.signal))) return last // stopping: resumed at next start
      try {
        const output = await this.withDeadline(step, (signal) => this.execute(parent, req, step, row, agentId, ctx, outputs, signal))
        await this.store.moveStep(row.id, 'succeeded', { output, attempts: attempt, result: summarise(output) })
        return { status: 'succeeded', output }
      } catch (err) {
        last = { status: err instanceof StepTimeout ? 'timed_out' : 'failed', error: (err as Error).message }
      }
    }
    await this.store.moveStep(row.id, last.status, { error: last.error, attempts: retries + 1 })
    return last
  }

  private async execute(parent: RunRow, req: WorkflowRequest, step: BundleWorkflowStep, row: RunRow, agentId: string, ctx: RenderContext, outputs: Record<string, { output: unknown }>, signal: AbortSignal): Promise<unknown> {
    const render = (field: keyof BundleWorkflowStep['render']): string | undefined => step.render[field]?.(ctx, templateHelpers)
    switch (step.action) {
      case 'agent': {
        const r = await this.actions.agent(agentId, render('message') ?? '', step.timeoutSeconds ?? DEFAULT_STEP_TIMEOUT_SECONDS.agent, signal, { external: req.external, source: req.source })
        return { text: r.text }
      }
      case 'wake':
        await this.actions.wake(agentId, `step:${parent.id}:${step.id}`, render('text') ?? '', { external: req.external, source: req.source })
        return { queued: true }
      case 'http': {
        const headers: Record<string, string> = {}
        for (const [name, fn] of Object.entries(step.headers ?? {})) headers[name] = fn(ctx, templateHelpers)
        const body = render('body') ?? null
        const method = step.method ?? (body === null ? 'GET' : 'POST')
        const r = await this.actions.http({ method, url: render('url') ?? '', scope: step.urlScope ?? null, headers, body, stepKey: `${req.workflow}\0${step.id}` }, signal)
        const expect = step.expect
        if (expect ? !expect.includes(r.status) : r.status < 200 || r.status > 299) throw new Error(`the call answered ${r.status}, expected ${expect ? expect.join(', ') : 'a 2xx status'}`)
        return r
      }
      case 'transform': {
        const { payload, headers, query, path } = req.context
        const value = await this.actions.transform(step, { payload, headers, query, path, steps: outputs })
        return value === undefined ? null : value
      }
      case 'deliver': {
        const r = await this.actions.deliver(step.channel ?? '', { runId: row.id, agentId, text: render('text') ?? '', to: render('to') ?? null, name: req.name, correlationId: row.correlationId }, signal)
        return { attempts: r.attempts, detail: r.detail }
      }
    }
  }

  /** Runs `work` under the step's deadline: past it the signal aborts and the step times out. */
  private async withDeadline<T>(step: BundleWorkflowStep, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    // a transform's deadline is its own timeoutMs, enforced by the worker pool
    if (step.action === 'transform' && step.timeoutSeconds === null) return work(new AbortController().signal)
    const seconds = step.timeoutSeconds ?? DEFAULT_STEP_TIMEOUT_SECONDS[step.action]
    const controller = new AbortController()
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => { controller.abort(); reject(new StepTimeout(`the step did not finish within ${seconds} s`)) }, seconds * 1000)
    })
    try {
      return await Promise.race([work(controller.signal), deadline])
    } finally {
      clearTimeout(timer)
    }
  }
}

/** The row's short result: the output as JSON, cut by the store. */
function summarise(output: unknown): string {
  try {
    return JSON.stringify(output) ?? 'null'
  } catch {
    return ''
  }
}
