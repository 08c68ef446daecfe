// `hookgate tasks [--bundle dist] [--state DIR] [--json] [--count N]`: each scheduled task of a
// compiled bundle with its next firing times, and its last firing when a run history is at hand.
// Reads the bundle and the history only; the list goes to stdout, notes to stderr.
import { existsSync } from 'node:fs'
import { ExitCode } from '../exit-codes.js'
import { BUNDLE_FLAG, DEFAULT_STATE_DIR, jsonFlag, processIO, readCommandArgs, usageLine, wholeNumber, type CommandIO, type CommandSpec, type VerbContext } from '../flags.js'
import { printable, storeFlagOk } from '../history.js'
import type { BundleTask } from '../../runtime/bundle/format.js'
import { loadBundle, type LoadedBundle } from '../../runtime/bundle/load.js'
import { slotClock } from '../../runtime/scheduler/cron.js'
import { openHistory, storeUrlOf } from '../../runtime/store/open.js'
import { lastFiredSlots } from '../../runtime/scheduler/fire.js'

const MAX_COUNT = 1000

export const spec: CommandSpec = {
  name: 'tasks',
  readsState: true,
  args: '',
  summary: 'list the scheduled tasks of a compiled bundle with their next firing times',
  flags: [
    BUNDLE_FLAG,
    { name: 'state', value: 'DIR', description: 'the state directory whose run history shows each task\'s last firing (default: .hookgate)' },
    { name: 'store', value: 'URL', description: 'read each task\'s last firing from a PostgreSQL store (postgres://…) instead of the state directory (default: the bundle\'s server.store)' },
    jsonFlag('the tasks as a JSON array'),
    { name: 'count', value: 'N', default: '5', description: 'how many next firing times to show per task' },
  ],
  notes: [
    'times are ISO-8601 UTC; a cron schedule is read in its task\'s timezone (default UTC)',
  ],
}

const TASKS_USAGE = usageLine(spec)

export interface TaskListing {
  id: string
  agentId: string
  name: string
  target: BundleTask['target']
  schedule: string
  timezone: string | null
  catchUp: 'skip' | 'once'
  /** the slot of its last firing in the history, null when none (or no history was read) */
  lastFiredFor: string | null
  /** ISO-8601 UTC, soonest first; empty when the bundle has no compiled schedule for it */
  next: string[]
}

/** The tasks with their next `count` slots after `now`. */
export function listTasks(tasks: readonly BundleTask[], lastFired: ReadonlyMap<string, number>, count: number, now: number): TaskListing[] {
  return tasks.map((t) => {
    const next: string[] = []
    if (t.when) {
      const clock = slotClock(t.when)
      for (let at = now, i = 0; i < count; i++) {
        at = clock.next(at)
        next.push(new Date(at).toISOString())
      }
    }
    const last = lastFired.get(t.id)
    return {
      id: t.id, agentId: t.agentId, name: t.name, target: t.target, schedule: t.schedule,
      timezone: t.when?.kind === 'cron' ? t.when.timezone : null,
      catchUp: t.catchUp ?? 'once',
      lastFiredFor: last === undefined ? null : new Date(last).toISOString(),
      next,
    }
  })
}

export async function run(argv: string[], io: CommandIO = processIO, context: VerbContext & { stateDir?: string } = {}): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const values = parsed.values as { bundle: string; state?: string; store?: string; json?: boolean; count: string }
  if (!storeFlagOk('tasks', values.store, io)) return ExitCode.usage
  if (wholeNumber(values.count, MAX_COUNT) === undefined) {
    io.stderr(`hookgate tasks: --count takes a whole number from 1 to ${MAX_COUNT}, not "${values.count}"\n${TASKS_USAGE}\n`)
    return ExitCode.usage
  }
  let bundle: LoadedBundle
  try {
    bundle = await loadBundle(values.bundle)
  } catch (err) {
    io.stderr(`hookgate tasks: ${(err as Error).message}\n`)
    return ExitCode.refused
  }
  const tasks: readonly BundleTask[] = bundle.config.tasks
  const stateDir = values.state ?? context.stateDir ?? DEFAULT_STATE_DIR
  // --store wins; else the database the bundle's runtime writes to (server.store). One that cannot
  // be named here is said, not swapped for the state directory, whose history would be the wrong one.
  let store = values.store
  let storeUnknown: string | undefined
  if (store === undefined && bundle.config.server.store) {
    try {
      store = storeUrlOf(bundle.config.server.store, bundle.configDir)
    } catch (err) {
      storeUnknown = (err as Error).message
    }
  }
  let lastFired: ReadonlyMap<string, number> = new Map()
  if (storeUnknown !== undefined) {
    io.stderr(`hookgate tasks: warning: cannot read the run history: ${storeUnknown} (or name the store with --store URL)\n`)
  } else if (store !== undefined || existsSync(stateDir)) {
    const reader = openHistory(stateDir, store)
    try {
      lastFired = lastFiredSlots((await reader.read()).rows)
    } catch (err) {
      io.stderr(`hookgate tasks: warning: cannot read the run history in ${reader.where}: ${(err as Error).message}\n`)
    } finally {
      await reader.close().catch(() => {})
    }
  }
  const listing = listTasks(tasks, lastFired, Number(values.count), (context.now ?? Date.now)())
  if (values.json) {
    io.stdout(`${JSON.stringify(listing, null, 2)}\n`)
    return ExitCode.ok
  }
  if (listing.length === 0) {
    io.stderr('no tasks in this bundle (agents[].tasks in hooks.yaml)\n')
    return ExitCode.ok
  }
  io.stdout(listing.map(formatTask).join('\n'))
  return ExitCode.ok
}

function formatTask(t: TaskListing): string {
  const lines = [
    `${t.id}  ${printable(t.name)}`,
    `  target     ${t.target} (agent ${t.agentId})`,
    `  schedule   ${printable(t.schedule)}${t.timezone ? ` (${t.timezone})` : ''}, catchUp ${t.catchUp}`,
    `  last fired ${t.lastFiredFor ?? '-'}`,
  ]
  if (t.next.length === 0) lines.push('  next       - (no compiled schedule: recompile the bundle with this hookgate)')
  t.next.forEach((at, i) => lines.push(`${i === 0 ? '  next      ' : '            '} ${at}`))
  return lines.join('\n') + '\n'
}
