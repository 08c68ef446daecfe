// The state-directory lock on its own: a live holder refuses, a dead one is taken over, a lock
// file cut short by a crash is taken over, and one process cannot hold one state twice.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { acquireStateLock, LOCK_FILE, StateLockedError } from '../../../runtime/lib/state-lock.js'
import { scratchDir } from '../../helpers/paths.js'

/** A pid that is certainly not running: a child that has already exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
  await new Promise((r) => child.on('exit', r))
  return child.pid!
}

const lock = suite('acquireStateLock')

lock('writes the owner pid and removes the file on release', () => {
  const dir = scratchDir()
  const held = acquireStateLock(dir)
  const holder = JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'))
  assert.is(holder.pid, process.pid)
  held.release()
  assert.not.ok(existsSync(join(dir, LOCK_FILE)))
})

lock('a second lock in the same process is refused, naming this pid', () => {
  const dir = scratchDir()
  const held = acquireStateLock(dir)
  try {
    const err = (() => { try { acquireStateLock(dir); return undefined } catch (e) { return e } })()
    assert.instance(err, StateLockedError)
    assert.is((err as StateLockedError).holderPid, process.pid)
    assert.match((err as Error).message, String(process.pid))
  } finally {
    held.release()
  }
})

lock('a live holder in another process makes the start fail, naming its pid', async () => {
  const dir = scratchDir()
  // The parent (this test runner's pid) is alive for the whole test: pretend it holds the lock.
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: process.ppid, startTime: null }) + '\n')
  const err = (() => { try { acquireStateLock(dir); return undefined } catch (e) { return e } })()
  assert.instance(err, StateLockedError)
  assert.is((err as StateLockedError).holderPid, process.ppid)
})

lock('the stale lock of a dead process is taken over', async () => {
  const dir = scratchDir()
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: await deadPid(), startTime: '1' }) + '\n')
  const held = acquireStateLock(dir)
  assert.is(JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')).pid, process.pid)
  held.release()
})

lock('a live pid with another start time is a reused pid, and its lock is stale', () => {
  const dir = scratchDir()
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: process.ppid, startTime: 'not-the-real-start-time' }) + '\n')
  if (!existsSync(`/proc/${process.ppid}/stat`)) return // no /proc: start times cannot be compared
  const held = acquireStateLock(dir)
  held.release()
})

lock('a lock file cut short by a crash is taken over', () => {
  const dir = scratchDir()
  writeFileSync(join(dir, LOCK_FILE), '{"pid":')
  const held = acquireStateLock(dir)
  held.release()
})

lock('release leaves a lock that another process took over alone', () => {
  const dir = scratchDir()
  const held = acquireStateLock(dir)
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: process.ppid, startTime: null }) + '\n')
  held.release()
  assert.ok(existsSync(join(dir, LOCK_FILE)))
})

lock.run()
