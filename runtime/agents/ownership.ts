// Which runtime runs what, on a store several runtimes share, and the order turns run in here:
// - the main sessions: this runtime competes for the sessions of the agents it serves (the store's
//   leases, store.sessions), and what the store tells it (gained, pulled, lost, routed) is handed to
//   the main turns;
// - the isolated turns: at most server.concurrency at once, one at a time per session key (in this
//   runtime by a keyed lock, and across runtimes by the key's lease, store.sessionKeys).
// On a store one runtime uses, the store has neither lease, and only the local gates apply.
import { KeyedLock, Semaphore } from '../lib/concurrency.js'
import type { Store } from '../store/store.js'
import type { MainTurns } from './main-turns.js'
import type { SessionRecord } from './session.js'

/** Hands the main sessions of `agentIds` to the store's leases (a reload changes them); nothing without shared sessions. */
export function serveSessions(store: Store, agentIds: readonly string[], turns: MainTurns): void {
  store.sessions?.serve(agentIds, {
    gained: (agentId, records, wakes) => turns.session(agentId).gain(records as SessionRecord[], wakes),
    pulled: (agentId, records, wakes, now) => turns.session(agentId).pull(records as SessionRecord[], wakes, now),
    lost: (agentId) => turns.sessions.get(agentId)?.lose(),
    routed: (agentId, route) => { turns.session(agentId).lastRoute = route },
  })
}

/** The gate every isolated turn passes: a slot, the session key's lock, and on a shared store its lease. */
export class TurnGate {
  private readonly slots: Semaphore
  private readonly locks = new KeyedLock()

  constructor(private readonly store: Store, concurrency: number) {
    this.slots = new Semaphore(concurrency)
  }

  setConcurrency(concurrency: number): void {
    this.slots.setLimit(concurrency)
  }

  /** Runs run `runId`'s `turn` once it holds a slot and its session key, here and across the runtimes sharing the store. */
  run<T>(sessionKey: string, runId: string, turn: () => Promise<T>): Promise<T> {
    const keys = this.store.sessionKeys
    return this.slots.run(() => this.locks.run(sessionKey, () => (keys ? keys.hold(sessionKey, runId, turn) : turn())))
  }
}
