// Memory held by accepted work, sent by a client with the token: next-heartbeat wakes of 250 KiB
// (under the 256 KiB body limit). A wake's text is needed until a heartbeat reads it, and the main
// session's queue is bounded (maxQueuedEvents, oldest dropped first), so what the server holds
// must be bounded by that queue: with the queue capped at 10 events, 600 such wakes leave nothing
// behind; with the default queue (1,000 events), 600 of them must still fit under the memory bound.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { setTestToken } from '../runtime/http/harness.js'
import { assertStillServing, describeTally, flood, memoryOf, request, startTarget, stopTarget, type Target } from './target.js'

const TOKEN = setTestToken()
const WAKES = 600

function config(maxQueuedEvents: number | undefined): string {
  return `
server:
  bodyTimeoutSeconds: 2
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
agents:
  - id: main
    default: true
    model: builtin/echo
    heartbeat: { every: 30m${maxQueuedEvents === undefined ? '' : `, maxQueuedEvents: ${maxQueuedEvents}`} }
`
}

/** Sends WAKES next-heartbeat wakes of 250 KiB each, 8 at once; all must be 200. */
async function bigWakes(t: Target): Promise<void> {
  const body = JSON.stringify({ text: 'x'.repeat(250 * 1024), mode: 'next-heartbeat' })
  const before = memoryOf(t.server.child.pid!)
  const tally = await flood(WAKES, 8, (i) => request(t.origin, '/hooks/wake', { agent: t.agent, token: TOKEN, body: body.replace('xxxx', String(i).padStart(4, '0')), withinMs: 10_000 }))
  assert.equal(tally.statuses, { 200: WAKES }, describeTally(tally))
  const after = memoryOf(t.server.child.pid!)
  if (process.env.HOOKGATE_ABUSE_VERBOSE) process.stdout.write(`  [rss] ${before.rssMiB} MiB before, ${after.rssMiB} MiB after ${WAKES} wakes of 250 KiB (${describeTally(tally)})\n`)
}

// ---------------------------------------------------------------------------------------------

const small = suite<{ t: Target }>('memory held by wakes, with a 10-event queue')

small.before(async (ctx) => { ctx.t = await startTarget(TOKEN, config(10)) })
small.after(async (ctx) => { await stopTarget(ctx.t) })

small(`memory leak: ${WAKES} wakes of 250 KiB with the queue capped at 10 events leave the server under the memory bound`, async ({ t }) => {
  await bigWakes(t)
  // Regression (2021b17, "A wake's run row is its event"): ~270 MiB after 600 at 7ac2c78, and
  // linear from there: 880 MiB after 3,000 (130 MiB before 2021b17). Each wake's run row now
  // carries its text, and RunStore keeps every row it ever wrote in a Map for the life of the
  // process (runs.ts: "bounding the Map … is future work"). Agent runs' rendered messages have
  // been kept the same way all along.
  await assertStillServing(t, `${WAKES} wakes of 250 KiB with a 10-event queue`)
})

small.run()

// ---------------------------------------------------------------------------------------------

const full = suite<{ t: Target }>('memory held by wakes, with the default 1,000-event queue')

full.before(async (ctx) => { ctx.t = await startTarget(TOKEN, config(undefined)) })
full.after(async (ctx) => { await stopTarget(ctx.t) })

full(`memory exhaustion: ${WAKES} queued wakes of 250 KiB (under the queue and body limits) keep the server under the memory bound`, async ({ t }) => {
  await bigWakes(t)
  // Regression: ~275 MiB after 600 (~370 MiB at the 1,000-event limit before 2021b17, 500-630 MiB
  // after 3,000 with the queue keeping the latest 1,000): the queue is bounded by count, not by
  // bytes, and every queued text stays in memory until a heartbeat reads it (30 min by default).
  await assertStillServing(t, `${WAKES} queued wakes of 250 KiB`)
})

full.run()
