// When a Task's next slot is: the compiled schedule (plain sets of numbers, see compiler/cron.ts)
// walked forward from an instant. Only comparisons and date arithmetic here; the time zone's wall
// clock comes from Intl, which Node ships with its full zone data.
//
// Daylight saving follows cron(8) (Vixie cron, cronie): a fixed-time job (no `*` in its minute or
// hour) whose wall time falls in a skipped hour runs once at the first instant after the gap, and in
// a repeated hour runs only at the first of the two instants; a job with `*` in its minute or hour
// runs by the wall clock as it is (nothing in a skipped hour, both times through a repeated hour).
import type { BundleSchedule } from '../bundle/format.js'

const MINUTE = 60_000
/** enough steps for any schedule the compiler lets through (Feb 29 on a weekday takes the longest) */
const MAX_STEPS = 100_000

type CronSchedule = Extract<BundleSchedule, { kind: 'cron' }>

/** The next slot strictly after an instant (ms since the epoch). */
export interface SlotClock {
  next(afterMs: number): number
  /** the latest slot at or before `atMs` and after `afterMs`, or null when there is none */
  latest(atMs: number, afterMs: number): number | null
}

export function slotClock(when: BundleSchedule): SlotClock {
  if (when.kind === 'every') return intervalClock(when.everyMs)
  return new CronClock(when)
}

/** Intervals count from the Unix epoch, so every process and restart agrees on the slots. */
function intervalClock(everyMs: number): SlotClock {
  return {
    next: (after) => (Math.floor(after / everyMs) + 1) * everyMs,
    latest: (at, after) => {
      const slot = Math.floor(at / everyMs) * everyMs
      return slot > after ? slot : null
    },
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>()

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone)
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric' })
    formatters.set(timeZone, f)
  }
  return f
}

class CronClock implements SlotClock {
  private readonly minutes: boolean[]
  private readonly hours: boolean[]
  private readonly days: boolean[]
  private readonly months: boolean[]
  private readonly weekdays: boolean[]
  private readonly utc: boolean
  private readonly format: Intl.DateTimeFormat | null

  constructor(private readonly s: CronSchedule) {
    this.minutes = mask(s.minutes, 60)
    this.hours = mask(s.hours, 24)
    this.days = mask(s.days, 32)
    this.months = mask(s.months, 13)
    this.weekdays = mask(s.weekdays, 7)
    this.utc = s.timezone === 'UTC' || s.timezone === 'Etc/UTC'
    this.format = this.utc ? null : formatterFor(s.timezone)
  }

  /** The wall clock at instant `u` (a whole minute), as if it were UTC: fields read with getUTC*. */
  private wall(u: number): number {
    if (!this.format) return u
    let y = 0, mo = 0, d = 0, h = 0, mi = 0
    for (const p of this.format.formatToParts(u)) {
      if (p.type === 'year') y = Number(p.value)
      else if (p.type === 'month') mo = Number(p.value)
      else if (p.type === 'day') d = Number(p.value)
      else if (p.type === 'hour') h = Number(p.value)
      else if (p.type === 'minute') mi = Number(p.value)
    }
    return Date.UTC(y, mo - 1, d, h, mi)
  }

  /** The instants whose wall clock reads `w`, earliest first: none in a gap, two in a repeated hour. */
  private instantsOf(w: number): number[] {
    if (this.utc) return [w]
    const out: number[] = []
    for (const probe of [w - 86_400_000, w, w + 86_400_000]) {
      const u = w - (this.wall(probe) - probe)
      if (!out.includes(u) && this.wall(u) === w) out.push(u)
    }
    return out.sort((a, b) => a - b)
  }

  /** The first instant whose wall clock reads `w` or later (the end of the gap when `w` was skipped). */
  private startOf(w: number): number {
    const at = this.instantsOf(w)
    if (at.length > 0) return at[0]!
    // In a gap: between the instant read with the offset before it and the one after, find the jump.
    let lo = w - (this.wall(w + 86_400_000) - (w + 86_400_000))
    let hi = w - (this.wall(w - 86_400_000) - (w - 86_400_000))
    if (lo > hi) [lo, hi] = [hi, lo]
    while (hi - lo > MINUTE) {
      const mid = lo + Math.floor((hi - lo) / 2 / MINUTE) * MINUTE
      if (this.wall(mid) > w) hi = mid
      else lo = mid
    }
    return hi
  }

  private dayMatches(date: Date): boolean {
    const dom = this.days[date.getUTCDate()]!
    const dow = this.weekdays[date.getUTCDay()]!
    // crontab(5): with both day fields restricted, either one matching is enough.
    return this.s.dayOfMonthStar || this.s.dayOfWeekStar ? dom && dow : dom || dow
  }

  private wallMatches(w: number): boolean {
    const date = new Date(w)
    return this.months[date.getUTCMonth() + 1]! && this.dayMatches(date) && this.hours[date.getUTCHours()]! && this.minutes[date.getUTCMinutes()]!
  }

  next(after: number): number {
    let u = Math.floor(after / MINUTE) * MINUTE + MINUTE
    for (let step = 0; step < MAX_STEPS; step++) {
      const w = this.wall(u)
      if (this.s.fixedTime && !this.utc) {
        // Just after a jump forward: a slot whose wall time was skipped runs now, once.
        const before = this.wall(u - MINUTE)
        for (let skipped = before + MINUTE; skipped < w; skipped += MINUTE) {
          if (this.wallMatches(skipped)) return u
        }
      }
      const date = new Date(w)
      const month = date.getUTCMonth() + 1
      if (!this.months[month]) {
        u = Math.max(u + MINUTE, this.startOf(Date.UTC(date.getUTCFullYear(), month, 1)))
        continue
      }
      if (!this.dayMatches(date)) {
        u = Math.max(u + MINUTE, this.startOf(Date.UTC(date.getUTCFullYear(), month - 1, date.getUTCDate() + 1)))
        continue
      }
      const minute = date.getUTCMinutes()
      if (!this.hours[date.getUTCHours()]) {
        u += (60 - minute) * MINUTE
        continue
      }
      if (!this.minutes[minute]) {
        let m = minute + 1
        while (m < 60 && !this.minutes[m]) m++
        u += (m - minute) * MINUTE
        continue
      }
      // The second time through a repeated hour: a fixed-time job already ran at the first.
      if (this.s.fixedTime && !this.utc && this.instantsOf(w)[0]! < u) {
        u += MINUTE
        continue
      }
      return u
    }
    throw new Error(`no slot within ${MAX_STEPS} steps of ${new Date(after).toISOString()}`)
  }

  latest(at: number, after: number): number | null {
    // Forward from a little before `at`, widening only when that window holds no slot.
    for (const back of [3_600_000, 86_400_000, 32 * 86_400_000, 367 * 86_400_000, Infinity]) {
      let slot = this.next(Math.max(after, at - back))
      if (slot > at) {
        if (at - back <= after) return null
        continue
      }
      for (let n = this.next(slot); n <= at; n = this.next(n)) slot = n
      return slot
    }
    return null
  }
}

function mask(values: number[], size: number): boolean[] {
  const out = new Array<boolean>(size).fill(false)
  for (const v of values) if (v >= 0 && v < size) out[v] = true
  return out
}
