// Hostile request heads, on raw sockets: a header flood up to what Node accepts (16 KiB of head,
// at most 2,000 headers kept) and past it (431 headers_too_large, connection closed), a 64 KiB
// path, very long header values and tokens, and request smuggling (Content-Length together with
// Transfer-Encoding, two Content-Lengths, odd Transfer-Encodings): 400 bad_request, connection
// closed, and the request hidden behind it is never answered.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { RawClient, setTestToken, within } from '../runtime/http/harness.js'
import { assertContractError, assertStillServing, request, startTarget, stopTarget, type Target } from './target.js'

const TOKEN = setTestToken()

const CONFIG = `
server:
  bodyTimeoutSeconds: 1
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: echo-header
      match: { path: echo-header }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "h={{headers.x-long}}"
`

/** Node's default --max-http-header-size: request line and headers together. */
const MAX_HEAD = 16 * 1024
const WAKE = JSON.stringify({ text: 'through the flood', mode: 'next-heartbeat' })

/** A raw POST /hooks/wake with the token first, then `extra` header lines, then the JSON body. */
function wakeWith(extra: string[], path = '/hooks/wake'): string {
  return [`POST ${path} HTTP/1.1`, 'Host: 127.0.0.1', `Authorization: Bearer ${TOKEN}`, 'Content-Type: application/json', `Content-Length: ${WAKE.length}`, 'Connection: close', ...extra].join('\r\n') + '\r\n\r\n' + WAKE
}

/** Writes `bytes` on a fresh connection and returns the first answer and whether the server closed the connection after it. */
async function exchange(t: Target, bytes: string): Promise<{ reply: Awaited<ReturnType<RawClient['response']>>; closed: boolean; client: RawClient }> {
  const client = await RawClient.open(t.port)
  try {
    await client.write(bytes).catch(() => {})
    const reply = await client.response(3000)
    const closed = (await within(client.closed.then(() => true), 2000, false)) as boolean
    return { reply, closed, client }
  } finally {
    client.destroy()
  }
}

function lines(count: number, make: (i: number) => string): string[] {
  return Array.from({ length: count }, (_, i) => make(i))
}

const heads = suite<{ t: Target }>('hostile request heads')

heads.before(async (ctx) => { ctx.t = await startTarget(TOKEN, CONFIG) })
heads.after(async (ctx) => { await stopTarget(ctx.t) })

heads('a header flood up to the 16 KiB head limit is served: 1,500+ headers, and 2,500 tiny ones (Node keeps 2,000)', async ({ t }) => {
  const fill: string[] = []
  let headBytes = wakeWith([]).length - WAKE.length
  for (let i = 0; headBytes + `h${i}:v\r\n`.length < MAX_HEAD - 64; i++) {
    fill.push(`h${i}:v`)
    headBytes += `h${i}:v\r\n`.length
  }
  assert.ok(fill.length > 1500, `only ${fill.length} headers fit`)
  const big = await exchange(t, wakeWith(fill))
  assert.is(big.reply.status, 200, big.reply.body)
  const tiny = await exchange(t, wakeWith(lines(2500, () => 'a: b')))
  assert.is(tiny.reply.status, 200, tiny.reply.body)
  await assertStillServing(t, 'a header flood within the limit')
})

heads('a header flood past the head limit is 431 headers_too_large and the connection is closed', async ({ t }) => {
  for (const flood of [lines(3000, (i) => `x-flood-${i}: v`), lines(20_000, () => 'a: b'), lines(200, (i) => `x-${i}: ${'v'.repeat(200)}`)]) {
    const { reply, closed } = await exchange(t, wakeWith(flood))
    assertContractError(reply, 431, 'headers_too_large')
    assert.ok(closed, 'the connection stays open after 431')
  }
  await assertStillServing(t, 'a header flood past the limit')
})

heads('a 64 KiB path is 431 headers_too_large (or 400/414) and the connection is closed', async ({ t }) => {
  for (const path of [`/hooks/${'a'.repeat(64 * 1024)}`, `/hooks/wake?${'q'.repeat(64 * 1024)}`, `/${'%41'.repeat(22 * 1024)}`]) {
    const { reply, closed } = await exchange(t, wakeWith([], path))
    assert.ok([400, 414, 431].includes(reply.status), `${reply.status} ${reply.body.slice(0, 200)}`)
    assertContractError(reply, reply.status, ['headers_too_large', 'bad_request', 'uri_too_long'])
    assert.ok(closed, 'the connection stays open after refusing a 64 KiB path')
  }
  await assertStillServing(t, 'a 64 KiB path')
})

heads('a long path that still fits the head is 404 no_mapping, answered as JSON', async ({ t }) => {
  const reply = await request(t.origin, `/hooks/${'a'.repeat(12 * 1024)}`, { token: TOKEN, body: WAKE })
  assertContractError(reply, 404, 'no_mapping')
  await assertStillServing(t, 'a 12 KiB unknown hook name')
})

heads('a 15 KiB header value fits and reaches the template; a 64 KiB one is 431 and the connection is closed', async ({ t }) => {
  const value = 'v'.repeat(15 * 1024)
  const fits = await request(t.origin, '/hooks/echo-header', { token: TOKEN, body: '{}', headers: { 'x-long': value } })
  assert.is(fits.status, 200, fits.text)
  for (const header of [`x-long: ${'v'.repeat(64 * 1024)}`, `Authorization: Bearer ${'t'.repeat(64 * 1024)}`, `x-hookgate-token: ${'t'.repeat(20 * 1024)}`, `Cookie: ${'c=1; '.repeat(8 * 1024)}`]) {
    const { reply, closed } = await exchange(t, wakeWith([header]))
    assertContractError(reply, 431, 'headers_too_large')
    assert.ok(closed, 'the connection stays open after 431')
  }
  await assertStillServing(t, 'very long header values')
})

heads('a 10 KiB token that fits the head is a plain 401, compared without trouble', async ({ t }) => {
  const tokens: Array<Record<string, string>> = [{ authorization: `Bearer ${'t'.repeat(10 * 1024)}` }, { 'x-hookgate-token': 't'.repeat(10 * 1024) }]
  for (const headers of tokens) {
    assertContractError(await request(t.origin, '/hooks/wake', { headers, body: WAKE }), 401, 'unauthorized')
  }
  await assertStillServing(t, 'a 10 KiB token')
})

const SMUGGLED = 'POST /hooks/wake HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ' + TOKEN + '\r\nContent-Type: application/json\r\nContent-Length: ' + WAKE.length + '\r\n\r\n' + WAKE

const SMUGGLING: Array<[string, string]> = [
  ['Content-Length then Transfer-Encoding (CL.TE)', `Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`],
  ['Transfer-Encoding then Content-Length (TE.CL)', `Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n${(SMUGGLED.length).toString(16)}\r\n${SMUGGLED}\r\n0\r\n\r\n`],
  ['two different Content-Lengths', `Content-Length: 0\r\nContent-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`],
  ['Transfer-Encoding: xchunked with a Content-Length', `Content-Length: ${SMUGGLED.length}\r\nTransfer-Encoding: xchunked\r\n\r\n${SMUGGLED}`],
  ['Transfer-Encoding: chunked, identity', `Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${SMUGGLED}`],
  ['a space before the colon', `Transfer-Encoding : chunked\r\nContent-Length: 6\r\n\r\n0\r\n\r\n${SMUGGLED}`],
  ['an obs-fold continuation line', `Content-Length: 6\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`],
  ['a bare LF line ending', `Content-Length: 6\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`],
]

heads('request smuggling: ambiguous body framing is 400 bad_request, the connection is closed, and the hidden request never runs', async ({ t }) => {
  for (const [what, rest] of SMUGGLING) {
    const bytes = `POST /hooks/wake HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\n${rest}`
    const client = await RawClient.open(t.port)
    let all = ''
    client.socket.on('data', (d: Buffer) => { all += d.toString('latin1') })
    try {
      await client.write(bytes).catch(() => {})
      const reply = await client.response(3000)
      assert.is(reply.status, 400, `${what}: ${reply.status} ${reply.body}`)
      assertContractError(reply, 400, 'bad_request')
      assert.ok(await within(client.closed.then(() => true), 2000, false), `${what}: the connection stays open`)
      // exactly one answer came back: the smuggled wake after it was not parsed as a request
      assert.is(all.split('HTTP/1.1 ').length - 1, 1, `${what}: more than one answer: ${all.slice(0, 400)}`)
    } finally {
      client.destroy()
    }
  }
  await assertStillServing(t, 'request smuggling attempts')
})

heads.run()
