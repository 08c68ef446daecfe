// `hookgate runs [--state DIR] [--json] [--limit N]`: the run history, newest first. Reads the file
// without opening it for writing, so it works while a server holds it. Machine output (the table
// or the JSON array) goes to stdout; the summary and warnings go to stderr.
import { existsSync } from 'node:fs'
import { getCommand, readCommandArgs, usageLine } from '../commands.js'
import { RUNS_FILE, RunStore, type RunRow, type RunStatus } from './runs.js'
import { join } from 'node:path'

export const RUNS_USAGE = usageLine(getCommand('runs'))
export const DEFAULT_RUNS_LIMIT = 50

const EXIT = { ok: 0, failed: 1, usage: 2 } as const
const NAME_MAX = 40
const ERROR_MAX = 60
/** the order statuses appear in the summary line */
const SUMMARY_ORDER: readonly RunStatus[] = ['succeeded', 'failed', 'timed_out', 'skipped', 'running', 'queued']

export interface CommandIO {
  stdout: (text: string) => void
  stderr: (text: string) => void
}

const processIO: CommandIO = {
  stdout: (text) => { process.stdout.write(text) },
  stderr: (text) => { process.stderr.write(text) },
}

export async function runsCommand(argv: string[], defaults: { stateDir: string }, io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs('runs', argv, io)
  if (parsed.kind !== 'ok') return parsed.exit!
  const values = parsed.values as { state?: string; json?: boolean; limit?: string }
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

  if (!existsSync(stateDir)) {
    if (values.json) io.stdout('[]\n')
    io.stderr(`no runs yet (state directory ${stateDir} does not exist)\n`)
    return EXIT.ok
  }
  let history
  try {
    history = RunStore.readHistory(stateDir)
  } catch (err) {
    io.stderr(`hookgate runs: cannot read ${join(stateDir, RUNS_FILE)}: ${(err as Error).message}\n`)
    return EXIT.failed
  }
  if (history.corrupt > 0) {
    io.stderr(`hookgate runs: warning: skipped ${history.corrupt} unreadable ${history.corrupt === 1 ? 'line' : 'lines'} in ${join(stateDir, RUNS_FILE)}\n`)
  }
  const shown = history.rows.slice(0, limit)
  if (values.json) {
    io.stdout(`${JSON.stringify(shown, null, 2)}\n`)
    return EXIT.ok
  }
  if (history.rows.length === 0) {
    io.stderr('no runs yet\n')
    return EXIT.ok
  }
  io.stdout(formatTable(shown))
  io.stderr(`${summarise(history.rows)}${shown.length < history.rows.length ? `; showing the newest ${shown.length}` : ''}\n`)
  return EXIT.ok
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
