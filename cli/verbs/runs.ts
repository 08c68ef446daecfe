// `hookgate runs [--state DIR] [--json] [--limit N] [filters]`: the run history, newest first. The
// table or the JSON goes to stdout; the summary and warnings to stderr. The filters are the
// operator page's (runtime/store/history-query.ts).
import { existsSync } from 'node:fs'
import { ExitCode } from '../exit-codes.js'
import { parseDuration } from '../../runtime/observe/clock.js'
import { DEFAULT_STATE_DIR, HISTORY_FLAGS, jsonFlag, processIO, readCommandArgs, usageLine, wholeNumber, type CommandIO, type CommandSpec, type VerbContext } from '../flags.js'
import { RUN_STATUSES, formatTable, historyAt, readAll, storeFlagOk, summarise } from '../history.js'
import { filterRuns, filters, type RunFilter } from '../../runtime/store/history-query.js'
import type { DefinitionKind } from '../../runtime/store/store.js'
import { spec as showSpec } from './runs-show.js'
import { spec as replaySpec } from './runs-replay.js'

export const DEFAULT_RUNS_LIMIT = 50
const KINDS: readonly DefinitionKind[] = ['hook', 'trigger', 'task']

export const spec: CommandSpec = {
  name: 'runs',
  readsState: true,
  args: '',
  summary: 'show the run history, newest first',
  flags: [
    ...HISTORY_FLAGS,
    jsonFlag('the rows as a JSON array'),
    { name: 'limit', value: 'N', default: String(DEFAULT_RUNS_LIMIT), description: 'show at most the newest N runs' },
    { name: 'kind', value: 'hook|trigger|task', description: 'only runs of this kind of definition' },
    { name: 'status', value: 'S', multiple: true, description: 'only runs in this status: queued, running, succeeded, failed, timed_out, skipped (repeatable, or a comma list)' },
    { name: 'definition', value: 'ID', description: 'only runs of this definition (a mapping, trigger or task id, or wake / agent)' },
    { name: 'since', value: 'DURATION', description: 'only runs created within this long, e.g. 90s, 15m, 2h, 7d' },
  ],
  notes: [
    'the filters combine (all must hold); --limit counts the runs that pass them',
  ],
  subcommands: [showSpec, replaySpec],
}

export const RUNS_USAGE = usageLine(spec)

export async function run(argv: string[], io: CommandIO = processIO, context: VerbContext & { stateDir?: string } = {}): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const values = parsed.values as { state?: string; store?: string; json?: boolean; limit: string; kind?: string; status: string[]; definition?: string; since?: string }
  if (!storeFlagOk('runs', values.store, io)) return ExitCode.usage
  const limit = wholeNumber(values.limit)
  if (limit === undefined) {
    io.stderr(`hookgate runs: --limit takes a whole number of at least 1, not "${values.limit}"\n${RUNS_USAGE}\n`)
    return ExitCode.usage
  }
  const stateDir = values.state ?? context.stateDir ?? DEFAULT_STATE_DIR
  if (values.state === '') {
    io.stderr(`hookgate runs: --state needs a directory\n${RUNS_USAGE}\n`)
    return ExitCode.usage
  }
  const filter = readFilter(values, context.now ?? Date.now)
  if (typeof filter === 'string') {
    io.stderr(`hookgate runs: ${filter}\n${RUNS_USAGE}\n`)
    return ExitCode.usage
  }

  if (values.store === undefined && !existsSync(stateDir)) {
    if (values.json) io.stdout('[]\n')
    io.stderr(`no runs yet (state directory ${stateDir} does not exist)\n`)
    return ExitCode.ok
  }
  const history = await readAll('runs', historyAt(stateDir, values.store), io)
  if (!history) return ExitCode.refused
  const filtered = filters(filter)
  const rows = filtered ? filterRuns(history.rows, filter) : history.rows
  const shown = rows.slice(0, limit)
  if (values.json) {
    io.stdout(`${JSON.stringify(shown, null, 2)}\n`)
    return ExitCode.ok
  }
  if (rows.length === 0) {
    io.stderr(history.rows.length === 0 ? 'no runs yet\n' : `no runs match the filters (of ${history.rows.length} in the history)\n`)
    return ExitCode.ok
  }
  io.stdout(formatTable(shown))
  io.stderr(`${summarise(rows)}${filtered ? ' matching the filters' : ''}${shown.length < rows.length ? `; showing the newest ${shown.length}` : ''}\n`)
  return ExitCode.ok
}

/** The flags as one filter, or what is wrong with one. */
function readFilter(values: { kind?: string; status: string[]; definition?: string; since?: string }, now: () => number): RunFilter | string {
  const filter: RunFilter = {}
  if (values.kind !== undefined) {
    if (!KINDS.includes(values.kind as DefinitionKind)) return `--kind takes hook, trigger or task, not "${values.kind}"`
    filter.kind = values.kind
  }
  if (values.status.length > 0) {
    const wanted = new Set(values.status.flatMap((s) => s.split(',')).map((s) => s.trim()))
    for (const s of wanted) if (!RUN_STATUSES.includes(s as never)) return `--status takes ${RUN_STATUSES.join(', ')}, not "${s}"`
    filter.status = [...wanted]
  }
  if (values.definition !== undefined) {
    if (values.definition === '') return '--definition needs an id'
    filter.definition = values.definition
  }
  if (values.since !== undefined) {
    const ms = parseDuration(values.since)
    if (ms === undefined) return `--since takes a duration such as 90s, 15m, 2h or 7d, not "${values.since}"`
    filter.from = now() - ms
  }
  return filter
}
