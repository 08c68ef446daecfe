// `<state>/address.json`: where the server owning the state listens ({ url, basePath, pid }), for
// the operator page (hookgate admin) to show endpoint URLs and to ask for the bundle it serves;
// written once the server listens, removed when it stops.
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from '../observe/log.js'

export const ADDRESS_FILE = 'address.json'

/** Writes the address file (a failure is logged: the server serves without it); returns its path. */
export function writeAddressFile(stateDir: string, address: { url: string; basePath: string }, log: Logger): string {
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
