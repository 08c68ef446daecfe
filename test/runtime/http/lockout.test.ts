// Repeated auth failures from one client address: the first `limit` in a window are 401, the next
// 429 with Retry-After until the lock-out ends; a correct token still passes and clears the count;
// the address is the socket peer, or behind a trusted proxy the right-most untrusted
// X-Forwarded-For hop; and the limiter's memory stays bounded however many addresses fail.
import { storeOptionsOf } from '../../../runtime/store/open.js'
import { openTestStore } from '../../helpers/stores.js'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { loadBundle } from '../../../runtime/bundle/load.js'
import { Engine } from '../../../runtime/agents/engine.js'
import { AddressMatcher, AuthLimiter, TokenCheck, tokenDigest } from '../../../runtime/http/auth.js'
import { createHandler } from '../../../runtime/http/handler.js'
import { assertError, assertOk, compileProject, send, serve, setTestToken, sleep, type Harness, type Reply } from './harness.js'

const TOKEN = setTestToken()
const WAKE = { text: 'hi', mode: 'next-heartbeat' }

function config(server: string): string {
  return `
server:
  bodyTimeoutSeconds: 0.5
${server}
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
`
}

const DIRECT = config('  authFailures: { limit: 3, windowSeconds: 2, lockoutSeconds: 1 }')
const PROXIED = config('  authFailures: { limit: 3, windowSeconds: 60, lockoutSeconds: 1, maxTrackedClients: 50 }\n  trustedProxies: ["127.0.0.1"]')

function wrong(h: Harness, forwardedFor?: string): Promise<Reply> {
  return send(h.origin, '/hooks/wake', { body: WAKE, token: 'wrong-token', ...(forwardedFor !== undefined ? { headers: { 'x-forwarded-for': forwardedFor } } : {}) })
}

function right(h: Harness, forwardedFor?: string): Promise<Reply> {
  return send(h.origin, '/hooks/wake', { body: WAKE, token: TOKEN, ...(forwardedFor !== undefined ? { headers: { 'x-forwarded-for': forwardedFor } } : {}) })
}

function assertLockedOut(reply: Reply, lockoutSeconds = 1): void {
  assertError(reply, 429, 'too_many_auth_failures')
  const retry = reply.headers['retry-after']
  assert.ok(typeof retry === 'string' && /^\d+$/.test(retry), `Retry-After must be whole seconds, got ${String(retry)}`)
  assert.ok(Number(retry) >= 1 && Number(retry) <= lockoutSeconds, `Retry-After ${retry} is outside 1..${lockoutSeconds}`)
}

// ---------------------------------------------------------------------------------------------

const direct = suite<{ h: Harness }>('auth-failure lock-out by socket address')

direct.before(async (ctx) => { ctx.h = await serve(DIRECT) })
direct.after(async (ctx) => { await ctx.h.close() })
// every test starts from a clean count: a correct token clears it
direct.before.each(async (ctx) => { assertOk(await right(ctx.h), 200, ['ok', 'action', 'runId', 'mode']) })

direct('token brute force: failures 1-3 are 401, the 4th is 429 with a numeric Retry-After', async ({ h }) => {
  for (let i = 1; i <= 3; i++) assertError(await wrong(h), 401, 'unauthorized')
  assertLockedOut(await wrong(h))
  // still locked out, on every path under the base, with or without a token
  assertLockedOut(await wrong(h))
  assertLockedOut(await send(h.origin, '/hooks/agent', { body: { message: 'x' } }))
})

direct('while locked out a correct token still passes and clears the count', async ({ h }) => {
  for (let i = 1; i <= 3; i++) assertError(await wrong(h), 401, 'unauthorized')
  assertLockedOut(await wrong(h))
  assertOk(await right(h), 200, ['ok', 'action', 'runId', 'mode'])
  // the count starts again from zero
  for (let i = 1; i <= 3; i++) assertError(await wrong(h), 401, 'unauthorized')
  assertLockedOut(await wrong(h))
})

direct('after the lock-out ends a wrong token is 401 again', async ({ h }) => {
  for (let i = 1; i <= 3; i++) assertError(await wrong(h), 401, 'unauthorized')
  assertLockedOut(await wrong(h))
  await sleep(1200)
  assertError(await wrong(h), 401, 'unauthorized')
})

direct('lock-out evasion: without trustedProxies a rotating X-Forwarded-For does not escape the lock-out', async ({ h }) => {
  for (let i = 1; i <= 3; i++) assertError(await wrong(h, `198.51.100.${i}`), 401, 'unauthorized')
  assertLockedOut(await wrong(h, '198.51.100.4'))
  assertLockedOut(await wrong(h, '203.0.113.77'))
  assertLockedOut(await wrong(h))
})

direct.run()

// ---------------------------------------------------------------------------------------------

const proxied = suite<{ h: Harness }>('auth-failure lock-out behind a trusted proxy (trustedProxies ["127.0.0.1"])')

proxied.before(async (ctx) => { ctx.h = await serve(PROXIED) })
proxied.after(async (ctx) => { await ctx.h.close() })

proxied('another client address is not affected by one that is locked out', async ({ h }) => {
  for (let i = 1; i <= 3; i++) assertError(await wrong(h, '192.0.2.1'), 401, 'unauthorized')
  assertLockedOut(await wrong(h, '192.0.2.1'))
  assertError(await wrong(h, '192.0.2.2'), 401, 'unauthorized')
  assertOk(await right(h, '192.0.2.2'), 200, ['ok', 'action', 'runId', 'mode'])
  assertLockedOut(await wrong(h, '192.0.2.1'))
})

proxied('X-Forwarded-For "203.0.113.9, 127.0.0.1" counts against 203.0.113.9, the right-most untrusted hop', async ({ h }) => {
  for (let i = 1; i <= 3; i++) assertError(await wrong(h, '203.0.113.9, 127.0.0.1'), 401, 'unauthorized')
  assertLockedOut(await wrong(h, '203.0.113.9'))
  const line = h.logs.map((l) => { try { return JSON.parse(l) } catch { return undefined } }).filter((e) => e?.msg === 'request').at(-1)
  assert.is(line?.client, '203.0.113.9', 'the request log names the resolved client address')
})

proxied('lock-out evasion: a forged left-most X-Forwarded-For hop does not escape the lock-out', async ({ h }) => {
  for (let i = 1; i <= 3; i++) assertError(await wrong(h, '203.0.113.20'), 401, 'unauthorized')
  assertLockedOut(await wrong(h, '10.9.9.9, 203.0.113.20'))
  assertLockedOut(await wrong(h, '1.2.3.4, 5.6.7.8, 203.0.113.20, 127.0.0.1'))
})

proxied('an IPv4-mapped IPv6 hop counts as the same IPv4 address', async ({ h }) => {
  for (let i = 1; i <= 3; i++) assertError(await wrong(h, '::ffff:203.0.113.30'), 401, 'unauthorized')
  assertLockedOut(await wrong(h, '203.0.113.30'))
})

// Regression: the spellings below each got a fresh lock-out bucket, so one client could fail
// limit × (number of spellings) times before any 429
proxied('lock-out evasion: an IPv4 hop with a port counts as the same address', async ({ h }) => {
  for (const hop of ['203.0.113.7:5555', '203.0.113.7:5556', ' 203.0.113.7 ']) assertError(await wrong(h, hop), 401, 'unauthorized')
  assertLockedOut(await wrong(h, '203.0.113.7'))
  assertLockedOut(await wrong(h, '203.0.113.7:1'))
})

proxied('lock-out evasion: other spellings of one IPv6 address (brackets, port, case, zeros) count as the same address', async ({ h }) => {
  for (const hop of ['[2001:db8::1]:443', '2001:DB8:0:0::1', '2001:db8::0:1']) assertError(await wrong(h, hop), 401, 'unauthorized')
  for (const hop of ['2001:db8::1', '[2001:0db8:0000:0000:0000:0000:0000:0001]', '2001:db8:0:0:0:0:0:1%eth0']) assertLockedOut(await wrong(h, hop))
  const line = h.logs.map((l) => { try { return JSON.parse(l) } catch { return undefined } }).filter((e) => e?.msg === 'request').at(-1)
  assert.is(line?.client, '2001:db8::1', 'the request log names the canonical address')
  assertError(await wrong(h, '2001:db8::2'), 401, 'unauthorized')
})

proxied('lock-out evasion: hops that are not addresses share one bucket, whatever their spelling', async ({ h }) => {
  for (const hop of ['unknown', '_hidden', 'x'.repeat(300)]) assertError(await wrong(h, hop), 401, 'unauthorized')
  assertLockedOut(await wrong(h, 'not even close'))
  // a valid address left of the garbage is not believed: the garbage is the right-most hop
  assertLockedOut(await wrong(h, '198.51.100.1, garbage'))
  assertError(await wrong(h, '198.51.100.1'), 401, 'unauthorized')
})

proxied('memory exhaustion: with maxTrackedClients 50, 500 failing addresses push out the oldest one tracked', async ({ h }) => {
  // a client one failure short of the lock-out …
  for (let i = 1; i <= 3; i++) assertError(await wrong(h, '192.0.2.200'), 401, 'unauthorized')
  // … then 500 other addresses fail once each (the window is 60 s, so nothing expires meanwhile)
  for (let batch = 0; batch < 500; batch += 25) {
    const replies = await Promise.all(Array.from({ length: 25 }, (_, k) => wrong(h, `10.${(batch + k) >> 8}.${(batch + k) & 255}.1`)))
    for (const r of replies) assertError(r, 401, 'unauthorized')
  }
  // a limiter that kept every address would now lock it out; a bounded one has forgotten it
  assertError(await wrong(h, '192.0.2.200'), 401, 'unauthorized')
})

proxied.run()

// ---------------------------------------------------------------------------------------------

const bound = suite('AuthLimiter memory bound')

bound('500 distinct failing addresses leave at most maxTrackedClients entries', () => {
  const limiter = new AuthLimiter({ limit: 3, windowMs: 60_000, lockoutMs: 1000, maxTrackedClients: 50 })
  const now = Date.now()
  for (let i = 0; i < 500; i++) limiter.fail(`10.0.${i >> 8}.${i & 255}`, now)
  assert.is(limiter.size, 50)
})

bound('the least recently seen address is dropped first; a recent one keeps its count', () => {
  const limiter = new AuthLimiter({ limit: 3, windowMs: 60_000, lockoutMs: 1000, maxTrackedClients: 50 })
  const now = Date.now()
  for (let i = 0; i < 3; i++) limiter.fail('old', now)
  for (let i = 0; i < 49; i++) limiter.fail(`a${i}`, now)
  for (let i = 0; i < 3; i++) limiter.fail('recent', now)
  assert.is(limiter.size, 50)
  // 'old' was dropped, so its next failure starts a fresh count; 'recent' is locked out on its 4th
  assert.is(limiter.fail('old', now), 0)
  assert.ok(limiter.fail('recent', now) > 0)
})

bound('a locked-out address answers retryAfter until the lock-out ends, then 0', () => {
  const limiter = new AuthLimiter({ limit: 3, windowMs: 60_000, lockoutMs: 1000, maxTrackedClients: 50 })
  const now = Date.now()
  for (let i = 0; i < 3; i++) assert.is(limiter.fail('x', now), 0)
  assert.is(limiter.fail('x', now), 1)
  assert.is(limiter.retryAfter('x', now + 500), 1)
  assert.is(limiter.retryAfter('x', now + 1000), 0)
  limiter.succeed('x')
  assert.is(limiter.size, 0)
})

bound.run()

// ---------------------------------------------------------------------------------------------

const held = suite<{ server: Server; limiter: AuthLimiter; engine: Engine; origin: string }>('the limiter behind a live server stays bounded')

held.before(async (ctx) => {
  const project = await compileProject(PROXIED)
  const bundle = await loadBundle(project.outDir)
  ctx.limiter = new AuthLimiter(bundle.config.server.authFailures)
  ctx.engine = Engine.open(await openTestStore(project.stateDir, storeOptionsOf(bundle.config, false)), bundle.config, bundle.workflows)
  const serving = { bundle, token: new TokenCheck(tokenDigest(TOKEN)), trusted: new AddressMatcher(bundle.config.server.trustedProxies), transforms: null, signatures: new Map() }
  ctx.server = createServer(createHandler({ current: () => serving, limiter: ctx.limiter, acceptor: ctx.engine, startedAt: Date.now(), log: () => {} }))
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve))
  ctx.origin = `http://127.0.0.1:${(ctx.server.address() as AddressInfo).port}`
})
held.after(async (ctx) => {
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()))
  await ctx.engine.close()
})

held('memory exhaustion: 500 distinct forwarded addresses failing keep the limiter at 50 entries', async ({ origin, limiter }) => {
  const h = { origin } as Harness
  for (let batch = 0; batch < 500; batch += 25) {
    const replies = await Promise.all(Array.from({ length: 25 }, (_, k) => wrong(h, `172.16.${(batch + k) >> 8}.${(batch + k) & 255}`)))
    for (const r of replies) assertError(r, 401, 'unauthorized')
    assert.ok(limiter.size <= 50, `the limiter tracks ${limiter.size} addresses`)
  }
  assert.is(limiter.size, 50)
})

held.run()
