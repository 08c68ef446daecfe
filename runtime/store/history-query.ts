// The run history as its readers ask it, written once for `hookgate runs` and `runs show` (cli/)
// and the operator page's API (admin/history.ts): which rows a query's filters keep, and a run's
// detail, the run with its workflow steps, the other runs under its correlation id and the runs
// replaying it. Each surface shapes the answer its own way (the CLI prints the rows as stored, the
// page a summary of each related run), and reads the run's stored request through its reader.
// Types only from the store's contract: it works on the rows any reader returns.
import type { RunRow } from './store.js'

export interface RunFilter {
  /** only runs of this kind of definition (hook, trigger, task) */
  kind?: string
  /** only runs in one of these statuses; empty or absent, any */
  status?: readonly string[]
  /** only runs of this definition id */
  definition?: string
  /** epoch ms: only runs created at or after */
  from?: number
  /** epoch ms: only runs created before */
  until?: number
}

/** The rows the filter keeps, in the order given (newest first, as read). */
export function filterRuns(rows: readonly RunRow[], filter: RunFilter): RunRow[] {
  const { kind, definition, from, until } = filter
  const statuses = filter.status ?? []
  return rows.filter((r) =>
    (kind === undefined || r.definitionKind === kind) &&
    (statuses.length === 0 || statuses.includes(r.status)) &&
    (definition === undefined || r.definitionId === definition) &&
    (from === undefined || Date.parse(r.createdAt) >= from) &&
    (until === undefined || Date.parse(r.createdAt) < until))
}

/** Whether the filter keeps any row out. */
export function filters(filter: RunFilter): boolean {
  return filter.kind !== undefined || (filter.status?.length ?? 0) > 0 || filter.definition !== undefined || filter.from !== undefined || filter.until !== undefined
}

export interface RunRelations {
  run: RunRow
  /** the rows of its workflow steps (their parentRunId names it), oldest first */
  steps: RunRow[]
  /** the other runs under its correlation id, its steps left out, oldest first */
  correlated: RunRow[]
  /** the runs replaying it (replayOf), oldest first */
  replays: RunRow[]
}

/** The run `id` and the runs related to it; undefined when no row has that id. `rows` newest first, as read. */
export function runRelations(rows: readonly RunRow[], id: string): RunRelations | undefined {
  const run = rows.find((r) => r.id === id)
  if (!run) return undefined
  // oldest first: the order the steps and siblings happened in
  const oldestFirst = [...rows].reverse()
  const steps = oldestFirst.filter((r) => r.parentRunId === id)
  const stepIds = new Set(steps.map((r) => r.id))
  return {
    run,
    steps,
    correlated: oldestFirst.filter((r) => r.correlationId === run.correlationId && r.id !== id && !stepIds.has(r.id)),
    replays: oldestFirst.filter((r) => r.replayOf === id),
  }
}
