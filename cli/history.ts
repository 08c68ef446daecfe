// The run history as the CLI reads and prints it (runs, runs show, runs replay, rejects, tasks): the
// reader of the state directory or of a PostgreSQL store (--store), read without opening it for
// writing, so it works while a server holds it; a missing state directory is an empty history.
// What cannot be read is said on stderr, never thrown. The table, the row and the summary a
// terminal shows; every cell made printable, since names and errors can come from payloads.
import { isPostgresUrl, openHistory } from '../runtime/store/open.js'
import type { HistoryReader, RunHistory, RunRow, RunStatus } from '../runtime/store/store.js'
import type { CommandIO } from './flags.js'

const NAME_MAX = 40
const ERROR_MAX = 60
/** the order statuses appear in the summary line, and the statuses --status takes */
export const RUN_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'timed_out', 'skipped', 'running', 'queued']

/** The history a CLI reads: the PostgreSQL store's when `store` names one, else the state directory's. */
export function historyAt(stateDir: string, store?: string): HistoryReader {
  return openHistory(stateDir, store)
}

/** The history, or undefined after saying on stderr why it cannot be read. */
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

/** readHistory, then the reader closed (a database reader holds a connection that would keep the process alive). */
export async function readAll(command: string, reader: HistoryReader, io: CommandIO): Promise<RunHistory | undefined> {
  try {
    return await readHistory(command, reader, io)
  } finally {
    await reader.close().catch(() => {})
  }
}

/** --store: a postgres:// URL or nothing; says why not on stderr. */
export function storeFlagOk(command: string, store: string | undefined, io: CommandIO, otherwise = 'without it the state directory is read'): boolean {
  if (store === undefined || isPostgresUrl(store)) return true
  io.stderr(`hookgate ${command}: --store takes a postgres:// (or postgresql://) URL; ${otherwise}\n`)
  return false
}

/** Fields too large or too raw for the text view; --json shows them. */
const TEXT_HIDDEN = new Set(['request', 'requestBlob', 'received', 'receivedBlob', 'receivedIn', 'response', 'idempotency'])

/** One `field  value` line per field of the row; objects and lists (deliveries, notifications) as one JSON line each. */
export function formatRow(row: RunRow, storedRequest?: boolean): string {
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
  // a store that keeps the request beside the row (PostgreSQL) says so through its reader: storedRequest
  const stored = storedRequest ?? (row.received !== undefined || row.receivedBlob !== undefined || row.receivedIn !== undefined)
  lines.push(`${'replay'.padEnd(width)}  ${stored ? `hookgate runs replay ${row.id}` : 'no stored request'}`)
  return lines.join('\n') + '\n'
}

/** One aligned line per run under a header; every cell is stripped of control characters. */
export function formatTable(rows: readonly RunRow[]): string {
  return alignedTable(['CREATED', 'ID', 'KIND', 'ACTION', 'STATUS', 'NAME', 'ERROR'], rows.map((r) => [
    r.createdAt,
    r.id,
    r.definitionKind,
    r.action,
    r.status,
    clipCell(r.name || r.definitionId, NAME_MAX),
    clipCell(r.error ?? '', ERROR_MAX),
  ]))
}

/** Cells under a header, each column as wide as its widest cell; the last column is not padded. */
export function alignedTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const all = [header, ...rows.map((cells) => cells.map(printable))]
  const widths = header.map((_, i) => Math.max(...all.map((cells) => cells[i]!.length)))
  return all.map((cells) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd() + '\n').join('')
}

/** `12 runs (10 succeeded, 1 failed, 1 queued)` */
export function summarise(rows: readonly RunRow[]): string {
  const counts = new Map<RunStatus, number>()
  for (const r of rows) counts.set(r.status, (counts.get(r.status) ?? 0) + 1)
  const parts = RUN_STATUSES.filter((s) => counts.has(s)).map((s) => `${counts.get(s)} ${s}`)
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
