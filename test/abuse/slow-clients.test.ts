// Slowloris against the body timeout (bodyTimeoutSeconds 0.5 here): a chunked body that never
// ends, and 100 connections at once each dripping one body byte per 100 ms. Every one of them gets
// 408 body_timeout within the timeout (plus scheduling slack) and is closed, while valid requests
// sent during the attack keep answering 200.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { head, RawClient, setTestToken, within } from '../runtime/http/harness.js'
import { assertContractError, assertStillServing, sleep, startTarget, stopTarget, validWake, type Target } from './target.js'

const TOKEN = setTestToken()
const TIMEOUT_MS = 500

const CONFIG = `
server:
  bodyTimeoutSeconds: ${TIMEOUT_MS / 1000}
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
`

const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }

const slow = suite<{ t: Target }>('slow clients and the body timeout')

slow.before(async (ctx) => { ctx.t = await startTarget(TOKEN, CONFIG) })
slow.after(async (ctx) => { await stopTarget(ctx.t) })

slow('a chunked body that never ends is 408 body_timeout within the body timeout, and the connection is closed', async ({ t }) => {
  const client = await RawClient.open(t.port)
  try {
    const started = performance.now()
    await client.write(head('POST', '/hooks/wake', { ...AUTH, 'transfer-encoding': 'chunked' }))
    await client.write('5\r\n{"tex\r\n')
    // keep the chunks coming, each one well-formed, none of them the last
    const drip = setInterval(() => { client.write('1\r\n \r\n').catch(() => {}) }, 50)
    try {
      const reply = await client.response(TIMEOUT_MS + 2000)
      const ms = performance.now() - started
      assertContractError(reply, 408, 'body_timeout')
      assert.ok(ms >= TIMEOUT_MS - 50 && ms < TIMEOUT_MS + 1000, `408 came after ${Math.round(ms)} ms (timeout ${TIMEOUT_MS} ms)`)
      assert.ok(await within(client.closed.then(() => true), 2000, false), 'the connection stays open after 408')
    } finally {
      clearInterval(drip)
    }
  } finally {
    client.destroy()
  }
  await assertStillServing(t, 'a chunked body that never ends')
})

slow('100 slow connections at once, each dripping a byte per 100 ms, all get 408 while valid requests keep answering 200', async ({ t }) => {
  const COUNT = 100
  const clients: RawClient[] = []
  let dripping = true
  try {
    for (let i = 0; i < COUNT; i++) {
      const client = await RawClient.open(t.port)
      clients.push(client)
      await client.write(head('POST', i % 2 === 0 ? '/hooks/wake' : '/hooks/agent', { ...AUTH, 'content-length': '1000' }))
    }
    const started = performance.now()
    const drips = clients.map(async (client) => {
      for (let n = 0; n < 40 && dripping && !client.answered; n++) {
        await client.write(' ').catch(() => {})
        await sleep(100)
      }
    })
    // meanwhile: valid requests, one after another, each must answer 200 quickly
    const latencies: number[] = []
    while (performance.now() - started < TIMEOUT_MS + 300) {
      const reply = await validWake(t)
      latencies.push(reply.ms)
    }
    const replies = await Promise.all(clients.map((c) => c.response(TIMEOUT_MS + 3000)))
    const ms = performance.now() - started
    for (const reply of replies) assertContractError(reply, 408, 'body_timeout')
    assert.ok(ms < TIMEOUT_MS + 2000, `all 100 answered only after ${Math.round(ms)} ms`)
    const closed = await Promise.all(clients.map((c) => within(c.closed.then(() => true), 2000, false)))
    assert.is(closed.filter(Boolean).length, COUNT, 'some slow connections stay open after 408')
    assert.ok(latencies.length >= 3, `only ${latencies.length} valid requests went through during the attack`)
    assert.ok(Math.max(...latencies) < 1000, `a valid request took ${Math.round(Math.max(...latencies))} ms during the attack`)
    dripping = false
    await Promise.all(drips)
  } finally {
    dripping = false
    for (const c of clients) c.destroy()
  }
  await assertStillServing(t, '100 slow connections')
})

slow.run()
