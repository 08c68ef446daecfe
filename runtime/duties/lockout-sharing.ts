// Sharing the auth lock-out counts as a duty: on a store several runtimes share, the failures each
// counts are merged in the store now and then (runtime/store/postgres/lockout.ts), so that a client
// locked out by one is locked out by all; the request path only counts in memory. A store one
// runtime uses has nothing to share: the duty does nothing then.
import type { LockoutCounters, Store } from '../store/store.js'
import { HEALTHY, type Duty } from './duty.js'

export function lockoutSharingDuty(store: Pick<Store, 'shareLockout'>, counters: LockoutCounters): Duty {
  let sharing: { close(): Promise<void> } | undefined
  return {
    name: 'lock-out sharing',
    start() { sharing = store.shareLockout?.(counters) },
    async stop() {
      await sharing?.close()
      sharing = undefined
    },
    health: () => HEALTHY,
  }
}
