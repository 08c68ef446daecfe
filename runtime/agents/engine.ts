// What the actions do once accepted: wake queues a system event on an agent's main session (and
// `now` runs a coalesced heartbeat turn); agent runs an isolated turn under its own session key,
// delivers the reply when asked, and posts a summary into the main session; workflow hands its run to
// the workflow runner (runtime/workflows/), wired here to the models, sessions, channels and
// transform workers. Every run is on disk before the request is answered, and runs a crash left
// unfinished are resumed at start (a reply already on disk is delivered, not asked for again).
//
// Over 400 lines: the isolated agent turn (ask, record, deliver, summarise) and the submit/resume
// paths share the session and reply state kept here; the scheduler (runtime/scheduler/), the workflow
// runner (runtime/workflows/) and notifications (runtime/notify/) live in their own modules and are
// only wired here. The isolated turn is the next piece to move out.
import { randomUUID } from 'node:crypto'
import { DEFAULT_MAX_PENDING_BYTES, type BundleConfig, type BundleRoute, type BundleWorkflow, type RenderContext } from '../bundle/format.js'
import type { AgentAction } from '../endpoints/mapping.js'
import { Fifo } from '../lib/fifo.js'
import { RunStoreError, isFinalStatus, type NewRun, type ReceivedRequest, type RecordLog, type RunLog, type RunRow, type Store } from '../store/store.js'
import { wrapExternalContent } from './envelope.js'
import { ModelError, createModelRegistry, type ChatMessage, type ModelProvider } from './models.js'
import { Notifier } from '../notify/notifier.js'
import { MainSession, TURN_REPLY_MAX_CHARS, clipText, type Route, type SessionRecord } from './session.js'
import { WorkflowRunner, type StepActions, type WorkflowRequest } from '../workflows/runner.js'
import { createStepActions } from '../workflows/actions.js'
import { createHttpStep } from '../workflows/http-step.js'
import type { TransformCaller } from '../transforms/pool.js'
import { PENDING_AGENT_RUN_BYTES, PENDING_WORKFLOW_RUN_BYTES, heldBytes } from './backlog.js'
import type { Acceptor, AgentInput, Origin, Refusal, RowExtra, RunOutcome, Submission, WakeInput, WorkflowInput } from './acceptor.js'
export type { AgentInput, Origin, RowExtra, RunOutcome, Submission, WakeInput, WorkflowInput } from './acceptor.js'

/** The model side, as the engine needs it (runtime/agents/models.ts builds it from the bundle). */
export interface Models { providerFor(model: string): ModelProvider }

/** A delivery channel, as the engine needs it (runtime/channels builds them from the bundle). */
export interface Deliverer {
  deliver(d: {
    runId: string; agentId: string; text: string; to: string | null; name: string | null; correlationId: string
    /** a notification about the run's status (runtime/notify), not the agent's reply */
    event?: { status: string; definitionKind: string; definitionId: string; messageId: string }
  }, signal?: AbortSignal): Promise<{ attempts: number; detail: string }>
}

export interface EngineWiring {
  models?: Models
  channels?: ReadonlyMap<string, Deliverer>
  /** the transform workers (workflow steps with action transform) */
  transforms?: ((caller: TransformCaller, input: Record<string, unknown>) => Promise<unknown>) | null
  /** http steps' secret headers, resolved at load: `<workflow id>\0<step id>` → header → value */
  stepSecrets?: ReadonlyMap<string, Record<string, string>>
  /** the bundle's routes, for the notify policy of hook and trigger runs */
  routes?: Iterable<BundleRoute>
}

/** An agent run's new row, field by field (every /agent request and agent mapping builds one). */
function agentRun(extra: RowExtra, definitionKind: Origin['definitionKind'], definitionId: string, correlationId: string, request: AgentRequest): NewRun {
  const run: NewRun = { id: extra.id ?? randomUUID(), definitionKind, definitionId, correlationId, action: 'agent', agentId: request.agentId, sessionKey: request.sessionKey, request }
  copyRowFields(extra, run)
  if (request.name) run.name = request.name
  return run
}

/** Only the row's own fields of an extra (the HTTP side passes an object that also sends the answer). */
function rowFields(extra: RowExtra): RowExtra {
  return copyRowFields(extra, {})
}

/** rowFields written into `out` (the run being built), without a new object. */
function copyRowFields<T extends RowExtra>(extra: RowExtra, out: T): T {
  if (extra.id !== undefined) out.id = extra.id
  if (extra.idempotency) out.idempotency = extra.idempotency
  if (extra.response) out.response = extra.response
  if (extra.received) out.received = extra.received
  if (extra.replayOf !== undefined) out.replayOf = extra.replayOf
  if (extra.scheduledFor !== undefined) out.scheduledFor = extra.scheduledFor
  return out
}

/**
 * A workflow run's request as its row keeps it. A mapped request's payload is the payload of the
 * received request stored beside it (the same object), which a fan-out stores once for all its
 * runs: the context keeps no second copy per run (a 245 KiB request fanned out to 200 workflow
 * runs stored it 200 times more), and a resume reads it back from there (`payloadFrom`).
 */
type StoredWorkflowRequest = Omit<WorkflowRequest, 'context'> & { context: Omit<WorkflowRequest['context'], 'payload'> & { payload?: unknown }; payloadFrom?: 'received' }

function storedWorkflowRequest(request: WorkflowRequest, received: ReceivedRequest | undefined): StoredWorkflowRequest {
  if (received === undefined || request.context.payload !== received.payload) return request
  const { payload: _payload, ...context } = request.context
  return { ...request, context, payloadFrom: 'received' }
}

/** A submission made ready to write (Engine.prepare). */
interface Prepared { run: NewRun; pending?: { holds: unknown; bytes: number }; start(row: RunRow, release?: () => void): void }

/** What a wake's run row keeps of its event; `now` asks for a turn at once (a shared session's owner reads it). */
interface WakeEvent { text: string; external: boolean; source: string; now?: true }

import type { IsolatedRecord } from './transcripts.js'
type AgentRequest = Omit<AgentInput, 'definitionKind' | 'definitionId' | 'correlationId'>

export const DEFAULT_TURN_TIMEOUT_SECONDS = 120

/** Until configure() wires the bundle's providers: the built-in model only. */
const builtinOnly: Models = createModelRegistry([], '.')

export class TurnTimeout extends Error {}


export class Engine implements Acceptor {
  private readonly sessions = new Map<string, MainSession>()
  private readonly inFlight = new Set<Promise<unknown>>()
  /** the promises behind inFlight, so one is tracked once however often it is handed over */
  private readonly watched = new Set<Promise<unknown>>()
  private readonly isolated: RecordLog<IsolatedRecord>
  private readonly replies = new Map<string, string>()
  private readonly deliveredNotes = new Map<string, string>()
  /** runs the last process left unfinished: what session and transcript state must be kept for */
  private readonly unfinishedAtStart = new Set<string>()
  private readonly slots: Semaphore
  private readonly sessionLocks = new KeyedLock()
  private models: Models = builtinOnly
  private channels: ReadonlyMap<string, Deliverer> = new Map()
  private transforms: EngineWiring['transforms'] = null
  private httpStep: StepActions['http'] = createHttpStep(new Map())
  private readonly workflowRunner: WorkflowRunner
  private closed = false
  /** tells each run's reply channel about its status, as its notify policy asks */
  private readonly notifier: Notifier
  /** runs a request waits on (waitForCompletion), with what their answer needs beyond the row */
  private readonly awaited = new Map<string, { reply?: string; delivery?: string }>()
  /** agent and workflow runs accepted and not yet finished (the backlog the HTTP side bounds) */
  private pendingRuns = 0
  /** what those runs hold in memory meanwhile (see backlog.ts), the HTTP side's other bound */
  private pendingBytes = 0

  readonly runs: RunLog

  private constructor(readonly store: Store, private config: BundleConfig, private workflows: ReadonlyMap<string, BundleWorkflow>) {
    const runs = store.runs
    this.runs = runs
    for (const r of runs.unfinished()) this.unfinishedAtStart.add(r.id)
    // Replies already on disk: a run resumed after a crash delivers these instead of asking again.
    // Only those of unfinished runs are kept, in memory and, when the store compacts the log, in it.
    const opened = store.openLog<IsolatedRecord>('isolated', (records) => records.filter((r) => this.unfinishedAtStart.has(r.runId)))
    for (const r of opened.records) {
      if (!this.unfinishedAtStart.has(r.runId)) continue
      if (r.type === 'isolated') this.replies.set(r.runId, r.reply)
      else if (r.type === 'delivered') this.deliveredNotes.set(r.runId, r.note)
    }
    this.isolated = opened.log
    this.slots = new Semaphore(config.server.concurrency ?? 4)
    this.workflowRunner = new WorkflowRunner({
      stepsOf: (parentRunId) => this.runs.children(parentRunId),
      createStep: (run) => this.runs.create(run),
      moveStep: async (id, status, extra) => {
        if (status === 'running' && this.runs.get(id)?.status === 'running') await this.runs.transition(id, 'queued')
        return this.runs.transition(id, status, extra)
      },
      outputOf: (row) => this.runs.output(row),
    }, createStepActions({
      complete: (agentId, message, timeoutSeconds) => this.complete(agentId, null, [{ role: 'user', content: message }], null, timeoutSeconds),
      isTurnTimeout: (err) => err instanceof TurnTimeout,
      // a workflow's wake step asks for a turn right after (heartbeat below)
      queueEvent: (agentId, event) => this.queueEvent(agentId, event, true),
      heartbeat: (agentId) => this.track(this.session(agentId).heartbeat()),
      http: (call, signal) => this.httpStep(call, signal),
      transforms: () => this.transforms,
      channel: (id) => this.channels.get(id),
    }))
    this.workflowRunner.start(workflows)
    this.notifier = new Notifier({
      runs,
      lastRoute: (agentId) => this.sessions.get(agentId)?.lastRoute ?? this.config.agents.find((a) => a.id === agentId)?.delivery ?? null,
      warn: (message) => { if (!this.closed) process.stderr.write(JSON.stringify({ level: 'error', msg: 'notification', error: message }) + '\n') },
    })
  }

  /** The engine over an opened store (openStore): it resumes nothing until resumeUnfinished. */
  static open(store: Store, config: BundleConfig, workflows: ReadonlyMap<string, BundleWorkflow>, options: EngineWiring = {}): Engine {
    const engine = new Engine(store, config, workflows)
    engine.configure(config, workflows, options)
    engine.notifier.start()
    // Several runtimes on one store: runs a dead one left are resumed here once this one claims them.
    store.onTakeover?.((rows, transcripts) => { if (!engine.closed) engine.resumeTaken(rows, transcripts as IsolatedRecord[]) })
    return engine
  }

  /** Applies a (re)loaded bundle; sessions of agents no longer configured stay on disk. */
  configure(config: BundleConfig, workflows: ReadonlyMap<string, BundleWorkflow>, wiring: EngineWiring = {}): void {
    this.config = config
    this.workflows = workflows
    if (wiring.models) this.models = wiring.models
    if (wiring.channels) this.channels = wiring.channels
    if (wiring.transforms !== undefined) this.transforms = wiring.transforms
    if (wiring.stepSecrets) this.httpStep = createHttpStep(wiring.stepSecrets)
    this.workflowRunner?.configure(workflows)
    this.notifier.configure(config, wiring.routes, wiring.channels)
    this.slots.setLimit(config.server.concurrency ?? 4)
    for (const agent of config.agents) {
      const s = this.session(agent.id)
      s.maxQueued = agent.maxQueuedEvents ?? 1000
      s.startHeartbeat(agent.heartbeatSeconds)
    }
    // Several runtimes on one store: this one competes for the sessions of the agents it serves.
    this.store.sessions?.serve(config.agents.map((a) => a.id), {
      gained: (agentId, records, wakes) => this.session(agentId).gain(records as SessionRecord[], wakes),
      pulled: (agentId, records, wakes, now) => this.session(agentId).pull(records as SessionRecord[], wakes, now),
      lost: (agentId) => this.sessions.get(agentId)?.lose(),
      routed: (agentId, route) => { this.session(agentId).lastRoute = route },
    })
  }

  private session(agentId: string): MainSession {
    let s = this.sessions.get(agentId)
    if (!s) {
      s = MainSession.open(agentId, this.store, {
        runHeartbeat: (id, prompt) => this.complete(id, null, [
          { role: 'system', content: `Heartbeat for agent ${id}: the system events queued since the last turn follow.` },
          { role: 'user', content: prompt },
        ], null, DEFAULT_TURN_TIMEOUT_SECONDS).then((r) => r.text),
        // One record for all the wakes a turn read, however many.
        settleWakes: (runIds, error) => this.runs.settle(runIds, error ? 'failed' : 'succeeded', error ? { error } : {}),
      }, { isOpen: (runId) => this.unfinishedAtStart.has(runId) })
      const agent = this.config.agents.find((a) => a.id === agentId)
      if (agent) s.maxQueued = agent.maxQueuedEvents ?? 1000
      this.sessions.set(agentId, s)
    }
    return s
  }

  /**
   * The run row is the event: its request holds the text, so a wake costs one record in one
   * journal (one fdatasync per batch); a restart queues the rows no turn has read yet.
   * Durable before it resolves: the run row and its event are on disk.
   */
  submitWake(input: WakeInput, extra: RowExtra = {}): Promise<RunRow> {
    return this.submit({ kind: 'wake', input }, extra)
  }

  submitAgent(input: AgentInput, extra: RowExtra = {}): Promise<RunRow> {
    return this.submit({ kind: 'agent', input }, extra)
  }

  submitWorkflow(input: WorkflowInput, extra: RowExtra = {}): Promise<RunRow> {
    return this.submit({ kind: 'workflow', input }, extra)
  }

  /**
   * One run, accepted durably before it resolves (submitMany for several in one write). No async
   * wrappers on this path: each was a promise and a microtask hop per request.
   */
  submit(submission: Submission, extra: RowExtra = {}): Promise<RunRow> {
    let p: Prepared
    try {
      p = this.prepare(submission, extra)
    } catch (err) {
      return Promise.reject(err)
    }
    return this.runs.create(p.run).then((row) => {
      p.start(row, p.pending === undefined ? undefined : this.holdBytes(heldBytes([p.pending.holds]) + p.pending.bytes, 1))
      return row
    })
  }

  /**
   * Several runs accepted with one durable write (a fan-out request): every row is on disk, from
   * one journal append, before it resolves; then each starts as its own submit would start it.
   */
  async submitMany(submissions: readonly Submission[], extras: readonly RowExtra[]): Promise<RunRow[]> {
    const prepared = submissions.map((s, i) => this.prepare(s, extras[i] ?? {}))
    const rows = await this.runs.createMany(prepared.map((p) => p.run))
    // The runs share what they hold (a workflow fan-out's payload): weighed once, released with the last.
    const pending = prepared.filter((p) => p.pending !== undefined)
    const release = pending.length === 0 ? undefined : this.holdBytes(heldBytes(pending.map((p) => p.pending!.holds)) + pending.reduce((n, p) => n + p.pending!.bytes, 0), pending.length)
    for (let i = 0; i < rows.length; i++) prepared[i]!.start(rows[i]!, prepared[i]!.pending === undefined ? undefined : release)
    return rows
  }

  /**
   * Counts `bytes` in the backlog for `runs` runs accepted together; each calls the function it
   * gets once it ends, and the bytes go with the last (what they share lives until then).
   */
  private holdBytes(bytes: number, runs: number): () => void {
    this.pendingBytes += bytes
    let left = runs
    return () => { if (--left === 0) this.pendingBytes -= bytes }
  }

  /**
   * A submission's row, and what starts it once that row is on disk; an agent or workflow run also
   * says what it holds in memory until it ends (`pending`: the request it keeps, and a fixed part),
   * and `start` hands it the function that takes that weight off the backlog.
   */
  private prepare(submission: Submission, extra: RowExtra): Prepared {
    if (extra.awaited && extra.id) this.awaited.set(extra.id, {})
    if (submission.kind === 'wake') {
      const input = submission.input
      const event: WakeEvent = { text: input.text, external: input.external, source: input.source }
      if (input.mode === 'now') event.now = true
      // Field by field: this is every wake's path, and an object spread here showed in the profile.
      const run: NewRun = { id: extra.id ?? randomUUID(), definitionKind: input.definitionKind, definitionId: input.definitionId, correlationId: input.correlationId, action: 'wake', agentId: input.agentId, request: event }
      copyRowFields(extra, run)
      if (input.name) run.name = input.name
      return {
        run,
        start: (row) => {
          const session = this.session(input.agentId)
          // Another runtime owns the session (a shared store): it claims the wake from the store.
          if (!session.owned) return this.runs.release?.(row.id)
          const dropped = session.enqueue({ type: 'event', id: `event:${row.id}`, runId: row.id, at: row.createdAt, text: event.text, external: event.external, source: event.source })
          // The displaced runs' status is not part of this wake's acknowledgement: awaiting it made
          // every wake past a full queue wait for a second fdatasync. A crash before it is written
          // leaves them queued, and resume queues (and so drops) them again.
          if (dropped.length > 0) this.dropLater(dropped)
          if (input.mode === 'now') this.track(session.heartbeat())
        },
      }
    }
    if (submission.kind === 'agent') {
      const { definitionKind, definitionId, correlationId, ...request } = submission.input
      return {
        run: agentRun(extra, definitionKind, definitionId, correlationId, request),
        pending: { holds: request, bytes: PENDING_AGENT_RUN_BYTES },
        start: (row, release) => { this.track(this.runAgent(row, request, release)) },
      }
    }
    const { definitionKind, definitionId, correlationId, ...request } = submission.input
    return {
      run: { id: randomUUID(), ...rowFields(extra), definitionKind, definitionId, correlationId, action: 'workflow', agentId: request.agentId, ...(request.name ? { name: request.name } : {}), request: storedWorkflowRequest(request, extra.received) },
      pending: { holds: request, bytes: PENDING_WORKFLOW_RUN_BYTES },
      start: (row, release) => { this.track(this.runWorkflow(row, request, release)) },
    }
  }

  /** Acceptor: one run accepted as submit accepts it, several with one write as submitMany does. */
  accept(submissions: readonly Submission[], extras: readonly RowExtra[]): Promise<RunRow[]> {
    if (submissions.length === 1) return this.submit(submissions[0]!, extras[0] ?? {}).then((row) => [row])
    return this.submitMany(submissions, extras)
  }

  /** Acceptor: recordOutcome. */
  record(origin: Pick<Origin, 'definitionKind' | 'definitionId' | 'correlationId'>, action: 'wake' | 'agent' | 'workflow', status: 'skipped' | 'failed', error?: string, result?: string, extra: RowExtra = {}): Promise<RunRow> {
    return this.recordOutcome(origin, action, status, error, result, extra)
  }

  /**
   * Acceptor: why a run cannot be accepted now. The store first (nothing is acknowledged that is not
   * on disk); then, for agent and workflow runs, the backlog's bounds: how many accepted runs wait
   * (server.maxPendingRuns) and what they hold (server.maxPendingBytes).
   */
  refusal(kind: 'wake' | 'agent' | 'workflow'): Refusal | undefined {
    const store = this.storeHealth()
    if (!store.ok) return { code: 'store_unavailable', message: 'the run store cannot write right now; try again shortly', retryAfterSeconds: 5 }
    if (kind === 'wake') return undefined
    if (this.pendingRuns >= this.config.server.maxPendingRuns) {
      return { code: 'too_many_pending_runs', message: `${this.pendingRuns} accepted runs are still waiting to run; try again shortly`, retryAfterSeconds: 5 }
    }
    if (this.pendingBytes >= (this.config.server.maxPendingBytes ?? DEFAULT_MAX_PENDING_BYTES)) {
      return { code: 'too_many_pending_runs', message: `the accepted runs still waiting to run hold ${(this.pendingBytes / 1048576).toFixed(1)} MiB of requests; try again shortly`, retryAfterSeconds: 5 }
    }
    return undefined
  }

  /**
   * A run's outcome once it is durably final, or null when `timeoutMs` passes first (waitForCompletion).
   * Waiting never cancels anything: the run goes on and finishes whether or not anyone waits.
   */
  async whenFinished(runId: string, timeoutMs: number): Promise<RunOutcome | null> {
    try {
      const row = await this.runs.whenFinished(runId, timeoutMs)
      if (!row) return null
      return { row, ...this.awaited.get(runId) }
    } finally {
      this.awaited.delete(runId)
    }
  }

  /** A matching request that started nothing (a transform skip or failure, a match.when that let it go) still gets its row. */
  async recordOutcome(origin: Pick<Origin, 'definitionKind' | 'definitionId' | 'correlationId'>, action: 'wake' | 'agent' | 'workflow', status: 'skipped' | 'failed', error?: string, result?: string, extra: RowExtra = {}): Promise<RunRow> {
    return this.runs.create({ id: randomUUID(), ...rowFields(extra), definitionKind: origin.definitionKind, definitionId: origin.definitionId, correlationId: origin.correlationId, action, status, ...(error ? { error } : {}), ...(result ? { result } : {}) })
  }

  /** Runs that a crash left queued or running are finished: run again, delivered, or settled. */
  resumeUnfinished(): number {
    const n = this.resume(this.runs.unfinished())
    for (const s of this.sessions.values()) if (s.pending.length > 0) this.track(s.heartbeat())
    return n
  }

  /**
   * Runs another runtime left unfinished and this one took over (a shared store): resumed as a
   * restart resumes its own, with the replies and deliveries their transcripts already hold.
   */
  resumeTaken(rows: readonly RunRow[], transcripts: readonly IsolatedRecord[]): void {
    for (const r of transcripts) {
      if (r.type === 'isolated') this.replies.set(r.runId, r.reply)
      else if (r.type === 'delivered') this.deliveredNotes.set(r.runId, r.note)
    }
    this.resume(rows)
  }

  private resume(rows: readonly RunRow[]): number {
    let n = 0
    for (const row of rows) {
      if (row.parentRunId !== undefined) {
        // a step resumes with its workflow; one whose workflow already ended was left behind
        const parent = this.runs.get(row.parentRunId)
        if (!parent || isFinalStatus(parent.status)) this.track(this.runs.transition(row.id, 'failed', { error: 'interrupted: its workflow had already ended' }))
        continue
      }
      n++
      if (row.action === 'wake') {
        // Its event still queued: the heartbeat settles it. Read by a turn already: the crash came
        // between that turn and the status change. Neither: the crash came before the event was
        // queued, so the request was never answered.
        const session = this.session(row.agentId ?? this.config.defaultAgentId)
        const eventId = `event:${row.id}`
        const event = row.request as Partial<WakeEvent> | undefined
        if (session.consumedAtStart.has(eventId)) this.track(this.finishWake(row.id))
        else if (typeof event?.text === 'string') this.track(this.settleDropped(session.enqueue({ type: 'event', id: eventId, runId: row.id, at: row.createdAt, text: event.text, external: event.external !== false, source: event.source ?? 'hook' })))
        else this.track(this.finishWake(row.id, 'interrupted before its event was stored; the request was not answered'))
        continue
      }
      const requeue = row.status === 'running' ? this.runs.transition(row.id, 'queued') : Promise.resolve(row)
      this.track(requeue.then((r) => (row.action === 'agent' ? this.runAgent(r, row.request as AgentRequest) : this.resumeWorkflow(r))))
    }
    return n
  }

  /** Events that are not runs of their own (summaries, workflow steps) go to the session journal. */
  private async queueEvent(agentId: string, event: { id: string; runId: string; text: string; external: boolean; source: string }, now = false): Promise<void> {
    await this.settleDropped(await this.session(agentId).queue(event, now))
  }

  /**
   * Displaced runs settled together once per turn of the event loop: under a flood past a full
   * queue every wake displaces one, and one `settled` record for the turn's few dozen costs less
   * than a record, a serialisation and a journal entry each.
   */
  private dropLater(runIds: readonly string[]): void {
    if (this.dropped.length === 0) setImmediate(this.settleDroppedNow)
    for (const id of runIds) this.dropped.push(id)
  }

  private dropped: string[] = []
  private readonly settleDroppedNow = (): void => {
    if (this.dropped.length === 0) return
    const ids = this.dropped
    this.dropped = []
    this.track(this.settleDropped(ids))
  }

  private async settleDropped(runIds: string[]): Promise<void> {
    if (runIds.length > 0) await this.runs.settle(runIds, 'failed', { error: 'dropped: the main session queue was full' })
  }

  async finishWake(runId: string, error?: string): Promise<void> {
    const row = this.runs.get(runId)
    if (!row || (row.status !== 'queued' && row.status !== 'running')) return
    await this.runs.transition(runId, error ? 'failed' : 'succeeded', error ? { error } : {})
  }

  /** `release`: takes the run's weight off the backlog (a resumed run, weighed here, has none yet). */
  private async runAgent(row: RunRow, req: AgentRequest, release = this.holdBytes(heldBytes([req]) + PENDING_AGENT_RUN_BYTES, 1)): Promise<void> {
    // At most `concurrency` isolated turns at once, and one at a time per session key: in this
    // runtime by its lock, and on a store several runtimes share, across them by the key's lease.
    this.pendingRuns++
    const keys = this.store.sessionKeys
    try {
      await this.slots.run(() => this.sessionLocks.run(req.sessionKey, () => (keys ? keys.hold(req.sessionKey, row.id, () => this.agentTurn(row, req)) : this.agentTurn(row, req))))
    } catch (err) {
      await this.endRefused(row.id, err)
    } finally {
      this.pendingRuns--
      release()
    }
  }

  /**
   * An acknowledged run is never stranded: a turn or workflow cut short because the store refused
   * one of its writes (a transcript record, a summary: `store_refused`, only ever alone) ends
   * failed, saying why, its unfinished steps with it. Anything else (the store closing, another
   * runtime taking the run over) leaves it to whoever resumes it. Rethrows `err` for the log.
   */
  private async endRefused(runId: string, err: unknown): Promise<never> {
    if (err instanceof RunStoreError && err.code === 'store_refused' && !this.closed) {
      const error = `interrupted: ${err.message}`
      for (const step of this.runs.children(runId)) if (!isFinalStatus(step.status)) await this.runs.transition(step.id, 'failed', { error }).catch(() => {})
      const row = this.runs.get(runId)
      if (row && !isFinalStatus(row.status)) await this.runs.transition(runId, 'failed', { error }).catch(() => {})
    }
    throw err
  }

  /** Accepted agent and workflow runs that have not finished yet. */
  get backlog(): number {
    return this.pendingRuns
  }

  /** What those runs hold in memory until they finish, in bytes (backlog.ts says how it is weighed). */
  get backlogBytes(): number {
    return this.pendingBytes
  }

  /** Whether every journal the engine writes can write now; the first reason when not. */
  storeHealth(): { ok: true } | { ok: false; reason: string } {
    const runs = this.runs.health
    if (!runs.ok) return runs
    const isolated = this.isolated.health
    if (!isolated.ok) return isolated
    for (const s of this.sessions.values()) {
      const h = s.journal.health
      if (!h.ok) return h
    }
    return { ok: true }
  }

  /** Per agent, the events waiting for its next heartbeat turn (read when metrics are scraped). */
  queuedEvents(): Array<[agentId: string, events: number]> {
    const out: Array<[string, number]> = []
    for (const [agentId, s] of this.sessions) out.push([agentId, s.pending.length])
    return out
  }

  private async agentTurn(row: RunRow, req: AgentRequest): Promise<void> {
    if (this.closed) return
    await this.runs.transition(row.id, 'running')
    const prompt = req.external ? wrapExternalContent(req.message, { source: req.source }) : req.message
    let reply = this.replies.get(row.id)
    try {
      if (reply === undefined) {
        reply = (await this.complete(req.agentId, req.model, [{ role: 'user', content: prompt }], req.thinking, req.timeoutSeconds ?? DEFAULT_TURN_TIMEOUT_SECONDS)).text
        // The prompt is kept as a transcript (cut: it is rebuilt from the run's request on resume); the reply whole, to deliver it after a crash.
        await this.isolated.append({ type: 'isolated', runId: row.id, sessionKey: req.sessionKey, at: new Date().toISOString(), prompt: clipText(prompt, TURN_REPLY_MAX_CHARS), reply })
        this.replies.set(row.id, reply)
      }
    } catch (err) {
      const status = err instanceof TurnTimeout ? 'timed_out' : 'failed'
      // The main session hears of it before the run is final, so a crash in between repeats
      // neither: the summary is not queued twice and the run resumes to its final state.
      await this.summarise(row, req, `${status.replace('_', ' ')}: ${(err as Error).message}`)
      await this.runs.transition(row.id, status, { error: (err as Error).message })
      return
    }
    let note = this.deliveredNotes.get(row.id) ?? ''
    if (req.deliver && !this.deliveredNotes.has(row.id)) {
      const delivered = await this.deliverReply(row, req, reply)
      if ('error' in delivered) {
        // The reply exists but did not reach anyone: that is a failed run, never a silent success.
        await this.summarise(row, req, `finished, but ${delivered.error}`)
        await this.runs.transition(row.id, 'failed', { error: delivered.error, result: reply.slice(0, 500), attempts: delivered.attempts })
        this.replies.delete(row.id)
        return
      }
      note = delivered.note
      await this.isolated.append({ type: 'delivered', runId: row.id, at: new Date().toISOString(), note })
    }
    await this.summarise(row, req, `finished: ${reply.slice(0, 500)}`)
    const waiter = this.awaited.get(row.id)
    if (waiter) { waiter.reply = reply; if (note) waiter.delivery = note.trim().replace(/^\(|\)$/g, '') }
    await this.runs.transition(row.id, 'succeeded', { result: `${reply.slice(0, 480)}${note}`.slice(0, 500) })
    this.replies.delete(row.id)
    this.deliveredNotes.delete(row.id)
  }

  private async deliverReply(row: RunRow, req: AgentRequest, text: string): Promise<{ note: string } | { error: string; attempts: number }> {
    const session = this.session(req.agentId)
    const agent = this.config.agents.find((a) => a.id === req.agentId)
    const route: Route | null = req.channel === 'last' ? session.lastRoute ?? agent?.delivery ?? null : { channel: req.channel, to: req.to }
    if (!route) return { note: ' (not delivered: no route yet; set agents[].delivery or a channel)' }
    const to = req.to ?? route.to
    const channel = this.channels.get(route.channel)
    if (!channel) return { error: `delivery failed: channel "${route.channel}" is not configured`, attempts: 0 }
    try {
      const result = await channel.deliver({ runId: row.id, agentId: req.agentId, text, to, name: req.name, correlationId: row.correlationId })
      await session.rememberRoute({ channel: route.channel, to })
      return { note: ` (delivered via ${route.channel}: ${result.detail})` }
    } catch (err) {
      return { error: `delivery via ${route.channel} failed: ${(err as Error).message}`, attempts: (err as { attempts?: number }).attempts ?? 1 }
    }
  }

  /** The main session hears how an isolated run went (untrusted: it quotes the hook's output). */
  private async summarise(row: RunRow, req: AgentRequest, what: string): Promise<void> {
    const label = req.name ?? row.definitionId
    if (this.session(req.agentId).knownAtStart.has(`summary:${row.id}`)) return // queued before a crash
    await this.queueEvent(req.agentId, { id: `summary:${row.id}`, runId: '', text: `Hook "${label}" (run ${row.id}) ${what}`, external: true, source: req.source }, req.wakeMode === 'now')
    if (req.wakeMode === 'now') this.track(this.session(req.agentId).heartbeat())
  }

  /** A workflow run resumed: its request as stored, with its payload read back from where it was stored once. */
  private async resumeWorkflow(row: RunRow): Promise<void> {
    const stored = row.request as StoredWorkflowRequest | undefined
    if (stored?.payloadFrom !== 'received') return this.runWorkflow(row, stored as WorkflowRequest)
    const received = await this.runs.received(row)
    if (received === undefined) {
      await this.runs.transition(row.id, 'failed', { error: 'interrupted, and the request it was started with is no longer stored' })
      return
    }
    const { payloadFrom: _from, ...request } = stored
    return this.runWorkflow(row, { ...request, context: { ...request.context, payload: received.payload } })
  }

  private async runWorkflow(row: RunRow, req: WorkflowRequest, release = this.holdBytes(heldBytes([req]) + PENDING_WORKFLOW_RUN_BYTES, 1)): Promise<void> {
    this.pendingRuns++
    try {
      await this.workflowRunner.run(row, req)
    } catch (err) {
      await this.endRefused(row.id, err)
    } finally {
      this.pendingRuns--
      release()
    }
  }

  /** One model call with the agent's model (or an override), its fallbacks, and a deadline. */
  async complete(agentId: string, override: string | null, messages: ChatMessage[], thinking: string | null, timeoutSeconds: number): Promise<{ text: string }> {
    const agent = this.config.agents.find((a) => a.id === agentId) ?? this.config.agents.find((a) => a.default)!
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

  private track(p: Promise<unknown>): void {
    // A coalesced heartbeat hands every wake the same promise: watch it once.
    if (this.watched.has(p)) return
    this.watched.add(p)
    const tracked = p.catch((err: Error) => {
      if (!this.closed) process.stderr.write(JSON.stringify({ level: 'error', msg: 'background run failed', error: err.message }) + '\n')
    }).finally(() => { this.inFlight.delete(tracked); this.watched.delete(p) })
    this.inFlight.add(tracked)
  }

  /** Waits for running turns up to `graceMs`; what is still running then is resumed at next start. */
  async drain(graceMs: number): Promise<boolean> {
    const deadline = Date.now() + graceMs
    if (this.dropped.length > 0) this.settleDroppedNow()
    while (this.inFlight.size > 0 && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([Promise.all([...this.inFlight]), new Promise((r) => { timer = setTimeout(r, Math.max(1, deadline - Date.now())) })])
      clearTimeout(timer)
    }
    return this.inFlight.size === 0
  }

  async close(): Promise<void> {
    // before the store closes: notifications still being sent get their outcome written
    await this.notifier.stop()
    this.closed = true
    this.workflowRunner.stop()
    for (const s of this.sessions.values()) await s.close()
    await this.store.close()
  }
}

/** The signal a local model call gets: nothing aborts it. */
const NEVER_ABORTED = new AbortController().signal

/** At most `limit` tasks at once; the rest wait in order. */
class Semaphore {
  private active = 0
  private readonly waiting = new Fifo<() => void>()

  constructor(private limit: number) {}

  setLimit(limit: number): void {
    this.limit = Math.max(1, limit)
    while (this.active < this.limit && this.waiting.length) { this.active++; this.waiting.shift()!() }
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.waiting.push(r))
    else this.active++
    try {
      return await task()
    } finally {
      const next = this.waiting.shift()
      if (next) next()
      else this.active--
    }
  }
}

/** One task at a time per key (turns on the same session key never overlap). */
class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>()

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve()
    const next = prev.then(task, task)
    const tail = next.catch(() => {})
    this.tails.set(key, tail)
    void tail.then(() => { if (this.tails.get(key) === tail) this.tails.delete(key) })
    return next
  }
}
