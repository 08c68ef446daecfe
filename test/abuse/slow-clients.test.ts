// Slowloris against the body timeout (bodyTimeoutSeconds 2 here): a chunked body that never
// ends, and 100 connections at once each dripping one body byte per 100 ms. Every one of them gets
// 408 body_timeout, not before the timeout, and is closed (a server without the timeout would
// hold them until the test gives up), while valid requests sent during the attack keep answering
// 200 before the slow connections are let go. Decided by the order of events, not by how many
// milliseconds a busy machine took.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { head, RawClient, setTestToken, within } from '../runtime/http/harness.js'
import { assertContractError, assertStillServing, sleep, startTarget, stopTarget, validWake, type Target } from './target.js'

const TOKEN = setTestToken()
const TIMEOUT_MS = 2000
/** how long an answer may take on a busy machine before the test calls it missing */
const SLACK_MS = 10_000

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
      const reply = await client.response(TIMEOUT_MS + SLACK_MS)
      const ms = performance.now() - started
      assertContractError(reply, 408, 'body_timeout')
      assert.ok(ms >= TIMEOUT_MS - 50, `408 came after ${Math.round(ms)} ms, before the timeout (${TIMEOUT_MS} ms)`)
      assert.ok(await within(client.closed.then(() => true), SLACK_MS, false), 'the connection stays open after 408')
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
    const drips = clients.map(async (client) => {
      for (let n = 0; n < 80 && dripping && !client.answered; n++) {
        await client.write(' ').catch(() => {})
        await sleep(100)
      }
    })
    // meanwhile: valid requests, one after another, each answered 200 while (at least half of)
    // the slow connections are still held open
    const held = () => clients.filter((c) => !c.answered).length
    let whileHeld = 0
    while (whileHeld < 3 && held() > 0) {
      await validWake(t)
      if (held() >= COUNT / 2) whileHeld++
    }
    assert.ok(whileHeld >= 3, `only ${whileHeld} valid requests were answered while the slow connections were held open`)
    const replies = await Promise.all(clients.map((c) => c.response(TIMEOUT_MS + SLACK_MS)))
    for (const reply of replies) assertContractError(reply, 408, 'body_timeout')
    const closed = await Promise.all(clients.map((c) => within(c.closed.then(() => true), SLACK_MS, false)))
    assert.is(closed.filter(Boolean).length, COUNT, 'some slow connections stay open after 408')
    dripping = false
    await Promise.all(drips)
  } finally {
    dripping = false
    for (const c of clients) c.destroy()
  }
  await assertStillServing(t, '100 slow connections')
})

slow.run()
