// `hookgate rejects [--state DIR] [--json] [--limit N] [--since DURATION]`: refused requests and why,
// newest first. Reads the log without opening it for writing, so it works while a server holds the
// state; a missing log is an empty answer. The table or the JSON array goes to stdout, the summary
// and warnings to stderr.
import { ExitCode } from '../exit-codes.js'
import { parseDuration } from '../../runtime/observe/clock.js'
import { DEFAULT_STATE_DIR, HISTORY_FLAGS, jsonFlag, processIO, readCommandArgs, usageLine, wholeNumber, type CommandIO, type CommandSpec, type VerbContext } from '../flags.js'
import { alignedTable, clipCell, historyAt, storeFlagOk } from '../history.js'
import type { RejectRecord } from '../../runtime/store/store.js'

export const DEFAULT_REJECTS_LIMIT = 50
const PATH_MAX = 48
const CLIENT_MAX = 40

export const spec: CommandSpec = {
  name: 'rejects',
  readsState: true,
  args: '',
  summary: 'show refused requests and why (status, reason code, client, path), newest first',
  flags: [
    ...HISTORY_FLAGS,
    jsonFlag('the records as a JSON array'),
    { name: 'limit', value: 'N', default: String(DEFAULT_REJECTS_LIMIT), description: 'show at most the newest N records' },
    { name: 'since', value: 'DURATION', description: 'only records seen within this long, e.g. 90s, 15m, 2h, 7d' },
  ],
  notes: [
    'identical refusals (same client, path, status and code) within one minute are one record with a count;',
    'the count of the current minute is written when the minute closes or the server stops',
  ],
}

export const REJECTS_USAGE = usageLine(spec)

export async function run(argv: string[], io: CommandIO = processIO, context: VerbContext & { stateDir?: string } = {}): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const values = parsed.values as { state?: string; store?: string; json?: boolean; limit: string; since?: string }
  const limit = wholeNumber(values.limit)
  if (limit === undefined) {
    io.stderr(`hookgate rejects: --limit takes a whole number of at least 1, not "${values.limit}"\n${REJECTS_USAGE}\n`)
    return ExitCode.usage
  }
  let since: number | undefined
  if (values.since !== undefined) {
    since = parseDuration(values.since)
    if (since === undefined) {
      io.stderr(`hookgate rejects: --since takes a duration such as 90s, 15m, 2h or 7d, not "${values.since}"\n${REJECTS_USAGE}\n`)
      return ExitCode.usage
    }
  }
  if (values.state === '') {
    io.stderr(`hookgate rejects: --state needs a directory\n${REJECTS_USAGE}\n`)
    return ExitCode.usage
  }
  const stateDir = values.state ?? context.stateDir ?? DEFAULT_STATE_DIR

  if (!storeFlagOk('rejects', values.store, io)) return ExitCode.usage
  let log
  const reader = historyAt(stateDir, values.store)
  try {
    log = await reader.rejects()
  } catch (err) {
    io.stderr(`hookgate rejects: cannot read the rejected-request log in ${reader.where}: ${(err as Error).message}\n`)
    return ExitCode.refused
  } finally {
    await reader.close().catch(() => {})
  }
  if (log.corrupt > 0) io.stderr(`hookgate rejects: warning: skipped ${log.corrupt} unreadable ${log.corrupt === 1 ? 'line' : 'lines'}\n`)
  let records = log.records
  if (since !== undefined) {
    const from = (context.now ?? Date.now)() - since
    records = records.filter((r) => Date.parse(r.lastAt) >= from)
  }
  const shown = records.slice(0, limit)
  if (values.json) {
    io.stdout(`${JSON.stringify(shown, null, 2)}\n`)
    return ExitCode.ok
  }
  if (records.length === 0) {
    io.stderr(`no refused requests recorded${since !== undefined ? ` in the last ${values.since}` : ''}\n`)
    return ExitCode.ok
  }
  io.stdout(formatRejects(shown))
  const total = records.reduce((n, r) => n + r.count, 0)
  io.stderr(`${total} refused ${total === 1 ? 'request' : 'requests'} in ${records.length} ${records.length === 1 ? 'record' : 'records'}${shown.length < records.length ? `; showing the newest ${shown.length}` : ''}\n`)
  return ExitCode.ok
}

/** One aligned line per record under a header; paths and addresses come from the network, so every cell is made printable. */
export function formatRejects(records: readonly RejectRecord[]): string {
  return alignedTable(['LAST SEEN', 'COUNT', 'STATUS', 'CODE', 'CLIENT', 'METHOD', 'PATH'], records.map((r) => [
    r.lastAt,
    String(r.count),
    String(r.status),
    r.code,
    clipCell(r.client, CLIENT_MAX),
    r.method,
    clipCell(r.path === '' ? '-' : r.path, PATH_MAX),
  ]))
}
