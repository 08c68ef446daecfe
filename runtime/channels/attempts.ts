// The delivery loop every HTTP channel shares: one POST per attempt through undici with its own
// timeout, at most maxAttempts attempts, exponential backoff with jitter between them (or the wait
// a 429/503 asked for in Retry-After), through the one retry loop (runtime/lib/retry.ts) with the
// channels' numbers, and one DeliveryError at the end whose message says what the receiver
// answered without quoting a credential.
import { setTimeout as delay } from 'node:timers/promises'
import type { Dispatcher } from 'undici'
import { loadUndici } from '../lib/undici.js'
import { backoffDelay as scheduled, parseRetryAfter, retry, type Backoff } from '../lib/retry.js'

export { parseRetryAfter }

export const BACKOFF_BASE_MS = 500
export const BACKOFF_CAP_MS = 30_000
/** a Retry-After longer than this ends the delivery (retryable) rather than holding the run */
export const RETRY_AFTER_MAX_MS = 60_000
/** how much of an answer is read; the rest is dropped */
export const ANSWER_LIMIT_BYTES = 64 * 1024

export class DeliveryError extends Error {
  override name = 'DeliveryError'
  constructor(message: string, readonly attempts: number, readonly retryable: boolean) {
    super(message)
  }
}

export interface DeliveryResult { ok: true; attempts: number; detail: string }

/** the channels' schedule: 500 ms doubling to 30 s */
const BACKOFF: Backoff = { baseMs: BACKOFF_BASE_MS, capMs: BACKOFF_CAP_MS }

/** The wait before attempt `attempt + 1`, on the channels' schedule (runtime/lib/retry.ts). */
export function backoffDelay(attempt: number, random: () => number = Math.random): number {
  return scheduled(BACKOFF, attempt, random)
}

export interface HttpAnswer {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** the first ANSWER_LIMIT_BYTES of the body, as UTF-8 */
  text: string
}

/** What one attempt came to. */
export type Outcome =
  | { ok: true; detail: string }
  | { ok: false; retryable: boolean; reason: string; retryAfterMs?: number | null }

/** Why a POST produced no answer. */
class NoAnswer extends Error {
  constructor(readonly kind: 'timeout' | 'cancelled' | 'network', readonly code: string) {
    super(kind)
  }
}

const CONNECT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT'])
/** failures another attempt cannot fix: the certificate or the request itself is wrong */
const FINAL_CODES = /^(CERT_|ERR_TLS_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|UND_ERR_INVALID_ARG|ERR_INVALID_URL)/

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown })?.code
  if (typeof code === 'string' && /^[A-Z0-9_]+$/.test(code)) return code
  const cause = (err as { cause?: unknown })?.cause
  if (cause && cause !== err) return errorCode(cause)
  return 'ERROR'
}

async function readLimited(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = []
  let total = 0
  for await (const chunk of body) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array)
    chunks.push(buf)
    total += buf.length
    if (total >= ANSWER_LIMIT_BYTES) break
  }
  return Buffer.concat(chunks).subarray(0, ANSWER_LIMIT_BYTES).toString('utf8')
}

/** One POST with a deadline covering connect, headers and body; throws NoAnswer when there is no answer. */
export async function post(
  url: string,
  headers: Record<string, string>,
  body: string,
  opts: { dispatcher?: Dispatcher; timeoutMs: number; signal?: AbortSignal },
): Promise<HttpAnswer> {
  // before the deadline starts: the first call's loading of undici is no part of the attempt
  const { request } = await loadUndici()
  if (opts.signal?.aborted) throw new NoAnswer('cancelled', 'ABORTED')
  const controller = new AbortController()
  let timedOut = false
  const timer = setTimeout(() => { timedOut = true; controller.abort() }, opts.timeoutMs)
  const onAbort = () => controller.abort()
  opts.signal?.addEventListener('abort', onAbort, { once: true })
  try {
    const res = await request(url, { method: 'POST', headers, body, dispatcher: opts.dispatcher, signal: controller.signal })
    const text = await readLimited(res.body)
    return { status: res.statusCode, headers: res.headers, text }
  } catch (err) {
    if (timedOut) throw new NoAnswer('timeout', 'TIMEOUT')
    if (opts.signal?.aborted) throw new NoAnswer('cancelled', 'ABORTED')
    throw new NoAnswer('network', errorCode(err))
  } finally {
    clearTimeout(timer)
    opts.signal?.removeEventListener('abort', onAbort)
  }
}

/** What a POST that got no answer counts as. */
export function noAnswerOutcome(err: unknown, timeoutMs: number): Outcome {
  if (!(err instanceof NoAnswer)) throw err
  if (err.kind === 'timeout') return { ok: false, retryable: true, reason: `timed out (no answer within ${formatMs(timeoutMs)})` }
  if (err.kind === 'cancelled') return { ok: false, retryable: true, reason: 'was cancelled' }
  if (FINAL_CODES.test(err.code)) return { ok: false, retryable: false, reason: `could not connect securely (${err.code})` }
  if (CONNECT_CODES.has(err.code)) return { ok: false, retryable: true, reason: `could not connect (${err.code})` }
  return { ok: false, retryable: true, reason: `lost the connection (${err.code})` }
}

export function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${ms} ms`
}

/** 429, 408 and 5xx are worth another attempt; other statuses are final. */
export function retryableStatus(status: number): boolean {
  return status === 429 || status === 408 || status >= 500
}

/**
 * The outcome of an answer that was not a success: retryable by status, with the server's wait
 * (Retry-After, or `fallbackRetryAfterMs` read from the body) on a 429 or 503.
 */
export function failedAnswer(answer: HttpAnswer, summary: string | null, nowMs: number, fallbackRetryAfterMs: number | null = null): Outcome {
  const retryable = retryableStatus(answer.status)
  const retryAfterMs = answer.status === 429 || answer.status === 503
    ? parseRetryAfter(answer.headers['retry-after'], nowMs) ?? fallbackRetryAfterMs
    : null
  return { ok: false, retryable, reason: `answered ${answer.status}${summary ? ` (${summary})` : ''}`, retryAfterMs }
}

/** A short, single-line piece of an answer fit for an error message, or null. */
export function shortText(text: unknown, max = 120): string | null {
  if (typeof text !== 'string') return null
  const line = text.replace(/\s+/g, ' ').trim()
  if (line === '') return null
  if (/^<(!doctype|html)/i.test(line)) return null
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

/** JSON.parse that answers undefined instead of throwing. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

export interface LoopContext {
  type: string
  id: string
  maxAttempts: number
  now: () => number
  sleep: (ms: number) => Promise<void>
  random?: () => number
  /** removes credentials from a message, the last line of defence for what a receiver echoes */
  scrub: (text: string) => string
  signal?: AbortSignal
}

function attemptsText(n: number): string {
  return `${n} attempt${n === 1 ? '' : 's'}`
}

/** Runs `attempt` until it succeeds, fails for good, or maxAttempts is reached. */
export function runAttempts(ctx: LoopContext, attempt: (n: number) => Promise<Outcome>): Promise<DeliveryResult> {
  const who = `${ctx.type} channel ${JSON.stringify(ctx.id)}`
  const fail = (message: string, attempts: number, retryable: boolean) => new DeliveryError(ctx.scrub(message), attempts, retryable)
  type Failed = Extract<Outcome, { ok: false }>
  return retry<DeliveryResult, Failed>({
    attempts: ctx.maxAttempts,
    backoff: BACKOFF,
    // a longer wait ends the delivery (retryable) rather than holding the run
    maxWaitMs: RETRY_AFTER_MAX_MS,
    ...(ctx.signal ? { signal: ctx.signal } : {}),
    sleep: ctx.sleep,
    ...(ctx.random ? { random: ctx.random } : {}),
    fail: (outcome, n) => fail(`${who} ${outcome.reason} after ${attemptsText(n)}`, n, outcome.retryable),
    cancelled: (n) => (n === 0 ? fail(`${who} was cancelled before the first attempt`, 0, true) : fail(`${who} was cancelled after ${attemptsText(n)}`, n, true)),
    refuseLongerWait: (outcome, n, asked) => fail(`${who} ${outcome.reason} and asked to wait ${formatMs(asked)}, longer than the ${formatMs(RETRY_AFTER_MAX_MS)} a delivery waits, after ${attemptsText(n)}`, n, true),
  }, async (n) => {
    const outcome = await attempt(n)
    if (outcome.ok) return { ok: true, value: { ok: true, attempts: n, detail: outcome.detail } }
    return { ok: false, failure: outcome, retryable: outcome.retryable, retryAfterMs: outcome.retryAfterMs ?? null }
  })
}

/** The default sleep: a real timer. */
export function realSleep(ms: number): Promise<void> {
  return delay(ms)
}
