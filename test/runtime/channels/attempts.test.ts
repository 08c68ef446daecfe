// The pieces of the delivery loop on their own: the backoff schedule, Retry-After, the loop's
// decisions and messages, and the text helpers the chat channels use.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { backoffDelay, parseRetryAfter, runAttempts, shortText, type LoopContext, type Outcome } from '../../../runtime/channels/attempts.js'
import { slackEscape, truncate, webhookMessageId } from '../../../runtime/channels/http-channels.js'
import { DeliveryError } from '../../../runtime/channels/index.js'
import { deliveryError, testClock } from './helpers.js'

// ---------------------------------------------------------------------------------------------
const backoff = suite('backoffDelay')

backoff('doubles from 500 ms and keeps each wait between half and all of its step', () => {
  const steps = [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]
  steps.forEach((step, i) => {
    assert.is(backoffDelay(i + 1, () => 0), step / 2, `attempt ${i + 1} lowest`)
    assert.is(backoffDelay(i + 1, () => 0.999999), Math.round(step / 2 + 0.999999 * step / 2), `attempt ${i + 1} highest`)
  })
})

backoff('never waits longer than the 30 s cap, however many attempts', () => {
  for (let n = 1; n < 60; n++) assert.ok(backoffDelay(n) <= 30_000)
})

backoff('spreads the waits of one step with jitter', () => {
  const seen = new Set(Array.from({ length: 50 }, () => backoffDelay(4)))
  assert.ok(seen.size > 10, `only ${seen.size} distinct waits`)
})

// ---------------------------------------------------------------------------------------------
const retryAfter = suite('parseRetryAfter')

retryAfter('reads delta seconds, whole or fractional', () => {
  assert.is(parseRetryAfter('3', 0), 3000)
  assert.is(parseRetryAfter('0', 0), 0)
  assert.is(parseRetryAfter('1.5', 0), 1500)
  assert.is(parseRetryAfter(['2', '9'], 0), 2000)
})

retryAfter('reads an HTTP date relative to now, never negative', () => {
  const now = Date.UTC(2024, 0, 2, 3, 4, 5)
  assert.is(parseRetryAfter('Tue, 02 Jan 2024 03:04:15 GMT', now), 10_000)
  assert.is(parseRetryAfter('Tue, 02 Jan 2024 03:00:00 GMT', now), 0)
})

retryAfter('answers null for a missing or unreadable value', () => {
  assert.is(parseRetryAfter(undefined, 0), null)
  assert.is(parseRetryAfter('', 0), null)
  assert.is(parseRetryAfter('soon', 0), null)
  assert.is(parseRetryAfter('-3', 0), null)
})

// ---------------------------------------------------------------------------------------------
const loop = suite('runAttempts')

function context(over: Partial<LoopContext> = {}) {
  const clock = testClock()
  return { clock, ctx: { type: 'slack', id: 'ops', maxAttempts: 4, now: clock.now, sleep: clock.sleep, random: () => 0, scrub: (t: string) => t.replace(/hunter2/g, '[redacted]'), ...over } as LoopContext }
}
const script = (...outcomes: Outcome[]) => { let i = 0; return async () => outcomes[Math.min(i++, outcomes.length - 1)]! }

loop('returns the success and how many attempts it took', async () => {
  const { ctx, clock } = context()
  const r = await runAttempts(ctx, script({ ok: false, retryable: true, reason: 'answered 503' }, { ok: true, detail: 'slack 200' }))
  assert.equal(r, { ok: true, attempts: 2, detail: 'slack 200' })
  assert.equal(clock.waits, [250])
})

loop('stops at the first final failure', async () => {
  const { ctx } = context()
  const err = await deliveryError(runAttempts(ctx, script({ ok: false, retryable: false, reason: 'answered 404 (no_service)' })))
  assert.is(err.message, 'slack channel "ops" answered 404 (no_service) after 1 attempt')
  assert.equal([err.attempts, err.retryable], [1, false])
})

loop('makes at most maxAttempts attempts and reports the last reason', async () => {
  const { ctx, clock } = context({ maxAttempts: 4 })
  let calls = 0
  const err = await deliveryError(runAttempts(ctx, async (n) => { calls++; return { ok: false, retryable: true, reason: `answered 50${n}` } }))
  assert.is(calls, 4)
  assert.is(err.message, 'slack channel "ops" answered 504 after 4 attempts')
  assert.equal([err.attempts, err.retryable], [4, true])
  assert.equal(clock.waits, [250, 500, 1000])
})

loop('makes one attempt when maxAttempts is 1 or less', async () => {
  const { ctx } = context({ maxAttempts: 0 })
  const err = await deliveryError(runAttempts(ctx, script({ ok: false, retryable: true, reason: 'answered 500' })))
  assert.is(err.attempts, 1)
})

loop('waits what the answer asked for instead of the backoff', async () => {
  const { ctx, clock } = context()
  await runAttempts(ctx, script({ ok: false, retryable: true, reason: 'answered 429', retryAfterMs: 7000 }, { ok: true, detail: 'x' }))
  assert.equal(clock.waits, [7000])
})

loop('gives up, retryable, when asked to wait longer than a minute', async () => {
  const { ctx, clock } = context()
  const err = await deliveryError(runAttempts(ctx, script({ ok: false, retryable: true, reason: 'answered 429', retryAfterMs: 120_000 })))
  assert.is(err.message, 'slack channel "ops" answered 429 and asked to wait 120 s, longer than the 60 s a delivery waits, after 1 attempt')
  assert.equal([err.attempts, err.retryable], [1, true])
  assert.equal(clock.waits, [])
})

loop('removes credentials from the message', async () => {
  const { ctx } = context()
  const err = await deliveryError(runAttempts(ctx, script({ ok: false, retryable: false, reason: 'answered 403 (bad token hunter2)' })))
  assert.is(err.message, 'slack channel "ops" answered 403 (bad token [redacted]) after 1 attempt')
})

loop('does not start when the signal has already aborted', async () => {
  const controller = new AbortController()
  controller.abort()
  const { ctx } = context({ signal: controller.signal })
  let calls = 0
  const err = await deliveryError(runAttempts(ctx, async () => { calls++; return { ok: true, detail: 'x' } }))
  assert.is(calls, 0)
  assert.is(err.message, 'slack channel "ops" was cancelled before the first attempt')
  assert.is(err.attempts, 0)
})

loop('throws DeliveryError, an Error with attempts and retryable', async () => {
  const err = new DeliveryError('m', 2, true)
  assert.instance(err, Error)
  assert.equal([err.name, err.message, err.attempts, err.retryable], ['DeliveryError', 'm', 2, true])
})

// ---------------------------------------------------------------------------------------------
const short = suite('shortText')

short('keeps a short answer on one line', () => {
  assert.is(shortText('  no_service\n'), 'no_service')
  assert.is(shortText('a\n  b'), 'a b')
})

short('cuts a long answer and drops HTML pages and non-strings', () => {
  assert.is(shortText('x'.repeat(200))!.length, 120)
  assert.is(shortText('<!DOCTYPE html><html>…</html>'), null)
  assert.is(shortText(''), null)
  assert.is(shortText(42), null)
})

// ---------------------------------------------------------------------------------------------
const cut = suite('truncate')

cut('leaves text within the limit alone', () => {
  assert.is(truncate('abc', 3), 'abc')
})

cut('cuts to exactly the limit and ends with an ellipsis', () => {
  const out = truncate('abcdefgh', 5)
  assert.is(out, 'abcd…')
  assert.is(out.length, 5)
})

cut('never splits a surrogate pair', () => {
  const out = truncate('abc😀def', 5)
  assert.is(out, 'abc…')
  assert.not.ok(/[\ud800-\udbff]$/.test(out.slice(0, -1)))
})

// ---------------------------------------------------------------------------------------------
const escape = suite('slackEscape')

escape('escapes the three characters Slack reads as markup', () => {
  assert.is(slackEscape('<!channel> & <@U123> > x'), '&lt;!channel&gt; &amp; &lt;@U123&gt; &gt; x')
})

// ---------------------------------------------------------------------------------------------
const msgId = suite('webhookMessageId')

msgId('is msg_ and the run id, with anything but letters, digits, _ and - replaced', () => {
  assert.is(webhookMessageId('2f1c-9a'), 'msg_2f1c-9a')
  assert.is(webhookMessageId('a.b:c'), 'msg_a_b_c')
})

backoff.run()
retryAfter.run()
loop.run()
short.run()
cut.run()
escape.run()
msgId.run()
