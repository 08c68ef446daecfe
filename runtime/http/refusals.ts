// The refusals a request gets from who it is (auth.ts): a wrong or missing hook token (401), a
// sender signature that does not verify (401 signature_invalid), and while its client address is
// locked out 429 with Retry-After; each counted in the auth metrics. Returned rather than thrown where
// a flood comes through (see authenticate).
import type { IncomingHttpHeaders } from 'node:http'
import { authMetrics } from '../observe/service-metrics.js'
import { presentedToken, type TokenCheck } from './auth.js'
import { HttpError } from './errors.js'
import type { AuthLimiter } from './lockout.js'
import { verifySender, type PreparedSignature } from './signatures.js'

/**
 * The hook token, checked in constant time; a wrong or missing one counts toward its client
 * address's lock-out: 401, then 429 with Retry-After while locked out. The refusal is returned,
 * not thrown: V8 tiers a function up only when it returns or loops, so a path that always ends in
 * a throw (a flood of wrong tokens) stayed in the interpreter and cost twice what it does now.
 */
export function authenticate(headers: IncomingHttpHeaders, token: TokenCheck, limiter: AuthLimiter, client: string, now: number): HttpError | Promise<HttpError> | undefined {
  if (token.matches(presentedToken(headers))) {
    limiter.succeed(client)
    return undefined
  }
  // Several runtimes share the count: while this client's is being merged, the failure waits for
  // it and is then answered as one runtime alone would answer it.
  const held = limiter.whenMerged(client)
  if (held !== undefined) return held.then(() => refuseFailure(limiter, client, Date.now()))
  return refuseFailure(limiter, client, now)
}

/** A wrong or missing token: counted toward its client's lock-out; 401, or 429 once locked out. */
function refuseFailure(limiter: AuthLimiter, client: string, now: number): HttpError {
  const already = limiter.retryAfter(client, now)
  const locked = already || limiter.fail(client, now)
  if (locked) {
    if (!already) authMetrics.lockoutStarted.inc()
    authMetrics.lockedOut.inc()
    return lockedOut(locked)
  }
  authMetrics.unauthorized.inc()
  return new HttpError(401, 'unauthorized', 'a valid hook token is required (Authorization: Bearer <token> or x-hookgate-token)')
}

function lockedOut(seconds: number): HttpError {
  return new HttpError(429, 'too_many_auth_failures', `too many failed attempts from this address; try again in ${seconds} s`, { 'retry-after': String(seconds) })
}

/** A signed route: a client locked out by earlier failures gets 429 before any body byte is read. */
export function refuseWhileLockedOut(limiter: AuthLimiter, client: string, now: number): HttpError | undefined {
  // a merge under way is no lock-out: a correctly signed request still passes
  const locked = limiter.lockedFor(client, now)
  if (locked === 0) return undefined
  authMetrics.lockedOut.inc()
  return lockedOut(locked)
}

/** The sender's signature over the raw body; a failure counts toward the same lock-out as a wrong token. */
export async function checkSignature(signature: PreparedSignature, headers: IncomingHttpHeaders, body: Buffer, limiter: AuthLimiter, client: string, now: number): Promise<{ deliveryId: string | undefined }> {
  const verdict = verifySender(signature, headers, body, now)
  if (verdict.ok) {
    limiter.succeed(client)
    return verdict
  }
  // as a wrong token: while the client's shared count is being merged, the failure waits for it
  const held = limiter.whenMerged(client)
  if (held !== undefined) await held
  const locked = limiter.fail(client, held === undefined ? now : Date.now())
  if (locked) {
    authMetrics.lockoutStarted.inc()
    authMetrics.lockedOut.inc()
    throw lockedOut(locked)
  }
  authMetrics.unauthorized.inc()
  throw new HttpError(401, 'signature_invalid', `the sender signature does not verify: ${verdict.reason}`)
}
