// `hookgate rejects [--state DIR] [--json] [--limit N] [--since DURATION]`: refused requests and why,
// newest first. Reads the log without opening it for writing, so it works while a server holds the
// state; a missing log is an empty answer. The table or the JSON array goes to stdout, the summary
// and warnings to stderr.
import { getCommand, readCommandArgs, usageLine, processIO } from './commands.js'
import { parseDuration } from '../runtime/observe/clock.js'
import type { RejectRecord } from '../runtime/store/store.js'
import { clipCell, historyAt, printable, storeFlagOk, type CommandIO } from './runs.js'

export const REJECTS_USAGE = usageLine(getCommand('rejects'))
export const DEFAULT_REJECTS_LIMIT = 50

const EXIT = { ok: 0, failed: 1, usage: 2 } as const
const PATH_MAX = 48
const CLIENT_MAX = 40


export async function rejectsCommand(argv: string[], defaults: { stateDir: string; now?: () => number }, io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs('rejects', argv, io)
  if (parsed.kind !== 'ok') return parsed.exit!
  const values = parsed.values as { state?: string; store?: string; json?: boolean; limit?: string; since?: string }
  let limit = DEFAULT_REJECTS_LIMIT
  if (values.limit !== undefined) {
    if (!/^[1-9][0-9]*$/.test(values.limit)) {
      io.stderr(`hookgate rejects: --limit takes a whole number of at least 1, not "${values.limit}"\n${REJECTS_USAGE}\n`)
      return EXIT.usage
    }
    limit = Number(values.limit)
  }
  let sinceMs: number | undefined
  if (values.since !== undefined) {
    sinceMs = parseDuration(values.since)
    if (sinceMs === undefined) {
      io.stderr(`hookgate rejects: --since takes a duration such as 90s, 15m, 2h or 7d, not "${values.since}"\n${REJECTS_USAGE}\n`)
      return EXIT.usage
    }
  }
  if (values.state === '') {
    io.stderr(`hookgate rejects: --state needs a directory\n${REJECTS_USAGE}\n`)
    return EXIT.usage
  }
  const stateDir = values.state ?? defaults.stateDir

  if (!storeFlagOk('rejects', values.store, io)) return EXIT.usage
  let log
  const reader = historyAt(stateDir, values.store)
  try {
    log = await reader.rejects()
  } catch (err) {
    io.stderr(`hookgate rejects: cannot read the rejected-request log in ${reader.where}: ${(err as Error).message}\n`)
    return EXIT.failed
  } finally {
    await reader.close().catch(() => {})
  }
  if (log.corrupt > 0) io.stderr(`hookgate rejects: warning: skipped ${log.corrupt} unreadable ${log.corrupt === 1 ? 'line' : 'lines'}\n`)
  let records = log.records
  if (sinceMs !== undefined) {
    const from = (defaults.now ?? Date.now)() - sinceMs
    records = records.filter((r) => Date.parse(r.lastAt) >= from)
  }
  const shown = records.slice(0, limit)
  if (values.json) {
    io.stdout(`${JSON.stringify(shown, null, 2)}\n`)
    return EXIT.ok
  }
  if (records.length === 0) {
    io.stderr(`no refused requests recorded${sinceMs !== undefined ? ` in the last ${values.since}` : ''}\n`)
    return EXIT.ok
  }
  io.stdout(formatRejects(shown))
  const total = records.reduce((n, r) => n + r.count, 0)
  io.stderr(`${total} refused ${total === 1 ? 'request' : 'requests'} in ${records.length} ${records.length === 1 ? 'record' : 'records'}${shown.length < records.length ? `; showing the newest ${shown.length}` : ''}\n`)
  return EXIT.ok
}

/** One aligned line per record under a header; paths and addresses come from the network, so every cell is made printable. */
export function formatRejects(records: readonly RejectRecord[]): string {
  const header = ['LAST SEEN', 'COUNT', 'STATUS', 'CODE', 'CLIENT', 'METHOD', 'PATH']
  const lines = records.map((r) => [
    r.lastAt,
    String(r.count),
    String(r.status),
    r.code,
    clipCell(r.client, CLIENT_MAX),
    r.method,
    clipCell(r.path === '' ? '-' : r.path, PATH_MAX),
  ].map(printable))
  const all = [header, ...lines]
  const widths = header.map((_, i) => Math.max(...all.map((cells) => cells[i]!.length)))
  return all.map((cells) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd() + '\n').join('')
}
