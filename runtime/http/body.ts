// Reading and parsing a request body: the size limit (by Content-Length before reading a byte,
// then by counting), one timeout for the whole body, and the content types hookgate accepts.
import type { IncomingMessage } from 'node:http'
import { HttpError } from './errors.js'

/** Resolves with the whole body, or rejects with 413 / 408 / 400. Never reads past the limit. */
export function readBody(req: IncomingMessage, limit: number, timeoutMs: number): Promise<Buffer> {
  const declared = req.headers['content-length']
  if (declared !== undefined) {
    const n = Number(declared)
    if (!Number.isInteger(n) || n < 0) return Promise.reject(new HttpError(400, 'invalid_content_length', 'the Content-Length header is not a whole number'))
    if (n > limit) return Promise.reject(new HttpError(413, 'payload_too_large', `the body is ${n} bytes; the limit is ${limit}`))
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    let done = false
    const finish = (err?: HttpError) => {
      if (done) return
      done = true
      clearTimeout(timer)
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('aborted', onAborted)
      if (err) {
        // Stop reading; the connection is closed after the answer so no more bytes are taken.
        req.pause()
        reject(err)
      } else {
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
      }
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) return finish(new HttpError(413, 'payload_too_large', `the body is over the limit of ${limit} bytes`))
      chunks.push(chunk)
    }
    const onEnd = () => finish()
    const onError = () => finish(new HttpError(400, 'body_read_failed', 'the body could not be read'))
    const onAborted = () => finish(new HttpError(400, 'body_aborted', 'the client closed the connection before the body was complete'))
    const timer = setTimeout(() => finish(new HttpError(408, 'body_timeout', `the body did not arrive within ${timeoutMs / 1000} s`)), timeoutMs)
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onError)
    req.on('aborted', onAborted)
  })
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * JSON nested deeper than this is refused before parsing: templates, transforms (structured
 * clone) and the run store all walk the payload recursively, and no webhook sender nests this deep.
 */
export const MAX_JSON_DEPTH = 512

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
export function parseBody(body: Buffer, contentType: string | undefined): unknown {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase()
  const json = type === '' || type === 'application/json' || /^[a-z0-9.+-]+\/[a-z0-9.+-]*\+json$/.test(type)
  const form = type === 'application/x-www-form-urlencoded'
  if (!json && !form) throw new HttpError(415, 'unsupported_media_type', `content type "${type}" is not accepted: send application/json or application/x-www-form-urlencoded`)
  let text: string
  try {
    text = utf8.decode(body)
  } catch {
    throw new HttpError(400, 'invalid_utf8', 'the body is not valid UTF-8')
  }
  if (text.trim() === '') return Object.create(null)
  if (form) {
    // curl -d sends form-urlencoded unless told otherwise; a JSON text here is that mistake.
    if (/^\s*[[{]/.test(text) && !text.includes('=')) {
      throw new HttpError(400, 'invalid_payload', 'the body looks like JSON but Content-Type is application/x-www-form-urlencoded (curl -d sends that by default): send Content-Type: application/json')
    }
    const out: Record<string, string> = Object.create(null)
    for (const [k, v] of new URLSearchParams(text)) out[k] = v
    return out
  }
  const depth = nestingBeyond(text, MAX_JSON_DEPTH)
  if (depth) throw new HttpError(400, 'invalid_json', `the body is nested more than ${MAX_JSON_DEPTH} levels deep`)
  try {
    return JSON.parse(text)
  } catch (err) {
    const reason = err instanceof SyntaxError ? err.message.replace(/^Unexpected/, 'unexpected').slice(0, 200) : 'it is nested too deeply'
    throw new HttpError(400, 'invalid_json', `the body is not valid JSON: ${reason}`)
  }
}
