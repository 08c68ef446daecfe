// Standard Webhooks signing and verification, checked against the specification's published test
// vector and the cases a receiver must refuse.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { signStandardWebhook, verifyStandardWebhook, webhookSecretKey } from '../../../runtime/channels/index.js'
import { thrown } from './helpers.js'

// The test vector published with the Standard Webhooks reference libraries.
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
}
const at = (seconds: number) => () => seconds * 1000
const headersOf = (over: Record<string, string | undefined> = {}) => ({
  'webhook-id': VECTOR.id,
  'webhook-timestamp': String(VECTOR.timestamp),
  'webhook-signature': VECTOR.signature,
  ...over,
})

// ---------------------------------------------------------------------------------------------
const key = suite('webhookSecretKey')

key('decodes the base64 after whsec_ into the HMAC key', () => {
  assert.equal(webhookSecretKey(VECTOR.secret), Buffer.from('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'base64'))
})

key('accepts padded base64', () => {
  assert.is(webhookSecretKey('whsec_' + Buffer.alloc(25, 7).toString('base64')).length, 25)
})

key('refuses a secret without the whsec_ prefix', () => {
  assert.is(thrown(() => webhookSecretKey('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')).message, 'it does not start with whsec_')
})

key('refuses what is not base64, including base64url', () => {
  for (const bad of ['whsec_', 'whsec_not base64 at all!!', 'whsec_abc-def_ghijklmnopqrstuvwxyz012345', 'whsec_QUJD=A']) {
    assert.is(thrown(() => webhookSecretKey(bad)).message, 'what follows whsec_ is not base64', bad)
  }
})

key('refuses a key shorter than the 24 bytes the specification asks for', () => {
  const err = thrown(() => webhookSecretKey('whsec_' + Buffer.from('short').toString('base64')))
  assert.is(err.message, 'it encodes 5 bytes; a signing secret needs at least 24 random bytes')
})

key('never quotes the secret in its message', () => {
  const secret = 'whsec_' + Buffer.from('tiny').toString('base64')
  assert.not.ok(thrown(() => webhookSecretKey(secret)).message.includes(secret.slice(6)))
})

// ---------------------------------------------------------------------------------------------
const sign = suite('signStandardWebhook')

sign('reproduces the published test vector', () => {
  assert.is(signStandardWebhook(webhookSecretKey(VECTOR.secret), VECTOR.id, VECTOR.timestamp, VECTOR.body), VECTOR.signature)
})

sign('signs bytes and the same text alike', () => {
  const k = webhookSecretKey(VECTOR.secret)
  assert.is(signStandardWebhook(k, VECTOR.id, VECTOR.timestamp, Buffer.from(VECTOR.body)), VECTOR.signature)
})

// ---------------------------------------------------------------------------------------------
const verify = suite('verifyStandardWebhook')

verify('accepts the published test vector at its own time', () => {
  assert.equal(verifyStandardWebhook(VECTOR.secret, headersOf(), VECTOR.body, { now: at(VECTOR.timestamp) }), { ok: true, id: VECTOR.id, timestamp: VECTOR.timestamp })
})

verify('reads the headers whatever their case', () => {
  const headers = { 'Webhook-Id': VECTOR.id, 'WEBHOOK-TIMESTAMP': String(VECTOR.timestamp), 'Webhook-Signature': VECTOR.signature }
  assert.ok(verifyStandardWebhook(VECTOR.secret, headers, VECTOR.body, { now: at(VECTOR.timestamp) }).ok)
})

verify('refuses a tampered body', () => {
  assert.equal(verifyStandardWebhook(VECTOR.secret, headersOf(), '{"test": 2432232315}', { now: at(VECTOR.timestamp) }), { ok: false, reason: 'no v1 signature matches' })
})

verify('refuses a changed id or timestamp, which are signed too', () => {
  assert.not.ok(verifyStandardWebhook(VECTOR.secret, headersOf({ 'webhook-id': 'msg_other' }), VECTOR.body, { now: at(VECTOR.timestamp) }).ok)
  assert.not.ok(verifyStandardWebhook(VECTOR.secret, headersOf({ 'webhook-timestamp': String(VECTOR.timestamp + 1) }), VECTOR.body, { now: at(VECTOR.timestamp) }).ok)
})

verify('refuses another secret', () => {
  const other = 'whsec_' + Buffer.alloc(24, 1).toString('base64')
  assert.not.ok(verifyStandardWebhook(other, headersOf(), VECTOR.body, { now: at(VECTOR.timestamp) }).ok)
})

verify('accepts one matching signature among several and ignores other schemes', () => {
  const sig = `v1a,c29tZXRoaW5nIGVsc2U= v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= ${VECTOR.signature}`
  assert.ok(verifyStandardWebhook(VECTOR.secret, headersOf({ 'webhook-signature': sig }), VECTOR.body, { now: at(VECTOR.timestamp) }).ok)
  const onlyV1a = `v1a,${VECTOR.signature.slice(3)}`
  assert.not.ok(verifyStandardWebhook(VECTOR.secret, headersOf({ 'webhook-signature': onlyV1a }), VECTOR.body, { now: at(VECTOR.timestamp) }).ok)
})

verify('refuses a timestamp more than five minutes from now, either way', () => {
  const ok = (now: number) => verifyStandardWebhook(VECTOR.secret, headersOf(), VECTOR.body, { now: at(now) })
  assert.ok(ok(VECTOR.timestamp + 300).ok)
  assert.ok(ok(VECTOR.timestamp - 300).ok)
  assert.equal(ok(VECTOR.timestamp + 301), { ok: false, reason: 'webhook-timestamp is more than 300 s away from now' })
  assert.not.ok(ok(VECTOR.timestamp - 301).ok)
})

verify('refuses a request missing any of the three headers', () => {
  for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
    assert.equal(verifyStandardWebhook(VECTOR.secret, headersOf({ [name]: undefined }), VECTOR.body, { now: at(VECTOR.timestamp) }), { ok: false, reason: `${name} is missing` })
  }
})

verify('refuses a timestamp that is not unix seconds', () => {
  const r = verifyStandardWebhook(VECTOR.secret, headersOf({ 'webhook-timestamp': '2021-02-25T15:02:10Z' }), VECTOR.body, { now: at(VECTOR.timestamp) })
  assert.equal(r, { ok: false, reason: 'webhook-timestamp is not unix seconds' })
})

verify('says so when its own secret is unusable', () => {
  const r = verifyStandardWebhook('not-a-secret', headersOf(), VECTOR.body, { now: at(VECTOR.timestamp) })
  assert.equal(r, { ok: false, reason: 'the secret is not usable: it does not start with whsec_' })
})

key.run()
sign.run()
verify.run()
