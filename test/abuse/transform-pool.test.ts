// Wedging the transform pool with tiny payloads: a 5,000-deep array (10 KB, far under the body
// limit) could not be structured-cloned to a transform worker thread (it goes as JSON to the
// transform processes that replaced them, issue 23), and the failed hand-over left its
// timer armed. When that stale timer fires it terminates whatever worker the slot has by then; if
// the slot is starting a fresh worker at that moment, the start never settles and the slot stays
// busy forever. Two such slots and every transform mapping stops answering for good, while
// /hooks/wake still answers. Whatever a payload does, a transform request must get an answer (at
// worst 500 transform_timeout) and the next ones must still work.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { setTestToken } from '../runtime/http/harness.js'
import { assertStillServing, postJson, sleep, startTarget, stopTarget, type Answer, type Target } from './target.js'

const TOKEN = setTestToken()

const CONFIG = `
server:
  bodyTimeoutSeconds: 2
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: hostile
      match: { path: hostile }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "hostile"
      transform: { module: keep.mjs, timeoutMs: 300 }
    - id: valid
      match: { path: valid }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "valid"
      transform: { module: keep.mjs, timeoutMs: 1000 }
`

// The module takes 300 ms to load (as one that reads a file or opens a client at start-up would),
// so a fresh worker is still starting when a stale timer goes off: this makes the race certain
// instead of likely (hammering with the plain module wedges the pool within ~3 s as well).
const TRANSFORMS = {
  'transforms/keep.mjs': 'await new Promise((r) => setTimeout(r, 300))\nexport default function keep() { return {} }\n',
}

const DEEP = `{"d":${'['.repeat(5000)}${']'.repeat(5000)}}`

/** A transform request's answer, or undefined when none came within `ms`. */
async function answerWithin(t: Target, path: string, ms: number): Promise<Answer | undefined> {
  return postJson(t, path, '{}', {}, ms).catch(() => undefined)
}

/**
 * Two hostile calls 150 ms apart on the first free slot (stale timers at 300 and 450 ms), then a
 * valid call at ~320 ms that has to start a new worker, which the second stale timer kills.
 */
async function wedgeOneSlot(t: Target): Promise<Answer | undefined> {
  const started = performance.now()
  await postJson(t, '/hooks/hostile', DEEP)
  await sleep(150 - (performance.now() - started))
  await postJson(t, '/hooks/hostile', DEEP)
  await sleep(320 - (performance.now() - started))
  // a healthy pool answers this within ~0.4 s (worker start 300 ms + the call); 1.5 s is plenty
  return answerWithin(t, '/hooks/valid', 1500)
}

const pool = suite<{ t: Target }>('the transform worker pool under deep payloads')

pool.before(async (ctx) => { ctx.t = await startTarget(TOKEN, CONFIG, TRANSFORMS) })
pool.after(async (ctx) => { await stopTarget(ctx.t) })

pool('the transform pool answers before the attack', async ({ t }) => {
  const reply = await answerWithin(t, '/hooks/valid', 3000)
  assert.is(reply?.status, 200, reply?.text)
})

pool('deep payloads on a transform mapping never leave a later transform request unanswered, nor wedge the pool', async ({ t }) => {
  const first = await wedgeOneSlot(t)
  // Regression: no answer at all (not even 500 transform_timeout): the stale timer of the second hostile
  // call terminated the worker this request was starting, Slot.ready never settles, and the slot
  // stays busy for good.
  assert.ok(first !== undefined, 'a valid transform request got no answer within 1.5 s after two deep payloads')
  const second = await wedgeOneSlot(t)
  assert.ok(second !== undefined, 'a second valid transform request got no answer within 1.5 s')
  // and with both slots gone, no transform mapping would ever answer again
  const after = await answerWithin(t, '/hooks/valid', 2000)
  assert.is(after?.status, 200, 'after the attack, transform mappings no longer answer')
  await assertStillServing(t, 'deep payloads against the transform pool')
})

pool.run()
