// The run history as the operator page reads it, through the store's history reader (the runtime's
// own files in the state directory for the file store), read (never written) and parsed again only
// when it changed. A query filters and pages the rows
// newest first; a run's detail adds its steps, the runs under its correlation id, its replays and
// the deliveries of its reply; `changes` lets the page wait for new rows instead of polling. The
// filters and the related runs are the ones `hookgate runs` uses (runtime/store/history-query.ts);
// the deliveries are read as the engine wrote them (runtime/agents/transcripts.ts).
import { existsSync, watch, type FSWatcher } from 'node:fs'
import { openHistory } from '../runtime/store/open.js'
import { filterRuns, runRelations } from '../runtime/store/history-query.js'
import type { HistoryReader, RunRow } from '../runtime/store/store.js'
import { deliveriesOf, type Delivery } from '../runtime/agents/transcripts.js'

export interface RunQuery {
  kind?: string
  status?: string[]
  definition?: string
  /** ISO-8601: only runs created at or after */
  since?: string
  /** ISO-8601: only runs created before */
  until?: string
  page?: number
  limit?: number
}

export interface RunPage {
  rows: RunSummary[]
  page: number
  pages: number
  total: number
  version: string
}

/**
 * The columns of the history table: the row's own, and `durationMs`, from its start (its creation
 * when it never started) to its end, for a finished run.
 */
export type RunSummary = Pick<RunRow, 'id' | 'definitionKind' | 'definitionId' | 'correlationId' | 'action' | 'status' | 'createdAt' | 'updatedAt' | 'startedAt' | 'finishedAt' | 'name' | 'error' | 'agentId' | 'replayOf' | 'parentRunId' | 'stepId' | 'scheduledFor'> & { durationMs?: number }

export interface RunDetail {
  run: RunRow
  steps: RunSummary[]
  correlated: RunSummary[]
  replays: RunSummary[]
  deliveries: Delivery[]
}

const SUMMARY_KEYS = ['id', 'definitionKind', 'definitionId', 'correlationId', 'action', 'status', 'createdAt', 'updatedAt', 'startedAt', 'finishedAt', 'name', 'error', 'agentId', 'replayOf', 'parentRunId', 'stepId', 'scheduledFor'] as const
/** Kept on disk for resume and replay: the page shows `received` (headers redacted when stored) instead. */
const HIDDEN = new Set(['request', 'requestBlob', 'receivedBlob', 'outputBlob', 'idempotency', 'response'])

export function summary(row: RunRow): RunSummary {
  const out: Record<string, unknown> = {}
  for (const k of SUMMARY_KEYS) if (row[k] !== undefined) out[k] = row[k]
  const duration = durationOf(row)
  if (duration !== undefined) out.durationMs = duration
  return out as RunSummary
}

/** How long a finished run took, in ms: from its start (or its creation, when it never started: a skip, a refusal) to its end. */
export function durationOf(row: Pick<RunRow, 'createdAt' | 'startedAt' | 'finishedAt'>): number | undefined {
  if (!row.finishedAt) return undefined
  const ms = Date.parse(row.finishedAt) - Date.parse(row.startedAt ?? row.createdAt)
  return Number.isFinite(ms) && ms >= 0 ? ms : undefined
}

export class History {
  private cached: { version: string; rows: RunRow[] } | undefined
  private readonly waiters = new Set<() => void>()
  private watcher: FSWatcher | undefined
  private poll: NodeJS.Timeout | undefined
  private lastVersion = ''

  private readonly reader: HistoryReader

  /** `stateDir`: also watched, so that a change is seen at once rather than at the next poll; `store`: a PostgreSQL store to read instead. */
  constructor(readonly stateDir: string, store?: string) {
    this.reader = openHistory(stateDir, store)
  }

  /** Changes with every append and every compaction. */
  version(): Promise<string> {
    return this.reader.version()
  }

  async rows(): Promise<RunRow[]> {
    const version = await this.version()
    if (this.cached?.version === version) return this.cached.rows
    const rows = (await this.reader.read()).rows
    this.cached = { version, rows }
    return rows
  }

  async query(q: RunQuery): Promise<RunPage> {
    const version = await this.version()
    const since = q.since ? Date.parse(q.since) : NaN
    const until = q.until ? Date.parse(q.until) : NaN
    const matching = filterRuns(await this.rows(), {
      ...(q.kind ? { kind: q.kind } : {}),
      status: q.status?.filter(Boolean) ?? [],
      ...(q.definition ? { definition: q.definition } : {}),
      ...(Number.isNaN(since) ? {} : { from: since }),
      ...(Number.isNaN(until) ? {} : { until }),
    })
    // from a query string: anything but a whole number is the default
    const whole = (n: number | undefined, fallback: number) => (n !== undefined && Number.isFinite(n) ? Math.trunc(n) : fallback)
    const limit = Math.min(Math.max(1, whole(q.limit, 25)), 200)
    const pages = Math.max(1, Math.ceil(matching.length / limit))
    const page = Math.min(Math.max(1, whole(q.page, 1)), pages)
    return { rows: matching.slice((page - 1) * limit, page * limit).map(summary), page, pages, total: matching.length, version }
  }

  /** The newest run of each definition id. */
  async lastRuns(): Promise<Map<string, RunSummary>> {
    const last = new Map<string, RunSummary>()
    for (const r of await this.rows()) if (!r.parentRunId && !last.has(r.definitionId)) last.set(r.definitionId, summary(r))
    return last
  }

  async detail(id: string): Promise<RunDetail | undefined> {
    const related = runRelations(await this.rows(), id)
    if (!related) return undefined
    const run: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(related.run)) if (!HIDDEN.has(k)) run[k] = v
    const duration = durationOf(related.run)
    if (duration !== undefined) run.durationMs = duration
    const received = await this.reader.received(related.run)
    if (received !== undefined) run.received = received
    return {
      run: run as unknown as RunRow,
      steps: related.steps.map(summary),
      correlated: related.correlated.map(summary),
      replays: related.replays.map(summary),
      deliveries: await deliveriesOf(this.reader, id),
    }
  }

  /** Resolves with the new version once the history changes from `after`, or after `ms` with the same one. */
  async changes(after: string, ms: number): Promise<string> {
    const now = await this.version()
    if (now !== after) return now
    await this.startWatching()
    return new Promise((resolveWait) => {
      const done = () => {
        clearTimeout(timer)
        this.waiters.delete(done)
        resolveWait(this.version())
      }
      const timer = setTimeout(done, ms)
      this.waiters.add(done)
    })
  }

  private async startWatching(): Promise<void> {
    if (this.poll) return
    const check = async (): Promise<void> => {
      const v = await this.version()
      if (v === this.lastVersion) return
      this.lastVersion = v
      for (const w of [...this.waiters]) w()
    }
    this.poll = setInterval(() => void check(), 1000)
    this.poll.unref()
    this.lastVersion = await this.version()
    // fs.watch tells at once where it can; the poll covers a state directory created later and
    // file systems without notifications.
    try {
      if (existsSync(this.stateDir)) this.watcher = watch(this.stateDir, () => void check())
      this.watcher?.unref()
    } catch { /* polling alone */ }
  }

  close(): void {
    void this.reader.close()
    this.watcher?.close()
    clearInterval(this.poll)
    for (const w of [...this.waiters]) w()
  }
}
