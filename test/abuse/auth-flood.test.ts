// Failed-auth floods with a rotating X-Forwarded-For. Without trustedProxies the header is not
// believed: all 2,000 count against 127.0.0.1, so after the first 20 (the default limit) every one
// is 429 with Retry-After, and a correct token still passes. With trustedProxies ["127.0.0.1"]
// every forwarded address is its own client, so nothing is locked out, and the limiter remembers
// at most maxTrackedClients of them: an address locked out before the flood is forgotten once
// maxTrackedClients newer ones have failed.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { setTestToken } from '../runtime/http/harness.js'
import { assertContractError, assertStillServing, describeTally, flood, memoryOf, request, startTarget, stopTarget, validWake, type Target } from './target.js'

const TOKEN = setTestToken()
const FLOOD = 2000
const TRACKED = 100

function config(server: string): string {
  return `
server:
  bodyTimeoutSeconds: 1
${server}
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
`
}

/** 198.18.x.y (a benchmarking range), a different one for each i. */
function address(i: number): string {
  return `198.18.${Math.floor(i / 250) % 250}.${(i % 250) + 1}`
}

function failedAuth(t: Target, forwardedFor: string, token = 'not-the-token') {
  return request(t.origin, '/hooks/wake', { agent: t.agent, token, headers: { 'x-forwarded-for': forwardedFor } })
}

// ---------------------------------------------------------------------------------------------

const direct = suite<{ t: Target }>('a failed-auth flood without trustedProxies')

direct.before(async (ctx) => { ctx.t = await startTarget(TOKEN, config('')) })
direct.after(async (ctx) => { await stopTarget(ctx.t) })

direct('2,000 failed-auth requests with rotating X-Forwarded-For all count against 127.0.0.1: 20 are 401, the rest 429', async ({ t }) => {
  const statuses: number[] = []
  const tally = await flood(FLOOD, 16, async (i) => {
    const reply = await failedAuth(t, `${address(i)}, ${address(i + 7)}`)
    if (reply.status === 429) {
      assertContractError(reply, 429, 'too_many_auth_failures')
      assert.match(String(reply.headers['retry-after']), /^\d+$/)
      assert.ok(Number(reply.headers['retry-after']) >= 1 && Number(reply.headers['retry-after']) <= 60)
    } else {
      assertContractError(reply, 401, 'unauthorized')
    }
    statuses.push(reply.status)
    return reply
  })
  assert.equal(tally.errors, {}, describeTally(tally))
  assert.equal(tally.statuses, { 401: 20, 429: FLOOD - 20 }, describeTally(tally))
  assert.ok(tally.ms < 10_000, describeTally(tally))
  // A refusal writes nothing per request: the 401s are logged (at most the limit per window), the
  // 1,980 lock-out answers are not (the rejected-request log counts them per minute).
  const logged = (status: number) => t.server.stdout.join('\n').split('\n').filter((l) => l.includes(`"status":${status}`)).length
  // log lines are written in batches: wait for the 401s to be out
  for (let i = 0; i < 100 && logged(401) < 20; i++) await new Promise((r) => setTimeout(r, 20))
  assert.is(logged(401), 20)
  assert.is(logged(429), 0, 'no log line per 429 of a locked-out client')
  // still locked out with no token at all, whatever address is claimed
  assertContractError(await request(t.origin, '/hooks/wake', { headers: { 'x-forwarded-for': '203.0.113.1' } }), 429, 'too_many_auth_failures')
  // a correct token still passes while locked out (and clears the count)
  await assertStillServing(t, '2,000 failed-auth requests without trustedProxies')
  assertContractError(await failedAuth(t, address(0)), 401, 'unauthorized')
})

direct.run()

// ---------------------------------------------------------------------------------------------

const proxied = suite<{ t: Target }>('a failed-auth flood behind a trusted proxy')

proxied.before(async (ctx) => {
  ctx.t = await startTarget(TOKEN, config(`  authFailures: { maxTrackedClients: ${TRACKED} }\n  trustedProxies: ["127.0.0.1"]`))
})
proxied.after(async (ctx) => { await stopTarget(ctx.t) })

proxied('one forwarded address is locked out after 20 failures while others are not', async ({ t }) => {
  for (let i = 0; i < 20; i++) assertContractError(await failedAuth(t, '203.0.113.7'), 401, 'unauthorized')
  assertContractError(await failedAuth(t, '203.0.113.7'), 429, 'too_many_auth_failures')
  assertContractError(await failedAuth(t, '203.0.113.8'), 401, 'unauthorized')
  await validWake(t)
})

proxied(`the limiter remembers at most maxTrackedClients (${TRACKED}) addresses: the locked-out one is forgotten after ${TRACKED} newer failures`, async ({ t }) => {
  // 203.0.113.8 failed once in the test before, after 203.0.113.7 was locked: 98 more fill the table
  const filled = await flood(TRACKED - 2, 8, (i) => failedAuth(t, address(100_000 + i)))
  assert.equal(filled.statuses, { 401: TRACKED - 2 }, describeTally(filled))
  assertContractError(await failedAuth(t, '203.0.113.7'), 429, 'too_many_auth_failures')
  // one more address evicts the oldest entry: the lock-out on 203.0.113.7
  assertContractError(await failedAuth(t, address(200_000)), 401, 'unauthorized')
  assertContractError(await failedAuth(t, '203.0.113.7'), 401, 'unauthorized')
})

proxied('2,000 failed-auth requests from rotating forwarded addresses are each a 401, and memory stays flat', async ({ t }) => {
  const before = memoryOf(t.server.child.pid!)
  const tally = await flood(FLOOD, 16, async (i) => {
    const reply = await failedAuth(t, `10.9.8.7, ${address(i)}`)
    assertContractError(reply, 401, 'unauthorized')
    return reply
  })
  assert.equal(tally.errors, {}, describeTally(tally))
  assert.equal(tally.statuses, { 401: FLOOD }, describeTally(tally))
  // and 200 distinct 4 KiB hops that are no address at all: they share one bucket, so rotating
  // such spellings buys no fresh attempts (the first 20 are 401, the rest 429)
  const long = await flood(200, 16, (i) => failedAuth(t, `${i}-${'f'.repeat(4096)}`))
  assert.equal(long.statuses, { 401: 20, 429: 180 }, describeTally(long))
  const after = await assertStillServing(t, '2,000 failed-auth requests behind a trusted proxy')
  assert.ok(after.rssMiB - before.rssMiB < 32, `RSS grew by ${after.rssMiB - before.rssMiB} MiB over 2,200 distinct failing addresses`)
})

proxied.run()
