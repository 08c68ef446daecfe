// Who is calling and may they: the hook token (constant-time, Bearer before x-hookgate-token),
// the client address (socket peer, or the right-most untrusted X-Forwarded-For hop behind a
// trusted proxy) and the per-address lock-out after repeated failures, bounded in memory.
import { createHash, timingSafeEqual } from 'node:crypto'
import { BlockList, isIP } from 'node:net'
import type { IncomingHttpHeaders } from 'node:http'

export const TOKEN_HEADER = 'x-hookgate-token'

/** The longest token looked at; a longer one is refused unread. */
export const MAX_TOKEN_CHARS = 4096

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i

/** The presented token: `Authorization: Bearer …` wins over `x-hookgate-token`. */
export function presentedToken(headers: IncomingHttpHeaders): string | undefined {
  const auth = headers.authorization
  if (typeof auth === 'string') {
    const m = BEARER.exec(auth)
    if (m) return m[1]
  }
  const h = headers[TOKEN_HEADER]
  return typeof h === 'string' && h.length > 0 ? h : undefined
}

export function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest()
}

/** Compares digests, so the time taken says nothing about the token's length or content. */
export function tokenMatches(presented: string | undefined, expected: Buffer): boolean {
  if (presented === undefined || presented.length > MAX_TOKEN_CHARS) return false
  return timingSafeEqual(tokenDigest(presented), expected)
}

/** The longest token (in bytes) checked without hashing; a longer token is always hashed. */
const FAST_TOKEN_BYTES = 256

/**
 * The hook token check, in constant time. The runtime may hold only the token's SHA-256 (a literal
 * token in hooks.yaml), so the first match compares digests. A token of up to FAST_TOKEN_BYTES is
 * then kept in memory, and every later check writes the presented token into a zeroed buffer and
 * compares a fixed window of FAST_TOKEN_BYTES + 1 bytes with the kept one (and the byte counts):
 * no hash per request (it showed in the profile), and every check touches the same bytes whatever
 * the token's length or content. A presented token longer than FAST_TOKEN_BYTES characters cannot
 * be the kept one and is refused at once.
 */
export class TokenCheck {
  private known: Buffer | null = null
  private knownBytes = 0
  /** room for FAST_TOKEN_BYTES characters of up to 3 bytes each: a write never cuts one short */
  private readonly scratch = Buffer.alloc(FAST_TOKEN_BYTES * 3)
  private readonly window = this.scratch.subarray(0, FAST_TOKEN_BYTES + 1)

  constructor(readonly digest: Buffer) {}

  matches(presented: string | undefined): boolean {
    if (presented === undefined || presented.length > MAX_TOKEN_CHARS) return false
    const known = this.known
    if (known === null) {
      if (!timingSafeEqual(tokenDigest(presented), this.digest)) return false
      this.learn(presented)
      return true
    }
    if (presented.length > FAST_TOKEN_BYTES) return false
    this.window.fill(0)
    const bytes = this.scratch.write(presented, 'utf8')
    // Beyond the window the bytes differ in count: a longer token never passes the second test.
    const same = timingSafeEqual(this.window, known)
    return same && bytes === this.knownBytes
  }

  private learn(token: string): void {
    const bytes = Buffer.byteLength(token, 'utf8')
    if (bytes > FAST_TOKEN_BYTES) return // stays on digests
    const known = Buffer.alloc(FAST_TOKEN_BYTES + 1)
    known.write(token, 'utf8')
    this.knownBytes = bytes
    this.known = known
  }
}

// ---- client address ------------------------------------------------------------------------

/** '::ffff:10.0.0.1' → '10.0.0.1'; anything else unchanged. */
export function foldAddress(address: string): string {
  if (address.length < 7 || address.charCodeAt(0) !== 58 /* : */) return address
  const m = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address)
  return m ? m[1]! : address
}

/** Trusted proxy addresses and CIDR ranges (node:net BlockList does the prefix matching). */
export class AddressMatcher {
  private readonly list = new BlockList()
  readonly empty: boolean

  constructor(cidrs: readonly string[]) {
    let added = 0
    for (const c of cidrs) {
      const [addr, bits] = c.split('/')
      const a = foldAddress(addr ?? '')
      const family = isIP(a)
      if (family === 0) continue
      const type = family === 4 ? 'ipv4' : 'ipv6'
      if (bits === undefined) this.list.addAddress(a, type)
      else this.list.addSubnet(a, Number(bits), type)
      added++
    }
    this.empty = added === 0
  }

  matches(address: string): boolean {
    const a = foldAddress(address)
    const family = isIP(a)
    return family !== 0 && this.list.check(a, family === 4 ? 'ipv4' : 'ipv6')
  }
}

/**
 * The address the lock-out counts against: the socket peer, unless the peer is a trusted proxy;
 * then the right-most X-Forwarded-For hop that is not itself trusted.
 */
export function resolveClientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined, trusted: AddressMatcher): string {
  const socket = foldAddress(peer ?? 'unknown')
  if (trusted.empty || !trusted.matches(socket) || forwardedFor === undefined) return socket
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',').map((h) => foldAddress(h.trim())).filter((h) => h.length > 0)
  for (let i = hops.length - 1; i >= 0; i--) {
    if (!trusted.matches(hops[i]!)) return hops[i]!.slice(0, 64)
  }
  return hops[0] ?? socket
}

// ---- lock-out --------------------------------------------------------------------------------

export interface LimiterSettings { limit: number; windowMs: number; lockoutMs: number; maxTrackedClients: number }

interface ClientState { failures: number; windowStart: number; lockedUntil: number }

/**
 * Counts auth failures per client address. The first `limit` failures in a window answer 401, the
 * next ones 429 until the lock-out ends; a correct token clears the count. At most
 * `maxTrackedClients` addresses are remembered: the least recently seen is dropped first.
 */
export class AuthLimiter {
  private readonly clients = new Map<string, ClientState>()

  constructor(private readonly settings: LimiterSettings) {}

  get size(): number {
    return this.clients.size
  }

  /** Seconds until the lock-out ends, or 0 when the client is not locked out. */
  retryAfter(client: string, now: number): number {
    const s = this.clients.get(client)
    if (!s || s.lockedUntil <= now) return 0
    return Math.max(1, Math.ceil((s.lockedUntil - now) / 1000))
  }

  /** Records a failure; returns the seconds to wait when this failure (or an earlier one) locked the client out, else 0. */
  fail(client: string, now: number): number {
    let s = this.clients.get(client)
    if (s) this.clients.delete(client)
    if (!s || now - s.windowStart >= this.settings.windowMs || (s.lockedUntil !== 0 && s.lockedUntil <= now)) {
      s = { failures: 0, windowStart: now, lockedUntil: 0 }
    }
    if (s.lockedUntil > now) {
      this.clients.set(client, s)
      return this.retryAfter(client, now)
    }
    s.failures++
    if (s.failures > this.settings.limit) s.lockedUntil = now + this.settings.lockoutMs
    this.clients.set(client, s)
    while (this.clients.size > this.settings.maxTrackedClients) {
      this.clients.delete(this.clients.keys().next().value as string)
    }
    return s.lockedUntil > now ? this.retryAfter(client, now) : 0
  }

  succeed(client: string): void {
    this.clients.delete(client)
  }
}
