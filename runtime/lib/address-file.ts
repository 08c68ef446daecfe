// `<state>/address.json`: where the runtime owning a state directory listens ({ url, basePath, pid }).
// The runtime writes it once it listens (runtime/serve/service.ts) and removes it when it stops; the
// operator page and the Gmail helper read it (through admin/endpoints.ts) to find that runtime. It
// lives here, not in the composition root, so that a reader never imports the runtime's wiring.
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export const ADDRESS_FILE = 'address.json'

export interface RuntimeAddress { url: string; basePath: string }

/** Where the runtime owning the state directory listens; undefined when none is (or the file is unreadable). */
export function readRuntimeAddress(stateDir: string): RuntimeAddress | undefined {
  try {
    const a = JSON.parse(readFileSync(join(stateDir, ADDRESS_FILE), 'utf8')) as { url?: unknown; basePath?: unknown }
    return typeof a.url === 'string' ? { url: a.url, basePath: String(a.basePath ?? '/hooks') } : undefined
  } catch {
    return undefined
  }
}

/** Writes the address file (a failure is logged: the server serves without it); returns its path. */
export function writeAddressFile(stateDir: string, address: RuntimeAddress, log: { error(msg: string, fields: Record<string, unknown>): void }): string {
  const file = join(stateDir, ADDRESS_FILE)
  try {
    writeFileSync(file, JSON.stringify({ url: address.url, basePath: address.basePath, pid: process.pid }) + '\n')
  } catch (err) {
    log.error('cannot write the address file', { error: (err as Error).message })
  }
  return file
}

export function removeAddressFile(file: string): void {
  rmSync(file, { force: true })
}
