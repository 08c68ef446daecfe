// The one retry loop (runtime/lib/retry.ts) on its own, with a clock that records each wait: the
// providers, the channels and the Gmail helper each run on it with their own numbers, so what it
// decides (stop, wait how long, try again) is decided once for all of them.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { backoffDelay, parseRetryAfter, pause, retry, type RetryPlan, type Tried } from '../../runtime/lib/retry.js'

const BACKOFF = { baseMs: 100, capMs: 1000 }

function plan(over: Partial<RetryPlan<string>> = {}): RetryPlan<string> & { waits: number[] } {
  const waits: number[] = []
  return {
    attempts: 4, backoff: BACKOFF, random: () => 1, waits,
    sleep: async (ms) => { waits.push(ms) },
    fail: (failure, n) => new Error(`${failure} after ${n}`),
    cancelled: (n) => new Error(`cancelled after ${n}`),
    ...over,
  }
}
const failing = (failure: string, more: Partial<Extract<Tried<string, string>, { ok: false }>> = {}) => async (): Promise<Tried<string, string>> => ({ ok: false, failure, retryable: true, ...more })

const loop = suite('retry')

loop('a failure that stays gives up after the attempts allowed, having waited the backoff between them', async () => {
  const p = plan()
  let tried = 0
  const err = await retry(p, async (n) => { tried = n; return failing('503')() }).catch((e: Error) => e)
  assert.is((err as Error).message, '503 after 4')
  assert.is(tried, 4)
  assert.equal(p.waits, [100, 200, 400])
})

loop('a final failure ends the loop at once, without a wait', async () => {
  const p = plan()
  const err = await retry(p, failing('400', { retryable: false })).catch((e: Error) => e)
  assert.is((err as Error).message, '400 after 1')
  assert.equal(p.waits, [])
})

loop('a Retry-After is waited instead of the backoff, and one past the longest wait is cut to it', async () => {
  const p = plan({ maxWaitMs: 5000 })
  const asked = [3000, 60_000]
  let i = 0
  const value = await retry(p, async () => (i < asked.length ? { ok: false, failure: '429', retryable: true, retryAfterMs: asked[i++]! } : { ok: true, value: 'done' }))
  assert.is(value, 'done')
  assert.equal(p.waits, [3000, 5000])
})

loop('a Retry-After longer than the caller holds ends the loop when the caller refuses such waits', async () => {
  const p = plan({ maxWaitMs: 5000, refuseLongerWait: (f, n, ms) => new Error(`${f} asked ${ms} after ${n}`) })
  const err = await retry(p, failing('429', { retryAfterMs: 9000 })).catch((e: Error) => e)
  assert.is((err as Error).message, '429 asked 9000 after 1')
  assert.equal(p.waits, [])
})

loop('an abort during a wait ends the loop at once: no further attempt, the caller\'s own words', async () => {
  const controller = new AbortController()
  let tried = 0
  // a real timer of a minute: the abort, not the timer, must end it
  const err = await retry({ attempts: 5, backoff: { baseMs: 60_000, capMs: 60_000 }, signal: controller.signal, fail: (f: string) => new Error(f), cancelled: (n) => new Error(`cancelled after ${n}`) }, async (n) => {
    tried = n
    setImmediate(() => controller.abort())
    return { ok: false, failure: 'timeout', retryable: true }
  }).catch((e: Error) => e)
  assert.is((err as Error).message, 'cancelled after 1')
  assert.is(tried, 1)
})

loop('a signal aborted before the first attempt makes none', async () => {
  const controller = new AbortController()
  controller.abort()
  let tried = 0
  const err = await retry(plan({ signal: controller.signal }), async () => { tried++; return { ok: true, value: 'x' } }).catch((e: Error) => e)
  assert.is((err as Error).message, 'cancelled after 0')
  assert.is(tried, 0)
})

loop('each wait is told before it is taken (a log line per retry)', async () => {
  const told: string[] = []
  await retry(plan({ attempts: 3, waiting: (f, n, ms) => told.push(`${f}#${n} ${ms}`) }), failing('502')).catch(() => {})
  assert.equal(told, ['502#1 100', '502#2 200'])
})

const schedule = suite('backoffDelay and parseRetryAfter')

schedule('the backoff doubles to its cap and is jittered into [½, 1] of each step', () => {
  assert.equal([1, 2, 3, 4, 5, 6].map((n) => backoffDelay(BACKOFF, n, () => 1)), [100, 200, 400, 800, 1000, 1000])
  assert.equal([1, 2, 3].map((n) => backoffDelay(BACKOFF, n, () => 0)), [50, 100, 200])
})

schedule('Retry-After: seconds whole or fractional, an HTTP date from now, nothing else', () => {
  assert.is(parseRetryAfter('1.5', 0), 1500)
  assert.is(parseRetryAfter('Tue, 02 Jan 2024 03:04:15 GMT', Date.UTC(2024, 0, 2, 3, 4, 5)), 10_000)
  assert.is(parseRetryAfter('-3', 0), null)
  assert.is(parseRetryAfter(undefined, 0), null)
})

schedule('pause with a real timer is cut short by the signal and says so', async () => {
  const controller = new AbortController()
  setImmediate(() => controller.abort())
  assert.is(await pause(60_000, controller.signal), false)
  assert.is(await pause(1), true)
})

loop.run()
schedule.run()
