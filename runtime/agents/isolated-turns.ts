// The isolated turns: an agent run asks its model under its own session key, records the reply (the
// `isolated` transcript log), delivers it when asked, and posts a summary into the agent's main
// session. Each step is on disk before the next: a run resumed after a crash delivers a reply
// already on disk instead of asking again, does not deliver twice, and does not queue its
// summary twice.
import type { AgentInput } from './acceptor.js'
import type { BundleConfig } from '../bundle/format.js'
import type { Deliverer } from '../channels/deliverer.js'
import type { RecordLog, RunLog, RunRow, Store, StoreHealth } from '../store/store.js'
import { PENDING_AGENT_RUN_BYTES, heldBytes, type Backlog } from './backlog.js'
import { DEFAULT_TURN_TIMEOUT_SECONDS, TurnTimeout, type ModelCalls } from './complete.js'
import { wrapExternalContent } from './envelope.js'
import type { InFlight } from './in-flight.js'
import type { MainTurns } from './main-turns.js'
import type { TurnGate } from './ownership.js'
import { TRANSCRIPT_LOG, type IsolatedRecord } from './transcripts.js'
import { TURN_REPLY_MAX_CHARS, clipText, type Route } from './session.js'

/** An agent run's request as its row keeps it. */
export type AgentRequest = Omit<AgentInput, 'definitionKind' | 'definitionId' | 'correlationId'>

/** The `isolated` log's records (their shapes in transcripts.ts, which the page's run detail reads too): what a resumed run reads back. */
export type { IsolatedRecord } from './transcripts.js'

/** Runs a request waits on (waitForCompletion), with what their answer needs beyond the row. */
export type AwaitedOutcomes = Map<string, { reply?: string; delivery?: string }>

export class IsolatedTurns {
  private readonly log: RecordLog<IsolatedRecord>
  private readonly replies = new Map<string, string>()
  private readonly deliveredNotes = new Map<string, string>()
  private channels: ReadonlyMap<string, Deliverer> = new Map()

  constructor(
    store: Store,
    private readonly runs: RunLog,
    /** runs the last process left unfinished: only their transcripts are kept */
    unfinishedAtStart: ReadonlySet<string>,
    private readonly models: ModelCalls,
    private readonly turns: MainTurns,
    private readonly gate: TurnGate,
    private readonly backlog: Backlog,
    private readonly inFlight: InFlight,
    private readonly awaited: AwaitedOutcomes,
    private agents: BundleConfig['agents'],
  ) {
    // Replies already on disk: a run resumed after a crash delivers these instead of asking again.
    // Only those of unfinished runs are kept, in memory and, when the store compacts the log, in it.
    const opened = store.openLog<IsolatedRecord>(TRANSCRIPT_LOG, (records) => records.filter((r) => unfinishedAtStart.has(r.runId)))
    this.adopt(opened.records.filter((r) => unfinishedAtStart.has(r.runId)))
    this.log = opened.log
  }

  configure(agents: BundleConfig['agents'], channels: ReadonlyMap<string, Deliverer> | undefined): void {
    this.agents = agents
    if (channels) this.channels = channels
  }

  /** Transcript records of runs to be resumed (at start, or taken over from another runtime). */
  adopt(records: readonly IsolatedRecord[]): void {
    for (const r of records) {
      if (r.type === 'isolated') this.replies.set(r.runId, r.reply)
      else if (r.type === 'delivered') this.deliveredNotes.set(r.runId, r.note)
    }
  }

  get health(): StoreHealth {
    return this.log.health
  }

  /** `release`: takes the run's weight off the backlog (a resumed run, weighed here, has none yet). */
  async run(row: RunRow, req: AgentRequest, release = this.backlog.hold(heldBytes([req]) + PENDING_AGENT_RUN_BYTES, 1)): Promise<void> {
    // At most `concurrency` isolated turns at once, and one at a time per session key (ownership.ts).
    this.backlog.runs++
    try {
      await this.gate.run(req.sessionKey, row.id, () => this.turn(row, req))
    } catch (err) {
      await this.inFlight.endRefused(row.id, err)
    } finally {
      this.backlog.runs--
      release()
    }
  }

  private async turn(row: RunRow, req: AgentRequest): Promise<void> {
    if (this.inFlight.closed) return
    await this.runs.transition(row.id, 'running')
    const prompt = req.external ? wrapExternalContent(req.message, { source: req.source }) : req.message
    let reply = this.replies.get(row.id)
    try {
      if (reply === undefined) {
        reply = (await this.models.complete(req.agentId, req.model, [{ role: 'user', content: prompt }], req.thinking, req.timeoutSeconds ?? DEFAULT_TURN_TIMEOUT_SECONDS)).text
        // The prompt is kept as a transcript (cut: it is rebuilt from the run's request on resume); the reply whole, to deliver it after a crash.
        await this.log.append({ type: 'isolated', runId: row.id, sessionKey: req.sessionKey, at: new Date().toISOString(), prompt: clipText(prompt, TURN_REPLY_MAX_CHARS), reply })
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
      const delivered = await this.deliver(row, req, reply)
      if ('error' in delivered) {
        // The reply exists but did not reach anyone: that is a failed run, never a silent success.
        await this.summarise(row, req, `finished, but ${delivered.error}`)
        await this.runs.transition(row.id, 'failed', { error: delivered.error, result: reply.slice(0, 500), attempts: delivered.attempts })
        this.replies.delete(row.id)
        return
      }
      note = delivered.note
      await this.log.append({ type: 'delivered', runId: row.id, at: new Date().toISOString(), note })
    }
    await this.summarise(row, req, `finished: ${reply.slice(0, 500)}`)
    const waiter = this.awaited.get(row.id)
    if (waiter) { waiter.reply = reply; if (note) waiter.delivery = note.trim().replace(/^\(|\)$/g, '') }
    await this.runs.transition(row.id, 'succeeded', { result: `${reply.slice(0, 480)}${note}`.slice(0, 500) })
    this.replies.delete(row.id)
    this.deliveredNotes.delete(row.id)
  }

  private async deliver(row: RunRow, req: AgentRequest, text: string): Promise<{ note: string } | { error: string; attempts: number }> {
    const session = this.turns.session(req.agentId)
    const agent = this.agents.find((a) => a.id === req.agentId)
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
    if (this.turns.session(req.agentId).knownAtStart.has(`summary:${row.id}`)) return // queued before a crash
    await this.turns.queueEvent(req.agentId, { id: `summary:${row.id}`, runId: '', text: `Hook "${label}" (run ${row.id}) ${what}`, external: true, source: req.source }, req.wakeMode === 'now')
    if (req.wakeMode === 'now') this.turns.heartbeat(req.agentId)
  }
}
