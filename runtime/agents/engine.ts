// What the actions do once accepted: wake queues a system event on an agent's main session (and
// `now` runs a coalesced heartbeat turn); agent runs an isolated turn under its own session key and
// posts a summary into the main session; workflow runs its steps in dependency order. Every run is
// on disk before the request is answered, and runs left unfinished by a crash are resumed at start.
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import type { BundleConfig, BundleWorkflow, RenderContext } from '../bundle-format.js'
import { RunStore, type RunRow } from '../store/runs.js'
import { Journal } from '../store/journal.js'
import { wrapExternalContent } from '../envelope.js'
import { templateHelpers } from '../template-helpers.js'
import { ModelError, providerFor, type ChatMessage } from './models.js'

export interface Origin {
  definitionKind: 'hook' | 'trigger' | 'task'
  definitionId: string
  correlationId: string
  /** shown as the envelope's source, e.g. 'hook /hooks/github' */
  source: string
  /** false when the mapping set allowUnsafeExternalContent */
  external: boolean
}

export interface WakeInput extends Origin { agentId: string; text: string; mode: 'now' | 'next-heartbeat'; name: string | null }

export interface AgentInput extends Origin {
  agentId: string
  sessionKey: string
  message: string
  name: string | null
  wakeMode: 'now' | 'next-heartbeat'
  deliver: boolean
  channel: string
  to: string | null
  model: string | null
  thinking: string | null
  timeoutSeconds: number | null
}

export interface WorkflowInput extends Origin { agentId: string; workflow: string; name: string | null; context: Omit<RenderContext, 'now'> & { now: string } }

type SessionRecord =
  | { type: 'event'; id: string; runId: string; text: string; external: boolean; source: string; at: string }
  | { type: 'turn'; id: string; at: string; events: string[]; reply: string }
  | { type: 'isolated'; runId: string; sessionKey: string; at: string; prompt: string; reply: string }

type PendingEvent = Extract<SessionRecord, { type: 'event' }>

/** Fields the HTTP side fixes for the run row: its id, and for Idempotency-Key the key and the answer. */
export interface RowExtra {
  id?: string
  idempotency?: { key: string; fingerprint: string }
  response?: { status: number; body: Record<string, unknown> }
}

export const DEFAULT_TURN_TIMEOUT_SECONDS = 120
const MAX_PENDING_EVENTS = 1000

/** One agent's main session: its queue of system events and its heartbeat. */
class MainSession {
  readonly pending: PendingEvent[] = []
  /** events a turn already read, as found on disk at start (to settle wakes a crash left open) */
  readonly consumedAtStart = new Set<string>()
  private running: Promise<void> | undefined
  private again = false
  private timer: NodeJS.Timeout | undefined

  constructor(readonly agentId: string, readonly journal: Journal<SessionRecord>, private readonly engine: Engine) {}

  startHeartbeat(seconds: number | null): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
    if (seconds !== null && seconds > 0) {
      this.timer = setInterval(() => this.heartbeat(), seconds * 1000)
      this.timer.unref()
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
  }

  /** Coalesced: wakes that arrive while a turn runs fold into one more turn after it. */
  heartbeat(): Promise<void> {
    if (this.running) {
      this.again = true
      return this.running
    }
    this.running = (async () => {
      do {
        this.again = false
        await this.turn()
      } while (this.again)
    })().finally(() => { this.running = undefined })
    return this.running
  }

  get busy(): Promise<void> | undefined {
    return this.running
  }

  private async turn(): Promise<void> {
    if (this.pending.length === 0) return
    const events = this.pending.splice(0, this.pending.length)
    const lines = events.map((e) => (e.external ? wrapExternalContent(e.text, { source: e.source }) : e.text))
    const reply = await this.engine.complete(this.agentId, null, [
      { role: 'system', content: `Heartbeat for agent ${this.agentId}: system events queued since the last turn follow.` },
      { role: 'user', content: lines.join('\n\n') },
    ], null, DEFAULT_TURN_TIMEOUT_SECONDS).catch((err: Error) => ({ error: err.message }))
    const text = 'error' in reply ? `heartbeat failed: ${reply.error}` : reply.text
    await this.journal.append({ type: 'turn', id: `turn:${Date.now()}:${events[0]!.id}`, at: new Date().toISOString(), events: events.map((e) => e.id), reply: text })
    for (const e of events) {
      if (e.runId) await this.engine.finishWake(e.runId, 'error' in reply ? reply.error : undefined)
    }
  }
}

export class Engine {
  private readonly sessions = new Map<string, MainSession>()
  private readonly inFlight = new Set<Promise<unknown>>()
  private readonly isolated: Journal<SessionRecord>
  private closed = false

  private constructor(readonly stateDir: string, readonly runs: RunStore, private config: BundleConfig, private workflows: ReadonlyMap<string, BundleWorkflow>, private readonly fsync: boolean) {
    this.isolated = Journal.open<SessionRecord>(join(stateDir, 'sessions', 'isolated.jsonl'), { fsync })
  }

  static open(stateDir: string, config: BundleConfig, workflows: ReadonlyMap<string, BundleWorkflow>, options: { fsync?: boolean } = {}): Engine {
    const engine = new Engine(stateDir, RunStore.open(stateDir, { fsync: options.fsync ?? true }), config, workflows, options.fsync ?? true)
    engine.configure(config, workflows)
    return engine
  }

  /** Applies a (re)loaded bundle's agents and workflows; sessions of removed agents stay on disk. */
  configure(config: BundleConfig, workflows: ReadonlyMap<string, BundleWorkflow>): void {
    this.config = config
    this.workflows = workflows
    for (const agent of config.agents) this.session(agent.id).startHeartbeat(agent.heartbeatSeconds)
  }

  private session(agentId: string): MainSession {
    let s = this.sessions.get(agentId)
    if (!s) {
      const path = join(this.stateDir, 'sessions', encodeURIComponent(agentId), 'main.jsonl')
      const { records } = Journal.read<SessionRecord>(path)
      s = new MainSession(agentId, Journal.open<SessionRecord>(path, { fsync: this.fsync }), this)
      for (const r of records) if (r.type === 'turn') for (const id of r.events) s.consumedAtStart.add(id)
      for (const r of records) if (r.type === 'event' && !s.consumedAtStart.has(r.id)) s.pending.push(r)
      this.sessions.set(agentId, s)
    }
    return s
  }

  /** Durable before it resolves: the event and its run row are on disk. */
  async submitWake(input: WakeInput, extra: RowExtra = {}): Promise<RunRow> {
    const row = await this.runs.create({ id: randomUUID(), ...extra, definitionKind: input.definitionKind, definitionId: input.definitionId, correlationId: input.correlationId, action: 'wake', agentId: input.agentId, ...(input.name ? { name: input.name } : {}) })
    await this.queueEvent(input.agentId, { runId: row.id, text: input.text, external: input.external, source: input.source })
    if (input.mode === 'now') this.track(this.session(input.agentId).heartbeat())
    return row
  }

  async submitAgent(input: AgentInput, extra: RowExtra = {}): Promise<RunRow> {
    const { definitionKind, definitionId, correlationId, ...request } = input
    const row = await this.runs.create({ id: randomUUID(), ...extra, definitionKind, definitionId, correlationId, action: 'agent', agentId: input.agentId, sessionKey: input.sessionKey, ...(input.name ? { name: input.name } : {}), request })
    this.track(this.runAgent(row, request))
    return row
  }

  async submitWorkflow(input: WorkflowInput, extra: RowExtra = {}): Promise<RunRow> {
    const { definitionKind, definitionId, correlationId, ...request } = input
    const row = await this.runs.create({ id: randomUUID(), ...extra, definitionKind, definitionId, correlationId, action: 'workflow', agentId: input.agentId, ...(input.name ? { name: input.name } : {}), request })
    this.track(this.runWorkflow(row, request))
    return row
  }

  /** A matching request that started nothing (a transform skip or failure) still gets its row. */
  async recordOutcome(origin: Pick<Origin, 'definitionKind' | 'definitionId' | 'correlationId'>, action: 'wake' | 'agent' | 'workflow', status: 'skipped' | 'failed', error?: string): Promise<RunRow> {
    return this.runs.create({ id: randomUUID(), definitionKind: origin.definitionKind, definitionId: origin.definitionId, correlationId: origin.correlationId, action, status, ...(error ? { error } : {}) })
  }

  /** Runs that a crash left queued or running are run again (wakes stay queued on their session). */
  resumeUnfinished(): number {
    let n = 0
    for (const row of this.runs.unfinished()) {
      if (row.action === 'wake') {
        // Its event is still queued: the heartbeat settles it. Already read by a turn: the crash
        // came between that turn and the status change. Neither: the crash came before the event
        // was queued, so the request was never answered.
        const session = this.session(row.agentId ?? this.config.defaultAgentId)
        const eventId = `event:${row.id}`
        if (session.pending.some((e) => e.id === eventId)) continue
        n++
        this.track(session.consumedAtStart.has(eventId) ? this.finishWake(row.id) : this.finishWake(row.id, 'interrupted before its event was queued; the request was not answered'))
        continue
      }
      n++
      const request = row.request as Omit<AgentInput, 'definitionKind' | 'definitionId' | 'correlationId'> & Omit<WorkflowInput, 'definitionKind' | 'definitionId' | 'correlationId'>
      const requeue = row.status === 'running' ? this.runs.transition(row.id, 'queued') : Promise.resolve(row)
      this.track(requeue.then((r) => (row.action === 'agent' ? this.runAgent(r, request) : this.runWorkflow(r, request))))
    }
    for (const s of this.sessions.values()) if (s.pending.length > 0) this.track(s.heartbeat())
    return n
  }

  private async queueEvent(agentId: string, e: { runId: string; text: string; external: boolean; source: string }): Promise<void> {
    const session = this.session(agentId)
    const event: PendingEvent = { type: 'event', id: `event:${e.runId || randomUUID()}`, at: new Date().toISOString(), ...e }
    await session.journal.append(event)
    session.pending.push(event)
    // Bounded: the oldest events are dropped first, and their runs say so.
    while (session.pending.length > MAX_PENDING_EVENTS) {
      const dropped = session.pending.shift()!
      if (dropped.runId) await this.finishWake(dropped.runId, 'dropped: the main session queue is full (1000 events)')
    }
  }

  async finishWake(runId: string, error?: string): Promise<void> {
    const row = this.runs.get(runId)
    if (!row || (row.status !== 'queued' && row.status !== 'running')) return
    await this.runs.transition(runId, error ? 'failed' : 'succeeded', error ? { error } : {})
  }

  private async runAgent(row: RunRow, req: Omit<AgentInput, 'definitionKind' | 'definitionId' | 'correlationId'>): Promise<void> {
    await this.runs.transition(row.id, 'running')
    const prompt = req.external ? wrapExternalContent(req.message, { source: req.source }) : req.message
    const timeout = req.timeoutSeconds ?? DEFAULT_TURN_TIMEOUT_SECONDS
    let status: 'succeeded' | 'failed' | 'timed_out' = 'succeeded'
    let reply = ''
    let error: string | undefined
    try {
      reply = (await this.complete(req.agentId, req.model, [{ role: 'user', content: prompt }], req.thinking, timeout)).text
      await this.isolated.append({ type: 'isolated', runId: row.id, sessionKey: req.sessionKey, at: new Date().toISOString(), prompt, reply })
    } catch (err) {
      status = err instanceof TurnTimeout ? 'timed_out' : 'failed'
      error = (err as Error).message
    }
    await this.runs.transition(row.id, status, status === 'succeeded' ? { result: reply.slice(0, 500) } : { error: error! })
    const label = req.name ?? row.definitionId
    const summary = status === 'succeeded' ? `Hook "${label}" (run ${row.id}) finished: ${reply.slice(0, 500)}` : `Hook "${label}" (run ${row.id}) ${status.replace('_', ' ')}: ${error}`
    await this.queueEvent(req.agentId, { runId: '', text: summary, external: true, source: req.source })
    if (req.wakeMode === 'now') this.track(this.session(req.agentId).heartbeat())
  }

  private async runWorkflow(row: RunRow, req: Omit<WorkflowInput, 'definitionKind' | 'definitionId' | 'correlationId'>): Promise<void> {
    await this.runs.transition(row.id, 'running')
    const wf = this.workflows.get(req.workflow)
    if (!wf) {
      await this.runs.transition(row.id, 'failed', { error: `workflow "${req.workflow}" is not in the loaded bundle` })
      return
    }
    const ctx: RenderContext = Object.assign(Object.create(null), req.context)
    const done = new Set<string>()
    const replies: string[] = []
    try {
      while (done.size < wf.steps.length) {
        const ready = wf.steps.filter((s) => !done.has(s.id) && s.needs.every((n) => done.has(n)))
        if (ready.length === 0) throw new Error('the workflow has steps that can never run')
        for (const step of ready) {
          const agentId = step.agentId ?? req.agentId
          const text = (step.render.text ?? step.render.message)?.(ctx, templateHelpers) ?? ''
          const content = req.external ? wrapExternalContent(text, { source: req.source }) : text
          if (step.action === 'wake') {
            await this.queueEvent(agentId, { runId: '', text, external: req.external, source: req.source })
            this.track(this.session(agentId).heartbeat())
          } else {
            const r = await this.complete(agentId, null, [{ role: 'user', content }], null, step.timeoutSeconds ?? DEFAULT_TURN_TIMEOUT_SECONDS)
            replies.push(`${step.id}: ${r.text}`)
          }
          done.add(step.id)
        }
      }
      await this.runs.transition(row.id, 'succeeded', { result: replies.join('\n').slice(0, 500) })
    } catch (err) {
      await this.runs.transition(row.id, err instanceof TurnTimeout ? 'timed_out' : 'failed', { error: (err as Error).message })
    }
  }

  /** One model call with the agent's model (or an override), its fallbacks, and a deadline. */
  async complete(agentId: string, override: string | null, messages: ChatMessage[], thinking: string | null, timeoutSeconds: number): Promise<{ text: string }> {
    const agent = this.config.agents.find((a) => a.id === agentId) ?? this.config.agents.find((a) => a.default)!
    const models = override ? [override] : [agent.model, ...agent.fallbackModels]
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(), timeoutSeconds * 1000)
    try {
      let last: Error | undefined
      for (const model of models) {
        try {
          return await Promise.race([
            providerFor(model).complete({ model, messages, thinking, signal: controller.signal }),
            new Promise<never>((_, reject) => controller.signal.addEventListener('abort', () => reject(new TurnTimeout(`the turn did not finish within ${timeoutSeconds} s`)), { once: true })),
          ])
        } catch (err) {
          if (err instanceof TurnTimeout) throw err
          last = err as Error
        }
      }
      throw last instanceof ModelError ? last : new ModelError(last?.message ?? 'no model answered')
    } finally {
      clearTimeout(timer)
    }
  }

  private track(p: Promise<unknown>): void {
    const tracked = p.catch((err: Error) => {
      if (!this.closed) process.stderr.write(JSON.stringify({ level: 'error', msg: 'background run failed', error: err.message }) + '\n')
    }).finally(() => this.inFlight.delete(tracked))
    this.inFlight.add(tracked)
  }

  /** Waits for running turns up to `graceMs`; what is still running then is resumed at next start. */
  async drain(graceMs: number): Promise<boolean> {
    const deadline = Date.now() + graceMs
    while (this.inFlight.size > 0 && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([Promise.all([...this.inFlight]), new Promise((r) => { timer = setTimeout(r, Math.max(1, deadline - Date.now())) })])
      clearTimeout(timer)
    }
    return this.inFlight.size === 0
  }

  async close(): Promise<void> {
    this.closed = true
    for (const s of this.sessions.values()) {
      s.stop()
      await s.journal.close()
    }
    await this.isolated.close()
    await this.runs.close()
  }
}

export class TurnTimeout extends Error {}
