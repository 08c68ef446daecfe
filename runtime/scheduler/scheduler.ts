// The scheduler: a background duty (start/stop, like the others) that fires each Task at its
// slots. It only creates runs: what a firing does is `fire` (runtime/scheduler/fire.ts), which claims
// the (task, slot) in the same durable write as the run row, so a reload, a restart or a second
// timer never fires one slot twice. One timer, set for the nearest slot of any task and set again
// after each firing and on reload; nothing polls.
import type { BundleTask } from '../bundle/format.js'
import { slotClock, type SlotClock } from './cron.js'

/** setTimeout's ceiling: a later slot is reached by waking early and setting the timer again. */
const MAX_DELAY_MS = 2 ** 31 - 1

export interface SchedulerDeps {
  /** Starts the task's run for the slot; false when the slot was already claimed. Resolves once the row is durable. */
  fire(task: BundleTask, slotMs: number): Promise<boolean>
  /** per task id, the latest slot it fired for, from the run history */
  lastFired(): ReadonlyMap<string, number>
  log(level: 'info' | 'error', msg: string, fields: Record<string, unknown>): void
  /** the clock (tests) */
  now?: () => number
}

interface Entry {
  task: BundleTask
  clock: SlotClock
  /** the compiled schedule as JSON: a reload that keeps it keeps the entry's place */
  key: string
  last: number | null
  next: number
}

export class Scheduler {
  private entries = new Map<string, Entry>()
  private timer: NodeJS.Timeout | null = null
  private running = false
  /** the firing under way, so that stop() can wait for its row */
  private busy: Promise<void> = Promise.resolve()
  private readonly now: () => number

  constructor(private readonly deps: SchedulerDeps) {
    this.now = deps.now ?? Date.now
  }

  /**
   * Begins with the tasks of the first bundle. A slot missed while the service was down (after the
   * task's last firing, at or before now) runs once now unless the task says `catchUp: skip`.
   */
  start(tasks: readonly BundleTask[], history: ReadonlyMap<string, number> = this.deps.lastFired()): Promise<void> {
    this.running = true
    const now = this.now()
    const missed: Array<[Entry, number]> = []
    this.entries = new Map()
    for (const task of this.usable(tasks)) {
      const entry = this.entry(task, history.get(task.id) ?? null, now)
      this.entries.set(task.id, entry)
      if (entry.last !== null && task.catchUp !== 'skip') {
        const slot = entry.clock.latest(now, entry.last)
        if (slot !== null) missed.push([entry, slot])
      }
    }
    return this.run(async () => {
      for (const [entry, slot] of missed) await this.fireOne(entry, slot, true)
    })
  }

  /** A reloaded bundle: unchanged tasks keep their next slot; new or changed ones start from now. */
  configure(tasks: readonly BundleTask[]): void {
    if (!this.running) return
    let history: ReadonlyMap<string, number> | null = null
    const now = this.now()
    const next = new Map<string, Entry>()
    for (const task of this.usable(tasks)) {
      const old = this.entries.get(task.id)
      const key = JSON.stringify(task.when)
      if (old && old.key === key) {
        next.set(task.id, { ...old, task })
        continue
      }
      history ??= this.deps.lastFired()
      next.set(task.id, this.entry(task, old?.last ?? history.get(task.id) ?? null, now))
    }
    this.entries = next
    this.arm()
  }

  /** Stops the timer and waits for a firing under way to be on disk. */
  async stop(): Promise<void> {
    this.running = false
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    await this.busy
  }

  /** The next slot of each task (for logs and tests). */
  upcoming(): Array<{ id: string; next: number }> {
    return [...this.entries.values()].map((e) => ({ id: e.task.id, next: e.next }))
  }

  private usable(tasks: readonly BundleTask[]): BundleTask[] {
    const out: BundleTask[] = []
    for (const t of tasks) {
      if (t.when) out.push(t)
      else this.deps.log('error', 'task not scheduled: the bundle has no compiled schedule for it; recompile with this hookgate', { task: t.id })
    }
    return out
  }

  private entry(task: BundleTask, last: number | null, now: number): Entry {
    const clock = slotClock(task.when!)
    return { task, clock, key: JSON.stringify(task.when), last, next: clock.next(Math.max(now, last ?? now)) }
  }

  /** Runs `work` after the firing before it, then sets the timer again. */
  private run(work: () => Promise<void>): Promise<void> {
    const done = this.busy.then(work).catch((err: Error) => this.deps.log('error', 'scheduler failed', { error: err.message }))
    this.busy = done.finally(() => this.arm())
    return this.busy
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    if (!this.running || this.entries.size === 0) return
    let soonest = Infinity
    for (const e of this.entries.values()) soonest = Math.min(soonest, e.next)
    const delay = Math.min(MAX_DELAY_MS, Math.max(0, soonest - this.now()))
    this.timer = setTimeout(() => { this.timer = null; void this.run(() => this.fireDue()) }, delay)
    this.timer.unref()
  }

  private async fireDue(): Promise<void> {
    const now = this.now()
    for (const entry of [...this.entries.values()]) {
      if (!this.running) return
      if (entry.next > now) continue
      // Woken late (a busy loop, a suspended host): the slots passed meanwhile run once, as the latest.
      const slot = entry.clock.latest(now, entry.next - 1) ?? entry.next
      await this.fireOne(entry, slot, false)
      entry.next = entry.clock.next(Math.max(now, slot))
    }
  }

  private async fireOne(entry: Entry, slot: number, caughtUp: boolean): Promise<void> {
    try {
      const fired = await this.deps.fire(entry.task, slot)
      if (fired && caughtUp) this.deps.log('info', 'task caught up a slot missed while stopped', { task: entry.task.id, scheduledFor: new Date(slot).toISOString() })
    } catch (err) {
      // The slot is not retried: the next one comes on schedule (a full disk shows in /healthz).
      this.deps.log('error', 'task firing failed', { task: entry.task.id, scheduledFor: new Date(slot).toISOString(), error: (err as Error).message })
    }
    if (entry.last === null || slot > entry.last) entry.last = slot
  }
}
