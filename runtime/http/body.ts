// Reading and parsing a request body: the size limit (by Content-Length before reading a byte,
// then by counting), one timeout for the whole body, and the content types hookgate accepts.
import { isUtf8 } from 'node:buffer'
import type { IncomingMessage } from 'node:http'
import { HttpError } from './errors.js'

/** How often the body deadlines are checked: a body times out at most this much late. */
const SWEEP_MS = 100

interface Deadline { at: number; expire(): void }

/**
 * One interval timer for every body being read, checked every SWEEP_MS, instead of a timer per
 * request (arming and clearing one per request showed in the profile). It stops when idle.
 */
class Deadlines {
  private readonly waiting = new Set<Deadline>()
  private timer: NodeJS.Timeout | null = null

  add(d: Deadline): void {
    this.waiting.add(d)
    if (this.timer === null) {
      this.timer = setInterval(() => this.sweep(), SWEEP_MS)
      this.timer.unref()
    }
  }

  delete(d: Deadline): void {
    this.waiting.delete(d)
  }

  private sweep(): void {
    if (this.waiting.size === 0) {
      clearInterval(this.timer!)
      this.timer = null
      return
    }
    const now = performance.now()
    for (const d of this.waiting) {
      if (d.at <= now) {
        this.waiting.delete(d)
        d.expire()
      }
    }
  }
}

const deadlines = new Deadlines()

/** Resolves with the whole body, or rejects with 413 / 408 / 400. Never reads past the limit. */
export function readBody(req: IncomingMessage, limit: number, timeoutMs: number): Promise<Buffer> {
  const declared = req.headers['content-length']
  if (declared !== undefined) {
    const n = Number(declared)
    if (!Number.isInteger(n) || n < 0) return Promise.reject(new HttpError(400, 'invalid_content_length', 'the Content-Length header is not a whole number'))
    if (n > limit) return Promise.reject(new HttpError(413, 'payload_too_large', `the body is ${n} bytes; the limit is ${limit}`))
  }
  return new Promise((resolve, reject) => {
    let first: Buffer | null = null
    let chunks: Buffer[] | null = null
    let size = 0
    let done = false
    const finish = (err?: HttpError) => {
      if (done) return
      done = true
      deadlines.delete(deadline)
      if (err) {
        // Stop reading; the connection is closed after the answer so no more bytes are taken.
        req.pause()
        reject(err)
      } else {
        resolve(chunks !== null ? Buffer.concat(chunks, size) : first ?? EMPTY)
      }
    }
    const deadline: Deadline = { at: performance.now() + timeoutMs, expire: () => finish(new HttpError(408, 'body_timeout', `the body did not arrive within ${timeoutMs / 1000} s`)) }
    deadlines.add(deadline)
    // Listeners stay on after the end: `done` makes them inert, and the request is dropped with them.
    req.on('data', (chunk: Buffer) => {
      if (done) return
      size += chunk.length
      if (size > limit) return finish(new HttpError(413, 'payload_too_large', `the body is over the limit of ${limit} bytes`))
      if (first === null) first = chunk
      else (chunks ??= [first]).push(chunk)
    })
    req.on('end', () => finish())
    req.on('error', () => finish(new HttpError(400, 'body_read_failed', 'the body could not be read')))
    req.on('aborted', () => finish(new HttpError(400, 'body_aborted', 'the client closed the connection before the body was complete')))
  })
}

const EMPTY = Buffer.alloc(0)

/**
 * JSON nested deeper than this is refused before parsing: templates, transforms (structured
 * clone) and the run store all walk the payload recursively, and no webhook sender nests this deep.
 */
export const MAX_JSON_DEPTH = 512

/** Bytes `[` and `{` in the body (strings included), counting up to `stop`. */
function openingBrackets(body: Buffer, stop: number): number {
  let n = 0
  for (const byte of [0x5b, 0x7b]) {
    for (let i = body.indexOf(byte); i !== -1 && n < stop; i = body.indexOf(byte, i + 1)) n++
  }
  return n
}

/** True when brackets outside strings nest deeper than `limit`: one linear pass, no recursion. */
function nestingBeyond(text: string, limit: number): boolean {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92 /* \\ */) i++
      else if (c === 34 /* " */) inString = false
    } else if (c === 34) {
      inString = true
    } else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > limit) return true
    } else if (c === 93 || c === 125) {
      depth--
    }
  }
  return false
}

/** `{}` for an empty body; JSON for json, +json or no content type; an object of strings for forms; else 415. */
/** The media type of a Content-Type header, lower case, without parameters. */
function mediaType(contentType: string | undefined): string {
  // the common case first, without splitting or a regex
  return contentType === 'application/json' ? contentType : (contentType ?? '').split(';')[0]!.trim().toLowerCase()
}

function isJsonType(type: string): boolean {
  return type === 'application/json' || type === '' || /^[a-z0-9.+-]+\/[a-z0-9.+-]*\+json$/.test(type)
}

/**
 * The JSON text of a body that parseBody parsed as JSON, as bytes on one line: without a byte order
 * mark, and with CR and LF (in valid JSON only whitespace between tokens) as spaces. Undefined for
 * a form body or a blank one. Only for a body parseBody accepted.
 */
export function jsonBodyText(body: Buffer, contentType: string | undefined): Buffer | undefined {
  if (!isJsonType(mediaType(contentType))) return undefined
  let text = body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? body.subarray(3) : body
  let copied = false
  for (const c of [0x0a, 0x0d]) {
    for (let at = text.indexOf(c); at !== -1; at = text.indexOf(c, at + 1)) {
      if (!copied) { text = Buffer.from(text); copied = true }
      text[at] = 0x20
    }
  }
  for (const b of text) if (b !== 0x20 && b !== 0x09) return text
  return undefined
}

export function parseBody(body: Buffer, contentType: string | undefined): unknown {
  const type = mediaType(contentType)
  const json = isJsonType(type)
  const form = !json && type === 'application/x-www-form-urlencoded'
  if (!json && !form) throw new HttpError(415, 'unsupported_media_type', `content type "${type}" is not accepted: send application/json or application/x-www-form-urlencoded`)
  if (!isUtf8(body)) throw new HttpError(400, 'invalid_utf8', 'the body is not valid UTF-8')
  let text = body.toString('utf8')
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1) // a byte order mark is not content
  const c = text.charCodeAt(0)
  if (c !== 123 /* { */ && c !== 91 /* [ */ && text.trim() === '') return Object.create(null)
  if (form) {
    // curl -d sends form-urlencoded unless told otherwise; a JSON text here is that mistake.
    if (/^\s*[[{]/.test(text) && !text.includes('=')) {
      throw new HttpError(400, 'invalid_payload', 'the body looks like JSON but Content-Type is application/x-www-form-urlencoded (curl -d sends that by default): send Content-Type: application/json')
    }
    const out: Record<string, string> = Object.create(null)
    for (const [k, v] of new URLSearchParams(text)) out[k] = v
    return out
  }
  // Nesting deeper than MAX_JSON_DEPTH needs more opening brackets than that: most bodies, large
  // ones included, have fewer, counted natively without walking the text character by character.
  if (text.length > MAX_JSON_DEPTH && openingBrackets(body, MAX_JSON_DEPTH + 1) > MAX_JSON_DEPTH && nestingBeyond(text, MAX_JSON_DEPTH)) throw new HttpError(400, 'invalid_json', `the body is nested more than ${MAX_JSON_DEPTH} levels deep`)
  try {
    return JSON.parse(text)
  } catch (err) {
    const reason = err instanceof SyntaxError ? err.message.replace(/^Unexpected/, 'unexpected').slice(0, 200) : 'it is nested too deeply'
    throw new HttpError(400, 'invalid_json', `the body is not valid JSON: ${reason}`)
  }
}
