// What the engine and the notifier need of a channel: deliver one text (an agent's reply, or a
// notification about a run's status) and say how it went, and where a reply goes (a route). Types
// only: runtime/agents and runtime/notify both use them, and neither imports the other for them.
import type { Delivery } from './http-channels.js'

/** A delivery channel as its users need it (createChannels builds them from the bundle). */
export interface Deliverer {
  deliver(d: Delivery, signal?: AbortSignal): Promise<{ attempts: number; detail: string }>
}

/** Where a reply goes: a channel id and its recipient (null: the channel's own default). */
export interface Route { channel: string; to: string | null }
