// The file store: the zero-setup default. Runs in `<stateDir>/runs.jsonl`, record logs under
// `<stateDir>/sessions/`, each on the group-commit journal (one write and one fdatasync per batch).
import { join } from 'node:path'
import { Journal } from './journal.js'
import { RunStore, type RunStoreOptions } from './runs.js'
import { RejectLog } from './rejects.js'
import type { OpenedLog, RefusalRecorder, Store } from '../store.js'

/** A session log (main.jsonl, isolated.jsonl) larger than this is compacted when it is opened. */
export const SESSION_COMPACT_ABOVE_BYTES = 16 * 1024 * 1024

export interface FileStoreOptions extends RunStoreOptions {
  /** the size past which a record log is rewritten at open to what `keep` keeps (tests set it low) */
  logCompactAboveBytes?: number
}

export class FileStore implements Store {
  readonly kind = 'file'
  readonly runs: RunStore
  private readonly logs = new Set<Journal<object>>()
  private rejects: RejectLog | undefined

  private constructor(readonly stateDir: string, private readonly options: FileStoreOptions) {
    this.runs = RunStore.open(stateDir, options)
  }

  /** Opens (creating if needed) the state in `stateDir`; sync, start-up only. */
  static open(stateDir: string, options: FileStoreOptions = {}): FileStore {
    return new FileStore(stateDir, options)
  }

  openLog<R extends object>(name: string, keep?: (records: R[]) => R[]): OpenedLog<R> {
    const path = join(this.stateDir, 'sessions', `${name}.jsonl`)
    const fsync = this.options.fsync ?? true
    const { records } = Journal.read<R>(path)
    if (keep && Journal.diskBytes(path) > (this.options.logCompactAboveBytes ?? SESSION_COMPACT_ABOVE_BYTES)) {
      Journal.rewrite(path, keep(records), { fsync })
      Journal.sweepBlobs(path)
    }
    const log = Journal.open<R>(path, { fsync })
    this.logs.add(log)
    return { records, log }
  }

  openRejects(warn: (error: string) => void): RefusalRecorder {
    this.rejects ??= RejectLog.open(this.stateDir, { warn })
    return this.rejects
  }

  async close(): Promise<void> {
    await this.rejects?.close()
    for (const log of this.logs) await log.close()
    await this.runs.close()
  }
}
