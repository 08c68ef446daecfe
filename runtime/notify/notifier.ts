// Notify policies (DESIGN §4 "Trigger notify policy"): tells a Trigger's or Task's reply channel
// about its runs (the runs it started, not a workflow's steps) — `silent` nothing, `done` the final
// status, `state` every status — once each change is on disk. It hears the run store's changes, keeps one queue per run so a run's
// notifications arrive in order, delivers through the same channels (and retries) as replies, and
// records each outcome on the run's row. A notification never changes a run's status and never
// holds up the run: the run's own writes do not wait for a delivery.
import type { BundleConfig, BundleRoute } from '../bundle/format.js'
import type { Deliverer, Route } from '../channels/deliverer.js'
import { isFinalStatus, type RunNotification, type RunRow, type RunStatus } from '../store/store.js'

export type NotifyPolicy = 'silent' | 'done' | 'state'

/** What the notifier needs of the run store: narrow, so a test can hand it a fake. */
export interface NotifierStore {
  subscribe(listener: (row: RunRow) => void): () => void
  recordNotification(id: string, note: RunNotification): Promise<void>
}

export interface NotifierWiring {
  runs: NotifierStore
  /** where `channel: last` goes for an agent: the main session's last route, else agents[].delivery */
  lastRoute(agentId: string): Route | null
  /** the time as ISO text */
  now?: () => string
  /** where a fault of the notifier itself is told (never a credential) */
  warn?: (message: string) => void
}

/** Where one run's notifications go, and which of its changes are told. */
export interface NotifyTarget {
  policy: NotifyPolicy
  /** a channel id, or 'last' */
  channel: string
  to: string | null
  agentId: string
  label: string
}

/** How long stop() lets notifications still being sent finish before cancelling them. */
export const NOTIFY_STOP_GRACE_MS = 2000

export class Notifier {
  private config: BundleConfig | null = null
  private routes = new Map<string, BundleRoute>()
  private channels: ReadonlyMap<string, Deliverer> = new Map()
  /** per run, the tail of its notifications: the next one starts after it */
  private readonly queues = new Map<string, Promise<void>>()
  private unsubscribe: (() => void) | null = null
  private abort = new AbortController()
  private readonly now: () => string

  constructor(private readonly wiring: NotifierWiring) {
    this.now = wiring.now ?? (() => new Date().toISOString())
  }

  /** Takes a (re)loaded bundle's definitions and channels; runs already queued use the new ones. */
  configure(config: BundleConfig, routes: Iterable<BundleRoute> | undefined, channels: ReadonlyMap<string, Deliverer> | undefined): void {
    this.config = config
    if (routes) {
      const byId = new Map<string, BundleRoute>()
      for (const r of routes) byId.set(r.id, r)
      this.routes = byId
    }
    if (channels) this.channels = channels
  }

  start(): void {
    if (this.unsubscribe) return
    this.abort = new AbortController()
    this.unsubscribe = this.wiring.runs.subscribe((row) => this.changed(row))
  }

  /**
   * Hears no more changes; lets notifications being sent finish for up to `graceMs`, then cancels
   * the rest (each recorded as not delivered). Resolves once nothing is left to write.
   */
  async stop(graceMs = NOTIFY_STOP_GRACE_MS): Promise<void> {
    this.unsubscribe?.()
    this.unsubscribe = null
    if (this.queues.size === 0) return
    let timer: NodeJS.Timeout | undefined
    await Promise.race([Promise.all([...this.queues.values()]), new Promise((r) => { timer = setTimeout(r, graceMs) })])
    clearTimeout(timer)
    this.abort.abort()
    while (this.queues.size > 0) await Promise.all([...this.queues.values()])
  }

  /** Notifications sent or waiting to be (tests, drain). */
  get pending(): number {
    return this.queues.size
  }

  /**
   * Which runs are told about, and where: keyed off the row's definition, so any kind of run that
   * has one is covered. Only runs the operator started: a workflow's steps share its definition,
   * but `done` means one message per workflow run (and `state` its own changes), not one per step.
   */
  targetFor(row: RunRow): NotifyTarget | null {
    const config = this.config
    if (!config || row.parentRunId !== undefined) return null
    const label = row.name ?? row.definitionId
    if (row.definitionKind === 'task') {
      const task = config.tasks.find((t) => t.id === row.definitionId) as (BundleConfig['tasks'][number] & { channel?: string; to?: string | null }) | undefined
      if (!task || task.notify === 'silent') return null
      return { policy: task.notify, channel: task.channel ?? 'last', to: task.to ?? null, agentId: task.agentId, label: task.name }
    }
    const route = this.routes.get(row.definitionId)
    if (!route || route.notify === null || route.notify === 'silent') return null
    // An agent run's request holds its channel and rendered `to` (a transform may have changed them).
    const req = row.request as { channel?: unknown; to?: unknown } | undefined
    const channel = typeof req?.channel === 'string' ? req.channel : route.channel
    const to = typeof req?.to === 'string' ? req.to : null
    return { policy: route.notify, channel, to, agentId: row.agentId ?? route.agentId ?? config.defaultAgentId, label }
  }

  private changed(row: RunRow): void {
    const target = this.targetFor(row)
    if (!target) return
    if (target.policy === 'done' && !isFinalStatus(row.status)) return
    const prev = this.queues.get(row.id) ?? Promise.resolve()
    const next: Promise<void> = prev.then(() => this.send(row, target)).catch((err: Error) => {
      this.wiring.warn?.(`notification for run ${row.id} could not be recorded: ${err.message}`)
    }).finally(() => { if (this.queues.get(row.id) === next) this.queues.delete(row.id) })
    this.queues.set(row.id, next)
  }

  private async send(row: RunRow, target: NotifyTarget): Promise<void> {
    const route = target.channel === 'last' ? this.wiring.lastRoute(target.agentId) : { channel: target.channel, to: target.to }
    // Nowhere to send: `notify` defaults to done, and a trigger without a channel (nor an agent
    // delivery route) has asked for nothing to be sent; the README says so.
    if (!route) return
    const to = target.to ?? route.to
    const status: RunStatus = row.status
    const note: RunNotification = { at: this.now(), state: status, channel: route.channel, ok: false, attempts: 0 }
    const channel = this.channels.get(route.channel)
    if (!channel) {
      note.error = `channel "${route.channel}" is not configured`
    } else {
      try {
        const result = await channel.deliver({
          runId: row.id, agentId: target.agentId, text: describe(row, target.label), to, name: target.label, correlationId: row.correlationId,
          event: { status, definitionKind: row.definitionKind, definitionId: row.definitionId, messageId: `${row.id}_${status}_${Date.parse(row.updatedAt)}` },
        }, this.abort.signal)
        note.ok = true
        note.attempts = result.attempts
      } catch (err) {
        note.attempts = (err as { attempts?: number }).attempts ?? 1
        note.error = (err as Error).message
      }
    }
    await this.wiring.runs.recordNotification(row.id, note)
  }
}

/** The notification's text: what ran, its new status, and for a finished run how it went. */
export function describe(row: RunRow, label: string): string {
  const head = `${label} (run ${row.id}) is ${row.status.replace('_', ' ')}`
  if (!isFinalStatus(row.status)) return head
  if (row.error) return `${head}: ${row.error}`
  if (row.result) return `${head}: ${row.result.slice(0, 200)}`
  return head
}
