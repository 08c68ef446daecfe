// A mapping's `signature` block, checked and turned into the runtime's BundleSignature: which keys
// each scheme uses, the generic scheme's signedString (parsed here into fixed parts, never evaluated
// as code), the secrets as references only, and the rule that a signed mapping is alone on its path.
import type { DiagnosticBag } from './diagnostics.js'
import type { LoadedConfig, PathSegment } from './load.js'
import { resolveSecret } from './resolve-secrets.js'
import type { SignatureConfig } from './schema.js'
import type { BundleSignature, SecretSpec, SignatureScheme, SignedStringPart } from '../runtime/bundle/format.js'

export const DEFAULT_TOLERANCE_SECONDS = 300

/** The keys only the generic scheme reads. */
const HMAC_KEYS = ['header', 'algorithm', 'encoding', 'prefix', 'timestampHeader', 'idHeader', 'signedString'] as const

/** Schemes that sign a timestamp of their own. */
const TIMESTAMPED = new Set<SignatureScheme>(['standard-webhooks', 'stripe', 'slack'])

/** undefined when the block has errors (each reported at its line). */
export function resolveSignature(sig: SignatureConfig, at: PathSegment[], mappingId: string, loaded: LoadedConfig, bag: DiagnosticBag): BundleSignature | undefined {
  const where = (key?: string, prefer: 'key' | 'value' = 'key') => loaded.locate(key === undefined ? at : [...at, key], prefer)
  const errors = bag.errorCount
  const scheme = sig.scheme as SignatureScheme

  const secrets: SecretSpec[] = []
  const refs = Array.isArray(sig.secret) ? sig.secret : [sig.secret]
  refs.forEach((ref, i) => {
    const path = Array.isArray(sig.secret) ? [...at, 'secret', i] : [...at, 'secret']
    // The hint names the variable after the mapping, so two signed mappings do not share a name.
    const spec = resolveSecret(ref, path, loaded, bag, `${mappingId.replace(/[^A-Za-z0-9]+/g, '_').toUpperCase()}_SIGNING_SECRET`)
    if (spec) secrets.push(spec)
  })

  if (scheme !== 'hmac') {
    for (const key of HMAC_KEYS) {
      if (sig[key] !== undefined) bag.error('SIGNATURE_FIELD_UNUSED', `signature.${key} is read only by scheme hmac, not ${scheme}`, where(key), `remove ${key}, or use scheme: hmac`)
    }
  }
  if (sig.answerPing !== undefined && scheme !== 'github') bag.error('SIGNATURE_FIELD_UNUSED', `signature.answerPing is read only by scheme github, not ${scheme}`, where('answerPing'))
  const timestamped = TIMESTAMPED.has(scheme) || (scheme === 'hmac' && sig.timestampHeader !== undefined)
  if (sig.toleranceSeconds !== undefined && !timestamped) {
    bag.error('SIGNATURE_FIELD_UNUSED', scheme === 'hmac' ? 'signature.toleranceSeconds needs a timestampHeader: without one nothing signed carries a time' : `scheme ${scheme} signs no timestamp, so signature.toleranceSeconds has nothing to bound`, where('toleranceSeconds'))
  }

  let hmac: BundleSignature['hmac'] = null
  if (scheme === 'hmac') {
    if (sig.header === undefined) bag.error('SIGNATURE_FIELD_MISSING', 'scheme hmac needs header: the name of the header that carries the signature', where(), 'e.g. header: X-Shopify-Hmac-Sha256')
    const signedString = parseSignedString(sig.signedString ?? '{{body}}', [...at, 'signedString'], { timestamp: sig.timestampHeader !== undefined, id: sig.idHeader !== undefined }, loaded, bag)
    if (sig.header !== undefined && signedString) {
      hmac = {
        header: sig.header.toLowerCase(),
        algorithm: sig.algorithm ?? 'sha256',
        encoding: sig.encoding ?? 'hex',
        prefix: sig.prefix ?? '',
        timestampHeader: sig.timestampHeader?.toLowerCase() ?? null,
        idHeader: sig.idHeader?.toLowerCase() ?? null,
        signedString,
      }
    }
  }
  if (bag.errorCount > errors || secrets.length !== refs.length) return undefined
  return {
    scheme,
    secrets,
    toleranceSeconds: timestamped ? sig.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS : null,
    answerPing: scheme === 'github' ? sig.answerPing ?? true : false,
    hmac,
  }
}

const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g

/** `v0:{{timestamp}}:{{body}}` → text and value parts; only timestamp, id (each with its header) and body may be named. */
function parseSignedString(text: string, path: PathSegment[], has: { timestamp: boolean; id: boolean }, loaded: LoadedConfig, bag: DiagnosticBag): SignedStringPart[] | undefined {
  const parts: SignedStringPart[] = []
  let last = 0
  let ok = true
  const literal = (s: string) => {
    if (s.includes('{{') || s.includes('}}')) {
      bag.error('SIGNATURE_TEMPLATE_INVALID', `signedString has an unclosed or stray {{ or }} in "${text}"`, loaded.locate(path))
      ok = false
    } else if (s !== '') parts.push({ text: s })
  }
  for (const m of text.matchAll(PLACEHOLDER)) {
    literal(text.slice(last, m.index))
    last = m.index! + m[0].length
    const name = m[1]!
    if (name !== 'timestamp' && name !== 'id' && name !== 'body') {
      bag.error('SIGNATURE_TEMPLATE_INVALID', `signedString may name only {{timestamp}}, {{id}} and {{body}}, not {{${name}}}`, loaded.locate(path))
      ok = false
    } else if (name === 'timestamp' && !has.timestamp) {
      bag.error('SIGNATURE_FIELD_MISSING', 'signedString names {{timestamp}} but the block has no timestampHeader to read it from', loaded.locate(path), 'add timestampHeader: <the header carrying the timestamp>')
      ok = false
    } else if (name === 'id' && !has.id) {
      bag.error('SIGNATURE_FIELD_MISSING', 'signedString names {{id}} but the block has no idHeader to read it from', loaded.locate(path), 'add idHeader: <the header naming the delivery>')
      ok = false
    } else {
      parts.push({ value: name })
    }
  }
  literal(text.slice(last))
  if (ok && !parts.some((p) => 'value' in p && p.value === 'body')) {
    // A signature over no body bytes would let any body through.
    bag.error('SIGNATURE_TEMPLATE_INVALID', 'signedString must include {{body}}: a signature that does not cover the body authenticates nothing', loaded.locate(path))
    ok = false
  }
  return ok ? parts : undefined
}
