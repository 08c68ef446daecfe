// One agent's main session on disk: the queue of system events a heartbeat turn reads, the turns
// it ran, and the last delivery route (`channel: last`). Identical consecutive events collapse into
// one line of the turn's prompt; the queue is bounded, and the oldest events are dropped first.
//
// On a store several runtimes share (`store.sessions`), one runtime at a time owns the session: it
// alone queues events for turns, runs them and settles their wakes. Another runtime puts events in
// the store for the owner to pull, and its turn commits are fenced (see runtime/store/postgres/sessions.ts).
import { RunStoreError, sessionLogName, type RecordLog, type RunRow, type SessionOwnership, type Store } from '../store/store.js'
import { wrapExternalContent } from './envelope.js'
import type { Route } from '../channels/deliverer.js'

export type { Route }

export type SessionRecord =
  | { type: 'event'; id: string; runId: string; text: string; external: boolean; source: string; at: string }
  | { type: 'turn'; id: string; at: string; events: string[]; reply: string; error?: string }
  | { type: 'route'; at: string; channel: string; to: string | null }

export type SessionEvent = Extract<SessionRecord, { type: 'event' }>

/** A turn's reply as its record keeps it (history, not a transcript to resume from). */
export const TURN_REPLY_MAX_CHARS = 64 * 1024

/** At most `max` characters, the cut marked. */
export function clipText(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`
}

/** The run an event belongs to: `event:<run>` (a wake), `summary:<run>`, `step:<run>:<step>`. */
export function runIdOfEvent(id: string): string {
  const start = id.indexOf(':') + 1
  const end = id.indexOf(':', start)
  return end < 0 ? id.slice(start) : id.slice(start, end)
}

export interface HeartbeatRunner {
  /** one model turn over the prompt; rejects with a readable error */
  runHeartbeat(agentId: string, prompt: string): Promise<string>
  /** settles the wake runs whose events a turn read (or dropped) */
  settleWakes(runIds: string[], error?: string): Promise<void>
}

export class MainSession {
  readonly pending: SessionEvent[] = []
  /** events a turn already read, as found on disk at start (to settle wakes a crash left open) */
  readonly consumedAtStart = new Set<string>()
  /** every event id the journal held at start, read or not (to queue a summary only once) */
  readonly knownAtStart = new Set<string>()
  lastRoute: Route | null = null
  maxQueued = 1000
  /** the queue's bound in bytes of event text as well as in events: big payloads fill it sooner */
  maxQueuedBytes = 8 * 1024 * 1024
  private pendingBytes = 0
  private running: Promise<void> | undefined
  private again = false
  private timer: NodeJS.Timeout | undefined

  /** the ids in `pending` (a shared session: an event pulled twice is queued once) */
  private readonly pendingIds = new Set<string>()

  private constructor(readonly agentId: string, readonly journal: RecordLog<SessionRecord>, private readonly runner: HeartbeatRunner, private readonly shared?: SessionOwnership<SessionRecord>) {}

  /** Whether this runtime runs the session's turns: always, unless several runtimes share the store. */
  get owned(): boolean {
    return this.shared === undefined || this.shared.owns(this.agentId)
  }

  /**
   * Opens the session's log (`<agent>/main` in the store) and queues the events no turn has read.
   * `isOpen(runId)`: whether a run was left unfinished; what was read or queued for finished runs
   * is not kept in memory, and when the store compacts the log it keeps what a later start still
   * needs: the last route, the unread events, and for unfinished runs their events and which were read.
   */
  static open(agentId: string, store: Store, runner: HeartbeatRunner, options: { isOpen?: (runId: string) => boolean } = {}): MainSession {
    if (store.sessions) {
      // Shared: what the session holds is read when this runtime gains it (gain), not at open.
      const opened = store.openLog<SessionRecord>(sessionLogName(agentId))
      return new MainSession(agentId, opened.log, runner, store.sessions as SessionOwnership<SessionRecord>)
    }
    const isOpen = options.isOpen ?? (() => true)
    let consumed: Set<string> | undefined
    let route: Extract<SessionRecord, { type: 'route' }> | undefined
    let kept: SessionEvent[] = []
    let unread: SessionEvent[] = []
    let readForOpenRuns: string[] = []
    const sort = (records: SessionRecord[]): void => {
      consumed = new Set<string>()
      for (const r of records) {
        if (r.type === 'turn') for (const id of r.events) consumed.add(id)
        else if (r.type === 'route') route = r
      }
      kept = []
      unread = []
      readForOpenRuns = []
      for (const r of records) {
        if (r.type !== 'event') continue
        const open = isOpen(runIdOfEvent(r.id))
        const read = consumed.has(r.id)
        if (!read) unread.push(r)
        if (open || !read) kept.push(r)
        if (open && read) readForOpenRuns.push(r.id)
      }
    }
    const opened = store.openLog<SessionRecord>(sessionLogName(agentId), (records) => {
      sort(records)
      const compacted: SessionRecord[] = [...(route ? [route] : []), ...kept]
      if (readForOpenRuns.length > 0) compacted.push({ type: 'turn', id: 'turn:compacted', at: new Date().toISOString(), events: readForOpenRuns, reply: '' })
      return compacted
    })
    if (consumed === undefined) sort(opened.records)
    const s = new MainSession(agentId, opened.log, runner)
    const last = route as Extract<SessionRecord, { type: 'route' }> | undefined
    if (last) s.lastRoute = { channel: last.channel, to: last.to }
    for (const r of kept) if (isOpen(runIdOfEvent(r.id))) s.knownAtStart.add(r.id)
    for (const id of readForOpenRuns) s.consumedAtStart.add(id)
    for (const r of unread) s.enqueue(r)
    return s
  }

  startHeartbeat(seconds: number | null): void {
    this.stop()
    if (seconds !== null && seconds > 0) {
      this.timer = setInterval(() => void this.heartbeat(), seconds * 1000)
      this.timer.unref()
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
  }

  /**
   * Writes the event to the session journal, then queues it. Returns the run ids the bound pushed
   * out. Shared: the event goes to the store for the owner, whichever runtime it is, to pull;
   * `now` asks it for a turn at once.
   */
  async queue(event: Omit<SessionEvent, 'type' | 'at'>, now = false): Promise<string[]> {
    const record: SessionEvent = { type: 'event', at: new Date().toISOString(), ...event }
    if (this.shared) {
      await this.shared.queue(this.agentId, record, now)
      return []
    }
    await this.journal.append(record)
    return this.enqueue(record)
  }

  /** Queues an event already durable elsewhere (a wake's run row). Returns the run ids the bound pushed out. */
  enqueue(event: SessionEvent): string[] {
    if (this.shared) {
      if (this.pendingIds.has(event.id)) return []
      this.pendingIds.add(event.id)
    }
    this.pending.push(event)
    this.pendingBytes += event.text.length
    const dropped: string[] = []
    while (this.pending.length > this.maxQueued || (this.pendingBytes > this.maxQueuedBytes && this.pending.length > 1)) {
      const old = this.pending.shift()!
      this.pendingBytes -= old.text.length
      if (this.shared) this.pendingIds.delete(old.id)
      if (old.runId) dropped.push(old.runId)
    }
    return dropped
  }

  async rememberRoute(route: Route): Promise<void> {
    if (this.lastRoute && this.lastRoute.channel === route.channel && this.lastRoute.to === route.to) return
    await this.journal.append({ type: 'route', at: new Date().toISOString(), ...route })
    // shared: every runtime's next reply with channel last goes here too
    if (this.shared) await this.shared.setRoute(this.agentId, route)
    this.lastRoute = route
  }

  /**
   * This runtime owns the shared session now: `records` is its log as it stands, `wakes` its
   * queued wakes (claimed). Wakes a committed turn already read are settled; the rest, and the
   * events no turn read, are queued, and a turn runs if any are.
   */
  gain(records: SessionRecord[], wakes: RunRow[]): void {
    this.clear()
    const consumed = new Set<string>()
    for (const r of records) {
      if (r.type === 'turn') for (const id of r.events) consumed.add(id)
      else if (r.type === 'route') this.lastRoute = { channel: r.channel, to: r.to }
    }
    const dropped: string[] = []
    for (const r of records) if (r.type === 'event' && !consumed.has(r.id)) dropped.push(...this.enqueue(r))
    const read: string[] = []
    for (const row of wakes) {
      const id = `event:${row.id}`
      if (consumed.has(id)) read.push(row.id)
      else dropped.push(...this.enqueue(wakeEvent(row)))
    }
    this.settle(read, dropped)
    if (this.pending.length > 0) void this.heartbeat().catch(() => {})
  }

  /** Events and wakes queued elsewhere, pulled by the owner; `now`: one of them asks for a turn at once. */
  pull(records: SessionRecord[], wakes: RunRow[], now: boolean): void {
    const dropped: string[] = []
    for (const r of records) if (r.type === 'event') dropped.push(...this.enqueue(r))
    for (const row of wakes) dropped.push(...this.enqueue(wakeEvent(row)))
    this.settle([], dropped)
    if (now) void this.heartbeat().catch(() => {})
  }

  /** Another runtime owns the session now: what was queued here is its to read. */
  lose(): void {
    this.clear()
  }

  private clear(): void {
    this.pending.length = 0
    this.pendingIds.clear()
    this.pendingBytes = 0
    this.again = false
  }

  private settle(read: string[], dropped: string[]): void {
    if (read.length > 0) void this.runner.settleWakes(read).catch(() => {})
    if (dropped.length > 0) void this.runner.settleWakes(dropped, 'dropped: the main session queue was full').catch(() => {})
  }

  /** Coalesced: wakes that arrive while a turn runs fold into one more turn after it. */
  heartbeat(): Promise<void> {
    // another runtime owns the session: it runs the turn when it pulls what asked for one
    if (!this.owned) return Promise.resolve()
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

  private async turn(): Promise<void> {
    if (this.pending.length === 0 || !this.owned) return
    const events = this.pending.splice(0, this.pending.length)
    this.pendingBytes = 0
    this.pendingIds.clear()
    const lines: string[] = []
    let previous: SessionEvent | undefined
    for (const e of events) {
      // The same event twice in a row (a retried webhook, a flapping alert) is read once.
      if (previous && previous.text === e.text && previous.source === e.source) continue
      lines.push(e.external ? wrapExternalContent(e.text, { source: e.source }) : e.text)
      previous = e
    }
    let reply = ''
    let error: string | undefined
    try {
      reply = await this.runner.runHeartbeat(this.agentId, lines.join('\n\n'))
    } catch (err) {
      error = (err as Error).message
    }
    // The events are out of the queue: whatever happens to the record, their wakes are settled, so
    // no acknowledged wake is left queued (a turn that cannot be recorded fails them, saying why).
    const record: SessionRecord = { type: 'turn', id: `turn:${events[0]!.id}`, at: new Date().toISOString(), events: events.map((e) => e.id), reply: clipText(reply, TURN_REPLY_MAX_CHARS), ...(error ? { error } : {}) }
    try {
      if (this.shared) await this.shared.commitTurn(this.agentId, record)
      else await this.journal.append(record)
    } catch (err) {
      // Another runtime took the session over while this turn ran: its turn reads these events
      // again and settles their wakes; this one's reply is not recorded, and nothing is settled here.
      if (err instanceof RunStoreError && err.code === 'fenced_out') return
      error = `could not be recorded (${(err as Error).message})`
    }
    await this.runner.settleWakes(events.map((e) => e.runId).filter(Boolean), error && `the heartbeat turn failed: ${error}`)
  }

  close(): Promise<void> {
    this.stop()
    return this.journal.close()
  }
}

/** A wake's run row as the event a turn reads (its request holds the text). */
export function wakeEvent(row: RunRow): SessionEvent {
  const event = row.request as { text?: unknown; external?: unknown; source?: unknown } | undefined
  return { type: 'event', id: `event:${row.id}`, runId: row.id, at: row.createdAt, text: typeof event?.text === 'string' ? event.text : '', external: event?.external !== false, source: typeof event?.source === 'string' ? event.source : 'hook' }
}
