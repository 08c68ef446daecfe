// Oversized uploads against the default 256 KiB limit: 50 at once declaring a Content-Length over
// the limit (413 from the header alone, before a body byte is sent, and the connection closed), and
// 20 at once sending a chunked body that runs past the limit and never ends (413 while counting,
// then the connection closed so the rest is never taken in). The server's memory does not grow by
// what the clients tried to send.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { head, RawClient, setTestToken, within } from '../runtime/http/harness.js'
import { assertContractError, assertStillServing, memoryOf, startTarget, stopTarget, type Target } from './target.js'

const TOKEN = setTestToken()
const LIMIT = 262_144

const CONFIG = `
server:
  bodyTimeoutSeconds: 2
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: small
      match: { path: small }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "small {{payload.x}}"
`

const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }

const uploads = suite<{ t: Target }>('oversized uploads')

uploads.before(async (ctx) => { ctx.t = await startTarget(TOKEN, CONFIG) })
uploads.after(async (ctx) => { await stopTarget(ctx.t) })

uploads('50 concurrent uploads declaring a Content-Length over the limit each get 413 before sending a byte, quickly', async ({ t }) => {
  const clients = await Promise.all(Array.from({ length: 50 }, () => RawClient.open(t.port)))
  try {
    const started = performance.now()
    const paths = ['/hooks/wake', '/hooks/agent', '/hooks/small']
    const sizes = [LIMIT + 1, 10 * 1024 * 1024, 1024 ** 3, 2 ** 53]
    await Promise.all(clients.map((c, i) => c.write(head('POST', paths[i % paths.length]!, { ...AUTH, 'content-length': String(sizes[i % sizes.length]) }))))
    const replies = await Promise.all(clients.map((c) => c.response(3000)))
    const ms = performance.now() - started
    for (const reply of replies) assertContractError(reply, 413, 'payload_too_large')
    assert.ok(ms < 3000, `50 refusals took ${Math.round(ms)} ms`)
    const closed = await Promise.all(clients.map((c) => within(c.closed.then(() => true), 2000, false)))
    assert.is(closed.filter(Boolean).length, 50, 'connections left open after 413: the server would wait for the body')
  } finally {
    for (const c of clients) c.destroy()
  }
  await assertStillServing(t, '50 uploads over the limit by Content-Length')
})

/**
 * What a client that keeps writing sees: the 413, or a reset when the server closes with its
 * bytes unread (Linux answers those with RST, and Node drops the socket on the write error before
 * reading the 413 that had already arrived). Either way the upload is cut off.
 */
type Outcome = { status: number; reply: Awaited<ReturnType<RawClient['response']>> } | { reset: string }

async function outcomeOf(c: RawClient): Promise<Outcome> {
  try {
    const reply = await c.response(3000)
    return { status: reply.status, reply }
  } catch (err) {
    return { reset: (err as Error).message.slice(0, 80) }
  }
}

/** Writes `piece` up to `times` times, stopping at the answer, at a write error, or when a write stalls 200 ms (the server stopped reading). */
async function push(c: RawClient, piece: string | Buffer, times: number): Promise<number> {
  let pushed = 0
  for (let i = 0; i < times && !c.answered; i++) {
    const ok = await within(c.write(piece).then(() => true, () => false), 200, false)
    if (!ok) break
    pushed += piece.length
  }
  return pushed
}

function assertCutOff(outcomes: Outcome[], what: string): void {
  for (const o of outcomes) if ('status' in o) assertContractError(o.reply, 413, 'payload_too_large')
  const answered = outcomes.filter((o) => 'status' in o).length
  if (process.env.HOOKGATE_ABUSE_VERBOSE) process.stdout.write(`  [${what}] ${answered} answered 413, ${outcomes.length - answered} reset while still writing\n`)
}

uploads('50 uploads that push their oversized bodies anyway are cut off (413 or reset) and not read into memory', async ({ t }) => {
  const before = memoryOf(t.server.child.pid!)
  const clients = await Promise.all(Array.from({ length: 50 }, () => RawClient.open(t.port)))
  const chunk = Buffer.alloc(64 * 1024, 0x20)
  let pushed = 0
  try {
    const started = performance.now()
    await Promise.all(clients.map(async (c) => {
      await c.write(head('POST', '/hooks/wake', { ...AUTH, 'content-length': String(8 * 1024 * 1024) }))
      pushed += await push(c, chunk, 128) // up to 8 MiB each, 400 MiB in all
    }))
    assertCutOff(await Promise.all(clients.map(outcomeOf)), '50 pushing uploads')
    const closed = await Promise.all(clients.map((c) => within(c.closed.then(() => true), 2000, false)))
    assert.is(closed.filter(Boolean).length, 50, 'pushing uploads left open')
    assert.ok(performance.now() - started < 4000, 'the uploads were not cut off quickly')
    assert.ok(pushed < 50 * 8 * 1024 * 1024, 'every byte of every upload was taken in')
  } finally {
    for (const c of clients) c.destroy()
  }
  const after = await assertStillServing(t, '50 uploads pushing their bodies anyway')
  assert.ok(after.rssMiB - before.rssMiB < 64, `RSS grew by ${after.rssMiB - before.rssMiB} MiB while clients pushed ${Math.round(pushed / 1024 / 1024)} MiB`)
})

uploads('20 concurrent chunked uploads past the limit get 413 while counting, before the body ends, and are closed', async ({ t }) => {
  const clients = await Promise.all(Array.from({ length: 20 }, () => RawClient.open(t.port)))
  try {
    const started = performance.now()
    const piece = '{"text":"' + 'x'.repeat(LIMIT + 1024)
    await Promise.all(clients.map(async (c) => {
      await c.write(head('POST', '/hooks/wake', { ...AUTH, 'transfer-encoding': 'chunked' }))
      // one chunk past the limit; the terminating chunk is never sent
      await c.write(`${Buffer.byteLength(piece).toString(16)}\r\n${piece}\r\n`)
    }))
    const replies = await Promise.all(clients.map((c) => c.response(3000)))
    const ms = performance.now() - started
    for (const reply of replies) assertContractError(reply, 413, 'payload_too_large')
    assert.ok(ms < 3000, `20 chunked refusals took ${Math.round(ms)} ms`)
    const closed = await Promise.all(clients.map((c) => within(c.closed.then(() => true), 2000, false)))
    assert.is(closed.filter(Boolean).length, 20, 'chunked uploads left open after 413')
  } finally {
    for (const c of clients) c.destroy()
  }
  await assertStillServing(t, '20 chunked uploads past the limit')
})

uploads('20 chunked uploads that keep pushing 4 MiB each are cut off (413 or reset) near the limit', async ({ t }) => {
  const before = memoryOf(t.server.child.pid!)
  const clients = await Promise.all(Array.from({ length: 20 }, () => RawClient.open(t.port)))
  let pushed = 0
  try {
    const piece = 'x'.repeat(32 * 1024)
    const framed = `${piece.length.toString(16)}\r\n${piece}\r\n`
    await Promise.all(clients.map(async (c) => {
      await c.write(head('POST', '/hooks/wake', { ...AUTH, 'transfer-encoding': 'chunked' }) + '9\r\n{"text":"\r\n')
      pushed += await push(c, framed, 128)
    }))
    assertCutOff(await Promise.all(clients.map(outcomeOf)), '20 pushing chunked uploads')
    const closed = await Promise.all(clients.map((c) => within(c.closed.then(() => true), 2000, false)))
    assert.is(closed.filter(Boolean).length, 20, 'chunked uploads left open')
    assert.ok(pushed < 20 * 128 * framed.length, 'every chunked upload was read to the end')
  } finally {
    for (const c of clients) c.destroy()
  }
  const after = await assertStillServing(t, '20 chunked uploads pushing 4 MiB each')
  assert.ok(after.rssMiB - before.rssMiB < 64, `RSS grew by ${after.rssMiB - before.rssMiB} MiB while clients pushed ${Math.round(pushed / 1024 / 1024)} MiB`)
})

uploads.run()
