// compileCron and compileEvery: what a task's schedule compiles to, and what is refused.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileCron, compileEvery } from '../../compiler/cron.js'

const sets = suite('compileCron turns the five fields into plain sets of numbers')

sets('"0 9-17/2 * * MON-FRI" compiles to hours 9, 11, 13, 15, 17 on Monday to Friday', () => {
  const r = compileCron('0 9-17/2 * * MON-FRI', 'Europe/Berlin')
  assert.ok(r.ok)
  if (!r.ok) return
  assert.equal(r.schedule.minutes, [0])
  assert.equal(r.schedule.hours, [9, 11, 13, 15, 17])
  assert.equal(r.schedule.weekdays, [1, 2, 3, 4, 5])
  assert.is(r.schedule.days.length, 31)
  assert.is(r.schedule.months.length, 12)
  assert.is(r.schedule.timezone, 'Europe/Berlin')
  assert.is(r.schedule.fixedTime, true)
  assert.is(r.schedule.dayOfMonthStar, true)
})

sets('month names, lists and Sunday as 7 fold into numbers', () => {
  const r = compileCron('*/20 * 1,15 jan-mar,DEC 7', 'UTC')
  if (!r.ok) throw new Error(r.problem)
  assert.equal(r.schedule.minutes, [0, 20, 40])
  assert.equal(r.schedule.months, [1, 2, 3, 12])
  assert.equal(r.schedule.weekdays, [0])
  assert.is(r.schedule.fixedTime, false, 'a * in the minute')
  assert.is(r.schedule.dayOfMonthStar, false)
  assert.is(r.schedule.dayOfWeekStar, false)
})

const refused = suite('compileCron refuses what cron would not run, saying why')

for (const [expr, problem] of [
  ['61 * * * *', 'minute "61" is outside 0-59'],
  ['* * * *', 'has 4 fields, not 5'],
  ['* 5-2 * * *', 'hour "5-2": the range runs backwards'],
  ['*/0 * * * *', 'minute "*/0" has a step of 0'],
  ['5/15 * * * *', 'minute "5/15": a step needs a range or *, e.g. "5-59/15"'],
  ['0 0 L * *', 'day of month "L": L, W, # and ? (Quartz) are not supported'],
  ['0 0 15W * *', 'day of month "15W": L, W, # and ? (Quartz) are not supported'],
  ['0 0 * * 5#3', 'day of week "5#3": L, W, # and ? (Quartz) are not supported'],
  ['0 0 * * FUN', 'day of week "FUN" is not a number or one of SUN MON TUE WED THU FRI SAT'],
  ['@reboot', '@reboot is not supported (a task runs on a schedule)'],
  ['@often', '"@often" is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly'],
] as const) {
  refused(`"${expr}": ${problem}`, () => {
    assert.equal(compileCron(expr, 'UTC'), { ok: false, code: 'CRON_INVALID', problem })
  })
}

refused('"0 0 30 2 *" never fires: there is no 30 February', () => {
  const r = compileCron('0 0 30 2 *', 'UTC')
  assert.equal(r, { ok: false, code: 'CRON_NEVER_FIRES', problem: 'day 30 never falls in month 2' })
  assert.ok(compileCron('0 0 30 2 1', 'UTC').ok, 'with a weekday too it fires on Mondays in February (OR rule)')
  assert.ok(compileCron('0 0 29 2 *', 'UTC').ok, '29 February fires in leap years')
})

const every = suite('compileEvery reads s, m, h and d')

every('90s, 15m, 2h and 1d are milliseconds; anything else is refused', () => {
  assert.is(compileEvery('90s'), 90_000)
  assert.is(compileEvery('15m'), 900_000)
  assert.is(compileEvery('2h'), 7_200_000)
  assert.is(compileEvery('1d'), 86_400_000)
  for (const bad of ['0s', '1.5m', '10', '5w', '400d']) assert.type(compileEvery(bad), 'string', bad)
})

sets.run()
refused.run()
every.run()
