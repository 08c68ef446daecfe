// Resuming runs: those the last process left queued or running (after a restart), and those this
// runtime took over from a dead one (a shared store's sweep). Each is finished from where it
// stopped: a wake whose event a turn already read is settled, one still queued is queued again, one
// cut before its event was stored ends failed; an agent run runs again with the reply and delivery
// its transcript holds; a workflow resumes its steps; a step whose workflow already ended fails.
// When it runs is the resume duty's business (runtime/duties/resume.ts).
import { isFinalStatus, type RunLog, type RunRow } from '../store/store.js'
import type { WakeEvent } from './accepting.js'
import type { InFlight } from './in-flight.js'
import type { AgentRequest, IsolatedRecord, IsolatedTurns } from './isolated-turns.js'
import type { MainTurns } from './main-turns.js'
import type { WorkflowRuns } from './workflow-runs.js'

export class Resuming {
  constructor(
    private readonly runs: RunLog,
    private readonly turns: MainTurns,
    private readonly isolated: IsolatedTurns,
    private readonly workflows: WorkflowRuns,
    private readonly inFlight: InFlight,
    /** the agent a wake without one belongs to */
    private readonly defaultAgentId: () => string,
  ) {}

  /** Runs that a crash left queued or running are finished: run again, delivered, or settled. Returns how many. */
  unfinished(): number {
    const n = this.resume(this.runs.unfinished())
    this.turns.turnWherePending()
    return n
  }

  /**
   * Runs another runtime left unfinished and this one took over (a shared store): resumed as a
   * restart resumes its own, with the replies and deliveries their transcripts already hold.
   */
  taken(rows: readonly RunRow[], transcripts: readonly IsolatedRecord[]): void {
    this.isolated.adopt(transcripts)
    this.resume(rows)
  }

  private resume(rows: readonly RunRow[]): number {
    let n = 0
    const track = (p: Promise<unknown>): void => this.inFlight.track(p)
    for (const row of rows) {
      if (row.parentRunId !== undefined) {
        // a step resumes with its workflow; one whose workflow already ended was left behind
        const parent = this.runs.get(row.parentRunId)
        if (!parent || isFinalStatus(parent.status)) track(this.runs.transition(row.id, 'failed', { error: 'interrupted: its workflow had already ended' }))
        continue
      }
      n++
      if (row.action === 'wake') {
        // Its event still queued: the heartbeat settles it. Read by a turn already: the crash came
        // between that turn and the status change. Neither: the crash came before the event was
        // queued, so the request was never answered.
        const session = this.turns.session(row.agentId ?? this.defaultAgentId())
        const eventId = `event:${row.id}`
        const event = row.request as Partial<WakeEvent> | undefined
        if (session.consumedAtStart.has(eventId)) track(this.turns.finishWake(row.id))
        else if (typeof event?.text === 'string') track(this.turns.settleDropped(session.enqueue({ type: 'event', id: eventId, runId: row.id, at: row.createdAt, text: event.text, external: event.external !== false, source: event.source ?? 'hook' })))
        else track(this.turns.finishWake(row.id, 'interrupted before its event was stored; the request was not answered'))
        continue
      }
      const requeue = row.status === 'running' ? this.runs.transition(row.id, 'queued') : Promise.resolve(row)
      track(requeue.then((r) => (row.action === 'agent' ? this.isolated.run(r, row.request as AgentRequest) : this.workflows.resume(r))))
    }
    return n
  }
}
