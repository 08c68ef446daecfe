// The fixed set of helpers that compiled templates (compiler/templates.ts) call at request time.
// Compiled template code is an arrow function `(c, h) => string`, where `c` is a RenderContext and
// `h` is `templateHelpers`. This module imports only types (the shapes in format.ts): it ships inside the runtime.
import type { RenderContext, RenderFn, TemplateHelpers } from './format.js'

export type { RenderContext }

/** Keys a lookup never follows, whatever the object holds. */
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'prototype', 'constructor'])

/**
 * A header is secret when its name says so: senders name their signatures, tokens and keys in
 * many ways (x-shopify-hmac-sha256, x-hub-signature-256, stripe-signature, x-twilio-signature,
 * x-gitlab-token, x-functions-key, …), so a name pattern, not a list of known headers, decides.
 * Whole words anywhere in the name, and `sig`/`key`/`pass`/`pwd` as a dash- or underscore-separated
 * part; `jwt`, `assertion` and `oidc` for the identity a fronting proxy asserts
 * (cf-access-jwt-assertion, x-goog-iap-jwt-assertion, x-amzn-oidc-data, x-jwt-assertion).
 * Erring on the side of redaction costs a template a value; the other way leaks a credential.
 */
const SECRET_HEADER = /signature|hmac|token|secret|auth|api-?key|passw(?:or)?d|cookie|session|credential|private|jwt|assertion|oidc|(?:^|[-_])(?:sig|key|pass|pwd)(?:$|[-_])/i

/** Named like a key, but a retry marker a template may want to show. */
const NOT_SECRET: ReadonlySet<string> = new Set(['idempotency-key'])

const REDACTED = '[redacted]'

/** True when a header's value must never appear in rendered output, stored runs or transforms (case-insensitive). */
export function isSecretHeader(name: string): boolean {
  return SECRET_HEADER.test(name) && !NOT_SECRET.has(name.toLowerCase())
}

/** The segments after a JWT's header: two (JWS) or four (JWE), base64url, any may be empty. */
const JWT_REST = /^\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*)?$/
const BASE64URL = /^[A-Za-z0-9_-]+$/
/** A JOSE header is a few hundred bytes; past this it is not decoded. */
const MAX_JWT_HEADER_CHARS = 4096

/**
 * True when a header's value is a JWT, whatever the header's name: three (or, encrypted, five)
 * base64url segments, the first decoding to a JSON object with an `alg`, alone or after an auth
 * scheme word (`Bearer eyJ…`). A credential by its shape, as a fronting proxy or a sender may put
 * one under any name. Hot path (every header of every stored request): a value that does not start
 * its token with `ey`/`ew` (what base64 of `{` and one more JSON character starts with) costs two
 * character reads; only a JWT-shaped value is decoded.
 */
export function isJwtValue(value: string): boolean {
  let start = 0
  if (value.charCodeAt(0) !== 101 /* e */) {
    start = value.indexOf(' ') + 1
    if (start === 0) return false
    while (value.charCodeAt(start) === 32) start++
    if (value.charCodeAt(start) !== 101) return false
  }
  const second = value.charCodeAt(start + 1)
  if (second !== 121 /* y */ && second !== 119 /* w */) return false
  const dot = value.indexOf('.', start)
  if (dot < 0 || dot - start > MAX_JWT_HEADER_CHARS) return false
  const head = value.slice(start, dot)
  if (!BASE64URL.test(head) || !JWT_REST.test(value.slice(dot))) return false
  try {
    const header: unknown = JSON.parse(Buffer.from(head, 'base64url').toString('utf8'))
    return header !== null && typeof header === 'object' && !Array.isArray(header) && typeof (header as Record<string, unknown>).alg === 'string' && Object.hasOwn(header, 'alg')
  } catch {
    return false
  }
}

/** True when this header, by its name or by its value, must never appear in rendered output, stored runs or transforms. */
export function isSecretHeaderEntry(name: string, value: string): boolean {
  return isSecretHeader(name) || isJwtValue(value)
}

/** Objects a named key may be read from: JSON-like objects with Object.prototype or no prototype. */
function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** The value of an own data property, or undefined (never inherited, never a getter). */
function ownValue(holder: object, key: string | number): unknown {
  const descriptor = Object.getOwnPropertyDescriptor(holder, key)
  if (descriptor === undefined || !('value' in descriptor)) return undefined
  return descriptor.value
}

function get(root: unknown, keys: readonly (string | number)[]): unknown {
  let current: unknown = root
  for (const key of keys) {
    if (current === null || typeof current !== 'object') return undefined
    if (typeof key === 'number') {
      if (!Array.isArray(current) || !Number.isSafeInteger(key) || key < 0) return undefined
      current = ownValue(current, key)
    } else if (typeof key === 'string') {
      if (FORBIDDEN_KEYS.has(key)) return undefined
      if (!Array.isArray(current) && !isPlainObject(current)) return undefined
      current = ownValue(current, key)
    } else {
      return undefined
    }
  }
  return current
}

/** JSON.stringify replacer for the slow path: BigInt as a decimal string, cycles as "[circular]". */
function tolerantReplacer(): (this: unknown, key: string, value: unknown) => unknown {
  // Objects on the path from the root to the value being serialised. `this` is the holder of the
  // current value, so everything above it in the stack belongs to a finished sibling branch.
  const ancestors: unknown[] = []
  return function (this: unknown, _key: string, value: unknown): unknown {
    if (typeof value === 'bigint') return value.toString()
    if (value === null || typeof value !== 'object') return value
    while (ancestors.length > 0 && ancestors[ancestors.length - 1] !== this) ancestors.pop()
    if (ancestors.includes(value)) return '[circular]'
    ancestors.push(value)
    return value
  }
}

function json(value: unknown): string {
  if (value === undefined) return ''
  try {
    return JSON.stringify(value) ?? ''
  } catch {
    // cycles, BigInt, or a throwing toJSON: retry tolerating the first two
  }
  try {
    return JSON.stringify(value, tolerantReplacer()) ?? ''
  } catch {
    return ''
  }
}

function text(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return value
    case 'number':
    case 'boolean':
    case 'bigint':
      return String(value)
    case 'object':
      return value === null ? '' : json(value)
    default:
      return '' // undefined, symbol, function
  }
}

/** Header values are strings; tolerate node's string[] (e.g. set-cookie) and stray non-strings. */
function headerText(value: unknown): string {
  if (typeof value === 'string') return value
  if (Array.isArray(value)) return value.map((v) => String(v)).join(', ')
  if (value === undefined || value === null) return ''
  return String(value)
}

/** A header's raw value by lower-case name: own properties only, any casing the context kept. */
export function findHeader(headers: Record<string, string>, lowerName: string): unknown {
  if (headers === null || typeof headers !== 'object' || FORBIDDEN_KEYS.has(lowerName)) return undefined
  const exact = ownValue(headers, lowerName)
  if (exact !== undefined) return exact
  // Contexts built by hand may keep the sender's casing.
  for (const key of Object.keys(headers)) {
    if (key.toLowerCase() === lowerName) return ownValue(headers, key)
  }
  return undefined
}

function header(headers: Record<string, string>, name: string): string {
  const lowerName = name.toLowerCase()
  const value = findHeader(headers, lowerName)
  if (value === undefined || value === null) return ''
  const shown = headerText(value)
  return isSecretHeaderEntry(lowerName, shown) ? REDACTED : shown
}

function headersJson(headers: Record<string, string>): string {
  if (headers === null || typeof headers !== 'object') return '{}'
  const members: string[] = []
  for (const key of Object.keys(headers).sort()) {
    const value = ownValue(headers, key)
    if (value === undefined) continue
    const text = headerText(value)
    const shown = isSecretHeaderEntry(key, text) ? REDACTED : text
    // Built by hand so the output order is the sorted order even for integer-like names.
    members.push(JSON.stringify(key) + ':' + JSON.stringify(shown))
  }
  return '{' + members.join(',') + '}'
}

export const templateHelpers: Readonly<TemplateHelpers> = Object.freeze({ get, text, json, header, headersJson })

export type CompiledRender = RenderFn
