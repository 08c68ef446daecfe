// A fake OpenAI chat completions API over real HTTP: POST /v1/chat/completions with a Bearer key
// (when the fake is given one) and a JSON body the real API would accept; anything else gets the
// real API's error shape ({ error: { message, type, param, code } }) and status.
import { randomBytes } from 'node:crypto'
import { startFake, type FakeApi, type FakeOptions, type Protocol, type ReceivedRequest } from './fake-server.js'

export type { Behaviour, FakeApi, ReceivedRequest } from './fake-server.js'

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool'])
const EFFORTS = ['minimal', 'low', 'medium', 'high']
const KNOWN_KEYS = new Set(['model', 'messages', 'reasoning_effort', 'temperature', 'top_p', 'max_tokens', 'max_completion_tokens', 'stream', 'n', 'stop', 'user', 'seed'])

function openaiError(message: string, type: string, code: string | null = null, param: string | null = null) {
  return { error: { message, type, param, code } }
}

function maskKey(key: string): string {
  return key.length <= 8 ? '********' : `${key.slice(0, 3)}${'*'.repeat(key.length - 7)}${key.slice(-4)}`
}

function reject(req: ReceivedRequest, apiKey: string | null): [number, unknown] | undefined {
  if (req.method !== 'POST' || req.path !== '/v1/chat/completions') return [404, openaiError(`Invalid URL (${req.method} ${req.path})`, 'invalid_request_error')]
  if (apiKey !== null) {
    const auth = req.headers.authorization
    if (!auth) return [401, openaiError("You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", 'invalid_request_error')]
    const given = auth.startsWith('Bearer ') ? auth.slice(7) : auth
    if (given !== apiKey) return [401, openaiError(`Incorrect API key provided: ${maskKey(given)}. You can find your API key at https://platform.openai.com/account/api-keys.`, 'invalid_request_error', 'invalid_api_key')]
  }
  const parseError: [number, unknown] = [400, openaiError('We could not parse the JSON body of your request. (HINT: This likely means you aren\'t using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)', 'invalid_request_error')]
  if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) return parseError
  const body = req.body
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return parseError
  for (const key of Object.keys(body)) {
    if (!KNOWN_KEYS.has(key)) return [400, openaiError(`Unrecognized request argument supplied: ${key}`, 'invalid_request_error')]
  }
  if (typeof body.model !== 'string' || body.model === '') return [400, openaiError('you must provide a model parameter', 'invalid_request_error')]
  if (!Array.isArray(body.messages) || body.messages.length === 0) return [400, openaiError("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", 'invalid_request_error', 'empty_array', 'messages')]
  for (const [i, m] of (body.messages as unknown[]).entries()) {
    const msg = m as { role?: unknown; content?: unknown }
    if (typeof msg?.role !== 'string' || !ROLES.has(msg.role)) return [400, openaiError(`Invalid value: '${String(msg?.role)}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.`, 'invalid_request_error', 'invalid_value', `messages[${i}].role`)]
    if (typeof msg.content !== 'string') return [400, openaiError(`Invalid type for 'messages[${i}].content': expected a string.`, 'invalid_request_error', 'invalid_type', `messages[${i}].content`)]
  }
  if (body.reasoning_effort !== undefined && !EFFORTS.includes(body.reasoning_effort)) {
    return [400, openaiError(`Invalid value: '${String(body.reasoning_effort)}'. Supported values are: 'minimal', 'low', 'medium', and 'high'.`, 'invalid_request_error', 'invalid_value', 'reasoning_effort')]
  }
  return undefined
}

const protocol: Protocol = {
  basePath: '/v1',
  reject,
  reply(req, text) {
    const promptTokens = Math.max(1, Math.ceil(req.raw.length / 4))
    const completionTokens = Math.max(1, Math.ceil(text.length / 4))
    return {
      id: `chatcmpl-${randomBytes(12).toString('hex')}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: req.body.model,
      choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
      system_fingerprint: 'fp_fake',
    }
  },
  malformed(req) {
    return { id: `chatcmpl-${randomBytes(12).toString('hex')}`, object: 'chat.completion', created: Math.floor(Date.now() / 1000), model: req.body?.model, choices: [], usage: { prompt_tokens: 1, completion_tokens: 0, total_tokens: 1 } }
  },
  error(status, message) {
    if (status === 401) return openaiError(message ?? 'Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key')
    if (status === 404) return openaiError(message ?? 'The model `gpt-unknown` does not exist or you do not have access to it.', 'invalid_request_error', 'model_not_found')
    if (status === 429) return openaiError(message ?? 'Rate limit reached for requests. Please try again in 1s.', 'requests', 'rate_limit_exceeded')
    if (status === 503) return openaiError(message ?? 'The engine is currently overloaded, please try again later', 'server_error')
    if (status >= 500) return openaiError(message ?? 'The server had an error while processing your request. Sorry about that!', 'server_error')
    return openaiError(message ?? 'Invalid request.', 'invalid_request_error')
  },
}

/** A fake OpenAI API; its url ends in /v1 like https://api.openai.com/v1. */
export function startFakeOpenAI(options: FakeOptions = {}): Promise<FakeApi> {
  return startFake(protocol, options)
}
