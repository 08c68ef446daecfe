// The store conformance suite (cases.ts) on PostgreSQL: a database per case on one throwaway server.
// A runtime that may crash is opened with a one-second lease and a fast sweep: the next runtime
// takes its unfinished runs over as a live one would, within a second or two.
import { storeConformance } from './cases.js'
import { scratchDir } from '../../../helpers/paths.js'
import { startPostgres } from '../../../helpers/pg.js'
import { until } from '../../http/harness.js'
import { connectStore } from '../../../../runtime/store/open.js'

const pg = await startPostgres()
let made = 0

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  storeConformance({
    name: 'PostgreSQL',
    fresh: async () => ({ stateDir: scratchDir('conformance-'), url: await pg.createDatabase(`conformance_${++made}`) }),
    open: (place, options) => connectStore(place.url!, place.stateDir, options),
    crashOptions: { hostTtlMs: 1000, sweepMs: 200 },
    // the dead runtime's runs, claimed by this one's sweep once its lease ran out
    resumed: async (store, count, withinMs) => {
      // the sweep claims once someone listens; what it claims, the run log holds. A store opened
      // as the runtime opens it leaves its sweep to the runtime's supervisor: started here instead.
      store.onTakeover!(() => {})
      await store.duties?.takeoverSweep?.start()
      return until(`${count} runs to be taken over`, () => (store.runs.unfinished().length >= count ? store.runs.unfinished() : undefined), withinMs).catch(() => store.runs.unfinished())
    },
    done: () => pg.destroy(),
  })
}
