// The main sessions' turns: one MainSession (runtime/agents/session.ts) per agent, opened when first
// needed, each with its queue of system events and its heartbeat; what the queue's bound pushes
// out is settled failed (together, once per turn of the event loop); the wakes a turn read are
// settled with one write. The wake path, the isolated turns' summaries and the workflows' wake
// steps all queue through here.
import type { BundleConfig } from '../bundle/format.js'
import type { RunLog, Store, StoreHealth } from '../store/store.js'
import { DEFAULT_TURN_TIMEOUT_SECONDS, type ModelCalls } from './complete.js'
import type { InFlight } from './in-flight.js'
import { MainSession, type Route } from './session.js'

/** An event that is not a run of its own (a summary, a workflow step's wake) for the session journal. */
export interface QueuedEvent { id: string; runId: string; text: string; external: boolean; source: string }

export class MainTurns {
  readonly sessions = new Map<string, MainSession>()
  private dropped: string[] = []

  constructor(
    private readonly store: Store,
    private readonly runs: RunLog,
    private readonly models: ModelCalls,
    private readonly inFlight: InFlight,
    /** whether a run was left unfinished by the last process (what session state is kept for) */
    private readonly isOpen: (runId: string) => boolean,
    private agents: BundleConfig['agents'],
  ) {}

  /** A (re)loaded bundle's agents: their queue bounds and heartbeats; sessions of agents no longer configured stay on disk. */
  configure(agents: BundleConfig['agents']): void {
    this.agents = agents
    for (const agent of agents) {
      const s = this.session(agent.id)
      s.maxQueued = agent.maxQueuedEvents ?? 1000
      s.startHeartbeat(agent.heartbeatSeconds)
    }
  }

  session(agentId: string): MainSession {
    let s = this.sessions.get(agentId)
    if (!s) {
      s = MainSession.open(agentId, this.store, {
        runHeartbeat: (id, prompt) => this.models.complete(id, null, [
          { role: 'system', content: `Heartbeat for agent ${id}: the system events queued since the last turn follow.` },
          { role: 'user', content: prompt },
        ], null, DEFAULT_TURN_TIMEOUT_SECONDS).then((r) => r.text),
        // One record for all the wakes a turn read, however many.
        settleWakes: (runIds, error) => this.runs.settle(runIds, error ? 'failed' : 'succeeded', error ? { error } : {}),
      }, { isOpen: this.isOpen })
      const agent = this.agents.find((a) => a.id === agentId)
      if (agent) s.maxQueued = agent.maxQueuedEvents ?? 1000
      this.sessions.set(agentId, s)
    }
    return s
  }

  /** A turn of the agent's main session now (coalesced with one under way), tracked. */
  heartbeat(agentId: string): void {
    this.inFlight.track(this.session(agentId).heartbeat())
  }

  /** Events that are not runs of their own (summaries, workflow steps) go to the session journal. */
  async queueEvent(agentId: string, event: QueuedEvent, now = false): Promise<void> {
    await this.settleDropped(await this.session(agentId).queue(event, now))
  }

  /**
   * Displaced runs settled together once per turn of the event loop: under a flood past a full
   * queue every wake displaces one, and one `settled` record for the turn's few dozen costs less
   * than a record, a serialisation and a journal entry each.
   */
  dropLater(runIds: readonly string[]): void {
    if (this.dropped.length === 0) setImmediate(this.settleDroppedNow)
    for (const id of runIds) this.dropped.push(id)
  }

  readonly settleDroppedNow = (): void => {
    if (this.dropped.length === 0) return
    const ids = this.dropped
    this.dropped = []
    this.inFlight.track(this.settleDropped(ids))
  }

  async settleDropped(runIds: string[]): Promise<void> {
    if (runIds.length > 0) await this.runs.settle(runIds, 'failed', { error: 'dropped: the main session queue was full' })
  }

  async finishWake(runId: string, error?: string): Promise<void> {
    const row = this.runs.get(runId)
    if (!row || (row.status !== 'queued' && row.status !== 'running')) return
    await this.runs.transition(runId, error ? 'failed' : 'succeeded', error ? { error } : {})
  }

  /** Where `channel: last` goes for an agent: the main session's last route, else agents[].delivery. */
  lastRoute(agentId: string): Route | null {
    return this.sessions.get(agentId)?.lastRoute ?? this.agents.find((a) => a.id === agentId)?.delivery ?? null
  }

  /** Per agent, the events waiting for its next heartbeat turn. */
  queuedEvents(): Array<[agentId: string, events: number]> {
    const out: Array<[string, number]> = []
    for (const [agentId, s] of this.sessions) out.push([agentId, s.pending.length])
    return out
  }

  /** A turn for every session with events queued (after a restart queued the unread ones). */
  turnWherePending(): void {
    for (const s of this.sessions.values()) if (s.pending.length > 0) this.inFlight.track(s.heartbeat())
  }

  /** Whether every session journal can write; the first reason when not. */
  health(): StoreHealth {
    for (const s of this.sessions.values()) {
      const h = s.journal.health
      if (!h.ok) return h
    }
    return { ok: true }
  }

  async close(): Promise<void> {
    for (const s of this.sessions.values()) await s.close()
  }
}
