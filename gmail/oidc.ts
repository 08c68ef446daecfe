// The check of the OIDC token Pub/Sub sends with each push (`Authorization: Bearer <Google ID
// token>`): an RS256 signature by one of Google's published keys (the JWKS, cached for its
// Cache-Control max-age and fetched again once when a token names a key not in it), the issuer,
// the audience the subscription was told, and the service account it signs as. Only node:crypto.
import { createPublicKey, verify, type KeyObject } from 'node:crypto'
import { request } from 'undici'

export const GOOGLE_ISSUERS = ['https://accounts.google.com', 'accounts.google.com']
/** clock difference allowed between Google and this host */
const SKEW_S = 300
/** an unknown kid fetches the keys again at most this often, so forged kids cannot make us hammer Google */
const REFETCH_EVERY_MS = 30_000
const DEFAULT_MAX_AGE_MS = 3600_000

export type OidcVerdict = { ok: true; email: string } | { ok: false; status: 401 | 403; reason: string }

export interface OidcExpectation { audience: string; email: string }

export class OidcVerifier {
  private keys = new Map<string, KeyObject>()
  private until = 0
  private lastForcedFetch = -Infinity
  private fetching: Promise<void> | undefined

  constructor(private readonly certsUrl: string, private readonly expected: OidcExpectation, private readonly now: () => number = Date.now) {}

  async check(authorization: string | undefined): Promise<OidcVerdict> {
    const m = /^Bearer\s+([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(authorization?.trim() ?? '')
    if (!m) return { ok: false, status: 401, reason: 'no bearer ID token' }
    let header: any, claims: any
    try {
      header = JSON.parse(Buffer.from(m[1]!, 'base64url').toString('utf8'))
      claims = JSON.parse(Buffer.from(m[2]!, 'base64url').toString('utf8'))
    } catch {
      return { ok: false, status: 401, reason: 'the ID token is not readable' }
    }
    if (header?.alg !== 'RS256' || typeof header.kid !== 'string') return { ok: false, status: 401, reason: 'the ID token is not RS256 with a key id' }
    const key = await this.keyFor(header.kid)
    if (!key) return { ok: false, status: 401, reason: 'the ID token is signed by a key Google does not publish' }
    const signed = verify('RSA-SHA256', Buffer.from(`${m[1]}.${m[2]}`), key, Buffer.from(m[3]!, 'base64url'))
    if (!signed) return { ok: false, status: 401, reason: 'the ID token\'s signature does not verify' }
    const nowS = Math.floor(this.now() / 1000)
    if (typeof claims?.exp !== 'number' || claims.exp + SKEW_S < nowS) return { ok: false, status: 401, reason: 'the ID token has expired' }
    if (typeof claims.iat !== 'number' || claims.iat - SKEW_S > nowS) return { ok: false, status: 401, reason: 'the ID token is issued in the future' }
    if (!GOOGLE_ISSUERS.includes(claims.iss)) return { ok: false, status: 401, reason: 'the ID token is not issued by Google' }
    const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud]
    if (!audiences.includes(this.expected.audience)) return { ok: false, status: 403, reason: 'the ID token is for another audience' }
    if (typeof claims.email !== 'string' || claims.email.toLowerCase() !== this.expected.email.toLowerCase() || claims.email_verified !== true) {
      return { ok: false, status: 403, reason: 'the ID token is not the configured service account\'s' }
    }
    return { ok: true, email: claims.email }
  }

  private async keyFor(kid: string): Promise<KeyObject | undefined> {
    const stale = this.now() >= this.until
    const forced = !stale && !this.keys.has(kid) && this.now() - this.lastForcedFetch >= REFETCH_EVERY_MS
    if (forced) this.lastForcedFetch = this.now()
    if (stale || forced) {
      try {
        await this.refresh()
      } catch {
        // keys we had stay usable when Google's endpoint is unreachable for a moment
      }
    }
    return this.keys.get(kid)
  }

  private refresh(): Promise<void> {
    this.fetching ??= (async () => {
      const res = await request(this.certsUrl, { headers: { accept: 'application/json' }, headersTimeout: 10_000, bodyTimeout: 10_000 })
      const text = await res.body.text()
      if (res.statusCode !== 200) throw new Error(`the JWKS answered ${res.statusCode}`)
      const body = JSON.parse(text) as { keys?: Array<Record<string, unknown>> }
      const keys = new Map<string, KeyObject>()
      for (const jwk of body.keys ?? []) {
        if (typeof jwk.kid !== 'string' || jwk.kty !== 'RSA') continue
        try { keys.set(jwk.kid, createPublicKey({ key: jwk as any, format: 'jwk' })) } catch { /* a key we cannot read is one we do not trust */ }
      }
      this.keys = keys
      const cacheControl = String(res.headers['cache-control'] ?? '')
      const maxAge = /max-age=(\d+)/.exec(cacheControl)
      this.until = this.now() + (maxAge ? Number(maxAge[1]) * 1000 : DEFAULT_MAX_AGE_MS)
    })().finally(() => { this.fetching = undefined })
    return this.fetching
  }
}
