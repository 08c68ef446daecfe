// Hostile bodies against the real `hookgate serve` in another process: truncated and invalid JSON,
// bytes that are not UTF-8, numbers too big for a double, a 200 KiB key and 50,000 duplicate keys.
// Each is answered with the contract's status and JSON error body (or accepted, where the JSON is
// valid), quickly, and right after it the server is alive, answers a valid wake with 200 and stays
// under the memory bound.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { setTestToken } from '../runtime/http/harness.js'
import { assertContractError, assertStillServing, postJson, startTarget, stopTarget, wakeTextOf, WAKE_KEYS, type Target } from './target.js'

const TOKEN = setTestToken()

const CONFIG = `
server:
  bodyTimeoutSeconds: 2
  maxBodyBytes: 1048576
  authFailures: { limit: 1000, windowSeconds: 60, lockoutSeconds: 1 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: field
      match: { path: field }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "a={{payload.a}}"
    - id: whole
      match: { path: whole }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "all={{payload}}"
`


const bodies = suite<{ t: Target }>('malformed and hostile JSON bodies')

bodies.before(async (ctx) => { ctx.t = await startTarget(TOKEN, CONFIG) })
bodies.after(async (ctx) => { await stopTarget(ctx.t) })

bodies('truncated JSON is 400 invalid_json, on the direct wake and on a mapping', async ({ t }) => {
  const full = JSON.stringify({ text: 'a whole sentence', mode: 'next-heartbeat', a: [1, 2, { b: 'c' }] })
  for (const cut of [1, 2, 9, 17, full.length - 10, full.length - 1]) {
    for (const path of ['/hooks/wake', '/hooks/field']) {
      assertContractError(await postJson(t, path, full.slice(0, cut)), 400, 'invalid_json')
    }
  }
  await assertStillServing(t, 'truncated JSON')
})

bodies('invalid JSON of every common shape is 400 invalid_json', async ({ t }) => {
  const invalid = [
    "{'text':'single quotes'}", '{text:"bare key"}', '{"text":"x",}', '[1,2,]', '{"a":01}', '{"a":NaN}', '{"a":Infinity}',
    'undefined', '{"a":1} trailing', '{"a":1}{"a":2}', '{"a":"raw\u0000control"}', '{"a":"\\x41"}', '{"a":"\\u12"}', '{"a"}', '{,}', ']', '"',
    '{"a":1}\u0000', '\u00ff\u00fe{}', '{"a":tru}', '{"a":nul}', '--1', '1e', '0x10',
  ]
  for (const body of invalid) {
    const reply = await postJson(t, '/hooks/field', body)
    assertContractError(reply, 400, 'invalid_json')
  }
  await assertStillServing(t, 'invalid JSON')
})

bodies('bytes that are not UTF-8 are 400 invalid_utf8 (stray, overlong, surrogate, truncated, beyond U+10FFFF)', async ({ t }) => {
  const bad = [[0xff], [0xc3, 0x28], [0xc0, 0xaf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80]]
  for (const bytes of bad) {
    const body = Buffer.concat([Buffer.from('{"text":"'), Buffer.from(bytes), Buffer.from('","mode":"now"}')])
    assertContractError(await postJson(t, '/hooks/wake', body), 400, 'invalid_utf8')
    assertContractError(await postJson(t, '/hooks/field', body), 400, 'invalid_utf8')
    // a form body is decoded the same way
    assertContractError(await postJson(t, '/hooks/field', Buffer.concat([Buffer.from('a='), Buffer.from(bytes)]), { 'content-type': 'application/x-www-form-urlencoded' }), 400, 'invalid_utf8')
  }
  await assertStillServing(t, 'invalid UTF-8')
})

bodies('huge numbers (1e999999, 200 KiB of digits) parse without hanging and render as text', async ({ t }) => {
  const inf = await postJson(t, '/hooks/field', '{"a":1e999999}')
  assert.is(inf.status, 200, inf.text)
  assert.is(wakeTextOf(t.stateDir, inf.json.runId), 'a=Infinity')
  const negative = await postJson(t, '/hooks/field', '{"a":-1e999999}')
  assert.is(negative.status, 200, negative.text)
  assert.is(wakeTextOf(t.stateDir, negative.json.runId), 'a=-Infinity')

  const digits = '9'.repeat(200 * 1024)
  for (const body of [`{"a":${digits}}`, `{"a":0.${digits}}`, `{"a":1e${digits}}`, `{"a":1e-${digits}}`]) {
    const reply = await postJson(t, '/hooks/field', body)
    assert.is(reply.status, 200, reply.text.slice(0, 300))
    assert.ok(reply.ms < 2000, `a 200 KiB number took ${Math.round(reply.ms)} ms to answer`)
    assert.match(wakeTextOf(t.stateDir, reply.json.runId) ?? '', /^a=(\d|Infinity)/)
  }
  // on the direct wake a number where text belongs is a field error, not a crash
  assertContractError(await postJson(t, '/hooks/wake', `{"text":${digits}}`), 400, 'invalid_payload')
  await assertStillServing(t, 'huge numbers')
})

bodies('a 200 KiB key is accepted as data and rendered once, without blowing up the answer', async ({ t }) => {
  const key = 'k'.repeat(200 * 1024)
  const reply = await postJson(t, '/hooks/whole', JSON.stringify({ [key]: 1 }))
  assert.is(reply.status, 200, reply.text.slice(0, 300))
  assert.equal(Object.keys(reply.json).sort(), [...WAKE_KEYS].sort())
  assert.ok(reply.text.length < 512, 'the answer does not echo the payload')
  assert.is(wakeTextOf(t.stateDir, reply.json.runId), `all={"${key}":1}`)
  // the same key on the direct wake is an unknown field next to a valid text: accepted or refused, but answered
  const wake = await postJson(t, '/hooks/wake', JSON.stringify({ text: 'x', mode: 'now', [key]: 1 }))
  assert.ok(wake.status === 200 || wake.status === 400, wake.text.slice(0, 300))
  await assertStillServing(t, 'a 200 KiB key')
})

bodies('50,000 duplicate keys parse in linear time: the last one wins', async ({ t }) => {
  const many = '{' + Array.from({ length: 50_000 }, (_, i) => `"a":${i}`).join(',') + '}'
  assert.ok(many.length > 262_144, 'more than the default 256 KiB limit: this file raises it to 1 MiB')
  const reply = await postJson(t, '/hooks/field', many)
  assert.is(reply.status, 200, reply.text.slice(0, 300))
  assert.ok(reply.ms < 2000, `50,000 duplicate keys took ${Math.round(reply.ms)} ms`)
  assert.is(wakeTextOf(t.stateDir, reply.json.runId), 'a=49999')

  const texts = '{' + Array.from({ length: 50_000 }, (_, i) => `"text":"t${i}"`).join(',') + ',"mode":"next-heartbeat"}'
  const wake = await postJson(t, '/hooks/wake', texts)
  assert.is(wake.status, 200, wake.text.slice(0, 300))
  assert.is(wakeTextOf(t.stateDir, wake.json.runId), 't49999')
  await assertStillServing(t, '50,000 duplicate keys')
})

bodies.run()
