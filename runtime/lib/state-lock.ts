// One process owns a state directory at a time. Two servers on one state would both resume the
// same unfinished runs (a model asked twice, a reply delivered twice) and both answer the same
// Idempotency-Key, so `serve` takes this lock before it opens or resumes anything and holds it
// for the life of the process; the Gmail helper takes one on its own folder (<state>/gmail). In
// lib/ because it knows nothing of what the folder holds (runtime/store/open.ts re-exports it).
//
// The lock is the file `<state>/lock`, created with O_EXCL and holding the owner's pid and its
// start time (from /proc where there is one, so a reused pid does not look like the old owner).
// A lock whose owner is gone (crash, kill -9, reboot) is stale and is taken over; taking over
// happens under a second O_EXCL file, so two starters racing for one stale lock cannot both win.
import { closeSync, mkdirSync, openSync, readFileSync, realpathSync, rmSync, statSync, writeSync } from 'node:fs'
import { dirname, join } from 'node:path'

export const LOCK_FILE = 'lock'
const TAKEOVER_FILE = 'lock.takeover'
/** a takeover marker older than this was left by a starter that died mid-takeover */
const TAKEOVER_STALE_MS = 10_000

export class StateLockedError extends Error {
  override name = 'StateLockedError'
  constructor(readonly stateDir: string, readonly holderPid: number) {
    super(`the state directory ${stateDir} is in use by another hookgate process (pid ${holderPid}); stop it or give this one its own --state`)
  }
}

interface Holder { pid: number; startTime: string | null }

export interface StateLock {
  readonly path: string
  /** removes the lock file if it is still ours; safe to call more than once */
  release(): void
}

/** locks this process holds: a second service in one process (tests, embedding) is refused too */
const heldHere = new Set<string>()

export function acquireStateLock(stateDir: string): StateLock {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 })
  const path = join(realpathSync(stateDir), LOCK_FILE)
  if (heldHere.has(path)) throw new StateLockedError(stateDir, process.pid)
  const me: Holder = { pid: process.pid, startTime: startTimeOf(process.pid) }
  for (let attempt = 0; attempt < 5; attempt++) {
    if (tryCreate(path, me)) return heldLock(path, me)
    const holder = readHolder(path)
    if (holder && isAlive(holder)) throw new StateLockedError(stateDir, holder.pid)
    takeOverStale(path, holder)
  }
  // Only a livelock of starters taking over from each other gets here.
  const holder = readHolder(path)
  throw new StateLockedError(stateDir, holder?.pid ?? 0)
}

function heldLock(path: string, me: Holder): StateLock {
  let released = false
  heldHere.add(path)
  const release = (): void => {
    if (released) return
    released = true
    heldHere.delete(path)
    const holder = readHolder(path)
    if (holder && holder.pid === me.pid && holder.startTime === me.startTime) rmSync(path, { force: true })
  }
  // The file is removed on a normal exit; after a crash the next start finds its owner gone.
  process.once('exit', release)
  return { path, release: () => { process.off('exit', release); release() } }
}

function tryCreate(path: string, me: Holder): boolean {
  let fd: number
  try {
    fd = openSync(path, 'wx', 0o600)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw err
  }
  try {
    writeSync(fd, JSON.stringify(me) + '\n')
  } finally {
    closeSync(fd)
  }
  return true
}

/**
 * Removes a stale lock under the takeover marker, re-checking under it that the lock is still the
 * stale one seen (another starter may have replaced it meanwhile).
 */
function takeOverStale(path: string, seen: Holder | null): void {
  const marker = join(dirname(path), TAKEOVER_FILE)
  let fd: number
  try {
    fd = openSync(marker, 'wx', 0o600)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    // Someone else is taking over; a marker left by a starter that died is cleared after a while.
    try {
      if (Date.now() - statSync(marker).mtimeMs > TAKEOVER_STALE_MS) rmSync(marker, { force: true })
    } catch { /* gone already */ }
    sleepMs(50)
    return
  }
  closeSync(fd)
  try {
    const now = readHolder(path)
    const same = now === null ? seen === null : seen !== null && now.pid === seen.pid && now.startTime === seen.startTime
    if (same && !(now && isAlive(now))) rmSync(path, { force: true })
  } finally {
    rmSync(marker, { force: true })
  }
}

function readHolder(path: string): Holder | null {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw err
  }
  try {
    const v = JSON.parse(text) as Partial<Holder>
    if (typeof v.pid === 'number' && Number.isInteger(v.pid) && v.pid > 0) return { pid: v.pid, startTime: typeof v.startTime === 'string' ? v.startTime : null }
  } catch { /* a lock file cut short by a crash between create and write */ }
  // Unreadable: its writer died before writing it (the write follows the create at once).
  return { pid: 0, startTime: null }
}

function isAlive(holder: Holder): boolean {
  if (holder.pid <= 0 || holder.pid === process.pid) return false // our own pid from a previous life (containers reuse pid 1)
  try {
    process.kill(holder.pid, 0)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false
    // EPERM: alive, under another user
  }
  // Alive: but is it the same process? A pid reused after a crash or reboot has another start time.
  const now = startTimeOf(holder.pid)
  return holder.startTime === null || now === null || now === holder.startTime
}

/** The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or null. */
function startTimeOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) is in parentheses and may itself hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return fields[19] ?? null
  } catch {
    return null
  }
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}
