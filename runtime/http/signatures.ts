// Sender signatures: each scheme's check of the raw body as received, one function per scheme, all
// of one shape (keys, settings, headers, body, now → the delivery id, or why it failed); the keys
// resolved once per load (a whsec_/whpk_ value that does not decode fails the start, naming its
// reference); the delivery id a repeat is recognised by; the payload a verified delivery's mapping
// reads (GitHub's form deliveries unwrapped); and the handshakes answered without a run (Slack's
// url_verification, GitHub's ping). Every comparison is timingSafeEqual on
// equal-length buffers; a failure's reason names the part that failed, never a secret or an
// expected value.
import { createHmac, createPublicKey, randomBytes, timingSafeEqual, verify as verifySignature, type KeyObject } from 'node:crypto'
import { join } from 'node:path'
import type { IncomingHttpHeaders, ServerResponse } from 'node:http'
import type { BundleRoute, BundleSignature, SecretSpec, SignatureScheme } from '../bundle/format.js'
import { generatedSecret, resolveSecretValue, SecretError } from '../bundle/secrets.js'
import { parseBody } from './body.js'
import { HttpError, sendJson } from './errors.js'

/** A signature block with its secrets resolved: HMAC keys as bytes, Ed25519 public keys (standard-webhooks v1a). */
export interface PreparedSignature {
  spec: BundleSignature
  hmacKeys: Buffer[]
  publicKeys: KeyObject[]
}

/** `deliveryId`: what a repeat of this delivery carries again (undefined: the scheme has none in its headers). */
export type Verdict = { ok: true; deliveryId: string | undefined } | { ok: false; reason: string }

type SchemeCheck = (keys: PreparedSignature, headers: IncomingHttpHeaders, body: Buffer, nowSeconds: number) => Verdict

/** Signatures looked at in one header; a sender rotating keys sends two or three. */
const MAX_SIGNATURES = 10
const HEX = /^[0-9a-fA-F]+$/
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/
const SECONDS = /^\d{1,12}$/
/** The SPKI DER prefix of an Ed25519 public key: with the raw 32 bytes after it, a key node:crypto reads. */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex')

/** Where `{ generate: true }` keeps a mapping's signing secret inside the state directory. */
export function generatedSigningSecretFile(stateDir: string, routeId: string): string {
  return join(stateDir, 'signing-secrets', encodeURIComponent(routeId))
}

/**
 * Resolves every signed route's secrets; throws SecretError naming the reference when one is
 * missing or malformed. `{ generate: true }` makes one into the state directory on first start
 * (a `whsec_` secret for standard-webhooks) and tells `onGenerated` where it is, never its value.
 */
export function prepareSignatures(routes: Iterable<readonly BundleRoute[]>, configDir: string, stateDir: string, onGenerated: (routeId: string, file: string) => void = () => {}): ReadonlyMap<string, PreparedSignature> {
  const out = new Map<string, PreparedSignature>()
  for (const list of routes) {
    for (const route of list) {
      if (!route.signature) continue
      const prepared: PreparedSignature = { spec: route.signature, hmacKeys: [], publicKeys: [] }
      for (const spec of route.signature.secrets) {
        let value: string
        if (spec.kind === 'generate') {
          const file = generatedSigningSecretFile(stateDir, route.id)
          const made = generatedSecret(file, () => (route.signature!.scheme === 'standard-webhooks' ? 'whsec_' + randomBytes(24).toString('base64') : randomBytes(32).toString('hex')), 'signing secret')
          if (made.generated) onGenerated(route.id, file)
          value = made.value
        } else {
          value = resolveSecretValue(spec, configDir)
        }
        addKey(prepared, route.signature.scheme, spec, value, `mapping "${route.id}"`)
      }
      out.set(route.id, prepared)
    }
  }
  return out
}

function addKey(into: PreparedSignature, scheme: SignatureScheme, spec: SecretSpec, value: string, owner: string): void {
  if (scheme !== 'standard-webhooks') {
    into.hmacKeys.push(Buffer.from(value, 'utf8'))
    return
  }
  const name = describeRef(spec)
  const decode = (b64: string): Buffer => {
    if (!BASE64.test(b64) || b64.length % 4 !== 0) throw new SecretError(`the signing secret ${name} of ${owner} is not valid base64 after its prefix`)
    return Buffer.from(b64, 'base64')
  }
  if (value.startsWith('whsec_')) {
    into.hmacKeys.push(decode(value.slice(6)))
  } else if (value.startsWith('whpk_')) {
    const raw = decode(value.slice(5))
    if (raw.length !== 32) throw new SecretError(`the signing key ${name} of ${owner} is not a 32-byte Ed25519 public key`)
    into.publicKeys.push(createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: 'der', type: 'spki' }))
  } else {
    throw new SecretError(`the signing secret ${name} of ${owner} must start with whsec_ (an HMAC secret) or whpk_ (an Ed25519 public key)`)
  }
}

function describeRef(spec: SecretSpec): string {
  return spec.kind === 'env' ? `\${${spec.name}}` : spec.kind === 'file' ? `{ file: ${spec.path} }` : 'in hooks.yaml'
}

export function verifySender(prepared: PreparedSignature, headers: IncomingHttpHeaders, body: Buffer, nowMs: number): Verdict {
  return SCHEMES[prepared.spec.scheme](prepared, headers, body, Math.floor(nowMs / 1000))
}

// ---- the schemes -------------------------------------------------------------------------------

/**
 * webhook-id, webhook-timestamp, webhook-signature: `v1,<base64 HMAC>` and `v1a,<base64 Ed25519>`,
 * space-separated. Svix, whose senders (Clerk, …) name them svix-id, svix-timestamp and
 * svix-signature unless they pay for the webhook- prefix, signs the same way: each header is read
 * under either name, the svix- one first, as Svix's own verifier does.
 */
const standardWebhooks: SchemeCheck = (keys, headers, body, now) => {
  const id = one(headers, 'svix-id') ?? one(headers, 'webhook-id')
  const ts = one(headers, 'svix-timestamp') ?? one(headers, 'webhook-timestamp')
  const sig = one(headers, 'svix-signature') ?? one(headers, 'webhook-signature')
  if (id === undefined || ts === undefined || sig === undefined) {
    const part = id === undefined ? 'id' : ts === undefined ? 'timestamp' : 'signature'
    return { ok: false, reason: `the webhook-${part} header (or svix-${part}) is missing` }
  }
  const stale = checkTimestamp(ts, 'webhook-timestamp', keys.spec, now)
  if (stale) return stale
  const signed = Buffer.concat([Buffer.from(`${id}.${ts}.`, 'utf8'), body])
  const expected = keys.hmacKeys.map((k) => createHmac('sha256', k).update(signed).digest())
  let parsed = 0
  for (const entry of sig.split(' ').slice(0, MAX_SIGNATURES)) {
    const comma = entry.indexOf(',')
    if (comma < 0) continue
    const version = entry.slice(0, comma)
    const presented = decoded(entry.slice(comma + 1), 'base64')
    if (!presented) continue
    if (version === 'v1') {
      parsed++
      if (expected.some((e) => equal(e, presented))) return { ok: true, deliveryId: id }
    } else if (version === 'v1a') {
      parsed++
      if (keys.publicKeys.some((k) => presented.length === 64 && verifySignature(null, signed, k, presented))) return { ok: true, deliveryId: id }
    }
  }
  return parsed === 0 ? malformed('webhook-signature holds no v1,<base64> or v1a,<base64> signature') : noMatch()
}

/** X-Hub-Signature-256: sha256=<hex HMAC of the body>; no timestamp, X-GitHub-Delivery names the delivery. */
const github: SchemeCheck = (keys, headers, body) => {
  const sig = one(headers, 'x-hub-signature-256')
  if (sig === undefined) return missing('x-hub-signature-256')
  const presented = sig.startsWith('sha256=') ? decoded(sig.slice(7), 'hex') : undefined
  if (!presented || presented.length !== 32) return malformed('x-hub-signature-256 is not sha256=<64 hex digits>')
  if (!keys.hmacKeys.some((k) => equal(createHmac('sha256', k).update(body).digest(), presented))) return noMatch()
  return { ok: true, deliveryId: one(headers, 'x-github-delivery') }
}

/** Stripe-Signature: t=<seconds>,v1=<hex>[,v1=<hex>…] over `${t}.${body}`; the event id is in the body. */
const stripe: SchemeCheck = (keys, headers, body, now) => {
  const header = one(headers, 'stripe-signature')
  if (header === undefined) return missing('stripe-signature')
  let ts: string | undefined
  const presented: Buffer[] = []
  for (const item of header.split(',').slice(0, MAX_SIGNATURES + 2)) {
    const eq = item.indexOf('=')
    const k = item.slice(0, eq).trim()
    const v = item.slice(eq + 1).trim()
    if (k === 't') ts = v
    else if (k === 'v1') {
      const d = decoded(v, 'hex')
      if (d && d.length === 32) presented.push(d)
    }
  }
  if (ts === undefined || presented.length === 0) return malformed('stripe-signature needs t=<seconds> and at least one v1=<64 hex digits>')
  const stale = checkTimestamp(ts, 'the stripe-signature timestamp', keys.spec, now)
  if (stale) return stale
  const signed = Buffer.concat([Buffer.from(`${ts}.`, 'utf8'), body])
  for (const k of keys.hmacKeys) {
    const expected = createHmac('sha256', k).update(signed).digest()
    if (presented.some((p) => equal(expected, p))) return { ok: true, deliveryId: undefined }
  }
  return noMatch()
}

/** X-Slack-Signature: v0=<hex> over `v0:${X-Slack-Request-Timestamp}:${body}` (form bodies as sent). */
const slack: SchemeCheck = (keys, headers, body, now) => {
  const ts = one(headers, 'x-slack-request-timestamp')
  const sig = one(headers, 'x-slack-signature')
  if (ts === undefined || sig === undefined) return missing(ts === undefined ? 'x-slack-request-timestamp' : 'x-slack-signature')
  const presented = sig.startsWith('v0=') ? decoded(sig.slice(3), 'hex') : undefined
  if (!presented || presented.length !== 32) return malformed('x-slack-signature is not v0=<64 hex digits>')
  const stale = checkTimestamp(ts, 'x-slack-request-timestamp', keys.spec, now)
  if (stale) return stale
  const signed = Buffer.concat([Buffer.from(`v0:${ts}:`, 'utf8'), body])
  if (!keys.hmacKeys.some((k) => equal(createHmac('sha256', k).update(signed).digest(), presented))) return noMatch()
  // Without an event_id in the body (slash commands, interactions), the signature itself: only a
  // byte-identical re-send of the same timestamp and body carries it again.
  return { ok: true, deliveryId: `v0=${presented.toString('hex')}` }
}

/**
 * The generic scheme: one header, a prefix, hex or base64 of an HMAC over the configured parts. A
 * repeat is known by the idHeader when one is configured, else, when a timestamp is signed, by the
 * signature itself: within the tolerance only a byte-identical re-send carries it again. Without
 * either, repeats cannot be told apart.
 */
const hmac: SchemeCheck = (keys, headers, body, now) => {
  const h = keys.spec.hmac!
  const sig = one(headers, h.header)
  if (sig === undefined) return missing(h.header)
  let ts = ''
  if (h.timestampHeader !== null) {
    const given = one(headers, h.timestampHeader)
    if (given === undefined) return missing(h.timestampHeader)
    const stale = checkTimestamp(given, h.timestampHeader, keys.spec, now)
    if (stale) return stale
    ts = given
  }
  const idHeader = h.idHeader ?? null
  const id = idHeader === null ? undefined : one(headers, idHeader)
  if (idHeader !== null && id === undefined) return missing(idHeader)
  const presented = sig.startsWith(h.prefix) ? decoded(sig.slice(h.prefix.length), h.encoding) : undefined
  const size = h.algorithm === 'sha1' ? 20 : h.algorithm === 'sha256' ? 32 : 64
  if (!presented || presented.length !== size) return malformed(`${h.header} is not ${h.prefix}<${h.encoding} ${h.algorithm} digest>`)
  const signed = Buffer.concat(h.signedString.map((p) => 'text' in p ? Buffer.from(p.text, 'utf8') : p.value === 'body' ? body : Buffer.from(p.value === 'id' ? id! : ts, 'utf8')))
  if (!keys.hmacKeys.some((k) => equal(createHmac(h.algorithm, k).update(signed).digest(), presented))) return noMatch()
  return { ok: true, deliveryId: id ?? (h.timestampHeader !== null ? `${h.algorithm}=${presented.toString('hex')}` : undefined) }
}

const SCHEMES: Record<SignatureScheme, SchemeCheck> = { 'standard-webhooks': standardWebhooks, github, stripe, slack, hmac }

// ---- delivery ids and handshakes ------------------------------------------------------------------

/**
 * What a repeat of this delivery carries again, once the body is parsed: the header id where the
 * scheme has one, Stripe's event `id`, Slack's `event_id` (the same on every Events API retry),
 * else for Slack the signature; the generic scheme's idHeader, or its signature when it signs a
 * timestamp. Undefined: repeats cannot be told apart (the generic scheme with neither).
 */
export function deliveryIdOf(scheme: SignatureScheme, verdict: { deliveryId: string | undefined }, payload: unknown): string | undefined {
  if (scheme === 'stripe') return stringField(payload, 'id')
  if (scheme === 'slack') return stringField(payload, 'event_id') ?? verdict.deliveryId
  return verdict.deliveryId
}

/** The idempotency key a signed delivery is remembered by (kept within the key rules: visible ASCII, ≤ 255). */
export function deliveryKey(routeId: string, deliveryId: string): string {
  const key = `sig:${routeId}:${deliveryId}`
  return key.length <= 255 && /^[\x21-\x7e]+$/.test(key) ? key : `sig:${routeId}:~${Buffer.from(deliveryId, 'utf8').toString('base64url').slice(0, 100)}:${deliveryId.length}`
}

/**
 * What a verified delivery's mapping reads. GitHub can send a webhook as
 * application/x-www-form-urlencoded, the JSON event in the form field `payload`: the signature
 * covers the raw form bytes (checked before this), the templates and conditions read the event.
 * Any other delivery is read as parsed.
 */
export function senderPayload(scheme: SignatureScheme, contentType: string | undefined, parsed: unknown): unknown {
  if (scheme !== 'github' || (contentType ?? '').split(';')[0]!.trim().toLowerCase() !== 'application/x-www-form-urlencoded') return parsed
  const json = stringField(parsed, 'payload', Infinity)
  if (json === undefined) return parsed
  try {
    // the same checks (UTF-8, nesting depth, JSON) as a JSON body
    return parseBody(Buffer.from(json, 'utf8'), 'application/json')
  } catch (err) {
    if (err instanceof HttpError) throw new HttpError(400, err.code, `the form field "payload" of the GitHub delivery is not valid JSON: ${err.message}`)
    throw err
  }
}

/** Slack's url_verification: the challenge to echo, once the signature checked. */
export function slackChallenge(payload: unknown): string | undefined {
  if (stringField(payload, 'type') !== 'url_verification') return undefined
  const c = stringField(payload, 'challenge')
  return c !== undefined && c.length <= 1024 ? c : ''
}

/**
 * Provider handshakes that start no run, answered once the signature checked: Slack's
 * url_verification gets its challenge back as JSON, GitHub's ping gets 200 (unless answerPing is
 * off). The status answered, or undefined when the delivery is no handshake.
 */
export function answerHandshake(res: ServerResponse, signature: PreparedSignature, headers: IncomingHttpHeaders, payload: unknown): number | undefined {
  const scheme = signature.spec.scheme
  if (scheme === 'slack') {
    const challenge = slackChallenge(payload)
    if (challenge === undefined) return undefined
    if (challenge === '') throw new HttpError(400, 'invalid_challenge', 'a url_verification request needs a challenge string of at most 1024 characters')
    sendJson(res, 200, { challenge })
    return 200
  }
  if (scheme === 'github' && signature.spec.answerPing && headers['x-github-event'] === 'ping') {
    sendJson(res, 200, { ok: true, ping: true })
    return 200
  }
  return undefined
}

// ---- helpers -------------------------------------------------------------------------------------

function one(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name]
  const s = Array.isArray(v) ? v[0] : v
  return s === undefined || s === '' ? undefined : s
}

function stringField(payload: unknown, key: string, maxLength = 256): string | undefined {
  if (payload === null || typeof payload !== 'object' || !Object.hasOwn(payload, key)) return undefined
  const v = (payload as Record<string, unknown>)[key]
  return typeof v === 'string' && v.length > 0 && v.length <= maxLength ? v : undefined
}

function decoded(text: string, encoding: 'hex' | 'base64'): Buffer | undefined {
  if (text.length === 0 || text.length > 1024) return undefined
  if (encoding === 'hex') return HEX.test(text) && text.length % 2 === 0 ? Buffer.from(text, 'hex') : undefined
  return BASE64.test(text) && text.length % 4 === 0 ? Buffer.from(text, 'base64') : undefined
}

function equal(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}

function checkTimestamp(text: string, what: string, spec: BundleSignature, now: number): Verdict | undefined {
  if (!SECONDS.test(text)) return malformed(`${what} is not a whole number of seconds`)
  const skew = Number(text) - now
  const tolerance = spec.toleranceSeconds ?? 300
  if (skew < -tolerance) return { ok: false, reason: `${what} is more than ${tolerance} s old (a stale or replayed delivery)` }
  if (skew > tolerance) return { ok: false, reason: `${what} is more than ${tolerance} s in the future` }
  return undefined
}

function missing(header: string): Verdict {
  return { ok: false, reason: `the ${header} header is missing` }
}

function malformed(why: string): Verdict {
  return { ok: false, reason: `the signature is malformed: ${why}` }
}

function noMatch(): Verdict {
  return { ok: false, reason: 'no signature matches the body with any configured secret' }
}
