// `hookgate runs show RUN_ID`: one run (every field, deliveries and notifications included when the
// row has them), its workflow steps, the other runs under its correlation id, and the runs replaying
// it: the run detail the operator page shows too (runtime/store/history-query.ts).
import { ExitCode } from '../exit-codes.js'
import { DEFAULT_STATE_DIR, HISTORY_FLAGS, jsonFlag, processIO, readCommandArgs, usageLine, type CommandIO, type CommandSpec, type VerbContext } from '../flags.js'
import { formatRow, formatTable, historyAt, printable, readHistory, storeFlagOk } from '../history.js'
import type { HistoryReader, RunRow } from '../../runtime/store/store.js'
import { runRelations } from '../../runtime/store/history-query.js'

export const spec: CommandSpec = {
  name: 'runs show',
  readsState: true,
  args: 'RUN_ID',
  summary: 'show one run: its row, its workflow steps, the runs sharing its correlation id and its replays',
  flags: [
    ...HISTORY_FLAGS,
    jsonFlag('one JSON object {run, steps, correlated, replays}'),
  ],
  notes: ['exit 0 shown, 1 no run with that id, 2 usage error'],
}

export const RUNS_SHOW_USAGE = usageLine(spec)

export async function run(argv: string[], io: CommandIO = processIO, context: VerbContext & { stateDir?: string } = {}): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const values = parsed.values as { state?: string; store?: string; json?: boolean }
  if (parsed.positionals.length !== 1 || parsed.positionals[0] === '') {
    io.stderr(`hookgate runs show: name one run id\n${RUNS_SHOW_USAGE}\n`)
    return ExitCode.usage
  }
  if (!storeFlagOk('runs show', values.store, io)) return ExitCode.usage
  const id = parsed.positionals[0]!
  const reader = historyAt(values.state || context.stateDir || DEFAULT_STATE_DIR, values.store)
  try {
    return await showRun(id, reader, values.json === true, io)
  } finally {
    await reader.close().catch(() => {})
  }
}

async function showRun(id: string, reader: HistoryReader, json: boolean, io: CommandIO): Promise<number> {
  const history = await readHistory('runs show', reader, io)
  if (!history) return ExitCode.refused
  const related = runRelations(history.rows, id)
  if (!related) {
    io.stderr(`hookgate runs show: no run with id ${printable(id)} in ${reader.where}\n`)
    return ExitCode.refused
  }
  const { run: row, steps, correlated, replays } = related
  const received = await reader.received(row)
  if (json) {
    const full = received !== undefined && row.received === undefined ? { ...row, received } : row
    // the request is shown where it is read, whichever row keeps it
    if (full !== row) delete (full as RunRow).receivedIn
    io.stdout(`${JSON.stringify({ run: full, steps, correlated, replays }, null, 2)}\n`)
    return ExitCode.ok
  }
  io.stdout(formatRow(row, received !== undefined))
  for (const [title, rows] of [['steps', steps], ['same correlation id', correlated], ['replays', replays]] as const) {
    if (rows.length > 0) io.stdout(`\n${title}:\n${formatTable(rows)}`)
  }
  return ExitCode.ok
}
