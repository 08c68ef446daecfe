// The log/file channel: each reply is one JSON line appended to a file (created 0600, its missing
// parent folders 0700), written and fsynced before the delivery counts; one attempt. Appends from
// concurrent deliveries to the same channel are queued so that lines never interleave.
import { mkdir, open, stat } from 'node:fs/promises'
import { dirname } from 'node:path'
import { DeliveryError, type DeliveryResult } from './attempts.js'
import type { Channel, Delivery } from './http-channels.js'

/** errors a later attempt is unlikely to fix (EEXIST: a file stands where a folder should be) */
const FINAL_CODES = new Set(['EACCES', 'EPERM', 'EISDIR', 'ENOTDIR', 'EEXIST', 'EROFS', 'ELOOP', 'ENAMETOOLONG'])

export class FileChannel implements Channel {
  readonly type = 'file' as const
  private tail: Promise<unknown> = Promise.resolve()

  /** `path` is absolute (createChannels resolves it against the config directory); `shownPath` is how the config wrote it */
  constructor(readonly id: string, readonly path: string, private readonly shownPath: string, private readonly now: () => number) {}

  deliver(d: Delivery, signal?: AbortSignal): Promise<DeliveryResult> {
    if (signal?.aborted) return Promise.reject(new DeliveryError(`file channel ${JSON.stringify(this.id)} was cancelled before the first attempt`, 0, true))
    const line = JSON.stringify({
      at: new Date(this.now()).toISOString(),
      runId: d.runId,
      agentId: d.agentId,
      name: d.name,
      to: d.to,
      text: d.text,
      correlationId: d.correlationId,
      ...(d.event ? { status: d.event.status } : {}),
    }) + '\n'
    const done = this.tail.then(() => this.append(line))
    this.tail = done.catch(() => undefined)
    return done
  }

  private async append(line: string): Promise<DeliveryResult> {
    try {
      const dir = dirname(this.path)
      await mkdir(dir, { recursive: true, mode: 0o700 })
      const existed = await stat(this.path).then(() => true, () => false)
      const handle = await open(this.path, 'a', 0o600)
      try {
        await handle.writeFile(line, 'utf8')
        await handle.sync()
      } finally {
        await handle.close()
      }
      if (!existed) await syncDir(dir)
      return { ok: true, attempts: 1, detail: 'file' }
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error'
      throw new DeliveryError(`file channel ${JSON.stringify(this.id)} could not append to ${this.shownPath} (${code}) after 1 attempt`, 1, !FINAL_CODES.has(code))
    }
  }
}

/** makes a new file's directory entry durable; a file system that cannot fsync a directory is fine */
async function syncDir(dir: string): Promise<void> {
  let handle
  try {
    handle = await open(dir, 'r')
    await handle.sync()
  } catch {
    // some platforms refuse to open or fsync a directory
  } finally {
    await handle?.close()
  }
}
