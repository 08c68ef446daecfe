// A permission taken from a directory in a way root feels too. Tests run as root, and root ignores
// mode bits (a chmod 0500 stops nothing), so the immutable attribute stands in for an operator's
// chmod, an ACL or a read-only mount: with `chattr +i` on a directory, creating, renaming or
// removing a file in it fails with EPERM, whoever asks. Files already open for writing are not
// stopped, just as with a chmod; what breaks is every new file (a blob, a log, a rotation).
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface LockableDir {
  /** chattr +i: no file can be created, renamed or removed in it until unlock() */
  lock(): void
  unlock(): void
}

/** `dir` made lockable, or null when chattr is missing or its file system has no immutable attribute. */
export function lockableDir(dir: string): LockableDir | null {
  const probe = mkdtempSync(join(dir, '.immutable-probe-'))
  try {
    execFileSync('chattr', ['+i', probe], { stdio: 'ignore' })
    let refused = false
    try { writeFileSync(join(probe, 'x'), '') } catch { refused = true }
    execFileSync('chattr', ['-i', probe], { stdio: 'ignore' })
    if (!refused) return null
  } catch {
    return null
  } finally {
    rmSync(probe, { recursive: true, force: true })
  }
  let locked = false
  const unlock = (): void => {
    if (!locked) return
    execFileSync('chattr', ['-i', dir], { stdio: 'ignore' })
    locked = false
  }
  // a test that fails while the directory is locked must not leave it undeletable
  process.on('exit', () => { try { unlock() } catch { /* gone already */ } })
  return {
    lock() { execFileSync('chattr', ['+i', dir], { stdio: 'ignore' }); locked = true },
    unlock,
  }
}
