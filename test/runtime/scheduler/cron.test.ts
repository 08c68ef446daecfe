// When a compiled schedule fires, held to published expectations rather than to itself: the
// examples of crontab(5) (cronie / Vixie cron), its day-of-month OR day-of-week rule, the
// daylight-saving rules of cron(8), and the 2026 transitions of America/New_York (02:00 EST → 03:00
// EDT on 8 March at 07:00 UTC; 02:00 EDT → 01:00 EST on 1 November at 06:00 UTC) and Europe/Berlin
// (02:00 CET → 03:00 CEST on 29 March at 01:00 UTC; 03:00 CEST → 02:00 CET on 25 October at 01:00 UTC).
//
// store: none — schedules on their own: the PostgreSQL pass leaves it out.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileCron, compileEvery } from '../../../compiler/cron.js'
import { slotClock } from '../../../runtime/scheduler/cron.js'

/** The next `n` slots of `expr` (in `tz`) strictly after `from`, as ISO UTC. */
function slots(expr: string, from: string, n: number, tz = 'UTC'): string[] {
  const compiled = compileCron(expr, tz)
  if (!compiled.ok) throw new Error(`${expr}: ${compiled.problem}`)
  const clock = slotClock(compiled.schedule)
  const out: string[] = []
  let at = Date.parse(from)
  for (let i = 0; i < n; i++) out.push(new Date((at = clock.next(at))).toISOString())
  return out
}

const iso = (s: string) => new Date(s).toISOString()

const examples = suite('slotClock(cron).next on the examples of crontab(5)')

examples('"5 0 * * *" runs five minutes after midnight, every day', () => {
  assert.equal(slots('5 0 * * *', '2026-11-24T12:00:00Z', 2), [iso('2026-11-25T00:05Z'), iso('2026-11-26T00:05Z')])
})

examples('"15 14 1 * *" runs at 2:15pm on the first of every month', () => {
  assert.equal(slots('15 14 1 * *', '2026-11-24T12:00:00Z', 2), [iso('2026-12-01T14:15Z'), iso('2027-01-01T14:15Z')])
})

examples('"0 22 * * 1-5" runs at 10 pm on weekdays (Friday 27 November, then Monday 30)', () => {
  assert.equal(slots('0 22 * * 1-5', '2026-11-27T12:00:00Z', 2), [iso('2026-11-27T22:00Z'), iso('2026-11-30T22:00Z')])
})

examples('"23 0-23/2 * * *" runs 23 minutes after midnight, 2am, 4am, every day', () => {
  assert.equal(slots('23 0-23/2 * * *', '2026-11-24T00:00:00Z', 3), [iso('2026-11-24T00:23Z'), iso('2026-11-24T02:23Z'), iso('2026-11-24T04:23Z')])
})

examples('"5 4 * * sun" runs at 4:05 every Sunday (names in any case; 0 and 7 are both Sunday)', () => {
  const sundays = [iso('2026-11-29T04:05Z'), iso('2026-12-06T04:05Z')]
  assert.equal(slots('5 4 * * sun', '2026-11-24T00:00:00Z', 2), sundays)
  assert.equal(slots('5 4 * * 0', '2026-11-24T00:00:00Z', 2), sundays)
  assert.equal(slots('5 4 * * 7', '2026-11-24T00:00:00Z', 2), sundays)
})

examples('"30 4 1,15 * 5" runs on the 1st and 15th of each month plus every Friday (the OR rule)', () => {
  // December 2026: Tuesday 1st, Fridays 4th and 11th, Tuesday 15th, Friday 18th
  assert.equal(slots('30 4 1,15 * 5', '2026-11-30T12:00:00Z', 5), ['2026-12-01', '2026-12-04', '2026-12-11', '2026-12-15', '2026-12-18'].map((d) => iso(`${d}T04:30Z`)))
})

examples('a day field written as */n counts as unrestricted: "0 0 */10 * 5" runs on days 1, 11, 21, 31 that are Fridays only', () => {
  // crontab(5) reads a field starting with * as unrestricted, so the two fields are ANDed: of days
  // 1, 11, 21 and 31, the Fridays after 1 December 2026 are 11 December and 1 January 2027.
  assert.equal(slots('0 0 */10 * 5', '2026-12-01T00:00:00Z', 2), [iso('2026-12-11T00:00Z'), iso('2027-01-01T00:00Z')])
})

examples('ranges, steps and lists: "*/15", "1-5", "0 9-17/2 * * MON-FRI"', () => {
  assert.equal(slots('*/15 * * * *', '2026-11-24T10:07:00Z', 4), ['10:15', '10:30', '10:45', '11:00'].map((t) => iso(`2026-11-24T${t}Z`)))
  assert.equal(slots('1-5 * * * *', '2026-11-24T10:03:30Z', 3), ['10:04', '10:05', '11:01'].map((t) => iso(`2026-11-24T${t}Z`)))
  // Friday 27 November: 17:00, then Monday 09:00, 11:00
  assert.equal(slots('0 9-17/2 * * MON-FRI', '2026-11-27T16:00:00Z', 3), [iso('2026-11-27T17:00Z'), iso('2026-11-30T09:00Z'), iso('2026-11-30T11:00Z')])
})

examples('the aliases are the expressions crontab(5) lists', () => {
  const from = '2026-11-24T06:30:00Z'
  assert.equal(slots('@hourly', from, 1), [iso('2026-11-24T07:00Z')])
  assert.equal(slots('@daily', from, 1), slots('@midnight', from, 1))
  assert.equal(slots('@daily', from, 1), [iso('2026-11-25T00:00Z')])
  assert.equal(slots('@weekly', from, 1), [iso('2026-11-29T00:00Z')])
  assert.equal(slots('@monthly', from, 1), [iso('2026-12-01T00:00Z')])
  assert.equal(slots('@yearly', from, 1), slots('@annually', from, 1))
  assert.equal(slots('@yearly', from, 1), [iso('2027-01-01T00:00Z')])
})

examples('29 February fires in leap years only', () => {
  assert.equal(slots('0 0 29 2 *', '2026-01-01T00:00:00Z', 2), [iso('2028-02-29T00:00Z'), iso('2032-02-29T00:00Z')])
})

examples('a zone with a half-hour offset: @hourly in Asia/Kolkata fires at :30 UTC', () => {
  assert.equal(slots('@hourly', '2026-01-01T00:00:00Z', 2, 'Asia/Kolkata'), [iso('2026-01-01T00:30Z'), iso('2026-01-01T01:30Z')])
})

const dst = suite('slotClock(cron).next across daylight-saving changes, as cron(8) describes')

dst('New York, 8 March 2026: "30 2 * * *" (in the skipped hour) runs once, at 03:00 EDT, right after the jump', () => {
  assert.equal(slots('30 2 * * *', '2026-03-07T12:00:00Z', 2, 'America/New_York'), [iso('2026-03-08T07:00Z'), iso('2026-03-09T06:30Z')])
})

dst('New York, 8 March 2026: two slots in the skipped hour ("0,30 2 * * *") still run only once', () => {
  assert.equal(slots('0,30 2 * * *', '2026-03-07T12:00:00Z', 3, 'America/New_York'), [iso('2026-03-08T07:00Z'), iso('2026-03-09T06:00Z'), iso('2026-03-09T06:30Z')])
})

dst('New York, 8 March 2026: a wildcard job ("*/30 * * * *") has no slots in the skipped hour', () => {
  // 01:30 EST, then 03:00 and 03:30 EDT
  assert.equal(slots('*/30 * * * *', '2026-03-08T06:00:00Z', 3, 'America/New_York'), [iso('2026-03-08T06:30Z'), iso('2026-03-08T07:00Z'), iso('2026-03-08T07:30Z')])
})

dst('New York, 1 November 2026: "30 1 * * *" runs once, at the first 01:30 (EDT), not again at 01:30 EST', () => {
  assert.equal(slots('30 1 * * *', '2026-10-31T12:00:00Z', 2, 'America/New_York'), [iso('2026-11-01T05:30Z'), iso('2026-11-02T06:30Z')])
  // started between the two 01:30s, it waits for the next day
  assert.equal(slots('30 1 * * *', '2026-11-01T05:45:00Z', 1, 'America/New_York'), [iso('2026-11-02T06:30Z')])
})

dst('New York, 1 November 2026: a wildcard job ("*/30 * * * *") runs both times through the repeated hour', () => {
  // 01:00 and 01:30 EDT, then 01:00 and 01:30 EST, then 02:00 EST
  assert.equal(slots('*/30 * * * *', '2026-11-01T04:50:00Z', 5, 'America/New_York'), ['05:00', '05:30', '06:00', '06:30', '07:00'].map((t) => iso(`2026-11-01T${t}Z`)))
})

dst('Berlin, 29 March 2026: "30 2 * * *" runs once at 03:00 CEST (01:00 UTC)', () => {
  assert.equal(slots('30 2 * * *', '2026-03-28T12:00:00Z', 2, 'Europe/Berlin'), [iso('2026-03-29T01:00Z'), iso('2026-03-30T00:30Z')])
})

dst('Berlin, 25 October 2026: "30 2 * * *" runs once, at 02:30 CEST (00:30 UTC), not again at 02:30 CET', () => {
  assert.equal(slots('30 2 * * *', '2026-10-24T12:00:00Z', 2, 'Europe/Berlin'), [iso('2026-10-25T00:30Z'), iso('2026-10-26T01:30Z')])
})

dst('Berlin, 25 October 2026: "@hourly" (a * in the hour) fires at each of the two 02:00s', () => {
  // 01:00 CEST = 23:00 UTC, 02:00 CEST = 00:00 UTC, 02:00 CET = 01:00 UTC, 03:00 CET = 02:00 UTC
  assert.equal(slots('@hourly', '2026-10-24T22:30:00Z', 4, 'Europe/Berlin'), [iso('2026-10-24T23:00Z'), iso('2026-10-25T00:00Z'), iso('2026-10-25T01:00Z'), iso('2026-10-25T02:00Z')])
})

dst('a local 09:00 job keeps local time across the change: 14:00 UTC in winter, 13:00 UTC in summer (New York)', () => {
  assert.equal(slots('0 9 * * *', '2026-03-06T15:00:00Z', 3, 'America/New_York'), [iso('2026-03-07T14:00Z'), iso('2026-03-08T13:00Z'), iso('2026-03-09T13:00Z')])
})

const latest = suite('slotClock.latest: the newest slot missed since the last firing')

latest('a daily job down for ten days has one latest slot, today\'s', () => {
  const c = compileCron('@daily', 'UTC')
  if (!c.ok) throw new Error(c.problem)
  const clock = slotClock(c.schedule)
  assert.is(clock.latest(Date.parse('2026-11-24T06:00:00Z'), Date.parse('2026-11-14T00:00:00Z')), Date.parse('2026-11-24T00:00:00Z'))
  assert.is(clock.latest(Date.parse('2026-11-24T06:00:00Z'), Date.parse('2026-11-24T00:00:00Z')), null)
})

latest('an interval counts from the epoch, so every process agrees on its slots', () => {
  const ms = compileEvery('90s')
  assert.is(ms, 90_000)
  const clock = slotClock({ kind: 'every', everyMs: 90_000 })
  assert.is(clock.next(Date.parse('2026-11-24T00:00:00Z')), Date.parse('2026-11-24T00:01:30Z'))
  assert.is(clock.next(Date.parse('2026-11-24T00:01:29.999Z')), Date.parse('2026-11-24T00:01:30Z'))
  assert.is(clock.latest(Date.parse('2026-11-24T00:04:00Z'), Date.parse('2026-11-24T00:00:00Z')), Date.parse('2026-11-24T00:03:00Z'))
})

examples.run()
dst.run()
latest.run()
