// A fake Anthropic Messages API over real HTTP: POST /v1/messages with x-api-key (when the fake is
// given one), anthropic-version and a JSON body the real API would accept; anything else gets the
// real API's error shape ({ type: 'error', error: { type, message } }) and status.
import { randomBytes } from 'node:crypto'
import { startFake, type FakeApi, type FakeOptions, type Protocol, type ReceivedRequest } from './fake-server.js'

export type { Behaviour, FakeApi, ReceivedRequest } from './fake-server.js'

const KNOWN_KEYS = new Set(['model', 'max_tokens', 'system', 'messages', 'thinking', 'temperature', 'top_k', 'top_p', 'stop_sequences', 'stream', 'metadata'])

function anthropicError(type: string, message: string) {
  return { type: 'error', error: { type, message }, request_id: `req_${randomBytes(12).toString('hex')}` }
}

const invalid = (message: string): [number, unknown] => [400, anthropicError('invalid_request_error', message)]

function reject(req: ReceivedRequest, apiKey: string | null): [number, unknown] | undefined {
  if (req.method !== 'POST' || req.path !== '/v1/messages') return [404, anthropicError('not_found_error', 'Not Found')]
  if (apiKey !== null) {
    const given = req.headers['x-api-key']
    if (given === undefined) return [401, anthropicError('authentication_error', 'x-api-key header is required')]
    if (given !== apiKey) return [401, anthropicError('authentication_error', 'invalid x-api-key')]
  }
  const version = req.headers['anthropic-version']
  if (version === undefined) return invalid('anthropic-version: header is required')
  if (version !== '2023-06-01' && version !== '2023-01-01') return invalid(`anthropic-version: invalid version "${String(version)}"`)
  if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) return invalid('Content-Type must be application/json')
  const body = req.body
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return invalid('There was an issue with the JSON body of the request')
  for (const key of Object.keys(body)) if (!KNOWN_KEYS.has(key)) return invalid(`${key}: Extra inputs are not permitted`)
  if (typeof body.model !== 'string' || body.model === '') return invalid('model: Field required')
  if (!Number.isInteger(body.max_tokens) || body.max_tokens < 1) return invalid('max_tokens: Field required')
  if (body.system !== undefined && typeof body.system !== 'string' && !Array.isArray(body.system)) return invalid('system: Input should be a valid string')
  if (!Array.isArray(body.messages) || body.messages.length === 0) return invalid('messages: at least one message is required')
  for (const [i, m] of (body.messages as unknown[]).entries()) {
    const msg = m as { role?: unknown; content?: unknown }
    if (msg?.role !== 'user' && msg?.role !== 'assistant') return invalid(`messages.${i}.role: Input should be 'user' or 'assistant'`)
    if (typeof msg.content !== 'string' && !Array.isArray(msg.content)) return invalid(`messages.${i}.content: Input should be a valid list`)
  }
  if (body.thinking !== undefined) {
    const t = body.thinking as { type?: unknown; budget_tokens?: unknown }
    if (t?.type !== 'enabled' && t?.type !== 'disabled') return invalid("thinking.type: Input should be 'enabled' or 'disabled'")
    if (t.type === 'enabled') {
      if (!Number.isInteger(t.budget_tokens) || (t.budget_tokens as number) < 1024) return invalid('thinking.enabled.budget_tokens: Input should be greater than or equal to 1024')
      if ((t.budget_tokens as number) >= body.max_tokens) return invalid('`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size')
    }
  }
  return undefined
}

const protocol: Protocol = {
  basePath: '',
  reject,
  reply(req, text) {
    const thinking = req.body.thinking?.type === 'enabled'
      ? [{ type: 'thinking', thinking: 'The user wants their message back.', signature: randomBytes(32).toString('base64') }]
      : []
    return {
      id: `msg_${randomBytes(12).toString('hex')}`,
      type: 'message',
      role: 'assistant',
      model: req.body.model,
      content: [...thinking, { type: 'text', text }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: Math.max(1, Math.ceil(req.raw.length / 4)), output_tokens: Math.max(1, Math.ceil(text.length / 4)) },
    }
  },
  malformed(req) {
    return { id: `msg_${randomBytes(12).toString('hex')}`, type: 'message', role: 'assistant', model: req.body?.model, stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 1, output_tokens: 0 } }
  },
  error(status, message) {
    const [type, text] = status === 400 ? ['invalid_request_error', 'Invalid request']
      : status === 401 ? ['authentication_error', 'invalid x-api-key']
        : status === 403 ? ['permission_error', 'Your API key does not have permission to use the specified resource.']
          : status === 404 ? ['not_found_error', 'The requested resource could not be found.']
            : status === 413 ? ['request_too_large', 'Request exceeds the maximum allowed number of bytes.']
              : status === 429 ? ['rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit.']
                : status === 529 ? ['overloaded_error', 'Overloaded']
                  : status >= 500 ? ['api_error', 'Internal server error']
                    : ['invalid_request_error', 'Invalid request']
    return anthropicError(type, message ?? text)
  },
}

/** A fake Anthropic API; its url is the origin, like https://api.anthropic.com. */
export function startFakeAnthropic(options: FakeOptions = {}): Promise<FakeApi> {
  return startFake(protocol, options)
}
