// What hookgate counts, and the text `GET /metrics` answers with. Counters and histograms are
// process-wide (the journal's and run store's hooks are static; production runs one server per
// process); each server adds the gauges it reads when scraped: backlog, queued events, bundle.
//
// No label value here ever comes from a request: routes are mapping ids or fixed names, journals
// are named by kind, never by path; so the series count is bounded by the config.
import type { FlushEvent, RunAction, RunStatus } from '../store/store.js'
import { Registry, type Counter } from './metrics.js'

export { EXPOSITION_CONTENT_TYPE } from './metrics.js'

const registry = new Registry()

/** Seconds, from a fast answer written from memory to a slow body on a slow link. */
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
/** Seconds, from a write into the page cache to an fdatasync on a busy disk. */
const DISK_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

// ---- requests ------------------------------------------------------------------------------

const requests = registry.counter('hookgate_http_requests_total',
  'HTTP requests answered, by route (a mapping id, wake, agent, healthz, metrics, or unmatched when no route had been chosen) and status code',
  ['route', 'status'])
// Without labels: a histogram per route would multiply its series by the mapping count.
const requestSeconds = registry.histogram('hookgate_http_request_duration_seconds',
  'Time from a request\'s arrival to its answer being written, every route together', REQUEST_BUCKETS)

/** Route label of a request refused before any route was chosen. */
export const UNMATCHED = 'unmatched'

/** Hot path: two Map lookups and three additions. */
export function countRequest(route: string, status: number, seconds: number): void {
  requests.labels(route, status).inc()
  requestSeconds.observe(seconds)
}

// ---- auth ----------------------------------------------------------------------------------

const authFailures = registry.counter('hookgate_auth_failures_total',
  'Requests with a missing or wrong hook token, by the status they got: 401, or 429 while their client address is locked out',
  ['status'])
const lockouts = registry.counter('hookgate_auth_lockouts_total', 'Times a client address was locked out after too many auth failures')

export const authMetrics: { unauthorized: Counter; lockedOut: Counter; lockoutStarted: Counter } = {
  unauthorized: authFailures.labels(401),
  lockedOut: authFailures.labels(429),
  lockoutStarted: lockouts.labels(),
}

// ---- runs ----------------------------------------------------------------------------------

const runs = registry.counter('hookgate_runs_total',
  'Runs that entered each status, counted once the change is on disk (created runs count under the status they start in)',
  ['action', 'status'])
// Every pair exists from the start (at 0), so a rate over a status that has not happened yet works.
for (const action of ['wake', 'agent', 'workflow'] satisfies RunAction[]) {
  for (const status of ['queued', 'running', 'succeeded', 'failed', 'timed_out', 'skipped'] satisfies RunStatus[]) runs.labels(action, status)
}

// ---- reloads -------------------------------------------------------------------------------

const reloads = registry.counter('hookgate_bundle_reloads_total',
  'Bundle reloads (SIGHUP or a changed file), by outcome: reloaded, unchanged (same inputs hash) or refused (the old bundle kept serving)',
  ['outcome'])
const reloadOutcomes = { reloaded: reloads.labels('reloaded'), unchanged: reloads.labels('unchanged'), refused: reloads.labels('refused') }

export function countReload(outcome: keyof typeof reloadOutcomes): void {
  reloadOutcomes[outcome].inc()
}

// ---- transforms ----------------------------------------------------------------------------

const transformFailures = registry.counter('hookgate_transform_failures_total',
  'Mapping transforms that answered 500, by mapping id and reason: timeout, error (it threw) or invalid_output',
  ['mapping', 'reason'])
const TRANSFORM_REASONS: Readonly<Record<string, string>> = { transform_timeout: 'timeout', transform_failed: 'error', transform_invalid_output: 'invalid_output' }

/** `code`: the mapping outcome's error code (transform_timeout, transform_failed, transform_invalid_output). */
export function countTransformFailure(mappingId: string, code: string): void {
  transformFailures.labels(mappingId, TRANSFORM_REASONS[code] ?? 'error').inc()
}

// ---- journal -------------------------------------------------------------------------------

/** What the journal reports after each flush attempt (its write and fdatasync of one batch). */

const flushes = registry.counter('hookgate_journal_flushes_total',
  'Journal flushes (one write and one fdatasync for a batch of records), by journal (runs, session, isolated, other) and result (ok, failed)',
  ['journal', 'result'])
const flushedBytes = registry.counter('hookgate_journal_written_bytes_total', 'Bytes written by successful journal flushes, by journal', ['journal'])
const flushedRecords = registry.counter('hookgate_journal_records_total', 'Records written by successful journal flushes, by journal', ['journal'])
const writeSeconds = registry.histogram('hookgate_journal_write_seconds', 'Time one journal flush spent writing its batch, every journal together', DISK_BUCKETS)
const fsyncSeconds = registry.histogram('hookgate_journal_fsync_seconds', 'Time one journal flush spent in fdatasync, every journal together', DISK_BUCKETS)

interface JournalCounters { ok: Counter; failed: Counter; bytes: Counter; records: Counter }
/** per journal file: one Map lookup per flush, the kind worked out once */
const journals = new Map<string, JournalCounters>()

/** The kind of journal a file is, from its name: a path is never a label (it names agents). */
function journalKind(path: string): string {
  if (path.endsWith('/runs.jsonl') || path.endsWith('\\runs.jsonl')) return 'runs'
  if (path.endsWith('main.jsonl')) return 'session'
  if (path.endsWith('isolated.jsonl')) return 'isolated'
  return 'other'
}

export function observeFlush(e: FlushEvent): void {
  let c = journals.get(e.path)
  if (!c) {
    const kind = journalKind(e.path)
    c = { ok: flushes.labels(kind, 'ok'), failed: flushes.labels(kind, 'failed'), bytes: flushedBytes.labels(kind), records: flushedRecords.labels(kind) }
    journals.set(e.path, c)
  }
  writeSeconds.observe(e.writeSeconds)
  // a flush whose write failed never reached fdatasync
  if (e.ok || e.fsyncSeconds > 0) fsyncSeconds.observe(e.fsyncSeconds)
  if (e.ok) {
    c.ok.inc()
    c.bytes.inc(e.bytes)
    c.records.inc(e.records)
  } else {
    c.failed.inc()
  }
}

// ---- process -------------------------------------------------------------------------------

registry.gauge('process_resident_memory_bytes', 'Resident memory size in bytes', [], () => process.memoryUsage.rss())
registry.gauge('process_start_time_seconds', 'Start time of the process since the Unix epoch in seconds', [], () => Math.round(performance.timeOrigin) / 1000)
registry.counterReading('process_cpu_seconds_total', 'User and system CPU time spent in seconds', () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
})

/**
 * What the journal's and the run store's hooks are pointed at (runtime/serve/service.ts, through
 * the store's observeStore; again is harmless): a write's flush, and a run's status made durable.
 */
export const storeMetricHooks = {
  onFlush: observeFlush,
  onDurable: (action: RunAction, status: RunStatus): void => { runs.labels(action, status).inc() },
}

// ---- one server's view ---------------------------------------------------------------------

/** What a server shows of itself when scraped, read at that moment. */
export interface ServerReadings {
  /** accepted agent and workflow runs not finished yet */
  backlog(): number
  /** the backlog past which new runs get 503 */
  backlogLimit(): number
  /** what the backlog's runs hold in memory, in bytes */
  backlogBytes(): number
  /** the bytes past which new runs get 503 */
  backlogLimitBytes(): number
  queuedEvents(): Iterable<[agentId: string, events: number]>
  bundle(): { inputsHash: string; compilerVersion: string }
}

/** The exposition text of one server: the process-wide families, then its own gauges. */
export function metricsRenderer(server: ServerReadings): () => string {
  const own = new Registry()
  own.gauge('hookgate_backlog_runs', 'Accepted agent and workflow runs that have not finished yet', [], () => server.backlog())
  own.gauge('hookgate_backlog_limit_runs', 'The backlog past which new agent and workflow runs are refused with 503 (server.maxPendingRuns)', [], () => server.backlogLimit())
  own.gauge('hookgate_backlog_bytes', 'What the accepted agent and workflow runs not finished yet hold in memory (their requests), in bytes', [], () => server.backlogBytes())
  own.gauge('hookgate_backlog_limit_bytes', 'The bytes past which new agent and workflow runs are refused with 503 (server.maxPendingBytes)', [], () => server.backlogLimitBytes())
  own.gauge('hookgate_queued_events', 'System events waiting for their agent\'s next heartbeat turn, by agent', ['agent'], () => {
    const out: Array<[string[], number]> = []
    for (const [agentId, n] of server.queuedEvents()) out.push([[agentId], n])
    return out
  })
  own.gauge('hookgate_bundle_info', 'The bundle being served: its inputs hash and the compiler version that built it (always 1)', ['inputs_hash', 'compiler_version'], () => {
    const b = server.bundle()
    return [[[b.inputsHash, b.compilerVersion], 1]]
  })
  return () => registry.render() + own.render()
}
