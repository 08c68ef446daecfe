// A real full disk for tests: a small tmpfs mounted in a temp directory (needs root, as CI and the
// developers' machines run; elsewhere the caller is told to skip). Filling it with a ballast file
// makes every write fail with ENOSPC; removing the ballast gives the space back.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface SmallDisk {
  dir: string
  /** fills every free byte (writes fail with ENOSPC until release) */
  fill(): void
  /** frees the space fill() took */
  release(): void
  unmount(): void
}

/** A tmpfs of `sizeKiB` KiB, or null when this process may not mount one. */
export function mountSmallDisk(sizeKiB = 4096): SmallDisk | null {
  const dir = mkdtempSync(join(tmpdir(), 'hookgate-smalldisk-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKiB}k,mode=0777`, 'tmpfs', dir], { stdio: 'ignore' })
  } catch {
    rmSync(dir, { recursive: true, force: true })
    return null
  }
  const ballast = join(dir, 'ballast')
  const unmount = (): void => {
    try { execFileSync('umount', ['-l', dir], { stdio: 'ignore' }) } catch { /* already gone */ }
    rmSync(dir, { recursive: true, force: true })
  }
  process.on('exit', unmount)
  return {
    dir,
    fill() {
      // Write in chunks until the disk refuses: what is left is not enough for a record.
      const chunk = Buffer.alloc(64 * 1024, 0x61)
      let i = 0
      for (;;) {
        try { writeFileSync(ballast + String(i++), chunk) } catch { break }
      }
      for (let size = 32 * 1024; size >= 1; size >>= 1) {
        try { writeFileSync(ballast + String(i++), Buffer.alloc(size)) } catch { /* keep going smaller */ }
      }
    },
    release() {
      for (const name of readdirSync(dir)) if (name.startsWith('ballast')) rmSync(join(dir, name), { force: true })
    },
    unmount,
  }
}
