// What each kind of workflow step does, built from the narrow functions the engine hands over
// (a model turn, the main session's queue, the channels, the transform workers), so that the engine
// only wires and the runner only orders.
import type { BundleRoute } from '../bundle/format.js'
import { pause } from '../lib/retry.js'
import { StepTimeout, type StepActions } from './runner.js'

export interface StepWiring {
  /** an agent step's model turn; `origin.external`: the message is wrapped in the safety envelope first */
  complete(agentId: string, message: string, timeoutSeconds: number, origin: { external: boolean; source: string }): Promise<{ text: string }>
  /** the turn's own deadline passed (the step ends timed_out, not failed) */
  isTurnTimeout(err: unknown): boolean
  queueEvent(agentId: string, event: { id: string; runId: string; text: string; external: boolean; source: string }): Promise<void>
  heartbeat(agentId: string): void
  http: StepActions['http']
  /** the transform workers of the bundle being served, or null when it has no transform */
  transforms(): ((caller: Pick<BundleRoute, 'id' | 'transform'>, input: Record<string, unknown>) => Promise<unknown>) | null | undefined
  channel(id: string): { deliver: (d: Parameters<StepActions['deliver']>[1], signal?: AbortSignal) => Promise<{ attempts: number; detail: string }> } | undefined
}

export function createStepActions(w: StepWiring): StepActions {
  return {
    agent: (agentId, message, timeoutSeconds, _signal, origin) => w.complete(agentId, message, timeoutSeconds, origin)
      .catch((err: Error) => { throw w.isTurnTimeout(err) ? new StepTimeout(err.message) : err }),
    wake: async (agentId, eventId, text, origin) => {
      await w.queueEvent(agentId, { id: eventId, runId: '', text, external: origin.external, source: origin.source })
      w.heartbeat(agentId)
    },
    http: (call, signal) => w.http(call, signal),
    transform: async (step, input) => {
      const run = w.transforms()
      if (!run || !step.transform) throw new Error('no transform worker for this step')
      return run({ id: step.transform.id, transform: step.transform }, input)
    },
    deliver: async (channelId, d, signal) => {
      const channel = w.channel(channelId)
      if (!channel) throw new Error(`channel "${channelId}" is not configured`)
      return channel.deliver(d, signal)
    },
    // a step's retry wait, ended early (false) when the runner stops
    sleep: (ms, signal) => pause(ms, signal),
  }
}
