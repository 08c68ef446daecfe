// The scheduler as a duty: started, it fires each task at its slots, first catching up a slot
// missed while the runtime was down (the catch-up is awaited: its rows are durable before the
// start is done); stopped, it sets no more timers and waits for a firing under way to be on disk.
import type { BundleTask } from '../bundle/format.js'
import type { Scheduler } from '../scheduler/scheduler.js'
import { HEALTHY, type Duty } from './duty.js'

/** `lastFired`: per task, the latest slot fired, as the history said at start. */
export function schedulerDuty(scheduler: Scheduler, tasks: () => readonly BundleTask[], lastFired: () => ReadonlyMap<string, number>): Duty {
  return {
    name: 'scheduler',
    start: () => scheduler.start(tasks(), lastFired()),
    stop: () => scheduler.stop(),
    health: () => HEALTHY,
  }
}
