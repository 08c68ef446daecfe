// The file store's history as the CLIs and the operator page read it: runs.jsonl folded, its
// blobs, the session logs and the rejected-request log, read without the lock (a server may be
// writing them meanwhile; a line in progress reads as torn, not as an error).
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { Journal } from './journal.js'
import { RejectLog } from './rejects.js'
import { RUNS_FILE, readHistory, readOutput, readReceived, readRequest } from './run-records.js'
import type { HistoryReader, ReceivedRequest, RejectRecord, RunHistory, RunRow } from '../store.js'

export class FileHistory implements HistoryReader {
  readonly where: string

  constructor(readonly stateDir: string) {
    this.where = join(stateDir, RUNS_FILE)
  }

  /** The file's identity and size: changes with every append and every compaction. */
  async version(): Promise<string> {
    try {
      const s = statSync(this.where)
      return `${s.ino}-${s.size}-${Math.round(s.mtimeMs)}`
    } catch {
      return 'none'
    }
  }

  /** the rows of the last read (and by id, once a fan-out's run looks for the row holding its request) */
  private lastRows: RunRow[] = []
  private byId: Map<string, RunRow> | undefined

  async read(): Promise<RunHistory> {
    const history = existsSync(this.where) ? readHistory(this.stateDir) : { rows: [], torn: 0, corrupt: 0 }
    this.lastRows = history.rows
    this.byId = undefined
    return history
  }

  async request(row: RunRow): Promise<unknown> {
    return readRequest(this.stateDir, row)
  }

  async received(row: RunRow): Promise<ReceivedRequest | undefined> {
    if (row.receivedIn === undefined) return readReceived(this.stateDir, row)
    let rows = this.rowsById()
    // not in the last read (none yet, or a row read elsewhere): the history as it is now
    if (!rows.has(row.receivedIn)) { await this.read(); rows = this.rowsById() }
    return readReceived(this.stateDir, row, (id) => rows.get(id))
  }

  private rowsById(): Map<string, RunRow> {
    return this.byId ??= new Map(this.lastRows.map((r) => [r.id, r]))
  }

  async output(row: RunRow): Promise<unknown> {
    return readOutput(this.stateDir, row)
  }

  async logRecords<R extends object>(name: string): Promise<R[]> {
    const file = join(this.stateDir, 'sessions', `${name}.jsonl`)
    return existsSync(file) ? Journal.read<R>(file).records : []
  }

  async rejects(): Promise<{ records: RejectRecord[]; torn: number; corrupt: number }> {
    return RejectLog.read(this.stateDir)
  }

  async close(): Promise<void> {}
}
