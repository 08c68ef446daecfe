// Standard Webhooks (https://www.standardwebhooks.com), symmetric scheme: the sender signs
// `${webhook-id}.${webhook-timestamp}.${body}` with HMAC-SHA256, the key being the bytes the
// `whsec_`-prefixed base64 secret encodes, and sends `v1,<base64 signature>` in webhook-signature
// (a space-separated list, so that a receiver can accept either key during a rotation).
import { createHmac, timingSafeEqual } from 'node:crypto'

export const SECRET_PREFIX = 'whsec_'
/** the specification asks for at least 24 random bytes */
export const MIN_SECRET_BYTES = 24
/** how far webhook-timestamp may be from the receiver's clock, either way */
export const DEFAULT_TOLERANCE_SECONDS = 300

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/

/**
 * The HMAC key a `whsec_…` secret encodes. Throws an Error that describes the problem without
 * quoting the secret.
 */
export function webhookSecretKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error(`it does not start with ${SECRET_PREFIX}`)
  const encoded = secret.slice(SECRET_PREFIX.length)
  if (!BASE64.test(encoded) || encoded.length % 4 === 1) throw new Error(`what follows ${SECRET_PREFIX} is not base64`)
  const key = Buffer.from(encoded, 'base64')
  // Buffer.from ignores what it cannot decode; a round trip shows that nothing was dropped.
  if (key.toString('base64').replace(/=+$/, '') !== encoded.replace(/=+$/, '')) throw new Error(`what follows ${SECRET_PREFIX} is not base64`)
  if (key.length < MIN_SECRET_BYTES) throw new Error(`it encodes ${key.length} bytes; a signing secret needs at least ${MIN_SECRET_BYTES} random bytes`)
  return key
}

/** The webhook-signature value (`v1,<base64>`) for one message. */
export function signStandardWebhook(key: Buffer, id: string, timestamp: number, body: string | Uint8Array): string {
  const mac = createHmac('sha256', key)
  mac.update(`${id}.${timestamp}.`)
  mac.update(body)
  return `v1,${mac.digest('base64')}`
}

export type HeaderBag = Record<string, string | string[] | undefined>

export type VerifyResult = { ok: true; id: string; timestamp: number } | { ok: false; reason: string }

function header(headers: HeaderBag, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue
    return Array.isArray(value) ? value.join(' ') : value
  }
  return undefined
}

/**
 * Checks a received message as a Standard Webhooks receiver would: the three headers are present,
 * the timestamp is within the tolerance of `now`, and one of the `v1` signatures matches
 * (compared in constant time). `body` must be the raw body, exactly as received.
 */
export function verifyStandardWebhook(
  secret: string,
  headers: HeaderBag,
  body: string | Uint8Array,
  options: { now?: () => number; toleranceSeconds?: number } = {},
): VerifyResult {
  let key: Buffer
  try {
    key = webhookSecretKey(secret)
  } catch (err) {
    return { ok: false, reason: `the secret is not usable: ${(err as Error).message}` }
  }
  const id = header(headers, 'webhook-id')
  const stamp = header(headers, 'webhook-timestamp')
  const signatures = header(headers, 'webhook-signature')
  if (!id) return { ok: false, reason: 'webhook-id is missing' }
  if (!stamp) return { ok: false, reason: 'webhook-timestamp is missing' }
  if (!signatures) return { ok: false, reason: 'webhook-signature is missing' }
  if (!/^\d{1,12}$/.test(stamp)) return { ok: false, reason: 'webhook-timestamp is not unix seconds' }
  const timestamp = Number(stamp)
  const nowSeconds = Math.floor((options.now ?? Date.now)() / 1000)
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS
  if (Math.abs(nowSeconds - timestamp) > tolerance) return { ok: false, reason: `webhook-timestamp is more than ${tolerance} s away from now` }
  const expected = Buffer.from(signStandardWebhook(key, id, timestamp, body).slice(3), 'base64')
  for (const entry of signatures.split(' ')) {
    const comma = entry.indexOf(',')
    if (comma < 0 || entry.slice(0, comma) !== 'v1') continue
    const given = Buffer.from(entry.slice(comma + 1), 'base64')
    if (given.length === expected.length && timingSafeEqual(given, expected)) return { ok: true, id, timestamp }
  }
  return { ok: false, reason: 'no v1 signature matches' }
}
