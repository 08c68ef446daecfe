// Accepting runs (the Acceptor, runtime/agents/acceptor.ts): each submission made into its run row,
// the rows created with one durable write, and only then each run started (a wake queued on its
// main session, an agent run's isolated turn, a workflow handed to the runner); what the backlog
// holds meanwhile is counted, and the refusal the request side asks for read off it. A request
// that waits for its run (waitForCompletion) gets the final row and, for an agent run, its reply.
//
// Every wake, agent and mapped request passes here: no object spreads or async wrappers on the
// path from accept to the write (each showed in the profile); rows are built field by field.
import { randomUUID } from 'node:crypto'
import { DEFAULT_MAX_PENDING_BYTES, type BundleConfig } from '../bundle/format.js'
import type { NewRun, RunLog, RunRow } from '../store/store.js'
import type { Acceptor, Origin, Refusal, RowExtra, RunOutcome, Submission } from './acceptor.js'
import { PENDING_AGENT_RUN_BYTES, PENDING_WORKFLOW_RUN_BYTES, heldBytes, type Backlog } from './backlog.js'
import type { InFlight } from './in-flight.js'
import type { AgentRequest, AwaitedOutcomes, IsolatedTurns } from './isolated-turns.js'
import type { MainTurns } from './main-turns.js'
import { storedWorkflowRequest, type WorkflowRuns } from './workflow-runs.js'

/** A submission made ready to write (prepare). */
interface Prepared { run: NewRun; pending?: { holds: unknown; bytes: number }; start(row: RunRow, release?: () => void): void }

/** What a wake's run row keeps of its event; `now` asks for a turn at once (a shared session's owner reads it). */
export interface WakeEvent { text: string; external: boolean; source: string; now?: true }

/** An agent run's new row, field by field (every /agent request and agent mapping builds one). */
function agentRun(extra: RowExtra, definitionKind: Origin['definitionKind'], definitionId: string, correlationId: string, request: AgentRequest): NewRun {
  const run: NewRun = { id: extra.id ?? randomUUID(), definitionKind, definitionId, correlationId, action: 'agent', agentId: request.agentId, sessionKey: request.sessionKey, request }
  copyRowFields(extra, run)
  if (request.name) run.name = request.name
  return run
}

/** Only the row's own fields of an extra (the HTTP side may pass an object with more on it). */
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

export class Accepting implements Acceptor {
  constructor(
    private readonly runs: RunLog,
    private readonly backlog: Backlog,
    private readonly turns: MainTurns,
    private readonly isolated: IsolatedTurns,
    private readonly workflows: WorkflowRuns,
    private readonly inFlight: InFlight,
    /** whether the store can write now (every journal the engine writes); the first reason when not */
    private readonly journals: () => { ok: true } | { ok: false; reason: string },
    private server: BundleConfig['server'],
    /** runs a request waits on (waitForCompletion), with what their answer needs beyond the row (the isolated turns fill it in) */
    private readonly awaited: AwaitedOutcomes,
  ) {}

  configure(server: BundleConfig['server']): void {
    this.server = server
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
      p.start(row, p.pending === undefined ? undefined : this.backlog.hold(heldBytes([p.pending.holds]) + p.pending.bytes, 1))
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
    const release = pending.length === 0 ? undefined : this.backlog.hold(heldBytes(pending.map((p) => p.pending!.holds)) + pending.reduce((n, p) => n + p.pending!.bytes, 0), pending.length)
    for (let i = 0; i < rows.length; i++) prepared[i]!.start(rows[i]!, prepared[i]!.pending === undefined ? undefined : release)
    return rows
  }

  /** Acceptor: one run accepted as submit accepts it, several with one write as submitMany does. */
  accept(submissions: readonly Submission[], extras: readonly RowExtra[]): Promise<RunRow[]> {
    if (submissions.length === 1) return this.submit(submissions[0]!, extras[0] ?? {}).then((row) => [row])
    return this.submitMany(submissions, extras)
  }

  /** Acceptor: a matching request that started nothing (a transform skip or failure, a match.when that let it go) still gets its row. */
  record(origin: Pick<Origin, 'definitionKind' | 'definitionId' | 'correlationId'>, action: 'wake' | 'agent' | 'workflow', status: 'skipped' | 'failed', error?: string, result?: string, extra: RowExtra = {}): Promise<RunRow> {
    return this.runs.create({ id: randomUUID(), ...rowFields(extra), definitionKind: origin.definitionKind, definitionId: origin.definitionId, correlationId: origin.correlationId, action, status, ...(error ? { error } : {}), ...(result ? { result } : {}) })
  }

  /**
   * Acceptor: why a run cannot be accepted now. The store first (nothing is acknowledged that is not
   * on disk); then, for agent and workflow runs, the backlog's bounds: how many accepted runs wait
   * (server.maxPendingRuns) and what they hold (server.maxPendingBytes).
   */
  refusal(kind: 'wake' | 'agent' | 'workflow'): Refusal | undefined {
    if (!this.journals().ok) return { code: 'store_unavailable', message: 'the run store cannot write right now; try again shortly', retryAfterSeconds: 5 }
    if (kind === 'wake') return undefined
    if (this.backlog.runs >= this.server.maxPendingRuns) {
      return { code: 'too_many_pending_runs', message: `${this.backlog.runs} accepted runs are still waiting to run; try again shortly`, retryAfterSeconds: 5 }
    }
    if (this.backlog.bytes >= (this.server.maxPendingBytes ?? DEFAULT_MAX_PENDING_BYTES)) {
      return { code: 'too_many_pending_runs', message: `the accepted runs still waiting to run hold ${(this.backlog.bytes / 1048576).toFixed(1)} MiB of requests; try again shortly`, retryAfterSeconds: 5 }
    }
    return undefined
  }

  /**
   * Acceptor: a run's outcome once it is durably final, or null when `timeoutMs` passes first
   * (waitForCompletion). Waiting never cancels anything: the run goes on and finishes whether or
   * not anyone waits.
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

  /** Acceptor: whether the store can write now (503 store_unavailable while it cannot). */
  storeHealth(): { ok: true } | { ok: false; reason: string } {
    return this.journals()
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
          const session = this.turns.session(input.agentId)
          // Another runtime owns the session (a shared store): it claims the wake from the store.
          if (!session.owned) return this.runs.release?.(row.id)
          const dropped = session.enqueue({ type: 'event', id: `event:${row.id}`, runId: row.id, at: row.createdAt, text: event.text, external: event.external, source: event.source })
          // The displaced runs' status is not part of this wake's acknowledgement: awaiting it made
          // every wake past a full queue wait for a second fdatasync. A crash before it is written
          // leaves them queued, and resume queues (and so drops) them again.
          if (dropped.length > 0) this.turns.dropLater(dropped)
          if (input.mode === 'now') this.inFlight.track(session.heartbeat())
        },
      }
    }
    if (submission.kind === 'agent') {
      const { definitionKind, definitionId, correlationId, ...request } = submission.input
      return {
        run: agentRun(extra, definitionKind, definitionId, correlationId, request),
        pending: { holds: request, bytes: PENDING_AGENT_RUN_BYTES },
        start: (row, release) => { this.inFlight.track(this.isolated.run(row, request, release)) },
      }
    }
    const { definitionKind, definitionId, correlationId, ...request } = submission.input
    return {
      run: { id: randomUUID(), ...rowFields(extra), definitionKind, definitionId, correlationId, action: 'workflow', agentId: request.agentId, ...(request.name ? { name: request.name } : {}), request: storedWorkflowRequest(request, extra.received) },
      pending: { holds: request, bytes: PENDING_WORKFLOW_RUN_BYTES },
      start: (row, release) => { this.inFlight.track(this.workflows.run(row, request, release)) },
    }
  }
}
