// The engine: what the actions do once accepted, composed from one module per concern and handed an
// opened store (it never opens one; its close closes the store it was handed):
// - accepting.ts: the Acceptor (acceptor.ts): rows prepared, created durably, the backlog counted;
// - main-turns.ts (with session.ts): the agents' main sessions, their event queues and heartbeats;
// - isolated-turns.ts: an agent run's turn: ask, record, deliver, summarise;
// - workflow-runs.ts: workflow runs handed to the workflow runner (runtime/workflows/);
// - complete.ts: model fallback and deadlines;
// - ownership.ts: on a shared store, which runtime runs which session, and one turn per session key;
// - resuming.ts: runs left unfinished by a restart or taken over from a dead runtime;
// - in-flight.ts: the work under way, drained at stop.
// Every run is on disk before the request is answered. Nothing here starts a background duty (the
// workflow runner, resuming, the notifier and the store's loops are duties, runtime/duties/,
// started and stopped in one place, runtime/serve/duties.ts); only each main session keeps its
// agent's heartbeat timer (session.ts), set by configure and cleared by close.
import type { BundleConfig, BundleRoute, BundleWorkflow } from '../bundle/format.js'
import type { Deliverer, Route } from '../channels/deliverer.js'
import { silentLogger, type Logger } from '../observe/log.js'
import type { RunLog, RunRow, Store } from '../store/store.js'
import type { WorkflowRunner } from '../workflows/runner.js'
import type { Acceptor, AgentInput, Origin, Refusal, RowExtra, RunOutcome, Submission, WakeInput, WorkflowInput } from './acceptor.js'
import { Accepting } from './accepting.js'
import { Backlog } from './backlog.js'
import { ModelCalls, type Models } from './complete.js'
import { InFlight } from './in-flight.js'
import { IsolatedTurns, type IsolatedRecord } from './isolated-turns.js'
import { MainTurns } from './main-turns.js'
import type { ChatMessage } from './models.js'
import { TurnGate, serveSessions } from './ownership.js'
import { Resuming } from './resuming.js'
import { WorkflowRuns, type StepTransforms } from './workflow-runs.js'

export type { AgentInput, Origin, RowExtra, RunOutcome, Submission, WakeInput, WorkflowInput } from './acceptor.js'
export type { Deliverer } from '../channels/deliverer.js'
export type { Models } from './complete.js'
export { DEFAULT_TURN_TIMEOUT_SECONDS, TurnTimeout } from './complete.js'

export interface EngineWiring {
  models?: Models
  channels?: ReadonlyMap<string, Deliverer>
  /** the transform workers (workflow steps with action transform) */
  transforms?: StepTransforms | undefined
  /** http steps' secret headers, resolved at load: `<workflow id>\0<step id>` → header → value */
  stepSecrets?: ReadonlyMap<string, Record<string, string>>
  /** the bundle's routes, for the notify policy of hook and trigger runs (the notifier's, runtime/serve/duties.ts) */
  routes?: Iterable<BundleRoute>
}

export class Engine implements Acceptor {
  readonly runs: RunLog
  private readonly inFlight: InFlight
  private readonly models: ModelCalls
  private readonly turns: MainTurns
  private readonly gate: TurnGate
  private readonly isolated: IsolatedTurns
  private readonly workflowRuns: WorkflowRuns
  private readonly accepting: Accepting
  private readonly resuming: Resuming
  private readonly backlogCount = new Backlog()

  private constructor(readonly store: Store, private config: BundleConfig, log: Logger) {
    const runs = store.runs
    this.runs = runs
    /** runs the last process left unfinished: what session and transcript state must be kept for */
    const unfinishedAtStart = new Set<string>()
    for (const r of runs.unfinished()) unfinishedAtStart.add(r.id)
    this.inFlight = new InFlight(runs, log)
    this.models = new ModelCalls(config.agents)
    this.turns = new MainTurns(store, runs, this.models, this.inFlight, (runId) => unfinishedAtStart.has(runId), config.agents)
    this.gate = new TurnGate(store, config.server.concurrency ?? 4)
    const awaited = new Map<string, { reply?: string; delivery?: string }>()
    this.isolated = new IsolatedTurns(store, runs, unfinishedAtStart, this.models, this.turns, this.gate, this.backlogCount, this.inFlight, awaited, config.agents)
    this.workflowRuns = new WorkflowRuns(runs, this.models, this.turns, this.backlogCount, this.inFlight)
    this.accepting = new Accepting(runs, this.backlogCount, this.turns, this.isolated, this.workflowRuns, this.inFlight, () => this.storeHealth(), config.server, awaited)
    this.resuming = new Resuming(runs, this.turns, this.isolated, this.workflowRuns, this.inFlight, () => this.config.defaultAgentId)
  }

  /**
   * The engine over an opened store (openStore): it starts nothing in the background and resumes
   * nothing until resumeUnfinished (the resume duty calls it); `log` hears of background failures.
   */
  static open(store: Store, config: BundleConfig, workflows: ReadonlyMap<string, BundleWorkflow>, options: EngineWiring = {}, log: Logger = silentLogger): Engine {
    const engine = new Engine(store, config, log)
    engine.configure(config, workflows, options)
    return engine
  }

  /** Applies a (re)loaded bundle; sessions of agents no longer configured stay on disk. */
  configure(config: BundleConfig, workflows: ReadonlyMap<string, BundleWorkflow>, wiring: EngineWiring = {}): void {
    this.config = config
    this.models.configure(config.agents, wiring.models)
    this.isolated.configure(config.agents, wiring.channels)
    this.workflowRuns.configure(workflows, wiring)
    this.accepting.configure(config.server)
    this.gate.setConcurrency(config.server.concurrency ?? 4)
    this.turns.configure(config.agents)
    // Several runtimes on one store: this one competes for the sessions of the agents it serves.
    serveSessions(this.store, config.agents.map((a) => a.id), this.turns)
  }

  /** The runner the engine's workflow runs go to; its start and stop are a duty (runtime/duties/workflow-runner.ts). */
  get workflowRunner(): WorkflowRunner {
    return this.workflowRuns.runner
  }

  // ---- the Acceptor (accepting.ts) ----------------------------------------------------------------

  accept(submissions: readonly Submission[], extras: readonly RowExtra[]): Promise<RunRow[]> {
    return this.accepting.accept(submissions, extras)
  }

  record(origin: Pick<Origin, 'definitionKind' | 'definitionId' | 'correlationId'>, action: 'wake' | 'agent' | 'workflow', status: 'skipped' | 'failed', error?: string, result?: string, extra: RowExtra = {}): Promise<RunRow> {
    return this.accepting.record(origin, action, status, error, result, extra)
  }

  whenFinished(runId: string, timeoutMs: number): Promise<RunOutcome | null> {
    return this.accepting.whenFinished(runId, timeoutMs)
  }

  refusal(kind: 'wake' | 'agent' | 'workflow'): Refusal | undefined {
    return this.accepting.refusal(kind)
  }

  /** Whether every journal the engine writes can write now; the first reason when not. */
  storeHealth(): { ok: true } | { ok: false; reason: string } {
    const runs = this.runs.health
    if (!runs.ok) return runs
    const isolated = this.isolated.health
    if (!isolated.ok) return isolated
    return this.turns.health()
  }

  // ---- the submit forms the request path and the scheduler use today ------------------------------

  /**
   * The run row is the event: its request holds the text, so a wake costs one record in one
   * journal (one fdatasync per batch); a restart queues the rows no turn has read yet.
   * Durable before it resolves: the run row and its event are on disk.
   */
  submitWake(input: WakeInput, extra: RowExtra = {}): Promise<RunRow> {
    return this.accepting.submit({ kind: 'wake', input }, extra)
  }

  submitAgent(input: AgentInput, extra: RowExtra = {}): Promise<RunRow> {
    return this.accepting.submit({ kind: 'agent', input }, extra)
  }

  submitWorkflow(input: WorkflowInput, extra: RowExtra = {}): Promise<RunRow> {
    return this.accepting.submit({ kind: 'workflow', input }, extra)
  }

  submit(submission: Submission, extra: RowExtra = {}): Promise<RunRow> {
    return this.accepting.submit(submission, extra)
  }

  submitMany(submissions: readonly Submission[], extras: readonly RowExtra[]): Promise<RunRow[]> {
    return this.accepting.submitMany(submissions, extras)
  }

  recordOutcome(origin: Pick<Origin, 'definitionKind' | 'definitionId' | 'correlationId'>, action: 'wake' | 'agent' | 'workflow', status: 'skipped' | 'failed', error?: string, result?: string, extra: RowExtra = {}): Promise<RunRow> {
    return this.accepting.record(origin, action, status, error, result, extra)
  }

  /** Accepted agent and workflow runs that have not finished yet. */
  get backlog(): number {
    return this.backlogCount.runs
  }

  /** What those runs hold in memory until they finish, in bytes (backlog.ts says how it is weighed). */
  get backlogBytes(): number {
    return this.backlogCount.bytes
  }

  // ---- resuming (resuming.ts; when, the resume duty decides) ------------------------------------

  /** Runs that a crash left queued or running are finished: run again, delivered, or settled. */
  resumeUnfinished(): number {
    return this.resuming.unfinished()
  }

  /** Runs another runtime left unfinished and this one took over (a shared store). */
  resumeTaken(rows: readonly RunRow[], transcripts: readonly object[]): void {
    if (!this.inFlight.closed) this.resuming.taken(rows, transcripts as IsolatedRecord[])
  }

  // ---- what the rest of the runtime reads --------------------------------------------------------

  /** One model call with the agent's model (or an override), its fallbacks, and a deadline. */
  complete(agentId: string, override: string | null, messages: ChatMessage[], thinking: string | null, timeoutSeconds: number): Promise<{ text: string }> {
    return this.models.complete(agentId, override, messages, thinking, timeoutSeconds)
  }

  finishWake(runId: string, error?: string): Promise<void> {
    return this.turns.finishWake(runId, error)
  }

  /** Where `channel: last` goes for an agent (the notifier asks). */
  lastRoute(agentId: string): Route | null {
    return this.turns.lastRoute(agentId)
  }

  /** Per agent, the events waiting for its next heartbeat turn (read when metrics are scraped). */
  queuedEvents(): Array<[agentId: string, events: number]> {
    return this.turns.queuedEvents()
  }

  /** Waits for running turns up to `graceMs`; what is still running then is resumed at next start. */
  drain(graceMs: number): Promise<boolean> {
    this.turns.settleDroppedNow()
    return this.inFlight.drain(graceMs)
  }

  /** Stops the sessions' heartbeats and closes the store (the duties are stopped before: runtime/serve/duties.ts). */
  async close(): Promise<void> {
    this.inFlight.closed = true
    this.workflowRuns.runner.stop()
    await this.turns.close()
    await this.store.close()
  }
}
