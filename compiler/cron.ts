// Task schedules, checked and compiled: a five-field cron expression (or an @alias) becomes plain
// sets of minutes, hours, days, months and weekdays, and `every: 90s` a number of milliseconds, so
// that the runtime's scheduler only compares numbers (runtime/scheduler/cron.ts).
//
// The dialect is Vixie cron / cronie's crontab(5): numbers, `*`, ranges `a-b`, steps `*/n` and
// `a-b/n`, lists, names JAN-DEC and SUN-SAT (any case), 0 or 7 for Sunday. Not supported (compile
// errors that say so): Quartz's `L`, `W`, `#` and `?`, `a/n` without a range end, and `@reboot`.
import type { BundleSchedule } from '../runtime/bundle/format.js'

export const CRON_ALIASES: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
}

interface FieldSpec { label: string; min: number; max: number; names?: readonly string[] }

const MONTH_NAMES = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'] as const
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] as const

const FIELDS: readonly FieldSpec[] = [
  { label: 'minute', min: 0, max: 59 },
  { label: 'hour', min: 0, max: 23 },
  { label: 'day of month', min: 1, max: 31 },
  { label: 'month', min: 1, max: 12, names: MONTH_NAMES },
  { label: 'day of week', min: 0, max: 7, names: DAY_NAMES },
]

/** Days in each month, February as in a leap year (a schedule for the 29th fires in leap years). */
const MONTH_DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

export type CronResult = { ok: true; schedule: Extract<BundleSchedule, { kind: 'cron' }> } | { ok: false; problem: string; code: 'CRON_INVALID' | 'CRON_NEVER_FIRES' }

/** Parses a cron expression (five fields or an @alias) into its sets; `timezone` is stored as given. */
export function compileCron(expression: string, timezone: string): CronResult {
  const text = expression.trim()
  let source = text
  if (text.startsWith('@')) {
    const alias = CRON_ALIASES[text.toLowerCase()]
    if (alias === undefined) return { ok: false, code: 'CRON_INVALID', problem: text.toLowerCase() === '@reboot' ? '@reboot is not supported (a task runs on a schedule)' : `"${text}" is not one of ${Object.keys(CRON_ALIASES).join(', ')}` }
    source = alias
  }
  const fields = source.split(/\s+/)
  if (fields.length !== 5) return { ok: false, code: 'CRON_INVALID', problem: `has ${fields.length} fields, not 5` }
  const sets: number[][] = []
  for (let i = 0; i < 5; i++) {
    const parsed = parseField(fields[i]!, FIELDS[i]!)
    if (typeof parsed === 'string') return { ok: false, code: 'CRON_INVALID', problem: parsed }
    sets.push(parsed)
  }
  // Sunday is 0 or 7; the runtime knows only 0.
  const weekdays = [...new Set(sets[4]!.map((d) => (d === 7 ? 0 : d)))].sort((a, b) => a - b)
  const schedule: Extract<BundleSchedule, { kind: 'cron' }> = {
    kind: 'cron',
    minutes: sets[0]!,
    hours: sets[1]!,
    days: sets[2]!,
    months: sets[3]!,
    weekdays,
    // crontab(5): a field that starts with `*` is unrestricted; when both day fields are restricted, either may match.
    dayOfMonthStar: fields[2]!.startsWith('*'),
    dayOfWeekStar: fields[4]!.startsWith('*'),
    // cron(8): only jobs with no `*` in their minute and hour get the daylight-saving treatment.
    fixedTime: !fields[0]!.startsWith('*') && !fields[1]!.startsWith('*'),
    timezone,
  }
  if (!schedule.dayOfMonthStar && schedule.dayOfWeekStar && !schedule.months.some((m) => schedule.days.some((d) => d <= MONTH_DAYS[m - 1]!))) {
    return { ok: false, code: 'CRON_NEVER_FIRES', problem: `day ${schedule.days.join(',')} never falls in month ${schedule.months.join(',')}` }
  }
  return { ok: true, schedule }
}

function parseField(field: string, spec: FieldSpec): number[] | string {
  const out = new Set<number>()
  for (const part of field.split(',')) {
    if (/[LW#?]/i.test(part) && !(spec.names && /^[A-Z]{3}$/i.test(part.split(/[-/]/)[0] ?? ''))) {
      return `${spec.label} "${part}": L, W, # and ? (Quartz) are not supported`
    }
    const m = /^(\*|([0-9A-Za-z]+)(?:-([0-9A-Za-z]+))?)(?:\/([0-9]+))?$/.exec(part)
    if (!m) return `${spec.label} "${part}" is not a number, range, list or step`
    let lo = spec.min
    let hi = spec.max === 7 ? 6 : spec.max
    if (m[2] !== undefined) {
      const a = value(m[2], spec)
      if (typeof a === 'string') return a
      lo = a
      hi = a
      if (m[3] !== undefined) {
        const b = value(m[3], spec)
        if (typeof b === 'string') return b
        hi = b
      } else if (m[4] !== undefined) {
        return `${spec.label} "${part}": a step needs a range or *, e.g. "${m[2]}-${spec.max}/${m[4]}"`
      }
      if (lo > hi) return `${spec.label} "${part}": the range runs backwards`
    }
    const step = m[4] !== undefined ? Number(m[4]) : 1
    if (step === 0) return `${spec.label} "${part}" has a step of 0`
    for (let v = lo; v <= hi; v += step) out.add(v)
  }
  return [...out].sort((a, b) => a - b)
}

function value(token: string, spec: FieldSpec): number | string {
  if (/^[0-9]+$/.test(token)) {
    const n = Number(token)
    if (n < spec.min || n > spec.max) return `${spec.label} "${token}" is outside ${spec.min}-${spec.max}`
    return n
  }
  const i = spec.names?.indexOf(token.toUpperCase() as never) ?? -1
  if (i < 0) return spec.names ? `${spec.label} "${token}" is not a number or one of ${spec.names.join(' ')}` : `${spec.label} "${token}" is not a number`
  return spec === FIELDS[3] ? i + 1 : i
}

/** `every: 90s` as milliseconds, or what is wrong with it. */
export function compileEvery(text: string): number | string {
  const m = /^([1-9][0-9]*)(s|m|h|d)$/.exec(text.trim())
  if (!m) return `"${text}" is not a whole number followed by s, m, h or d`
  const ms = Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd']
  if (ms > 366 * 86_400_000) return `"${text}" is longer than 366 days`
  return ms
}

/** Whether this runtime knows the IANA time zone name. */
export function isKnownTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat(undefined, { timeZone: name })
    return true
  } catch {
    return false
  }
}
