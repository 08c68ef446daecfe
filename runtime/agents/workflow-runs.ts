// Workflow runs as the engine runs them: each is handed to the workflow runner (runtime/workflows/),
// built here over the run log and the engine's narrow functions (a model turn, the main session's
// queue, the channels, the transform workers, http steps with their secret headers). The runner's
// start and stop are a duty (runtime/duties/workflow-runner.ts), started and stopped by the
// supervisor with the others; this module only wires it and counts its runs in the backlog.
import type { BundleWorkflow } from '../bundle/format.js'
import type { Deliverer } from '../channels/deliverer.js'
import type { ReceivedRequest, RunLog, RunRow } from '../store/store.js'
import type { TransformCaller } from '../transforms/pool.js'
import { createStepActions } from '../workflows/actions.js'
import { createHttpStep } from '../workflows/http-step.js'
import { WorkflowRunner, type StepActions, type WorkflowRequest } from '../workflows/runner.js'
import { PENDING_WORKFLOW_RUN_BYTES, heldBytes, type Backlog } from './backlog.js'
import { TurnTimeout, type ModelCalls } from './complete.js'
import { wrapExternalContent } from './envelope.js'
import type { InFlight } from './in-flight.js'
import type { MainTurns } from './main-turns.js'

/** The transform workers, as workflow steps with action transform call them. */
export type StepTransforms = ((caller: TransformCaller, input: Record<string, unknown>) => Promise<unknown>) | null

/**
 * A workflow run's request as its row keeps it. A mapped request's payload is the payload of the
 * received request stored beside it (the same object), which a fan-out stores once for all its
 * runs: the context keeps no second copy per run (a 245 KiB request fanned out to 200 workflow
 * runs stored it 200 times more), and a resume reads it back from there (`payloadFrom`).
 */
type StoredWorkflowRequest = Omit<WorkflowRequest, 'context'> & { context: Omit<WorkflowRequest['context'], 'payload'> & { payload?: unknown }; payloadFrom?: 'received' }

export function storedWorkflowRequest(request: WorkflowRequest, received: ReceivedRequest | undefined): StoredWorkflowRequest {
  if (received === undefined || request.context.payload !== received.payload) return request
  const { payload: _payload, ...context } = request.context
  return { ...request, context, payloadFrom: 'received' }
}

export class WorkflowRuns {
  readonly runner: WorkflowRunner
  private channels: ReadonlyMap<string, Deliverer> = new Map()
  private transforms: StepTransforms = null
  private httpStep: StepActions['http'] = createHttpStep(new Map())

  constructor(private readonly runs: RunLog, models: ModelCalls, turns: MainTurns, private readonly backlog: Backlog, private readonly inFlight: InFlight) {
    this.runner = new WorkflowRunner({
      stepsOf: (parentRunId) => runs.children(parentRunId),
      createStep: (run) => runs.create(run),
      moveStep: async (id, status, extra) => {
        if (status === 'running' && runs.get(id)?.status === 'running') await runs.transition(id, 'queued')
        return runs.transition(id, status, extra)
      },
      outputOf: (row) => runs.output(row),
    }, createStepActions({
      complete: (agentId, message, timeoutSeconds, origin) => models.complete(agentId, null, [{ role: 'user', content: origin.external ? wrapExternalContent(message, { source: origin.source }) : message }], null, timeoutSeconds),
      isTurnTimeout: (err) => err instanceof TurnTimeout,
      // a workflow's wake step asks for a turn right after (heartbeat below)
      queueEvent: (agentId, event) => turns.queueEvent(agentId, event, true),
      heartbeat: (agentId) => turns.heartbeat(agentId),
      http: (call, signal) => this.httpStep(call, signal),
      transforms: () => this.transforms,
      channel: (id) => this.channels.get(id),
    }))
  }

  /** A (re)loaded bundle: its workflows (runs started later use them), channels, transform workers and http steps' secrets. */
  configure(workflows: ReadonlyMap<string, BundleWorkflow>, wiring: { channels?: ReadonlyMap<string, Deliverer>; transforms?: StepTransforms | undefined; stepSecrets?: ReadonlyMap<string, Record<string, string>> }): void {
    if (wiring.channels) this.channels = wiring.channels
    if (wiring.transforms !== undefined) this.transforms = wiring.transforms
    if (wiring.stepSecrets) this.httpStep = createHttpStep(wiring.stepSecrets)
    this.runner.configure(workflows)
  }

  /** `release`: takes the run's weight off the backlog (a resumed run, weighed here, has none yet). */
  async run(row: RunRow, req: WorkflowRequest, release = this.backlog.hold(heldBytes([req]) + PENDING_WORKFLOW_RUN_BYTES, 1)): Promise<void> {
    this.backlog.runs++
    try {
      await this.runner.run(row, req)
    } catch (err) {
      await this.inFlight.endRefused(row.id, err)
    } finally {
      this.backlog.runs--
      release()
    }
  }

  /** A workflow run resumed: its request as stored, with its payload read back from where it was stored once. */
  async resume(row: RunRow): Promise<void> {
    const stored = row.request as StoredWorkflowRequest | undefined
    if (stored?.payloadFrom !== 'received') return this.run(row, stored as WorkflowRequest)
    const received = await this.runs.received(row)
    if (received === undefined) {
      await this.runs.transition(row.id, 'failed', { error: 'interrupted, and the request it was started with is no longer stored' })
      return
    }
    const { payloadFrom: _from, ...request } = stored
    return this.run(row, { ...request, context: { ...request.context, payload: received.payload } })
  }
}
