// The call of an http workflow step, through undici (loaded on first use): secret headers added to
// the rendered ones, the answer read up to a limit, a JSON answer parsed, and what becomes the
// step's output (status, headers, body). Cookies an answer sets are not kept in the history.
// The URL is checked against the step's scope (runtime/bundle/step-url.ts) just before the call: the secret headers
// go only where the config fixed them. Redirects are not followed (undici's request does not).
import { loadUndici } from '../lib/undici.js'
import type { StepActions } from './runner.js'
import { scopedStepUrl, StepUrlRefused } from '../bundle/step-url.js'

/** The most of an answer's body a step reads; a longer answer fails the step. */
export const HTTP_STEP_BODY_LIMIT = 1024 * 1024

/** `secrets`: `<workflow id>\0<step id>` → header (lower case) → resolved secret value. */
export function createHttpStep(secrets: ReadonlyMap<string, Record<string, string>>): StepActions['http'] {
  return async (call, signal) => {
    if (call.scope === null) throw new StepUrlRefused('the url was refused: this bundle was compiled before http steps carried the scope of their url; recompile it')
    const url = scopedStepUrl(call.url, call.scope)
    const { request } = await loadUndici()
    const headers: Record<string, string> = { ...call.headers, ...secrets.get(call.stepKey) }
    if (call.body !== null && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json'
    const res = await request(url, { method: call.method as 'GET', headers, body: call.body ?? undefined, signal })
    const chunks: Buffer[] = []
    let total = 0
    for await (const chunk of res.body) {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array)
      total += buf.length
      if (total > HTTP_STEP_BODY_LIMIT) {
        res.body.destroy()
        throw new Error(`the answer is longer than ${HTTP_STEP_BODY_LIMIT} bytes`)
      }
      chunks.push(buf)
    }
    const text = Buffer.concat(chunks).toString('utf8')
    const out: Record<string, string> = {}
    for (const [name, value] of Object.entries(res.headers)) {
      if (value === undefined || name === 'set-cookie') continue
      out[name] = Array.isArray(value) ? value.join(', ') : String(value)
    }
    let body: unknown = text
    if (/\bjson\b/i.test(out['content-type'] ?? '') && text !== '') {
      try { body = JSON.parse(text) } catch { /* kept as text */ }
    }
    return { status: res.statusCode, headers: out, body }
  }
}
