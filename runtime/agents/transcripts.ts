// The isolated-turn journal: the record log `isolated`, where the engine keeps each isolated turn's
// reply (a run resumed after a crash delivers it instead of asking the model again) and marks the
// reply delivered (so it is never sent twice). The records' shapes are defined here, for the engine
// that writes them and for the one reader outside it: a run's deliveries, which the operator page's
// run detail shows (admin/history.ts), read through the store's history reader.
import type { HistoryReader } from '../store/store.js'

/** The record log's name (Store.openLog, HistoryReader.logRecords). */
export const TRANSCRIPT_LOG = 'isolated'

export type IsolatedRecord =
  | { type: 'isolated'; runId: string; sessionKey: string; at: string; prompt: string; reply: string }
  /** the reply reached its channel: a run resumed after a crash does not send it twice */
  | { type: 'delivered'; runId: string; at: string; note: string }

/** A reply the engine delivered for a run: when, and the channel's note on it. */
export interface Delivery { at: string; note: string }

/** The replies delivered for the run, oldest first (a record read from disk is trusted for nothing). */
export async function deliveriesOf(reader: Pick<HistoryReader, 'logRecords'>, runId: string): Promise<Delivery[]> {
  const out: Delivery[] = []
  for (const r of await reader.logRecords<{ type?: string; runId?: string; at?: string; note?: string }>(TRANSCRIPT_LOG)) {
    if (r.type === 'delivered' && r.runId === runId) out.push({ at: String(r.at), note: String(r.note ?? '').trim().replace(/^\(|\)$/g, '') })
  }
  return out
}
