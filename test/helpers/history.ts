// What a runtime stored, read through the store-neutral reader the CLIs and the page use (the
// store's HistoryReader): the file store's files, or the PostgreSQL database the test harness gave
// the state directory (test/helpers/stores.ts). So a behaviour test reads the history the same way
// whichever store it runs on. Each read opens the reader and closes it (a PostgreSQL pool left
// open would hold the test process for its idle timeout).
import { openHistory } from '../../runtime/store/open.js'
import type { HistoryReader, ReceivedRequest, RejectRecord, RunRow } from '../../runtime/store/store.js'
import { knownStoreUrl } from './stores.js'

/** The history of the runtime on `stateDir` (close it after use). */
export function historyOf(stateDir: string): HistoryReader {
  return openHistory(stateDir, knownStoreUrl(stateDir))
}

async function reading<T>(stateDir: string, read: (history: HistoryReader) => Promise<T>): Promise<T> {
  const history = historyOf(stateDir)
  try {
    return await read(history)
  } finally {
    await history.close()
  }
}

/**
 * Every run row stored for `stateDir`, newest first, as the file store's history folds them: with
 * the request and the received request a row keeps in its own line (PostgreSQL keeps them in
 * columns beside the row: they are read from there), not those in a blob or a fan-out's holder.
 */
export function readRows(stateDir: string): Promise<RunRow[]> {
  return reading(stateDir, async (h) => Promise.all((await h.read()).rows.map(async (row) => {
    let full = row
    if (row.request === undefined && !row.requestBlob) {
      const request = await h.request(row)
      if (request !== undefined) full = { ...full, request }
    }
    if (row.received === undefined && !row.receivedBlob && row.receivedIn === undefined) {
      const received = await h.received(row)
      if (received !== undefined) full = { ...full, received }
    }
    return full
  })))
}

/** The run row with this id as it is stored now. */
export async function storedRow(stateDir: string, id: string): Promise<RunRow | undefined> {
  return (await readRows(stateDir)).find((r) => r.id === id)
}

/** A run's request (what a resume runs again), from wherever the store keeps it. */
export function readRequest(stateDir: string, row: RunRow): Promise<unknown> {
  return reading(stateDir, (h) => h.request(row))
}

/** A run's received request (what `hookgate runs replay` sends again), from wherever the store keeps it. */
export function readReceived(stateDir: string, row: RunRow): Promise<ReceivedRequest | undefined> {
  return reading(stateDir, (h) => h.received(row))
}

/** A step's output, from wherever the store keeps it. */
export function readOutput(stateDir: string, row: RunRow): Promise<unknown> {
  return reading(stateDir, (h) => h.output(row))
}

/** The records of a record log (`isolated`, `<agent>/main`), oldest first. */
export function readLog<R extends object>(stateDir: string, name: string): Promise<R[]> {
  return reading(stateDir, (h) => h.logRecords<R>(name))
}

/** The rejected-request log, the last record per bucket. */
export function readRejects(stateDir: string): Promise<RejectRecord[]> {
  return reading(stateDir, async (h) => (await h.rejects()).records)
}

/** A record log as JSON lines, one record a line, as the file store writes it. */
export async function readLogText(stateDir: string, name: string): Promise<string> {
  return (await readLog<object>(stateDir, name)).map((record) => JSON.stringify(record) + '\n').join('')
}
