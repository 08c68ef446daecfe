// The processes a test can see in /proc: a server's transform processes, and whether one is gone.
import { readdirSync, readFileSync } from 'node:fs'

function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  } catch {
    return undefined
  }
}

/** The pids of the transform processes (hookgate-worker) whose parent is `parent`. */
export function transformProcesses(parent: number): number[] {
  const out: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    const pid = Number(name)
    const fields = statFields(pid)
    if (!fields || Number(fields[1]) !== parent || fields[0] === 'Z') continue
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('hookgate-worker')) out.push(pid)
    } catch { /* exited meanwhile */ }
  }
  return out
}

/** True once the process has exited (a zombie nobody reaped yet counts as exited). */
export function processGone(pid: number): boolean {
  const fields = statFields(pid)
  return fields === undefined || fields[0] === 'Z' || fields[0] === 'X'
}

/** CPU seconds (user + system) the process has used, or NaN when it is gone. */
export function cpuSecondsOf(pid: number): number {
  const fields = statFields(pid)
  return fields ? (Number(fields[11]) + Number(fields[12])) / 100 : NaN
}
