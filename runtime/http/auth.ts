// Who is calling and may they: the hook token (constant-time; an Authorization header before
// x-hookgate-token), the client address in one canonical spelling (socket peer, or the right-most
// untrusted X-Forwarded-For hop behind a trusted proxy) and the per-address lock-out after repeated
// failures, bounded in memory (lockout.ts, re-exported here). The refusals a request gets from them
// are in refusals.ts.
import { timingSafeEqual } from 'node:crypto'
import { BlockList, isIP } from 'node:net'
import type { IncomingHttpHeaders } from 'node:http'

export { AuthLimiter, type LimiterSettings } from './lockout.js'
// the digest tokens are kept and compared as (it is made where secrets are resolved)
import { tokenDigest } from '../bundle/secrets.js'
export { tokenDigest }

export const TOKEN_HEADER = 'x-hookgate-token'

/** The longest token looked at; a longer one is refused unread. */
export const MAX_TOKEN_CHARS = 4096

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i

/**
 * The presented token: an `Authorization` header, whatever it holds, is the presented credential
 * and wins over `x-hookgate-token`. Empty, `Bearer ` with nothing after it, or another scheme
 * (`Basic …`) presents no valid token, so the request fails even beside a right x-hookgate-token:
 * a sender who writes an Authorization header means it, and falling back would let a stray or
 * stripped value be overruled by a second header.
 */
export function presentedToken(headers: IncomingHttpHeaders): string | undefined {
  const auth = headers.authorization
  if (auth !== undefined) return BEARER.exec(auth)?.[1]
  const h = headers[TOKEN_HEADER]
  return typeof h === 'string' && h.length > 0 ? h : undefined
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

  /**
   * `token`: the token itself, when the runtime read it (from the environment, a file or the
   * generated one): checks are fast from the first request on, also for a sender that never
   * presents the right one (a flood of wrong tokens hashed every request otherwise).
   */
  constructor(readonly digest: Buffer, token?: string) {
    if (token !== undefined && timingSafeEqual(tokenDigest(token), digest)) this.learn(token)
  }

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

/**
 * Every spelling of a forwarded-for hop that is not an address (`unknown`, `_hidden`, garbage)
 * counts as this one client: a sender cannot earn a fresh lock-out bucket by writing its hop
 * differently, and no real address shares the bucket.
 */
export const NOT_AN_ADDRESS = 'not-an-address'

const MAPPED_V4 = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i
const MAPPED_V4_HEX = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/
const V4_WITH_PORT = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/
const BRACKETED = /^\[([^\]]*)\](?::\d{1,5})?$/

/**
 * The one spelling of an address the lock-out counts against, or undefined when the text is not an
 * address: a port (`203.0.113.7:5555`, `[2001:db8::1]:443`), brackets and a zone id are dropped,
 * IPv6 is compressed and lower-cased (`2001:DB8:0:0::1` and `2001:db8::0:1` are `2001:db8::1`),
 * and an IPv4-mapped IPv6 address folds to its IPv4 address.
 */
export function canonicalAddress(text: string): string | undefined {
  let a = text.trim()
  const family = isIP(a)
  if (family === 4) return a
  if (family === 6) {
    const mapped = MAPPED_V4.exec(a)
    if (mapped && isIP(mapped[1]!) === 4) return mapped[1]!
  } else {
    const port = V4_WITH_PORT.exec(a)
    if (port) return isIP(port[1]!) === 4 ? port[1]! : undefined
    const bracketed = BRACKETED.exec(a)
    if (!bracketed) return undefined
    a = bracketed[1]!
  }
  const zone = a.indexOf('%')
  if (zone >= 0) a = a.slice(0, zone)
  if (isIP(a) !== 6) return undefined
  // WHATWG URL serialises IPv6 hosts in the RFC 5952 form (and writes an embedded IPv4 in hex).
  const host = new URL(`http://[${a}]/`).hostname.slice(1, -1)
  const hex = MAPPED_V4_HEX.exec(host)
  if (!hex) return host
  const hi = parseInt(hex[1]!, 16)
  const lo = parseInt(hex[2]!, 16)
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
}

/** Trusted proxy addresses and CIDR ranges (node:net BlockList does the prefix matching). */
export class AddressMatcher {
  private readonly list = new BlockList()
  readonly empty: boolean

  constructor(cidrs: readonly string[]) {
    let added = 0
    for (const c of cidrs) {
      const [addr, bits] = c.split('/')
      const a = canonicalAddress(addr ?? '')
      if (a === undefined) continue
      const type = isIP(a) === 4 ? 'ipv4' : 'ipv6'
      // an IPv4-mapped range (::ffff:10.0.0.0/104) folds to its IPv4 range, as its addresses do
      const prefix = bits === undefined ? undefined : type === 'ipv4' && isIP(addr!) === 6 ? Number(bits) - 96 : Number(bits)
      if (prefix === undefined) this.list.addAddress(a, type)
      else if (prefix >= 0) this.list.addSubnet(a, prefix, type)
      else continue
      added++
    }
    this.empty = added === 0
  }

  /** `address` in its canonical spelling (canonicalAddress). */
  matches(address: string): boolean {
    const family = isIP(address)
    return family !== 0 && this.list.check(address, family === 4 ? 'ipv4' : 'ipv6')
  }
}

/**
 * The address the lock-out counts against, canonical (canonicalAddress): the socket peer, unless
 * the peer is a trusted proxy; then the right-most X-Forwarded-For hop that is not itself trusted.
 * A hop that is not an address ends the walk: what lies left of it cannot be trusted, so the
 * request counts against the one shared NOT_AN_ADDRESS bucket.
 */
export function resolveClientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined, trusted: AddressMatcher): string {
  const socket = peer === undefined ? 'unknown' : canonicalAddress(peer) ?? NOT_AN_ADDRESS
  if (trusted.empty || !trusted.matches(socket) || forwardedFor === undefined) return socket
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',').filter((h) => h.trim().length > 0)
  let last = socket
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = canonicalAddress(hops[i]!)
    if (hop === undefined) return NOT_AN_ADDRESS
    if (!trusted.matches(hop)) return hop
    last = hop
  }
  return last
}
