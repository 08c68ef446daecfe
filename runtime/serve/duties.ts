// Every background duty of `hookgate serve`, registered in one place and in the order they start
// (the supervisor stops them in reverse):
//  1. retention          the store's prune of the history past its bounds (PostgreSQL)
//  2. workflow runner    takes workflow runs: before anything resumes or fires one
//  3. notifier           hears every status a run enters: before resumed runs change
//  4. session ownership  competes for the main sessions' leases (PostgreSQL): before resuming
//                        wakes, so that a session this runtime gains reads them
//  5. resume             finishes the runs the last process left, and takes over a dead runtime's;
//                        at stop, lets the runs under way finish for the grace
//  6. transform processes  started by their first call; stopped before the runs are drained
//  7. takeover sweep     looks for a dead runtime's runs (PostgreSQL): once resume listens
//  8. lock-out sharing   merges the auth failures counted by every runtime (PostgreSQL)
//  9. bundle watcher     reloads when the bundle file changes
// 10. scheduler          fires tasks, catching up missed slots: last, once all it fires into runs
// So at stop (after the listener has stopped taking requests): the scheduler fires no more, the
// bundle is no longer watched, the counts and the sweep stop, the transform processes end, the
// runs under way finish (or are left for the next start), then the sessions, the notifier (its last
// notifications written), the runner and the prune stop; the engine closes the store after.
import type { BundleConfig, BundleTask, BundleWorkflow } from '../bundle/format.js'
import type { Engine } from '../agents/engine.js'
import { bundleWatcherDuty } from '../duties/bundle-watcher.js'
import { lockoutSharingDuty } from '../duties/lockout-sharing.js'
import { notifierDuty } from '../duties/notifier.js'
import { resumeDuty } from '../duties/resume.js'
import { schedulerDuty } from '../duties/scheduler.js'
import { Supervisor } from '../duties/supervisor.js'
import { transformPoolDuty } from '../duties/transform-pool.js'
import { workflowRunnerDuty } from '../duties/workflow-runner.js'
import type { Notifier } from '../notify/notifier.js'
import type { Logger } from '../observe/log.js'
import type { Scheduler } from '../scheduler/scheduler.js'
import type { LockoutCounters, Store } from '../store/store.js'

export interface ServeDuties {
  store: Store
  engine: Engine
  notifier: Notifier
  scheduler: Scheduler
  /** the auth limiter's counters, shared across runtimes on a shared store */
  lockout: LockoutCounters
  /** the bundle being served (its workflows and tasks when a duty starts, its transform pool when they stop) */
  current(): { bundle: { workflows: ReadonlyMap<string, BundleWorkflow>; config: BundleConfig }; pool: { close(): Promise<void> } | null }
  /** per task, the latest slot fired, as the history said at start (the scheduler's catch-up) */
  firedAtStart(): ReadonlyMap<string, number>
  /** the bundle file to watch, and what a change asks for; null: not watched */
  watch: { bundleFile: string; changed(): void } | null
  /** how long a stop lets the runs under way finish */
  graceMs: number
  log: Logger
}

export function registerDuties(d: ServeDuties): Supervisor {
  const supervisor = new Supervisor(d.log)
  const store = d.store.duties
  supervisor
    .add(store?.retention)
    .add(workflowRunnerDuty(d.engine.workflowRunner, () => d.current().bundle.workflows))
    .add(notifierDuty(d.notifier))
    .add(store?.sessionOwnership)
    .add(resumeDuty(d.engine, d.store, d.graceMs, d.log))
    .add(transformPoolDuty(() => d.current().pool))
    .add(store?.takeoverSweep)
    .add(lockoutSharingDuty(d.store, d.lockout))
    .add(d.watch && bundleWatcherDuty(d.watch.bundleFile, d.watch.changed))
    .add(schedulerDuty(d.scheduler, (): readonly BundleTask[] => d.current().bundle.config.tasks, d.firedAtStart))
  return supervisor
}
