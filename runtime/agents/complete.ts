// Model fallback and deadlines: one model call for an agent with its model (or an override), its
// fallback models in order, and the turn's deadline over all of them (an AbortSignal every
// provider call gets, aborted when it passes). Every turn the engine runs asks through here: the
// isolated turns, the main session's heartbeat turns and the workflows' agent steps.
import type { BundleConfig } from '../bundle/format.js'
import { ModelError, createModelRegistry, type ChatMessage, type ModelProvider } from './models.js'

/** The model side, as the engine needs it (runtime/agents/models.ts builds it from the bundle). */
export interface Models { providerFor(model: string): ModelProvider }

export const DEFAULT_TURN_TIMEOUT_SECONDS = 120

export class TurnTimeout extends Error {}

/** Until configure() wires the bundle's providers: the built-in model only. */
const builtinOnly: Models = createModelRegistry([], '.')

/** The signal a local model call gets: nothing aborts it. */
const NEVER_ABORTED = new AbortController().signal

export class ModelCalls {
  private models: Models = builtinOnly

  constructor(private agents: BundleConfig['agents']) {}

  /** A (re)loaded bundle's agents, and its providers when they were built anew. */
  configure(agents: BundleConfig['agents'], models?: Models): void {
    this.agents = agents
    if (models) this.models = models
  }

  /** One model call with the agent's model (or an override), its fallbacks, and a deadline. */
  async complete(agentId: string, override: string | null, messages: ChatMessage[], thinking: string | null, timeoutSeconds: number): Promise<{ text: string }> {
    const agent = this.agents.find((a) => a.id === agentId) ?? this.agents.find((a) => a.default)!
    const models = override ? [override] : [agent.model, ...agent.fallbackModels]
    if (models.length === 1) {
      // A local model (builtin/echo) cannot hang: no timer and no abort signal for it.
      const provider = this.models.providerFor(models[0]!)
      if (provider.local) {
        try {
          return await provider.complete({ model: models[0]!, messages, thinking, signal: NEVER_ABORTED })
        } catch (err) {
          throw new ModelError(`${models[0]}: ${(err as Error).message}`)
        }
      }
    }
    const controller = new AbortController()
    let rejectTimeout!: (e: Error) => void
    const timedOut = new Promise<never>((_, reject) => { rejectTimeout = reject })
    const timer = setTimeout(() => {
      controller.abort()
      rejectTimeout(new TurnTimeout(`the turn did not finish within ${timeoutSeconds} s`))
    }, timeoutSeconds * 1000)
    timedOut.catch(() => {})
    try {
      const reasons: string[] = []
      for (const model of models) {
        try {
          return await Promise.race([this.models.providerFor(model).complete({ model, messages, thinking, signal: controller.signal }), timedOut])
        } catch (err) {
          if (err instanceof TurnTimeout || controller.signal.aborted) throw err instanceof TurnTimeout ? err : new TurnTimeout(`the turn did not finish within ${timeoutSeconds} s`)
          reasons.push(`${model}: ${(err as Error).message}`)
        }
      }
      throw new ModelError(reasons.length > 1 ? `every model failed (${reasons.join('; ')})` : reasons[0] ?? 'no model answered')
    } finally {
      clearTimeout(timer)
    }
  }
}
