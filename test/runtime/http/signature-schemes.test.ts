// Each sender scheme's check on its own, with the providers' published examples where they exist
// (Standard Webhooks' reference vector, Slack's worked example) and payloads signed the way each
// provider documents it: valid passes; tampered body, wrong secret, stale or future timestamp,
// missing or malformed header fail with a reason that names the part and never a secret.
//
// store: none — each scheme checked on its own: the PostgreSQL pass leaves it out.
import { createHmac, generateKeyPairSync, sign } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { BundleRoute, BundleSignature } from '../../../runtime/bundle/format.js'
import { deliveryIdOf, prepareSignatures, verifySender, type PreparedSignature, type Verdict } from '../../../runtime/http/signatures.js'
import { SecretError } from '../../../runtime/bundle/secrets.js'

/** Keys for `spec` from secret values, through the same start-up path the service uses (env references). */
function prepare(spec: Omit<BundleSignature, 'secrets' | 'toleranceSeconds' | 'answerPing' | 'hmac'> & Partial<BundleSignature>, ...values: string[]): PreparedSignature {
  const secrets = values.map((v, i) => {
    process.env[`HOOKGATE_TEST_SIG_${i}`] = v
    return { kind: 'env' as const, name: `HOOKGATE_TEST_SIG_${i}` }
  })
  const signature: BundleSignature = { toleranceSeconds: 300, answerPing: false, hmac: null, ...spec, secrets }
  const route = { id: 'm', signature } as unknown as BundleRoute
  return prepareSignatures([[route]], '/', '/nonexistent-state')
    .get('m')!
}

function failure(v: Verdict): string {
  assert.is(v.ok, false, 'expected the check to fail')
  return (v as { reason: string }).reason
}

function assertFails(v: Verdict, reason: RegExp, secrets: string[] = []): void {
  const why = failure(v)
  assert.match(why, reason)
  for (const s of secrets) assert.not.ok(why.includes(s), 'a failure reason must not name a secret')
}

const hex = (key: string | Buffer, data: string | Buffer, alg = 'sha256') => createHmac(alg, key).update(data).digest('hex')
const b64 = (key: string | Buffer, data: string | Buffer, alg = 'sha256') => createHmac(alg, key).update(data).digest('base64')

// ---- standard-webhooks ---------------------------------------------------------------------------

const sw = suite('standardWebhooks')
const SW_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
const SW_VECTOR = { 'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek', 'webhook-timestamp': '1614265330', 'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=' }
const SW_BODY = Buffer.from('{"test": 2432232314}')
const SW_NOW = 1614265330_000

sw('the published Standard Webhooks vector verifies, and its webhook-id is the delivery id', () => {
  const v = verifySender(prepare({ scheme: 'standard-webhooks' }, SW_SECRET), SW_VECTOR, SW_BODY, SW_NOW)
  assert.equal(v, { ok: true, deliveryId: 'msg_p5jXN8AQM9LWM0D4loKWxJek' })
})

sw('several space-separated signatures: one that matches is enough', () => {
  const headers = { ...SW_VECTOR, 'webhook-signature': `v1,bm9wZQ== v2,abc ${SW_VECTOR['webhook-signature']}` }
  assert.ok(verifySender(prepare({ scheme: 'standard-webhooks' }, SW_SECRET), headers, SW_BODY, SW_NOW).ok)
})

sw('a tampered body, a wrong secret, a stale or future timestamp fail', () => {
  const keys = prepare({ scheme: 'standard-webhooks' }, SW_SECRET)
  assertFails(verifySender(keys, SW_VECTOR, Buffer.from('{"test": 2432232315}'), SW_NOW), /no signature matches/)
  assertFails(verifySender(prepare({ scheme: 'standard-webhooks' }, 'whsec_' + Buffer.from('another secret').toString('base64')), SW_VECTOR, SW_BODY, SW_NOW), /no signature matches/)
  assertFails(verifySender(keys, SW_VECTOR, SW_BODY, SW_NOW + 301_000), /webhook-timestamp is more than 300 s old/)
  assertFails(verifySender(keys, SW_VECTOR, SW_BODY, SW_NOW - 301_000), /more than 300 s in the future/)
})

sw('a missing or malformed header fails, naming the header', () => {
  const keys = prepare({ scheme: 'standard-webhooks' }, SW_SECRET)
  for (const h of ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const) {
    const headers: IncomingHttpHeaders = { ...SW_VECTOR }
    delete headers[h]
    assertFails(verifySender(keys, headers, SW_BODY, SW_NOW), new RegExp(`the ${h} header \\(or ${h.replace('webhook-', 'svix-')}\\) is missing`))
  }
  assertFails(verifySender(keys, { ...SW_VECTOR, 'webhook-signature': 'g0hM9SsE+OTPJTGt' }, SW_BODY, SW_NOW), /malformed/)
  assertFails(verifySender(keys, { ...SW_VECTOR, 'webhook-timestamp': '16142653.30' }, SW_BODY, SW_NOW), /not a whole number of seconds/)
})

sw('v1a: an Ed25519 signature verifies against a whpk_ public key; another key pair does not', () => {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  const other = generateKeyPairSync('ed25519')
  const raw = (k: typeof publicKey) => Buffer.from(k.export({ format: 'jwk' }).x!, 'base64url').toString('base64')
  const signed = Buffer.concat([Buffer.from(`${SW_VECTOR['webhook-id']}.${SW_VECTOR['webhook-timestamp']}.`), SW_BODY])
  const headers = { ...SW_VECTOR, 'webhook-signature': `v1a,${sign(null, signed, privateKey).toString('base64')}` }
  assert.ok(verifySender(prepare({ scheme: 'standard-webhooks' }, `whpk_${raw(publicKey)}`), headers, SW_BODY, SW_NOW).ok)
  assertFails(verifySender(prepare({ scheme: 'standard-webhooks' }, `whpk_${raw(other.publicKey)}`), headers, SW_BODY, SW_NOW), /no signature matches/)
  // the asymmetric signature is no HMAC: a whsec_ secret does not accept it
  assertFails(verifySender(prepare({ scheme: 'standard-webhooks' }, SW_SECRET), headers, SW_BODY, SW_NOW), /no signature matches/)
})

sw('a whsec_ secret that is not base64 fails the start, naming its reference and not its value', () => {
  try {
    prepare({ scheme: 'standard-webhooks' }, 'whsec_not*base64!')
    assert.unreachable('a malformed whsec_ secret was accepted')
  } catch (err) {
    assert.instance(err, SecretError)
    assert.match((err as Error).message, /\$\{HOOKGATE_TEST_SIG_0\} of mapping "m" is not valid base64/)
    assert.not.ok((err as Error).message.includes('not*base64'), 'the message must not show the value')
  }
  assert.throws(() => prepare({ scheme: 'standard-webhooks' }, 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'), /must start with whsec_ .* or whpk_/)
})

// ---- github --------------------------------------------------------------------------------------

const gh = suite('github')
const GH_SECRET = "It's a Secret to Everybody"
const GH_BODY = Buffer.from('Hello, World!')

gh('GitHub\'s documented example (secret "It\'s a Secret to Everybody", body "Hello, World!") verifies', () => {
  // the expected value GitHub's "Validating webhook deliveries" page gives for this secret and body
  const headers = { 'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17', 'x-github-delivery': '72d3162e-cc78-11e3-81ab-4c9367dc0958' }
  assert.equal(verifySender(prepare({ scheme: 'github', toleranceSeconds: null }, GH_SECRET), headers, GH_BODY, Date.now()), { ok: true, deliveryId: '72d3162e-cc78-11e3-81ab-4c9367dc0958' })
})

gh('a tampered body, a wrong secret, a missing or malformed header fail', () => {
  const keys = prepare({ scheme: 'github', toleranceSeconds: null }, GH_SECRET)
  const good = { 'x-hub-signature-256': `sha256=${hex(GH_SECRET, GH_BODY)}` }
  assertFails(verifySender(keys, good, Buffer.from('Hello, World?'), Date.now()), /no signature matches/, [GH_SECRET])
  assertFails(verifySender(prepare({ scheme: 'github', toleranceSeconds: null }, 'wrong'), good, GH_BODY, Date.now()), /no signature matches/)
  assertFails(verifySender(keys, {}, GH_BODY, Date.now()), /x-hub-signature-256 header is missing/)
  assertFails(verifySender(keys, { 'x-hub-signature-256': hex(GH_SECRET, GH_BODY) }, GH_BODY, Date.now()), /malformed/)
  assertFails(verifySender(keys, { 'x-hub-signature': `sha1=${hex(GH_SECRET, GH_BODY, 'sha1')}` }, GH_BODY, Date.now()), /missing/)
})

// ---- stripe --------------------------------------------------------------------------------------

const st = suite('stripe')
const ST_SECRET = 'whsec_test_stripe_endpoint_secret'
const ST_BODY = Buffer.from('{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"payment_intent.succeeded"}')

/** Stripe's documented signed payload: `${t}.${body}`, HMAC-SHA256 with the endpoint secret, hex. */
function stripeHeader(secret: string, t: number, body: Buffer, extra = ''): string {
  return `t=${t},v1=${hex(secret, Buffer.concat([Buffer.from(`${t}.`), body]))}${extra}`
}

st('t= and v1= over `${t}.${body}` verify; a v0 entry and a second v1 beside it are fine; the event id comes from the body', () => {
  const now = Math.floor(Date.now() / 1000)
  const keys = prepare({ scheme: 'stripe' }, ST_SECRET)
  const header = stripeHeader(ST_SECRET, now, ST_BODY, `,v1=${'0'.repeat(64)},v0=${'1'.repeat(64)}`)
  const v = verifySender(keys, { 'stripe-signature': header }, ST_BODY, now * 1000)
  assert.ok(v.ok)
  assert.is(deliveryIdOf('stripe', v as { deliveryId: undefined }, JSON.parse(ST_BODY.toString())), 'evt_1NG8Du2eZvKYlo2CUI79vXWy')
})

st('tampered body, wrong secret, stale and future t, missing and malformed header fail', () => {
  const now = Math.floor(Date.now() / 1000)
  const keys = prepare({ scheme: 'stripe' }, ST_SECRET)
  const header = stripeHeader(ST_SECRET, now, ST_BODY)
  assertFails(verifySender(keys, { 'stripe-signature': header }, Buffer.from(ST_BODY.toString().replace('succeeded', 'failed')), now * 1000), /no signature matches/)
  assertFails(verifySender(keys, { 'stripe-signature': stripeHeader('whsec_other', now, ST_BODY) }, ST_BODY, now * 1000), /no signature matches/)
  assertFails(verifySender(keys, { 'stripe-signature': stripeHeader(ST_SECRET, now - 301, ST_BODY) }, ST_BODY, now * 1000), /more than 300 s old/)
  assertFails(verifySender(keys, { 'stripe-signature': stripeHeader(ST_SECRET, now + 301, ST_BODY) }, ST_BODY, now * 1000), /in the future/)
  assertFails(verifySender(keys, {}, ST_BODY, now * 1000), /stripe-signature header is missing/)
  assertFails(verifySender(keys, { 'stripe-signature': `v1=${hex(ST_SECRET, ST_BODY)}` }, ST_BODY, now * 1000), /malformed: stripe-signature needs t=/)
})

// ---- slack ---------------------------------------------------------------------------------------

const sl = suite('slack')
// Slack's worked example ("Verifying requests from Slack"): a slash command, form-encoded.
const SL_SECRET = '8f742231b10e8888abcd99yyyzzz85a5'
const SL_TS = '1531420618'
const SL_BODY = Buffer.from('token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c')
const SL_SIG = 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503'
const SL_HEADERS = { 'x-slack-request-timestamp': SL_TS, 'x-slack-signature': SL_SIG }

sl("Slack's documented example verifies on the raw form bytes; without an event_id the signature is the delivery id", () => {
  const v = verifySender(prepare({ scheme: 'slack' }, SL_SECRET), SL_HEADERS, SL_BODY, Number(SL_TS) * 1000)
  assert.equal(v, { ok: true, deliveryId: SL_SIG })
  assert.is(deliveryIdOf('slack', v as { deliveryId: string }, { event_id: 'Ev0PV52K21' }), 'Ev0PV52K21')
})

sl('tampered body, wrong secret, stale and future timestamp, missing and malformed headers fail', () => {
  const keys = prepare({ scheme: 'slack' }, SL_SECRET)
  const at = Number(SL_TS) * 1000
  assertFails(verifySender(keys, SL_HEADERS, Buffer.from(SL_BODY.toString().replace('text=', 'text=x')), at), /no signature matches/)
  assertFails(verifySender(prepare({ scheme: 'slack' }, 'another-signing-secret'), SL_HEADERS, SL_BODY, at), /no signature matches/, ['another-signing-secret'])
  assertFails(verifySender(keys, SL_HEADERS, SL_BODY, at + 301_000), /x-slack-request-timestamp is more than 300 s old/)
  assertFails(verifySender(keys, SL_HEADERS, SL_BODY, at - 301_000), /in the future/)
  assertFails(verifySender(keys, { 'x-slack-signature': SL_SIG }, SL_BODY, at), /x-slack-request-timestamp header is missing/)
  assertFails(verifySender(keys, { 'x-slack-request-timestamp': SL_TS }, SL_BODY, at), /x-slack-signature header is missing/)
  assertFails(verifySender(keys, { ...SL_HEADERS, 'x-slack-signature': SL_SIG.slice(3) }, SL_BODY, at), /malformed/)
})

// ---- hmac ----------------------------------------------------------------------------------------

const hm = suite('hmac (generic)')
const SHOPIFY = { header: 'x-shopify-hmac-sha256', algorithm: 'sha256', encoding: 'base64', prefix: '', timestampHeader: null, signedString: [{ value: 'body' }] } as const

hm('Shopify style: base64 HMAC-SHA256 of the raw body in X-Shopify-Hmac-Sha256', () => {
  const keys = prepare({ scheme: 'hmac', toleranceSeconds: null, hmac: { ...SHOPIFY, signedString: [...SHOPIFY.signedString] } }, 'shpss_secret')
  const body = Buffer.from('{"id":820982911946154508,"email":"jon@example.com"}')
  assert.ok(verifySender(keys, { 'x-shopify-hmac-sha256': b64('shpss_secret', body) }, body, Date.now()).ok)
  assertFails(verifySender(keys, { 'x-shopify-hmac-sha256': b64('shpss_secret', body) }, Buffer.from(body.toString() + ' '), Date.now()), /no signature matches/)
  assertFails(verifySender(keys, { 'x-shopify-hmac-sha256': hex('shpss_secret', body) }, body, Date.now()), /malformed/)
  assertFails(verifySender(keys, {}, body, Date.now()), /x-shopify-hmac-sha256 header is missing/)
})

hm('a prefix, sha512 hex and a signed string over a timestamp header, with its tolerance', () => {
  const keys = prepare({ scheme: 'hmac', toleranceSeconds: 60, hmac: { header: 'x-sig', algorithm: 'sha512', encoding: 'hex', prefix: 'sha512=', timestampHeader: 'x-ts', signedString: [{ text: 'v1:' }, { value: 'timestamp' }, { text: ':' }, { value: 'body' }] } }, 'k1')
  const now = Math.floor(Date.now() / 1000)
  const body = Buffer.from('a=1&b=2')
  const sigAt = (t: number) => ({ 'x-ts': String(t), 'x-sig': `sha512=${hex('k1', `v1:${t}:a=1&b=2`, 'sha512')}` })
  assert.ok(verifySender(keys, sigAt(now), body, now * 1000).ok)
  assertFails(verifySender(keys, sigAt(now - 61), body, now * 1000), /x-ts is more than 60 s old/)
  assertFails(verifySender(keys, sigAt(now + 61), body, now * 1000), /in the future/)
  assertFails(verifySender(keys, { 'x-sig': sigAt(now)['x-sig'] }, body, now * 1000), /x-ts header is missing/)
  assertFails(verifySender(keys, { ...sigAt(now), 'x-sig': sigAt(now)['x-sig'].slice(7) }, body, now * 1000), /malformed/)
})

hm('rotation: either of two secrets verifies; a third does not', () => {
  const keys = prepare({ scheme: 'hmac', toleranceSeconds: null, hmac: { header: 'x-sig', algorithm: 'sha1', encoding: 'hex', prefix: '', timestampHeader: null, signedString: [{ value: 'body' }] } }, 'old-secret', 'new-secret')
  const body = Buffer.from('{}')
  assert.ok(verifySender(keys, { 'x-sig': hex('old-secret', body, 'sha1') }, body, Date.now()).ok)
  assert.ok(verifySender(keys, { 'x-sig': hex('new-secret', body, 'sha1') }, body, Date.now()).ok)
  assertFails(verifySender(keys, { 'x-sig': hex('third-secret', body, 'sha1') }, body, Date.now()), /no signature matches/)
})

sw.run()
gh.run()
st.run()
sl.run()
hm.run()
