// The contract's order of checks, seen from outside: path under the base → `token` in the query →
// method → auth (Bearer before x-hookgate-token) → empty or unknown name → … ; each refusal with
// its status and the one JSON error shape. Also the three ways to configure the token, and what a
// request that is not HTTP at all gets.
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertError, assertOk, assertRawError, head, post, RawClient, scratchDir, send, serve, setTestToken, type Harness } from './harness.js'

const TOKEN = setTestToken()

const CONFIG = `
server:
  bodyTimeoutSeconds: 0.5
  maxBodyBytes: 1024
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: nested
      match: { path: a/b }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "nested {{payload.x}}"
    - id: ping
      match: { path: ping }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "ping"
`

const WAKE = { text: 'hello', mode: 'next-heartbeat' }

// ---------------------------------------------------------------------------------------------

const order = suite<{ h: Harness }>('the order of checks')

order.before(async (ctx) => { ctx.h = await serve(CONFIG) })
order.after(async (ctx) => { await ctx.h.close() })

order('a path outside the base path is 404 before anything else, even with a valid token', async ({ h }) => {
  assertError(await send(h.origin, '/elsewhere', { body: WAKE }), 404, 'not_found')
  assertError(await send(h.origin, '/elsewhere', { body: WAKE, token: TOKEN }), 404, 'not_found')
  assertError(await send(h.origin, '/hooksx/wake', { body: WAKE, token: TOKEN }), 404, 'not_found')
  assertError(await send(h.origin, '/', { method: 'GET' }), 404, 'not_found')
})

order('token leaked into the query string: ?token= is 400 token_in_query even with a wrong method and no auth', async ({ h }) => {
  assertError(await send(h.origin, '/hooks/wake?token=abc', { method: 'GET' }), 400, 'token_in_query')
  assertError(await send(h.origin, '/hooks/wake?x=1&token=abc', { method: 'DELETE' }), 400, 'token_in_query')
  assertError(await send(h.origin, `/hooks/wake?token=${TOKEN}`, { body: WAKE }), 400, 'token_in_query')
  // even with the right token in the header: a URL token ends up in proxy and access logs
  assertError(await send(h.origin, `/hooks/wake?token=${TOKEN}`, { body: WAKE, token: TOKEN }), 400, 'token_in_query')
})

order('GET, PUT and DELETE are 405 with Allow: POST before auth', async ({ h }) => {
  for (const method of ['GET', 'PUT', 'DELETE']) {
    const noAuth = await send(h.origin, '/hooks/wake', { method })
    assertError(noAuth, 405, 'method_not_allowed')
    assert.is(noAuth.headers.allow, 'POST', `${method}: Allow header`)
    const wrongAuth = await send(h.origin, '/hooks/agent', { method, token: 'wrong' })
    assertError(wrongAuth, 405, 'method_not_allowed')
    assert.is(wrongAuth.headers.allow, 'POST')
  }
})

order('a missing token is 401 unauthorized', async ({ h }) => {
  assertError(await send(h.origin, '/hooks/wake', { body: WAKE }), 401, 'unauthorized')
})

order('a wrong token is 401 unauthorized in either header', async ({ h }) => {
  assertError(await send(h.origin, '/hooks/wake', { body: WAKE, token: TOKEN + 'x' }), 401, 'unauthorized')
  assertError(await send(h.origin, '/hooks/wake', { body: WAKE, headers: { 'x-hookgate-token': TOKEN.slice(0, -1) } }), 401, 'unauthorized')
  assertError(await send(h.origin, '/hooks/wake', { body: WAKE, headers: { authorization: `Basic ${TOKEN}` } }), 401, 'unauthorized')
  assertError(await send(h.origin, '/hooks/wake', { body: WAKE, headers: { authorization: 'Bearer ' } }), 401, 'unauthorized')
})

order('the right token passes as Bearer and as x-hookgate-token', async ({ h }) => {
  assertOk(await send(h.origin, '/hooks/wake', { body: WAKE, token: TOKEN }), 200, ['ok', 'action', 'runId', 'mode'])
  assertOk(await send(h.origin, '/hooks/wake', { body: WAKE, headers: { 'x-hookgate-token': TOKEN } }), 200, ['ok', 'action', 'runId', 'mode'])
})

order('Bearer wins over x-hookgate-token: right Bearer with a wrong header passes', async ({ h }) => {
  const reply = await send(h.origin, '/hooks/wake', { body: WAKE, token: TOKEN, headers: { 'x-hookgate-token': 'wrong' } })
  assertOk(reply, 200, ['ok', 'action', 'runId', 'mode'])
})

order('Bearer wins over x-hookgate-token: a wrong Bearer with the right header fails', async ({ h }) => {
  const reply = await send(h.origin, '/hooks/wake', { body: WAKE, token: 'wrong', headers: { 'x-hookgate-token': TOKEN } })
  assertError(reply, 401, 'unauthorized')
})

// Regression: `Authorization: Bearer ` with no token beside a valid x-hookgate-token was accepted
order('an empty Bearer beside a valid x-hookgate-token is 401: the Authorization header is the credential', async ({ h }) => {
  for (const authorization of ['Bearer ', 'Bearer', '', 'Basic dXNlcjpwdw==']) {
    const reply = await send(h.origin, '/hooks/wake', { body: WAKE, headers: { authorization, 'x-hookgate-token': TOKEN } })
    assertError(reply, 401, 'unauthorized')
  }
})

order('the Bearer scheme name is case-insensitive (bearer, BEARER)', async ({ h }) => {
  assertOk(await send(h.origin, '/hooks/wake', { body: WAKE, headers: { authorization: `bearer ${TOKEN}` } }), 200, ['ok', 'action', 'runId', 'mode'])
  assertOk(await send(h.origin, '/hooks/wake', { body: WAKE, headers: { authorization: `BEARER ${TOKEN}` } }), 200, ['ok', 'action', 'runId', 'mode'])
})

order('the empty name (/hooks/ and /hooks) is 401 without auth', async ({ h }) => {
  assertError(await send(h.origin, '/hooks/', { body: WAKE }), 401, 'unauthorized')
  assertError(await send(h.origin, '/hooks', { body: WAKE }), 401, 'unauthorized')
})

order('the empty name (/hooks/ and /hooks) is 404 after auth', async ({ h }) => {
  assertError(await send(h.origin, '/hooks/', { body: WAKE, token: TOKEN }), 404, 'no_mapping')
  assertError(await send(h.origin, '/hooks', { body: WAKE, token: TOKEN }), 404, 'no_mapping')
})

order('an unknown name is 401 without auth and 404 no_mapping with it', async ({ h }) => {
  assertError(await send(h.origin, '/hooks/nothing-here', { body: {} }), 401, 'unauthorized')
  assertError(await post(h.origin, '/hooks/nothing-here', TOKEN, {}), 404, 'no_mapping')
})

order('a nested name /hooks/a/b routes to the mapping with match.path a/b', async ({ h }) => {
  const reply = await post(h.origin, '/hooks/a/b', TOKEN, { x: 1 })
  const body = assertOk(reply, 200, ['ok', 'action', 'runId', 'mode'])
  assert.is(body.action, 'wake')
  assertError(await post(h.origin, '/hooks/a', TOKEN, { x: 1 }), 404, 'no_mapping')
  assertError(await post(h.origin, '/hooks/a/b/c', TOKEN, { x: 1 }), 404, 'no_mapping')
})

order('the order holds across checks: wrong method beats no auth, no auth beats unknown name, unknown name beats a bad body', async ({ h }) => {
  assertError(await send(h.origin, '/hooks/nothing-here', { method: 'PUT' }), 405, 'method_not_allowed')
  assertError(await send(h.origin, '/hooks/nothing-here', { body: 'not json', headers: { 'content-type': 'text/plain' } }), 401, 'unauthorized')
  assertError(await send(h.origin, '/hooks/nothing-here', { body: 'not json', token: TOKEN, headers: { 'content-type': 'text/plain' } }), 404, 'no_mapping')
  // auth passes, the name exists, then the body is looked at
  assertError(await send(h.origin, '/hooks/ping', { body: 'not json', token: TOKEN, headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type')
})

order('the body limit is checked before the content type', async ({ h }) => {
  const client = await RawClient.open(h.port)
  try {
    await client.write(head('POST', '/hooks/ping', { authorization: `Bearer ${TOKEN}`, 'content-type': 'text/plain', 'content-length': '5000' }))
    assertRawError(await client.response(), 413, 'payload_too_large')
  } finally {
    client.destroy()
  }
})

order('a request that is not valid HTTP gets 400 with the JSON error body', async ({ h }) => {
  const client = await RawClient.open(h.port)
  try {
    await client.write('THIS IS NOT HTTP\r\n\r\n')
    const reply = await client.response()
    assertRawError(reply, 400, 'bad_request')
  } finally {
    client.destroy()
  }
})

order('headers too large get 431 with the JSON error body', async ({ h }) => {
  const client = await RawClient.open(h.port)
  try {
    await client.write(head('POST', '/hooks/wake', { 'x-padding': 'p'.repeat(20_000), 'content-length': '2' }))
    const reply = await client.response()
    assertRawError(reply, 431, 'headers_too_large')
  } finally {
    client.destroy()
  }
})

order('request smuggling: Content-Length together with Transfer-Encoding is refused with 400', async ({ h }) => {
  const client = await RawClient.open(h.port)
  try {
    await client.write(head('POST', '/hooks/wake', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': '4', 'transfer-encoding': 'chunked' }) + '0\r\n\r\nGET /hooks/wake HTTP/1.1\r\nHost: x\r\n\r\n')
    assertRawError(await client.response(), 400, 'bad_request')
  } finally {
    client.destroy()
  }
})

order('request smuggling: two different Content-Length headers are refused with 400', async ({ h }) => {
  const client = await RawClient.open(h.port)
  try {
    const lines = ['POST /hooks/wake HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${TOKEN}`, 'Content-Length: 2', 'Content-Length: 40', 'Connection: close', '', '{}']
    await client.write(lines.join('\r\n'))
    assertRawError(await client.response(), 400, 'bad_request')
  } finally {
    client.destroy()
  }
})

order.run()

// ---------------------------------------------------------------------------------------------

const fileToken = suite<{ h: Harness; token: string }>('a token configured as { file: path }')

fileToken.before(async (ctx) => {
  ctx.token = randomBytes(24).toString('base64url')
  const secretFile = join(scratchDir('secret-'), 'hook-token')
  writeFileSync(secretFile, ctx.token + '\n')
  ctx.h = await serve(`hooks:\n  enabled: true\n  token: { file: ${JSON.stringify(secretFile)} }\n`)
})
fileToken.after(async (ctx) => { await ctx.h.close() })

fileToken('the contents of the file (without the trailing newline) is the token', async ({ h, token }) => {
  assertOk(await post(h.origin, '/hooks/wake', token, WAKE), 200, ['ok', 'action', 'runId', 'mode'])
  assertError(await post(h.origin, '/hooks/wake', token + 'x', WAKE), 401, 'unauthorized')
  assertError(await send(h.origin, '/hooks/wake', { body: WAKE }), 401, 'unauthorized')
})

fileToken('the token from the env of the other config is not accepted here', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/wake', TOKEN, WAKE), 401, 'unauthorized')
})

fileToken.run()

// ---------------------------------------------------------------------------------------------

const paddedFileToken = suite<{ h: Harness; token: string }>('a token file with whitespace around the token')

paddedFileToken.before(async (ctx) => {
  ctx.token = randomBytes(24).toString('base64url')
  const secretFile = join(scratchDir('secret-'), 'hook-token')
  writeFileSync(secretFile, ` \t${ctx.token}  \r\n\n`)
  ctx.h = await serve(`hooks:\n  enabled: true\n  token: { file: ${JSON.stringify(secretFile)} }\n`)
})
paddedFileToken.after(async (ctx) => { await ctx.h.close() })

// Regression: only one final newline was cut, so a file saved with a CRLF, a blank line or a space
// held a token nobody could send
paddedFileToken('a secret file with surrounding whitespace: the trimmed contents are the token', async ({ h, token }) => {
  assertOk(await post(h.origin, '/hooks/wake', token, WAKE), 200, ['ok', 'action', 'runId', 'mode'])
  assertError(await post(h.origin, '/hooks/wake', token + 'x', WAKE), 401, 'unauthorized')
})

paddedFileToken.run()

// ---------------------------------------------------------------------------------------------

const generated = suite<{ h: Harness }>('a token configured as { generate: true }')

generated.before(async (ctx) => { ctx.h = await serve('hooks:\n  enabled: true\n  token: { generate: true }\n') })
generated.after(async (ctx) => { await ctx.h.close() })

generated('the generated token file appears in the state dir with mode 0600', async ({ h }) => {
  const file = join(h.stateDir, 'token')
  assert.ok(existsSync(file), 'no token file in the state dir')
  assert.is(statSync(file).mode & 0o777, 0o600)
})

generated('the token in that file authenticates, anything else does not', async ({ h }) => {
  const token = readFileSync(join(h.stateDir, 'token'), 'utf8').trim()
  assert.ok(token.length >= 24, 'the generated token is short')
  assertOk(await post(h.origin, '/hooks/wake', token, WAKE), 200, ['ok', 'action', 'runId', 'mode'])
  assertError(await post(h.origin, '/hooks/wake', TOKEN, WAKE), 401, 'unauthorized')
  assertError(await send(h.origin, '/hooks/wake', { body: WAKE }), 401, 'unauthorized')
})

generated.run()
