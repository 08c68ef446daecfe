// Resuming as a duty: started, it finishes the runs the last process left unfinished and, on a
// store several runtimes share, the runs this runtime takes over from a dead one; stopped, it takes
// over no more and lets the runs under way finish for the grace, leaving what is still running to
// be resumed at the next start (by this runtime or, on a shared store, by another).
import type { Logger } from '../observe/log.js'
import type { RunRow, Store } from '../store/store.js'
import { HEALTHY, type Duty } from './duty.js'

/** What resuming needs of the engine (runtime/agents/engine.ts). */
export interface Resumable {
  resumeUnfinished(): number
  resumeTaken(rows: readonly RunRow[], transcripts: readonly object[]): void
  drain(graceMs: number): Promise<boolean>
}

export function resumeDuty(engine: Resumable, store: Pick<Store, 'onTakeover'>, graceMs: number, log: Logger): Duty {
  let running = false
  return {
    name: 'resume',
    start() {
      running = true
      const resumed = engine.resumeUnfinished()
      if (resumed > 0) log.info('resumed unfinished runs', { runs: resumed })
      // Several runtimes on one store: runs a dead one left are resumed here once this one claims them.
      store.onTakeover?.((rows, transcripts) => { if (running) engine.resumeTaken(rows, transcripts) })
    },
    async stop() {
      running = false
      if (!(await engine.drain(graceMs))) log.info('grace period over; unfinished runs resume at the next start')
    },
    health: () => HEALTHY,
  }
}
