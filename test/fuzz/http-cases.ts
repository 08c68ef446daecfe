// The requests the HTTP fuzzer sends: fast-check arbitraries for one raw HTTP/1.1 request (method,
// request-target, headers, body, framing) aimed at the fuzz config's routes (fuzz-config.ts), the
// bytes that go on the wire, and a curl-like reproduction of a (shrunk) case.
//
// Secrets are placeholders in the generated values (TOKEN, SIG, NONCE below), filled in when the
// request is encoded: a printed case names them, never their values, and the same case replays
// against any server pair. Every value is built from small generators so that fast-check's
// shrinking can take a failing request apart (fewer headers, a shorter body, a plainer path).
import { createHmac } from 'node:crypto'
import fc from 'fast-check'

/** Stands for the hook token in a generated header value. */
export const TOKEN = '${TOKEN}'
/** Stands for GitHub's X-Hub-Signature-256 hex digest of the body as sent. */
export const SIG = '${SIG}'
/** Stands for a value unique to one sending of a case (delivery ids, Idempotency-Keys). */
export const NONCE = '${NONCE}'

/** The route names the fuzz config serves (fuzz-config.ts), the built-ins, and a few it does not. */
export const ROUTE_NAMES = ['alert', 'deploy', 'triage', 'shaped', 'batch', 'github', 'pr', 'form', 'wake', 'agent'] as const

export interface FuzzRequest {
  method: string
  /** the request-target as written on the request line (non-ASCII goes out as UTF-8) */
  target: string
  /** in order; values may hold the placeholders */
  headers: Array<[string, string]>
  /** the body bytes, and how they were made (for the reproduction) */
  body: Uint8Array
  bodyKind: string
  /** how the body is framed: Content-Length (correct), chunked, or none (no body header) */
  framing: 'length' | 'chunked' | 'none'
  /** the same request sent twice in a row (an Idempotency-Key or a delivery id answers the repeat) */
  repeat: boolean
}

// ---- strings --------------------------------------------------------------------------------------

/** Characters that broke things before, or could: NUL, lone surrogates, BOM, line separators, quotes, markers. */
const SPECIAL_CHARS = ['\u0000', '\ud800', '\udfff', '\udbff', '\ufeff', '\u2028', '\u2029', '\u200b', '"', '\\', '\n', '\r', '\t', '<', '>', '%', '&', '=', '+', '/', '.', '{', '}', '$', '\u00e9', '\u{1f600}', '\u0130', '\uff1c', '\u0007', '\u007f']
const PLAIN_CHARS = 'abcxyz AZ09-_:'.split('')

const fuzzChar: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...PLAIN_CHARS), weight: 6 },
  { arbitrary: fc.constantFrom(...SPECIAL_CHARS), weight: 3 },
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 1 },
)

export function fuzzString(maxLength = 24): fc.Arbitrary<string> {
  return fc.string({ unit: fuzzChar, maxLength })
}

// ---- JSON, written by hand so that it can say what JSON.stringify cannot --------------------------

/** A JSON text's tree: numbers keep their literal text, objects may repeat a key. */
export type Json =
  | { t: 'lit'; text: string }
  | { t: 'str'; s: string }
  | { t: 'arr'; items: Json[] }
  | { t: 'obj'; entries: Array<[string, Json]> }

const NUMBER_TEXTS = ['0', '-0', '1', '-1', '7', '1.5', '1e400', '-1e400', '1E-400', '123456789012345678901234567890', '9007199254740993', '0.1e1', '2e308', '-9223372036854775809']

export function stringifyJson(j: Json): string {
  switch (j.t) {
    case 'lit': return j.text
    case 'str': return JSON.stringify(j.s)
    case 'arr': return '[' + j.items.map(stringifyJson).join(',') + ']'
    case 'obj': return '{' + j.entries.map(([k, v]) => JSON.stringify(k) + ':' + stringifyJson(v)).join(',') + '}'
  }
}

const scalarJson: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom<Json>({ t: 'lit', text: 'null' }, { t: 'lit', text: 'true' }, { t: 'lit', text: 'false' }),
  fc.constantFrom(...NUMBER_TEXTS).map((text): Json => ({ t: 'lit', text })),
  fc.integer().map((n): Json => ({ t: 'lit', text: String(n) })),
  fuzzString().map((s): Json => ({ t: 'str', s })),
)

const anyJson: fc.Arbitrary<Json> = fc.letrec<{ json: Json }>((tie) => ({
  json: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalarJson,
    fc.array(tie('json'), { maxLength: 4 }).map((items): Json => ({ t: 'arr', items })),
    fc.array(fc.tuple(fuzzString(10), tie('json')), { maxLength: 4 }).map((entries): Json => ({ t: 'obj', entries })),
  ),
})).json

const str = (s: string): Json => ({ t: 'str', s })
const lit = (text: string): Json => ({ t: 'lit', text })
const strs = (...values: string[]): fc.Arbitrary<Json> => fc.constantFrom(...values).map(str)

/** Values for the fields the routes read: mostly well typed, sometimes anything at all. */
function field(typed: fc.Arbitrary<Json>): fc.Arbitrary<Json> {
  return fc.oneof({ arbitrary: typed, weight: 4 }, { arbitrary: anyJson, weight: 1 })
}

const FIELDS: Record<string, fc.Arbitrary<Json>> = {
  text: field(fuzzString().map(str)),
  mode: field(strs('now', 'next-heartbeat', 'later', '')),
  message: field(fuzzString().map(str)),
  agentId: field(strs('main', 'ops', 'nobody', '*', '')),
  sessionKey: field(strs('hook:x', 'agent:main', '')),
  model: field(strs('builtin/echo', 'openai/gpt-4o', 'nowhere/x', '')),
  thinking: field(strs('low', 'high', 'off', 'loud')),
  waitForCompletion: field(fc.constantFrom(lit('true'), lit('false'))),
  deliver: field(fc.constantFrom(lit('true'), lit('false'))),
  channel: field(strs('last', 'nowhere')),
  timeoutSeconds: field(fc.constantFrom(...['1', '30', '0', '-1', '1e400', '1.5'].map(lit))),
  name: field(fuzzString().map(str)),
  status: field(strs('firing', 'resolved', 'success')),
  service: field(fuzzString().map(str)),
  commonLabels: field(fc.record({ alertname: fuzzString().map(str) }).map(({ alertname }): Json => ({ t: 'obj', entries: [['alertname', alertname]] }))),
  items: field(fc.array(anyJson, { maxLength: 25 }).map((items): Json => ({ t: 'arr', items }))),
  skip: field(fc.constant(lit('true'))),
  boom: field(fc.constant(lit('true'))),
  spin: field(fc.constant(lit('true'))),
  override: field(fc.array(fc.tuple(fc.constantFrom('text', 'message', 'name', 'agentId', 'sessionKey', 'mode', 'deliver', 'model', 'thinking', 'timeoutSeconds', 'to', 'bogus'), anyJson), { maxLength: 3 }).map((entries): Json => ({ t: 'obj', entries }))),
  action: field(strs('opened', 'reopened', 'closed')),
  ref: field(fc.oneof(strs('refs/heads/main', 'refs/tags/v1.2'), fuzzString(40).map((s) => str('refs/heads/' + s)))),
  draft: field(fc.constantFrom(lit('true'), lit('false'))),
  title: field(fc.oneof(strs('wip: x', 'WIP', 'ready'), fuzzString().map((s) => str('wip ' + s)))),
  number: field(fc.constantFrom(...NUMBER_TEXTS).map(lit)),
  id: field(fuzzString().map(str)),
  subject: field(fuzzString().map(str)),
  source: field(strs('github', 'stripe')),
  ['__proto__']: field(fc.constant<Json>({ t: 'obj', entries: [['polluted', lit('true')]] })),
}

/** An object payload: some of the fields the routes read, some arbitrary ones, now and then a key twice. */
const shapedPayload: fc.Arbitrary<Json> = fc.tuple(
  fc.subarray(Object.keys(FIELDS), { maxLength: 6 }).chain((keys) => fc.tuple(...keys.map((k) => FIELDS[k]!.map((v): [string, Json] => [k, v])))),
  fc.array(fc.tuple(fuzzString(10), anyJson), { maxLength: 2 }),
  fc.boolean(),
).map(([known, extra, duplicate]): Json => {
  const entries: Array<[string, Json]> = [...known, ...extra]
  // a duplicate key: JSON.parse keeps the last, other parsers the first
  if (duplicate && entries.length > 0) entries.push([entries[0]![0], str('duplicate')])
  return { t: 'obj', entries }
})

// ---- bodies ---------------------------------------------------------------------------------------

interface Body { bytes: Uint8Array; kind: string }

const utf8 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'utf8'))
const concat = (...parts: Uint8Array[]): Uint8Array => new Uint8Array(Buffer.concat(parts))

/** Nesting deeper than the server's limit (512) is refused; around it must parse or refuse cleanly. */
const deepJson: fc.Arbitrary<Body> = fc.tuple(fc.integer({ min: 1, max: 700 }), fc.boolean(), fc.boolean()).map(([depth, arrays, closed]) => {
  const open = arrays ? '['.repeat(depth) : '{"a":'.repeat(depth)
  const close = closed ? (arrays ? ']'.repeat(depth) : '}'.repeat(depth)) : ''
  return { bytes: utf8(open + (arrays ? '' : '1') + close), kind: `json nested ${depth} deep${closed ? '' : ', unclosed'}` }
})

const jsonBody: fc.Arbitrary<Body> = fc.tuple(
  fc.oneof({ arbitrary: shapedPayload, weight: 5 }, { arbitrary: anyJson, weight: 1 }),
  fc.oneof({ arbitrary: fc.constant('plain'), weight: 10 }, { arbitrary: fc.constantFrom('bom', 'pretty', 'truncated', 'trailing', 'lone-surrogate-bytes', 'latin1'), weight: 4 }),
  fc.nat(),
).map(([json, how, cut]) => {
  const text = stringifyJson(json)
  switch (how) {
    case 'bom': return { bytes: concat(new Uint8Array([0xef, 0xbb, 0xbf]), utf8(text)), kind: 'json with a BOM' }
    case 'pretty': return { bytes: utf8(text.replace(/,/g, ',\r\n  ')), kind: 'json with CRLF' }
    case 'truncated': return { bytes: utf8(text.slice(0, text.length > 1 ? cut % text.length : 0)), kind: 'truncated json' }
    case 'trailing': return { bytes: utf8(text + ' x'), kind: 'json with trailing garbage' }
    // a surrogate written as its 3 UTF-8-like bytes (CESU): not valid UTF-8
    case 'lone-surrogate-bytes': return { bytes: concat(utf8(text.slice(0, -1)), new Uint8Array([0xed, 0xa0, 0x80]), utf8(text.slice(-1))), kind: 'json with raw surrogate bytes' }
    case 'latin1': return { bytes: new Uint8Array(Buffer.from(text, 'latin1')), kind: 'json as latin1' }
    default: return { bytes: utf8(text), kind: 'json' }
  }
})

const formBody: fc.Arbitrary<Body> = fc.oneof(
  fc.array(fc.tuple(fc.oneof(fc.constantFrom('user_name', 'text', 'payload', 'token', 'mode', 'message'), fuzzString(8)), fuzzString()), { maxLength: 5 })
    .map((entries) => ({ bytes: utf8(new URLSearchParams(entries).toString()), kind: 'form' })),
  fc.constantFrom('a=%zz', 'a=%', '=&=&', 'a', 'text=%00%ff', 'a=1&a=2', '{"text":"json in a form"}', 'text=%F0%9F%98', '&&&&', 'a=b=c')
    .map((s) => ({ bytes: utf8(s), kind: 'raw form' })),
)

const multipartBody: fc.Arbitrary<Body> = fuzzString().map((value) => ({
  bytes: utf8(`--xyz\r\nContent-Disposition: form-data; name="text"\r\n\r\n${value}\r\n--xyz--\r\n`),
  kind: 'multipart',
}))

const binaryBody: fc.Arbitrary<Body> = fc.uint8Array({ maxLength: 64 }).map((bytes) => ({ bytes, kind: 'binary' }))

const emptyBody: fc.Arbitrary<Body> = fc.constantFrom('', ' ', '\r\n', '\ufeff').map((s) => ({ bytes: utf8(s), kind: 'blank' }))

/** Over the fuzz config's maxBodyBytes (64 KiB) now and then, or a long field the templates and regexes read. */
const largeBody: fc.Arbitrary<Body> = fc.tuple(fc.constantFrom('title', 'text', 'ref', 'message'), fc.constantFrom('a', ' ', 'wip ', '-', '\u00e9'), fc.integer({ min: 1000, max: 70_000 }))
  .map(([key, unit, n]) => ({ bytes: utf8(JSON.stringify({ [key]: (key === 'ref' ? 'refs/heads/' : '') + unit.repeat(Math.ceil(n / unit.length)) })), kind: `large ${key}` }))

const bodies: fc.Arbitrary<Body> = fc.oneof(
  { arbitrary: jsonBody, weight: 12 },
  { arbitrary: formBody, weight: 3 },
  { arbitrary: emptyBody, weight: 2 },
  { arbitrary: deepJson, weight: 1 },
  { arbitrary: binaryBody, weight: 1 },
  { arbitrary: multipartBody, weight: 1 },
  { arbitrary: largeBody, weight: 1 },
)

// ---- headers ----------------------------------------------------------------------------------------

const CONTENT_TYPES = [
  'application/json', 'application/json; charset=utf-8', 'application/json;charset=UTF-8', 'APPLICATION/JSON', 'application/json; charset=latin1',
  'application/cloudevents+json', 'application/vnd.github+json', '*/*+json', 'application/+json', 'application/json;', 'application/jsonx',
  'application/x-www-form-urlencoded', 'application/x-www-form-urlencoded; charset=utf-8', 'Application/X-WWW-Form-Urlencoded',
  'multipart/form-data; boundary=xyz', 'text/plain', 'text/json', '', ' ', ';', 'application/json, text/plain', 'application/octet-stream',
]

/** Token variants: most requests carry the right token so that they get past auth. */
const authHeaders: fc.Arbitrary<Array<[string, string]>> = fc.oneof(
  { arbitrary: fc.constant<Array<[string, string]>>([['Authorization', `Bearer ${TOKEN}`]]), weight: 12 },
  { arbitrary: fc.constant<Array<[string, string]>>([['x-hookgate-token', TOKEN]]), weight: 4 },
  {
    arbitrary: fc.constantFrom<Array<[string, string]>>(
      [],
      [['authorization', `bearer ${TOKEN}`]],
      [['Authorization', `Bearer  ${TOKEN}`]],
      [['Authorization', `Bearer ${TOKEN} `]],
      [['Authorization', 'Bearer']],
      [['Authorization', 'Bearer ']],
      [['Authorization', 'Basic dXNlcjpwYXNz']],
      [['Authorization', 'Bearer wrong-token']],
      [['Authorization', `Bearer ${TOKEN}x`]],
      [['Authorization', `Bearer ${TOKEN}`], ['Authorization', 'Bearer wrong']],
      [['Authorization', 'Bearer wrong'], ['x-hookgate-token', TOKEN]],
      [['x-hookgate-token', `${TOKEN}, ${TOKEN}`]],
      [['x-hookgate-token', TOKEN], ['x-hookgate-token', TOKEN]],
      [['X-HOOKGATE-TOKEN', ` ${TOKEN} `]],
      [['x-hookgate-token', '']],
    ),
    weight: 4,
  },
)

const signatureHeaders: fc.Arbitrary<Array<[string, string]>> = fc.tuple(
  fc.constantFrom(`sha256=${SIG}`, `sha256=${SIG}`, `sha256=${SIG}`, `SHA256=${SIG}`, 'sha256=00', 'sha1=abc', '', null),
  fc.constantFrom('push', 'pull_request', 'ping', '', null),
  fc.constantFrom(`${NONCE}-d1`, `${NONCE}-d2`, '', null),
).map(([sig, event, delivery]) => {
  const out: Array<[string, string]> = []
  if (sig !== null) out.push(['X-Hub-Signature-256', sig])
  if (event !== null) out.push(['X-GitHub-Event', event])
  if (delivery !== null) out.push(['X-GitHub-Delivery', delivery])
  return out
})

// Mostly headers that parse, so that most requests reach the handler; now and then one that does not.
const headerName: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom('x-fuzz', 'x-event', 'x-correlation-id', 'idempotency-key', 'x-forwarded-for', 'x-hookgate-replay-of', 'cookie', 'x-api-key', 'accept', 'user-agent', 'content-encoding', 'expect', 'upgrade', 'connection'), weight: 8 },
  { arbitrary: fc.string({ unit: fc.constantFrom(...'abcxyz-_!#$%&\'*+.^`|~09'.split('')), minLength: 1, maxLength: 12 }), weight: 2 },
  // a second Host or Content-Length, a Transfer-Encoding beside Content-Length, names that are not tokens
  { arbitrary: fc.constantFrom('host', 'content-length', 'transfer-encoding', 'bad header', 'bad:colon', '', 'x-\u00e9', 'x\u0000y'), weight: 1 },
)

const headerValue: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom('pull_request', 'push', `${NONCE}-key`, `${NONCE}-key`, 'gzip', '100-continue', 'chunked', '203.0.113.9', 'unknown, 10.0.0.1', '[::1]:80', 'run-1', 'websocket', 'upgrade', 'keep-alive', '0', '-1', '+5'), weight: 6 },
  { arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 40 }).map((v) => v.replace(/[\r\n]/g, ' ')), weight: 3 },
  { arbitrary: fuzzString(40), weight: 1 },
)

const extraHeaders = fc.oneof(
  { arbitrary: fc.constant<Array<[string, string]>>([]), weight: 5 },
  { arbitrary: fc.array(fc.tuple(headerName, headerValue), { minLength: 1, maxLength: 3 }), weight: 2 },
)

// ---- the request line --------------------------------------------------------------------------------

const METHODS = ['POST', 'GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'post', 'Post', 'CONNECT', 'TRACE', 'FOO', 'M-SEARCH', 'PROPFIND']

const method = fc.oneof({ arbitrary: fc.constant('POST'), weight: 20 }, { arbitrary: fc.constantFrom(...METHODS), weight: 2 })

/** encodeURIComponent, with a lone surrogate written as the bytes of U+FFFD (encodeURIComponent throws on it). */
function percentEncode(s: string): string {
  return encodeURIComponent(s.replace(/[\ud800-\udfff]/gu, '\ufffd'))
}

/** A name under the base path, spelled in the ways a path can be spelled (mostly as is). */
const hookName: fc.Arbitrary<string> = fc.tuple(
  fc.oneof({ arbitrary: fc.constantFrom(...ROUTE_NAMES), weight: 20 }, { arbitrary: fuzzString(12), weight: 1 }, { arbitrary: fc.constant(''), weight: 1 }),
  fc.oneof(
    { arbitrary: fc.constant('as-is'), weight: 30 },
    { arbitrary: fc.constantFrom('percent-first', 'percent-all', 'upper', 'trailing-slash', 'trailing-slashes', 'encoded-slash', 'nul', 'bad-percent', 'double-encoded', 'unicode'), weight: 4 },
  ),
).map(([name, how]) => {
  switch (how) {
    case 'percent-first': return name === '' ? '%' : '%' + name.charCodeAt(0).toString(16).padStart(2, '0') + name.slice(1)
    case 'percent-all': return percentEncode(name).replace(/[A-Za-z0-9]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase())
    case 'upper': return name.toUpperCase()
    case 'trailing-slash': return name + '/'
    case 'trailing-slashes': return name + '//'
    case 'encoded-slash': return name + '%2F'
    case 'nul': return name + '%00'
    case 'bad-percent': return name + '%zz'
    case 'double-encoded': return percentEncode(percentEncode(name))
    case 'unicode': return name + '\u00e9\u{1f600}'
    default: return name
  }
})

const base = fc.oneof(
  { arbitrary: fc.constant('/hooks/'), weight: 30 },
  { arbitrary: fc.constantFrom('/hooks//', '//hooks/', '/hooks/./', '/hooks/../hooks/', '/HOOKS/', '/%68ooks/', 'http://127.0.0.1/hooks/', '/hooks/x/../'), weight: 3 },
)

const query = fc.oneof(
  { arbitrary: fc.constant(''), weight: 20 },
  { arbitrary: fc.constantFrom('?q=1', '?token=x', '?TOKEN=x', '?q=%zz', '?q=%00&q=2', '?', '#frag', '?a=b#c', '?q=' + 'x'.repeat(300)), weight: 2 },
)

const requestTarget: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.tuple(base, hookName, query).map(([b, name, q]) => b + name + q), weight: 20 },
  { arbitrary: fc.constantFrom('/hooks', '/healthz', '/metrics', '/livez', '/readyz', '/', '*', '/hooksx/alert', '/healthz?x=1', '/metrics?token=x', '/%', '/..', ''), weight: 1 },
)

// ---- the request ---------------------------------------------------------------------------------------

/** GitHub's headers: mostly on the signed route's path, now and then elsewhere. */
function signatureFor(target: string): fc.Arbitrary<Array<[string, string]> | null> {
  return target.includes('github')
    ? fc.oneof({ arbitrary: signatureHeaders, weight: 6 }, { arbitrary: fc.constant(null), weight: 1 })
    : fc.oneof({ arbitrary: fc.constant(null), weight: 6 }, { arbitrary: signatureHeaders, weight: 1 })
}

export const fuzzRequest: fc.Arbitrary<FuzzRequest> = requestTarget.chain((target) => fc.record({
  method,
  target: fc.constant(target),
  auth: authHeaders,
  signature: signatureFor(target),
  contentType: fc.oneof(
    { arbitrary: fc.constant<string | null>('application/json'), weight: 10 },
    { arbitrary: fc.constant<string | null>(null), weight: 2 },
    { arbitrary: fc.constantFrom<string | null>(...CONTENT_TYPES), weight: 4 },
  ),
  extra: extraHeaders,
  body: bodies,
  framing: fc.constantFrom<FuzzRequest['framing']>('length', 'length', 'length', 'length', 'length', 'length', 'chunked', 'none'),
  repeat: fc.boolean(),
})).map(({ method, target, auth, signature, contentType, extra, body, framing, repeat }) => {
  const headers: Array<[string, string]> = [...auth]
  if (signature) headers.push(...signature)
  if (contentType !== null) headers.push(['Content-Type', contentType])
  headers.push(...extra)
  // no body and no framing header: an empty body
  const none = framing === 'none'
  return { method, target, headers, body: none ? new Uint8Array(0) : body.bytes, bodyKind: none ? 'none' : body.kind, framing, repeat }
})

// ---- on the wire -----------------------------------------------------------------------------------------

export interface Secrets { token: string; signingSecret: string }

/** Fills the placeholders: the token, the body's signature, this sending's nonce. */
export function resolveHeaders(r: FuzzRequest, secrets: Secrets, nonce: string): Array<[string, string]> {
  const sig = createHmac('sha256', secrets.signingSecret).update(r.body).digest('hex')
  return r.headers.map(([k, v]) => [k, fill(v, secrets.token, sig, nonce)])
}

function fill(value: string, token: string, sig: string, nonce: string): string {
  return value.split(TOKEN).join(token).split(SIG).join(sig).split(NONCE).join(nonce)
}

/** The exact bytes of the request: request line, headers (plus framing and Connection: close), body. */
export function encodeRequest(r: FuzzRequest, secrets: Secrets, nonce: string): Buffer {
  return encodeWith(r, resolveHeaders(r, secrets, nonce))
}

function encodeWith(r: FuzzRequest, headers: Array<[string, string]>): Buffer {
  const lines = [`${r.method} ${r.target} HTTP/1.1`, 'Host: 127.0.0.1']
  for (const [k, v] of headers) lines.push(`${k}: ${v}`)
  if (r.framing === 'length') lines.push(`Content-Length: ${r.body.length}`)
  if (r.framing === 'chunked') lines.push('Transfer-Encoding: chunked')
  lines.push('Connection: close')
  const head = Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'utf8')
  if (r.framing === 'none') return head
  if (r.framing === 'length') return Buffer.concat([head, r.body])
  // chunked: the body in chunks of up to 7 bytes, then the last chunk
  const parts: Buffer[] = [head]
  for (let i = 0; i < r.body.length; i += 7) {
    const chunk = r.body.subarray(i, i + 7)
    parts.push(Buffer.from(chunk.length.toString(16) + '\r\n'), Buffer.from(chunk), Buffer.from('\r\n'))
  }
  parts.push(Buffer.from('0\r\n\r\n'))
  return Buffer.concat(parts)
}

/** Bytes as printf '%b' reads them: printable ASCII as is, everything else as \xHH. */
function printfEscape(bytes: Uint8Array): string {
  let out = ''
  for (const b of bytes) {
    if (b === 0x27) out += "'\\''"
    else if (b === 0x5c) out += '\\\\'
    else if (b >= 0x20 && b < 0x7f) out += String.fromCharCode(b)
    else out += '\\x' + b.toString(16).padStart(2, '0')
  }
  return out
}

function shellQuote(s: string): string {
  return "'" + s.replace(/'/g, "'\\''") + "'"
}

/**
 * A reproduction: the curl line (with TOKEN, SIG as shell variables: export TOKEN=…, and
 * SIG=$(printf … | openssl dgst -sha256 -hmac "$SECRET")), and the exact bytes through bash's
 * /dev/tcp, since curl normalises what the fuzzer sends on purpose (dot segments, methods, framing).
 */
export function reproduce(r: FuzzRequest, origin = 'http://127.0.0.1:8787'): string {
  const headers = r.headers.map(([k, v]) => `-H ${shellQuote(`${k}: ${v}`).replace(/\$\{(TOKEN|SIG|NONCE)\}/g, "'\"$$$1\"'")}`)
  const data = r.framing === 'none' ? '' : ` --data-binary @-`
  const te = r.framing === 'chunked' ? " -H 'Transfer-Encoding: chunked'" : ''
  // curl --data-binary would add Content-Type: application/x-www-form-urlencoded
  const noType = r.framing !== 'none' && !r.headers.some(([k]) => k.toLowerCase() === 'content-type') ? " -H 'Content-Type:'" : ''
  const curl = `${r.framing === 'none' ? '' : `printf '%b' '${printfEscape(r.body)}' | `}curl -sS -i --path-as-is -X ${shellQuote(r.method)} ${headers.join(' ')}${te}${noType}${data} ${shellQuote(origin + (r.target.startsWith('/') ? r.target : '/' + r.target))}`
  // placeholders as control characters that printfEscape writes as \x01… and the shell gets back as variables
  const raw = encodeWith(r, r.headers.map(([k, v]) => [k, fill(v, '\u0001T\u0001', '\u0001S\u0001', 'NONCE')]))
  const rawText = printfEscape(raw).replace(/\\x01T\\x01/g, "'\"$TOKEN\"'").replace(/\\x01S\\x01/g, "'\"$SIG\"'")
  const lines = [
    `  ${r.method} ${JSON.stringify(r.target)}, ${r.headers.length} headers, body ${r.body.length} bytes (${r.bodyKind}), framing ${r.framing}${r.repeat ? ', sent twice' : ''}`,
    `  curl:  ${curl}`,
    `  raw:   exec 3<>/dev/tcp/127.0.0.1/8787; printf '%b' '${rawText}' >&3; cat <&3`,
  ]
  if (r.headers.some(([, v]) => v.includes(SIG))) lines.push(`  (SIG=$(printf '%b' '${printfEscape(r.body)}' | openssl dgst -sha256 -hmac "$HOOKGATE_FUZZ_SECRET" | sed 's/^.* //'))`)
  return lines.join('\n')
}
