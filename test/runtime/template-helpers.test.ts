import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { isSecretHeader, templateHelpers } from '../../runtime/bundle/template-helpers.js'

const h = templateHelpers

/** A prototype-less record, the way the runtime builds headers and query objects. */
function dict<T>(entries: Record<string, T>): Record<string, T> {
  return Object.assign(Object.create(null) as Record<string, T>, entries)
}

// ---------------------------------------------------------------------------------------------
const get = suite('templateHelpers.get')

get('walks nested own properties and array indexes', () => {
  const payload = JSON.parse('{"user":{"name":"Ann","tags":["a","b"]},"list":[[1,2],[3,4]]}')
  assert.is(h.get(payload, ['user', 'name']), 'Ann')
  assert.is(h.get(payload, ['user', 'tags', 1]), 'b')
  assert.is(h.get(payload, ['list', 1, 0]), 3)
  assert.equal(h.get(payload, ['user']), { name: 'Ann', tags: ['a', 'b'] })
})

get('returns the root itself for an empty key list', () => {
  const payload = { a: 1 }
  assert.is(h.get(payload, []), payload)
  assert.is(h.get('text', []), 'text')
})

get('returns undefined for missing keys and for lookups through null or primitives', () => {
  const payload = JSON.parse('{"a":null,"b":"str","c":5}')
  assert.is(h.get(payload, ['missing']), undefined)
  assert.is(h.get(payload, ['a', 'x']), undefined)
  assert.is(h.get(payload, ['b', 0]), undefined)
  assert.is(h.get(payload, ['c', 'x']), undefined)
  assert.is(h.get(undefined, ['x']), undefined)
  assert.is(h.get(null, [0]), undefined)
})

get('keeps own properties whose value is null or falsy', () => {
  const payload = JSON.parse('{"a":null,"b":0,"c":false,"d":""}')
  assert.is(h.get(payload, ['a']), null)
  assert.is(h.get(payload, ['b']), 0)
  assert.is(h.get(payload, ['c']), false)
  assert.is(h.get(payload, ['d']), '')
})

get('never follows __proto__ even when the payload has it as an own key', () => {
  const payload = JSON.parse('{"__proto__":{"x":1}}')
  assert.ok(Object.hasOwn(payload, '__proto__'), 'JSON.parse creates an own __proto__ key')
  assert.is(h.get(payload, ['__proto__', 'x']), undefined)
  assert.is(h.get(payload, ['__proto__']), undefined)
})

get('never follows constructor or prototype, own or inherited', () => {
  const payload = JSON.parse('{"constructor":{"name":"x"},"prototype":{"y":1}}')
  assert.is(h.get(payload, ['constructor']), undefined)
  assert.is(h.get(payload, ['constructor', 'name']), undefined)
  assert.is(h.get(payload, ['prototype', 'y']), undefined)
  assert.is(h.get({}, ['constructor']), undefined)
  assert.is(h.get([], ['constructor']), undefined)
})

get('ignores inherited properties such as toString and hasOwnProperty', () => {
  const payload = JSON.parse('{"a":{}}')
  assert.is(h.get(payload, ['toString']), undefined)
  assert.is(h.get(payload, ['a', 'hasOwnProperty']), undefined)
  assert.is(h.get(payload, ['a', 'valueOf']), undefined)
  assert.is(h.get([1, 2], ['map']), undefined)
  const child = Object.create({ inherited: 'yes' }) as object
  assert.is(h.get({ child }, ['child', 'inherited']), undefined)
})

get('reads nothing from strings, so length on a string is undefined', () => {
  assert.is(h.get('hello', ['length']), undefined)
  assert.is(h.get('hello', [0]), undefined)
  assert.is(h.get({ s: 'hello' }, ['s', 'length']), undefined)
})

get('applies array indexes only to arrays', () => {
  const payload = JSON.parse('{"obj":{"0":"zero"},"arr":["first"]}')
  assert.is(h.get(payload, ['obj', 0]), undefined)
  assert.is(h.get(payload, ['arr', 0]), 'first')
  assert.is(h.get(payload, ['arr', 1]), undefined)
  assert.is(h.get(payload, ['arr', -1]), undefined)
  assert.is(h.get(payload, ['arr', 0.5]), undefined)
  assert.is(h.get(payload, ['arr', Number.NaN]), undefined)
})

get('reads named keys of arrays only when they are own properties', () => {
  const arr = ['first', 'second']
  assert.is(h.get(arr, ['1']), 'second')
  assert.is(h.get(arr, ['length']), 2)
  assert.is(h.get(arr, ['push']), undefined)
})

get('reads named keys from prototype-less objects', () => {
  assert.is(h.get(dict({ a: dict({ b: 'deep' }) }), ['a', 'b']), 'deep')
})

get('reads nothing from non-plain objects such as Map, Date, class instances or functions', () => {
  class Box {
    value = 1
  }
  const fn = Object.assign(() => 1, { extra: 'x' })
  assert.is(h.get(new Box(), ['value']), undefined)
  assert.is(h.get(new Map([['a', 1]]), ['a']), undefined)
  assert.is(h.get(new Date(0), ['getTime']), undefined)
  assert.is(h.get(fn, ['extra']), undefined)
  assert.is(h.get({ fn }, ['fn', 'name']), undefined)
})

get('does not call getters', () => {
  let called = false
  const payload = {
    get secret() {
      called = true
      return 'leak'
    },
  }
  assert.is(h.get(payload, ['secret']), undefined)
  assert.is(called, false)
})

get('does not modify Object.prototype while looking up hostile keys', () => {
  const payload = JSON.parse('{"__proto__":{"polluted":true}}')
  h.get(payload, ['__proto__', 'polluted'])
  h.get(payload, ['constructor', 'prototype', 'polluted'])
  assert.is(({} as Record<string, unknown>)['polluted'], undefined)
})

get.run()

// ---------------------------------------------------------------------------------------------
const text = suite('templateHelpers.text')

text('returns strings unchanged', () => {
  assert.is(h.text('plain'), 'plain')
  assert.is(h.text(''), '')
  assert.is(h.text('"quoted" <b>'), '"quoted" <b>')
})

text('renders numbers, booleans and bigints with String', () => {
  assert.is(h.text(42), '42')
  assert.is(h.text(-1.5), '-1.5')
  assert.is(h.text(0), '0')
  assert.is(h.text(true), 'true')
  assert.is(h.text(false), 'false')
  assert.is(h.text(12345678901234567890n), '12345678901234567890')
})

text('renders null and undefined as an empty string', () => {
  assert.is(h.text(null), '')
  assert.is(h.text(undefined), '')
})

text('renders objects and arrays as JSON', () => {
  assert.is(h.text({ a: 1, b: [true, null] }), '{"a":1,"b":[true,null]}')
  assert.is(h.text([1, 'two']), '[1,"two"]')
  assert.is(h.text({}), '{}')
})

text('renders functions and symbols as an empty string', () => {
  assert.is(h.text(() => 'x'), '')
  assert.is(h.text(Symbol('s')), '')
})

text.run()

// ---------------------------------------------------------------------------------------------
const json = suite('templateHelpers.json')

json('serialises values with JSON.stringify', () => {
  assert.is(h.json({ a: 'x', n: [1, 2] }), '{"a":"x","n":[1,2]}')
  assert.is(h.json('str'), '"str"')
  assert.is(h.json(null), 'null')
  assert.is(h.json(3), '3')
})

json('renders undefined, functions and symbols as an empty string', () => {
  assert.is(h.json(undefined), '')
  assert.is(h.json(() => 1), '')
  assert.is(h.json(Symbol('s')), '')
})

json('does not throw on a cyclic object and keeps its acyclic part', () => {
  const a: Record<string, unknown> = { name: 'a' }
  a['self'] = a
  let out = ''
  assert.not.throws(() => {
    out = h.json(a)
  })
  assert.type(out, 'string')
  assert.match(out, '"name":"a"')
})

json('does not mistake a repeated but acyclic reference for a cycle', () => {
  const shared = { v: 1 }
  const out = h.json({ a: shared, b: shared, cyclic: null as unknown })
  assert.is(out, '{"a":{"v":1},"b":{"v":1},"cyclic":null}')
  const loop: Record<string, unknown> = { shared }
  loop['loop'] = loop
  assert.is(h.json(loop), '{"shared":{"v":1},"loop":"[circular]"}')
})

json('does not throw on BigInt values', () => {
  let out = ''
  assert.not.throws(() => {
    out = h.json({ big: 10n })
  })
  assert.is(out, '{"big":"10"}')
  assert.is(h.json(7n), '"7"')
})

json('returns an empty string when toJSON throws', () => {
  const hostile = {
    toJSON() {
      throw new Error('boom')
    },
  }
  assert.is(h.json(hostile), '')
})

json.run()

// ---------------------------------------------------------------------------------------------
const header = suite('templateHelpers.header')

header('returns the value of a present header', () => {
  const headers = dict({ 'x-github-event': 'push', 'content-type': 'application/json' })
  assert.is(h.header(headers, 'x-github-event'), 'push')
  assert.is(h.header(headers, 'content-type'), 'application/json')
})

header('looks the name up case-insensitively', () => {
  assert.is(h.header(dict({ 'x-github-event': 'push' }), 'X-GitHub-Event'), 'push')
  assert.is(h.header(dict({ 'X-Mixed-Case': 'yes' }), 'x-mixed-case'), 'yes')
})

header('returns an empty string when the header is missing', () => {
  assert.is(h.header(dict({}), 'x-missing'), '')
  assert.is(h.header(dict({}), 'authorization'), '')
})

header('does not read inherited properties of a plain headers object', () => {
  assert.is(h.header({} as Record<string, string>, 'constructor'), '')
  assert.is(h.header({} as Record<string, string>, 'toString'), '')
  assert.is(h.header({} as Record<string, string>, '__proto__'), '')
})

header('redacts every class of secret header', () => {
  const headers = dict({
    authorization: 'Bearer abc',
    'proxy-authorization': 'Basic xyz',
    cookie: 'session=1',
    'set-cookie': 'session=2',
    'x-hookgate-token': 'tok',
    'x-hub-signature-256': 'sha256=aa',
    'stripe-signature': 't=1,v1=bb',
    'webhook-signature': 'v1,cc',
    'x-gitlab-token': 'gl',
    'x-webhook-secret': 's3',
    'x-api-key': 'k1',
    'x-apikey': 'k2',
    'x-password': 'p',
    'x-auth-user': 'u',
  })
  for (const name of Object.keys(headers)) {
    assert.is(h.header(headers, name), '[redacted]', name)
    assert.is(h.header(headers, name.toUpperCase()), '[redacted]', name.toUpperCase())
  }
})

header('joins array values such as repeated headers', () => {
  const headers = dict({ 'x-multi': ['a', 'b'] as unknown as string })
  assert.is(h.header(headers, 'x-multi'), 'a, b')
})

header.run()

// ---------------------------------------------------------------------------------------------
const headersJson = suite('templateHelpers.headersJson')

headersJson('serialises all headers as JSON with keys sorted', () => {
  const headers = dict({ 'x-b': '2', accept: '*/*', 'x-a': '1' })
  assert.is(h.headersJson(headers), '{"accept":"*/*","x-a":"1","x-b":"2"}')
})

headersJson('keeps the sorted order even for integer-like header names', () => {
  assert.is(h.headersJson(dict({ b: 'x', '10': 'y', '9': 'z' })), '{"10":"y","9":"z","b":"x"}')
})

headersJson('replaces the value of every secret header with [redacted]', () => {
  const headers = dict({
    authorization: 'Bearer abc',
    'proxy-authorization': 'Basic xyz',
    cookie: 'session=1',
    'set-cookie': 'session=2',
    'x-hookgate-token': 'tok',
    'x-hub-signature-256': 'sha256=aa',
    'stripe-signature': 't=1',
    'webhook-signature': 'v1',
    'x-webhook-secret': 's3',
    'x-api-key': 'k1',
    'x-apikey': 'k2',
    'x-password': 'p',
    'x-custom-auth': 'u',
    'user-agent': 'GitHub-Hookshot',
  })
  const parsed = JSON.parse(h.headersJson(headers)) as Record<string, string>
  assert.equal(Object.keys(parsed), Object.keys(headers).sort())
  for (const name of Object.keys(headers)) {
    assert.is(parsed[name], name === 'user-agent' ? 'GitHub-Hookshot' : '[redacted]', name)
  }
})

headersJson('redacts secret headers whatever the case of their name', () => {
  assert.is(h.headersJson(dict({ Authorization: 'Bearer abc' })), '{"Authorization":"[redacted]"}')
})

headersJson('escapes quotes in header values', () => {
  assert.is(h.headersJson(dict({ 'x-q': 'a"b' })), '{"x-q":"a\\"b"}')
})

headersJson('returns an empty object for no headers', () => {
  assert.is(h.headersJson(dict({})), '{}')
})

headersJson.run()

// ---------------------------------------------------------------------------------------------
const secret = suite('isSecretHeader')

secret('recognises the named secret headers in any case', () => {
  for (const name of ['authorization', 'Proxy-Authorization', 'COOKIE', 'set-cookie', 'X-Hookgate-Token']) {
    assert.ok(isSecretHeader(name), name)
  }
})

secret('recognises headers whose name contains a secret word', () => {
  for (const name of [
    'x-hub-signature',
    'x-hub-signature-256',
    'stripe-signature',
    'webhook-signature',
    'x-slack-signature',
    'x-gitlab-token',
    'x-webhook-secret',
    'x-api-key',
    'x-apikey',
    'x-db-password',
    'x-auth',
    'www-authenticate',
  ]) {
    assert.ok(isSecretHeader(name), name)
  }
})

// Regression: {{headers}} and the headers stored with a workflow run kept x-shopify-hmac-sha256 and
// other signatures, keys and sessions whose names a short list of words missed.
secret('signature leak: HMAC, key, session, credential and private-key headers of real senders are secret', () => {
  for (const name of [
    'x-shopify-hmac-sha256',
    'X-Shopify-Hmac-SHA256',
    'x-twilio-signature',
    'x-line-signature',
    'svix-signature',
    'x-wc-webhook-signature',
    'x-zm-signature',
    'x-hmac',
    'x-functions-key',
    'x-webhook-key',
    'x_access_key',
    'x-sig',
    'x-session-id',
    'x-client-credentials',
    'x-private-key',
    'x-db-passwd',
    'x-admin-pass',
  ]) {
    assert.ok(isSecretHeader(name), name)
  }
})

secret('does not flag ordinary headers', () => {
  for (const name of ['content-type', 'user-agent', 'x-github-event', 'x-github-delivery', 'accept', 'host', 'content-length', 'keep-alive', 'idempotency-key', 'Idempotency-Key', 'x-correlation-id', 'x-forwarded-for', 'x-gitlab-event', 'x-shopify-topic', 'x-signal', 'x-keyword']) {
    assert.not.ok(isSecretHeader(name), name)
  }
})

secret.run()

// ---------------------------------------------------------------------------------------------
const helpers = suite('templateHelpers')

helpers('is frozen so compiled code cannot replace a helper', () => {
  assert.ok(Object.isFrozen(templateHelpers))
  assert.throws(() => {
    ;(templateHelpers as unknown as Record<string, unknown>)['text'] = () => 'hijacked'
  })
  assert.is(templateHelpers.text('ok'), 'ok')
})

helpers.run()
