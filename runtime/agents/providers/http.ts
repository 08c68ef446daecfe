// The HTTP side every model provider shares: one JSON POST per attempt through undici, each attempt
// with its own deadline (the provider's timeoutMs) and all of them under the turn's AbortSignal;
// retries for 429, 5xx and network failures with exponential backoff and jitter (or the wait a
// 429/503 asked for in Retry-After), through the one retry loop (runtime/lib/retry.ts) with the
// providers' numbers; at most 4 MiB of any answer read; and one ModelError at the end whose
// message says what happened in words, never with the API key in it.
import type { Dispatcher } from 'undici'
import { loadUndici } from '../../lib/undici.js'
import { backoffDelay as scheduled, parseRetryAfter, retry, type Backoff } from '../../lib/retry.js'
import { ModelError } from './model-error.js'

export { parseRetryAfter }

export const BACKOFF_BASE_MS = 250
export const BACKOFF_CAP_MS = 8_000
/** the providers' schedule: 250 ms doubling to 8 s; a longer Retry-After is cut to 8 s */
const BACKOFF: Backoff = { baseMs: BACKOFF_BASE_MS, capMs: BACKOFF_CAP_MS }
/** the most of an answer that is read; a successful answer longer than this is refused */
export const ANSWER_LIMIT_BYTES = 4 * 1024 * 1024
/** how much of an error message from the provider is quoted */
const DETAIL_CHARS = 200

/** What a provider needs to reach its API (the key already resolved). */
export interface ProviderSettings {
  id: string
  baseUrl: string
  /** null: no key is sent */
  apiKey: string | null
  /** the deadline of one attempt: connect, headers and the whole body */
  timeoutMs: number
  /** attempts after the first one, for failures another attempt may fix */
  maxRetries: number
  /** undici's global dispatcher when absent */
  dispatcher?: Dispatcher
}

export interface JsonPost {
  /** how errors name the provider, e.g. `openai-compatible provider "local"` */
  label: string
  url: string
  headers: Record<string, string>
  body: unknown
  /** values that must never appear in an error message (the API key) */
  secrets: string[]
  timeoutMs: number
  maxRetries: number
  dispatcher?: Dispatcher
  signal: AbortSignal
}

/** The wait before retry number `retry` (1-based), on the providers' schedule (runtime/lib/retry.ts). */
export function backoffDelay(retry: number, random: () => number = Math.random): number {
  return scheduled(BACKOFF, retry, random)
}

/** `text` with every secret replaced, so that an echoed key never reaches a log or a run row. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text
  for (const s of secrets) if (s.length > 0) out = out.split(s).join('[redacted]')
  return out
}

/** The provider's own words about a failed request: error.message, error (a string), message or detail; else the raw text. */
export function errorDetail(raw: string, secrets: readonly string[]): string {
  let text = raw
  try {
    const body = JSON.parse(raw) as Record<string, unknown> | null
    const error = body?.error as Record<string, unknown> | string | undefined
    const found = [typeof error === 'object' && error !== null ? error.message : undefined, error, body?.message, body?.detail].find((v) => typeof v === 'string' && v.trim() !== '')
    if (typeof found === 'string') text = found
  } catch {
    // not JSON: quote the text as it is
  }
  const flat = redact(text, secrets).replace(/[\u0000-\u001f\u007f\s]+/g, ' ').trim()
  return flat.length > DETAIL_CHARS ? `${flat.slice(0, DETAIL_CHARS)}…` : flat
}

/** Trailing slashes off, so `${base}/path` never has `//`. */
export function joinUrl(baseUrl: string, path: string): string {
  return `${baseUrl.replace(/\/+$/, '')}${path}`
}

/** The model name the API wants: what follows the first `/` of `provider/model`. */
export function apiModelName(model: string, label: string): string {
  const slash = model.indexOf('/')
  if (slash <= 0 || slash === model.length - 1) throw new ModelError(`${label} was given model "${model}", which is not provider/model`)
  return model.slice(slash + 1)
}

type Attempt =
  | { kind: 'answer'; status: number; headers: Record<string, string | string[] | undefined>; raw: string; truncated: boolean }
  | { kind: 'timeout' }
  | { kind: 'network'; code: string }
  | { kind: 'aborted' }

/** network failures another attempt cannot fix: the certificate or the request itself is wrong */
const FINAL_NETWORK_CODES = /^(CERT_|ERR_TLS_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|UND_ERR_INVALID_ARG|ERR_INVALID_URL|ERR_INVALID_ARG)/
/** the peer went away in the middle of the exchange (rather than never being reached) */
const DROPPED_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED'])
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT'])

function errorCode(err: unknown, depth = 0): string {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string' && /^[A-Z0-9_]+$/.test(code)) return code
  const cause = (err as { cause?: unknown } | null)?.cause
  if (cause && cause !== err && depth < 5) return errorCode(cause, depth + 1)
  return 'ERROR'
}

async function readLimited(body: Dispatcher.ResponseData['body']): Promise<{ raw: string; truncated: boolean }> {
  const chunks: Buffer[] = []
  let total = 0
  let truncated = false
  for await (const chunk of body) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array)
    chunks.push(buf)
    total += buf.length
    if (total > ANSWER_LIMIT_BYTES) { truncated = true; break } // leaving the loop destroys the stream
  }
  return { raw: Buffer.concat(chunks).subarray(0, ANSWER_LIMIT_BYTES).toString('utf8'), truncated }
}

/** One POST: its own deadline, cancelled at once by the turn's signal; never throws. */
async function attemptOnce(post: JsonPost, payload: string): Promise<Attempt> {
  // before the deadline starts: the first call's loading of undici is no part of the attempt
  const { request } = await loadUndici()
  if (post.signal.aborted) return { kind: 'aborted' }
  const controller = new AbortController()
  let timedOut = false
  const timer = setTimeout(() => { timedOut = true; controller.abort() }, post.timeoutMs)
  const onTurnAbort = () => controller.abort()
  post.signal.addEventListener('abort', onTurnAbort, { once: true })
  try {
    const res = await request(post.url, {
      method: 'POST',
      headers: post.headers,
      body: payload,
      signal: controller.signal,
      dispatcher: post.dispatcher,
      // undici's own timers as a backstop; the attempt deadline above is the one that counts
      headersTimeout: post.timeoutMs,
      bodyTimeout: post.timeoutMs,
    })
    const { raw, truncated } = await readLimited(res.body)
    return { kind: 'answer', status: res.statusCode, headers: res.headers, raw, truncated }
  } catch (err) {
    if (post.signal.aborted) return { kind: 'aborted' }
    const code = errorCode(err)
    if (timedOut || TIMEOUT_CODES.has(code)) return { kind: 'timeout' }
    return { kind: 'network', code }
  } finally {
    clearTimeout(timer)
    post.signal.removeEventListener('abort', onTurnAbort)
  }
}

function attemptsSuffix(attempts: number): string {
  return attempts > 1 ? ` after ${attempts} attempts` : ''
}

function abortedError(label: string): ModelError {
  return new ModelError(`${label}: the request was cancelled because the turn ended`)
}

/**
 * POSTs `body` as JSON and returns the parsed JSON of a 2xx answer. Everything else ends in a
 * ModelError: a 4xx other than 429 at once, a 429/5xx/network failure/attempt timeout after
 * `maxRetries` retries, the turn's abort at once (no retry, no wait).
 */
export function postJson(post: JsonPost): Promise<unknown> {
  const payload = JSON.stringify(post.body)
  const fail = (message: string, retryable: boolean) => new ModelError(redact(message, post.secrets), retryable)
  return retry<unknown, ModelError>({
    attempts: post.maxRetries + 1,
    backoff: BACKOFF,
    maxWaitMs: BACKOFF_CAP_MS,
    signal: post.signal,
    fail: (failure) => failure,
    cancelled: () => abortedError(post.label),
  }, async (attempt) => {
    const result = await attemptOnce(post, payload)
    if (result.kind === 'aborted') throw abortedError(post.label)
    if (result.kind === 'answer' && result.status >= 200 && result.status < 300) {
      if (result.truncated) throw fail(`${post.label} returned an answer larger than ${ANSWER_LIMIT_BYTES / 1024 / 1024} MiB`, false)
      try {
        return { ok: true, value: JSON.parse(result.raw) as unknown }
      } catch {
        throw fail(`${post.label} returned a malformed answer: the body is not JSON`, false)
      }
    }
    if (result.kind === 'answer') {
      const detail = errorDetail(result.raw, post.secrets)
      const retryable = result.status === 429 || (result.status >= 500 && result.status <= 599)
      const said = detail ? `: ${detail}` : ''
      if (!retryable) throw fail(`${post.label} answered ${result.status}${said}`, false)
      const retryAfterMs = result.status === 429 || result.status === 503 ? parseRetryAfter(result.headers['retry-after']) : null
      return { ok: false, failure: fail(`${post.label} answered ${result.status}${attemptsSuffix(attempt)}${said}`, true), retryable: true, retryAfterMs }
    }
    if (result.kind === 'timeout') {
      return { ok: false, failure: fail(`${post.label} did not answer within ${post.timeoutMs} ms${attemptsSuffix(attempt)}`, true), retryable: true }
    }
    const what = DROPPED_CODES.has(result.code) ? 'dropped the connection' : 'could not be reached'
    if (FINAL_NETWORK_CODES.test(result.code)) throw fail(`${post.label} could not be reached (${result.code})`, false)
    return { ok: false, failure: fail(`${post.label} ${what} (${result.code})${attemptsSuffix(attempt)}`, true), retryable: true }
  })
}

/** The error for a 2xx answer whose JSON lacks what the protocol promises. */
export function malformed(label: string, what: string): ModelError {
  return new ModelError(`${label} returned a malformed answer: ${what}`)
}

export type ThinkingLevel = 'minimal' | 'low' | 'medium' | 'high'
const THINKING_LEVELS: readonly string[] = ['minimal', 'low', 'medium', 'high']

/** The reasoning level a call asks for: null for 'off' or none; a ModelError for a value no provider knows. */
export function thinkingLevel(thinking: string | null, label: string): ThinkingLevel | null {
  if (thinking === null || thinking === 'off') return null
  if (THINKING_LEVELS.includes(thinking)) return thinking as ThinkingLevel
  throw new ModelError(`${label} cannot use thinking "${thinking}" (expected off, ${THINKING_LEVELS.join(', ')})`)
}
