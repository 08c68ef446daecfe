// `hookgate runs [--state DIR] [--json] [--limit N] [filters]`: the run history, newest first, and
// `hookgate runs show RUN_ID`: one run with its steps and the runs related to it. Both read the file
// without opening it for writing, so they work while a server holds it. Machine output (the table
// or the JSON) goes to stdout; the summary and warnings go to stderr.
import { existsSync } from 'node:fs'
import { getCommand, readCommandArgs, usageLine, processIO } from './commands.js'
import { isPostgresUrl, openHistory } from '../runtime/store/open.js'
import type { DefinitionKind, HistoryReader, RunHistory, RunRow, RunStatus } from '../runtime/store/store.js'
import { parseDuration } from '../runtime/observe/clock.js'

export const RUNS_USAGE = usageLine(getCommand('runs'))
export const RUNS_SHOW_USAGE = usageLine(getCommand('runs show'))
export const DEFAULT_RUNS_LIMIT = 50

const EXIT = { ok: 0, failed: 1, usage: 2 } as const
const NAME_MAX = 40
const ERROR_MAX = 60
/** the order statuses appear in the summary line */
const SUMMARY_ORDER: readonly RunStatus[] = ['succeeded', 'failed', 'timed_out', 'skipped', 'running', 'queued']
const KINDS: readonly DefinitionKind[] = ['hook', 'trigger', 'task']

export interface CommandIO {
  stdout: (text: string) => void
  stderr: (text: string) => void
}


export async function runsCommand(argv: string[], defaults: { stateDir: string; now?: () => number }, io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs('runs', argv, io)
  if (parsed.kind !== 'ok') return parsed.exit!
  const values = parsed.values as { state?: string; store?: string; json?: boolean; limit?: string; kind?: string; status: string[]; definition?: string; since?: string }
  if (!storeFlagOk('runs', values.store, io)) return EXIT.usage
  let limit = DEFAULT_RUNS_LIMIT
  if (values.limit !== undefined) {
    if (!/^[1-9][0-9]*$/.test(values.limit)) {
      io.stderr(`hookgate runs: --limit takes a whole number of at least 1, not "${values.limit}"\n${RUNS_USAGE}\n`)
      return EXIT.usage
    }
    limit = Number(values.limit)
  }
  const stateDir = values.state ?? defaults.stateDir
  if (values.state === '') {
    io.stderr(`hookgate runs: --state needs a directory\n${RUNS_USAGE}\n`)
    return EXIT.usage
  }
  const filter = readFilter(values, defaults.now ?? Date.now)
  if (typeof filter === 'string') {
    io.stderr(`hookgate runs: ${filter}\n${RUNS_USAGE}\n`)
    return EXIT.usage
  }

  if (values.store === undefined && !existsSync(stateDir)) {
    if (values.json) io.stdout('[]\n')
    io.stderr(`no runs yet (state directory ${stateDir} does not exist)\n`)
    return EXIT.ok
  }
  const history = await readAll('runs', historyAt(stateDir, values.store), io)
  if (!history) return EXIT.failed
  const rows = filter ? history.rows.filter(filter) : history.rows
  const shown = rows.slice(0, limit)
  if (values.json) {
    io.stdout(`${JSON.stringify(shown, null, 2)}\n`)
    return EXIT.ok
  }
  if (rows.length === 0) {
    io.stderr(history.rows.length === 0 ? 'no runs yet\n' : `no runs match the filters (of ${history.rows.length} in the history)\n`)
    return EXIT.ok
  }
  io.stdout(formatTable(shown))
  io.stderr(`${summarise(rows)}${filter ? ' matching the filters' : ''}${shown.length < rows.length ? `; showing the newest ${shown.length}` : ''}\n`)
  return EXIT.ok
}

/** The filters as one predicate (undefined when none is given), or what is wrong with one. */
function readFilter(values: { kind?: string; status: string[]; definition?: string; since?: string }, now: () => number): ((row: RunRow) => boolean) | undefined | string {
  const tests: Array<(row: RunRow) => boolean> = []
  if (values.kind !== undefined) {
    const kind = values.kind
    if (!KINDS.includes(kind as DefinitionKind)) return `--kind takes hook, trigger or task, not "${kind}"`
    tests.push((r) => r.definitionKind === kind)
  }
  if (values.status.length > 0) {
    const wanted = new Set(values.status.flatMap((s) => s.split(',')).map((s) => s.trim()))
    for (const s of wanted) if (!SUMMARY_ORDER.includes(s as RunStatus)) return `--status takes ${SUMMARY_ORDER.join(', ')}, not "${s}"`
    tests.push((r) => wanted.has(r.status))
  }
  if (values.definition !== undefined) {
    const id = values.definition
    if (id === '') return '--definition needs an id'
    tests.push((r) => r.definitionId === id)
  }
  if (values.since !== undefined) {
    const ms = parseDuration(values.since)
    if (ms === undefined) return `--since takes a duration such as 90s, 15m, 2h or 7d, not "${values.since}"`
    const from = now() - ms
    tests.push((r) => Date.parse(r.createdAt) >= from)
  }
  if (tests.length === 0) return undefined
  return (row) => tests.every((t) => t(row))
}

/** The history, or undefined after saying on stderr why it cannot be read; a missing state directory is an empty history. */
export async function readHistory(command: string, reader: HistoryReader, io: CommandIO): Promise<RunHistory | undefined> {
  let history
  try {
    history = await reader.read()
  } catch (err) {
    io.stderr(`hookgate ${command}: cannot read ${reader.where}: ${(err as Error).message}\n`)
    return undefined
  }
  if (history.corrupt > 0) {
    io.stderr(`hookgate ${command}: warning: skipped ${history.corrupt} unreadable ${history.corrupt === 1 ? 'line' : 'lines'} in ${reader.where}\n`)
  }
  return history
}

/** The history a CLI reads: the PostgreSQL store's when `store` names one, else the state directory's (a missing one is an empty history). */
export function historyAt(stateDir: string, store?: string): HistoryReader {
  return openHistory(stateDir, store)
}

/** readHistory, then the reader closed (a database reader holds a connection that would keep the process alive). */
export async function readAll(command: string, reader: HistoryReader, io: CommandIO): Promise<RunHistory | undefined> {
  try {
    return await readHistory(command, reader, io)
  } finally {
    await reader.close().catch(() => {})
  }
}

/** --store: a postgres:// URL or nothing; says why not on stderr. */
export function storeFlagOk(command: string, store: string | undefined, io: CommandIO): boolean {
  if (store === undefined || isPostgresUrl(store)) return true
  io.stderr(`hookgate ${command}: --store takes a postgres:// (or postgresql://) URL; without it the state directory is read\n`)
  return false
}

/** A step row of a workflow run names its run in `parentRunId` (written by the workflow runner). */
type MaybeStep = RunRow & { parentRunId?: string }

/**
 * `hookgate runs show RUN_ID`: the row (every field, deliveries and notifications included when the
 * row has them), its steps, the other runs under its correlation id, and the runs replaying it.
 */
export async function runsShowCommand(argv: string[], defaults: { stateDir: string }, io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs('runs show', argv, io)
  if (parsed.kind !== 'ok') return parsed.exit!
  const values = parsed.values as { state?: string; store?: string; json?: boolean }
  if (parsed.positionals.length !== 1 || parsed.positionals[0] === '') {
    io.stderr(`hookgate runs show: name one run id\n${RUNS_SHOW_USAGE}\n`)
    return EXIT.usage
  }
  if (!storeFlagOk('runs show', values.store, io)) return EXIT.usage
  const id = parsed.positionals[0]!
  const stateDir = values.state || defaults.stateDir
  const reader = historyAt(stateDir, values.store)
  try {
    return await showRun(id, reader, values.json === true, io)
  } finally {
    await reader.close().catch(() => {})
  }
}

async function showRun(id: string, reader: HistoryReader, json: boolean, io: CommandIO): Promise<number> {
  const history = await readHistory('runs show', reader, io)
  if (!history) return EXIT.failed
  const row = history.rows.find((r) => r.id === id)
  if (!row) {
    io.stderr(`hookgate runs show: no run with id ${printable(id)} in ${reader.where}\n`)
    return EXIT.failed
  }
  // oldest first: the order the steps and siblings happened in
  const oldestFirst = [...history.rows].reverse()
  const steps = oldestFirst.filter((r) => (r as MaybeStep).parentRunId === id)
  const stepIds = new Set(steps.map((r) => r.id))
  const correlated = oldestFirst.filter((r) => r.correlationId === row.correlationId && r.id !== id && !stepIds.has(r.id))
  const replays = oldestFirst.filter((r) => r.replayOf === id)
  if (json) {
    const received = await reader.received(row)
    const full = received !== undefined && row.received === undefined ? { ...row, received } : row
    // the request is shown where it is read, whichever row keeps it
    if (full !== row) delete (full as RunRow).receivedIn
    io.stdout(`${JSON.stringify({ run: full, steps, correlated, replays }, null, 2)}\n`)
    return EXIT.ok
  }
  io.stdout(formatRow(row))
  for (const [title, rows] of [['steps', steps], ['same correlation id', correlated], ['replays', replays]] as const) {
    if (rows.length > 0) io.stdout(`\n${title}:\n${formatTable(rows)}`)
  }
  return EXIT.ok
}

/** Fields too large or too raw for the text view; --json shows them. */
const TEXT_HIDDEN = new Set(['request', 'requestBlob', 'received', 'receivedBlob', 'receivedIn', 'response', 'idempotency'])

/** One `field  value` line per field of the row; objects and lists (deliveries, notifications) as one JSON line each. */
export function formatRow(row: RunRow): string {
  const entries = Object.entries(row).filter(([k, v]) => v !== undefined && !TEXT_HIDDEN.has(k))
  const width = Math.max(...entries.map(([k]) => k.length))
  const lines: string[] = []
  for (const [k, v] of entries) {
    if (Array.isArray(v)) {
      lines.push(`${k.padEnd(width)}  ${v.length === 0 ? '-' : ''}`.trimEnd())
      for (const item of v) lines.push(`  - ${printable(typeof item === 'string' ? item : JSON.stringify(item))}`)
    } else {
      lines.push(`${k.padEnd(width)}  ${printable(typeof v === 'string' ? v : JSON.stringify(v))}`)
    }
  }
  const stored = row.received !== undefined || row.receivedBlob !== undefined || row.receivedIn !== undefined
  lines.push(`${'replay'.padEnd(width)}  ${stored ? `hookgate runs replay ${row.id}` : 'no stored request'}`)
  return lines.join('\n') + '\n'
}

/** One aligned line per run under a header; every cell is stripped of control characters. */
export function formatTable(rows: readonly RunRow[]): string {
  const header = ['CREATED', 'ID', 'KIND', 'ACTION', 'STATUS', 'NAME', 'ERROR']
  const lines = rows.map((r) => [
    r.createdAt,
    r.id,
    r.definitionKind,
    r.action,
    r.status,
    clipCell(r.name || r.definitionId, NAME_MAX),
    clipCell(r.error ?? '', ERROR_MAX),
  ].map(printable))
  const all = [header, ...lines]
  const widths = header.map((_, i) => Math.max(...all.map((cells) => cells[i]!.length)))
  return all.map((cells) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd() + '\n').join('')
}

/** `12 runs (10 succeeded, 1 failed, 1 queued)` */
export function summarise(rows: readonly RunRow[]): string {
  const counts = new Map<RunStatus, number>()
  for (const r of rows) counts.set(r.status, (counts.get(r.status) ?? 0) + 1)
  const parts = SUMMARY_ORDER.filter((s) => counts.has(s)).map((s) => `${counts.get(s)} ${s}`)
  return `${rows.length} ${rows.length === 1 ? 'run' : 'runs'}${parts.length ? ` (${parts.join(', ')})` : ''}`
}

/** Run names and errors can come from webhook payloads: never let them drive the terminal. */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return String(text).replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]/g, ' ')
}

export function clipCell(text: string, max: number): string {
  const chars = Array.from(text)
  return chars.length <= max ? text : chars.slice(0, max - 1).join('') + '…'
}
