// Every code an HTTP error body can carry ({"ok":false,"error":…,"code":…}), on each surface that
// answers one: the runtime (hooks, /metrics, the protocol-level refusals), the operator page's API
// (admin/server.ts) and the Gmail helper's push receiver (gmail/run.ts). One entry per code: the
// statuses it comes with, where, and a line saying what it means; the docs' error reference
// (docs/reference/errors.md) is generated from this table by scripts/docs.mjs. `HttpError` takes
// only a code listed here (the type checker holds every use to it), and
// test/runtime/http/error-codes.test.ts holds the table to the source both ways: each code listed is
// answered somewhere, each code answered is listed. Codes never change once released.
//
// Data only: nothing at run time imports this file (errors.ts takes the type), so the table costs
// the runtime nothing.

export type ErrorSurface = 'runtime' | 'admin' | 'gmail'

export interface ErrorCodeEntry {
  /** the HTTP statuses answered with this code */
  readonly status: readonly number[]
  /** which servers answer it */
  readonly surfaces: readonly ErrorSurface[]
  /** what it means, in one line, for the reference */
  readonly meaning: string
}

export const ERROR_CODES = {
  // ---- before the body: the path, the method, the token --------------------------------------------
  not_found: { status: [404], surfaces: ['runtime', 'admin', 'gmail'], meaning: 'nothing is served at this path (outside the base path, or not an endpoint of this server)' },
  hooks_disabled: { status: [404], surfaces: ['runtime'], meaning: 'hooks.enabled is false: every path under the base path is refused, before the token is asked for' },
  token_in_query: { status: [400], surfaces: ['runtime'], meaning: 'the URL carries a token query parameter; the hook token goes in a header, never in the URL' },
  method_not_allowed: { status: [405], surfaces: ['runtime', 'admin', 'gmail'], meaning: 'the method is not the one the endpoint takes (the Allow header names it); CONNECT is refused the same way' },
  unauthorized: { status: [401], surfaces: ['runtime', 'gmail'], meaning: 'the hook token (or the Gmail push token or ID token) is missing or wrong; it counts toward the lock-out' },
  signature_invalid: { status: [401], surfaces: ['runtime'], meaning: 'a signed mapping\'s sender signature does not verify over the raw body; it counts toward the lock-out' },
  too_many_auth_failures: { status: [429], surfaces: ['runtime', 'admin'], meaning: 'too many failed attempts from this client address: locked out until Retry-After seconds have passed' },
  forbidden: { status: [403], surfaces: ['gmail'], meaning: 'the push\'s ID token is valid but not the one the helper expects (another audience or account)' },
  invalid_replay_of: { status: [400], surfaces: ['runtime'], meaning: 'x-hookgate-replay-of does not hold one run id' },
  no_mapping: { status: [404], surfaces: ['runtime'], meaning: 'no mapping serves this name (or none matches the payload\'s source), or the name is empty or not valid percent-encoding' },
  store_unavailable: { status: [503], surfaces: ['runtime'], meaning: 'the run store cannot write now: nothing is accepted that is not stored (Retry-After)' },
  too_many_pending_runs: { status: [503], surfaces: ['runtime'], meaning: 'the backlog of accepted agent and workflow runs is full, by count or by bytes (Retry-After)' },

  // ---- reading and parsing the body ----------------------------------------------------------------
  invalid_content_length: { status: [400], surfaces: ['runtime'], meaning: 'the Content-Length header is not a whole number' },
  payload_too_large: { status: [413], surfaces: ['runtime', 'admin', 'gmail'], meaning: 'the body is over the limit (the server\'s, the mapping\'s, the API\'s or the receiver\'s)' },
  body_timeout: { status: [408], surfaces: ['runtime'], meaning: 'the whole body did not arrive within the body timeout' },
  body_read_failed: { status: [400], surfaces: ['runtime'], meaning: 'the body could not be read from the connection' },
  body_aborted: { status: [400], surfaces: ['runtime'], meaning: 'the client closed the connection before the body was complete' },
  unsupported_media_type: { status: [415], surfaces: ['runtime', 'admin'], meaning: 'the content type is not one the endpoint parses (JSON, or form-urlencoded for hooks)' },
  invalid_utf8: { status: [400], surfaces: ['runtime'], meaning: 'the body is not valid UTF-8' },
  invalid_json: { status: [400], surfaces: ['runtime', 'admin'], meaning: 'the body is not valid JSON, or is nested too deeply' },
  invalid_payload: { status: [400], surfaces: ['runtime'], meaning: 'a field of the request is missing, of the wrong type or out of range (or JSON sent as form-urlencoded)' },
  invalid_challenge: { status: [400], surfaces: ['runtime'], meaning: 'a Slack url_verification request without a usable challenge' },
  invalid_idempotency_key: { status: [400], surfaces: ['runtime'], meaning: 'Idempotency-Key is not 1 to 255 visible ASCII characters' },
  idempotency_key_reused: { status: [409], surfaces: ['runtime'], meaning: 'the Idempotency-Key was already used with a different request' },

  // ---- policy and mapping ----------------------------------------------------------------------------
  session_key_not_allowed: { status: [400], surfaces: ['runtime'], meaning: 'a sessionKey the policy refuses: none accepted from requests, outside the allowed prefixes, or given to a wake' },
  agent_not_allowed: { status: [400], surfaces: ['runtime'], meaning: 'the agent is not in allowedAgentIds (or explicit agent routing is off)' },
  thinking_unsupported: { status: [400], surfaces: ['runtime'], meaning: 'thinking was asked of a model without a reasoning setting' },
  unknown_channel: { status: [400], surfaces: ['runtime'], meaning: 'an /agent request names a channel the config does not declare' },
  model_not_allowed: { status: [400], surfaces: ['runtime'], meaning: 'the model override is not one the agent is configured with' },
  condition_text_too_long: { status: [413], surfaces: ['runtime'], meaning: 'the payload\'s text is too long for the patterns of the mapping\'s match.when' },
  for_each_not_array: { status: [400], surfaces: ['runtime'], meaning: 'a fan-out mapping\'s forEach path does not hold an array in this payload' },
  too_many_items: { status: [413], surfaces: ['runtime'], meaning: 'a fan-out would start more runs than the mapping\'s maxItems' },
  transform_failed: { status: [500], surfaces: ['runtime'], meaning: 'the mapping\'s transform threw or its process failed (the reason is in the run row and the log, not the answer)' },
  transform_timeout: { status: [500], surfaces: ['runtime'], meaning: 'the mapping\'s transform did not finish within its timeout' },
  transform_invalid_output: { status: [500], surfaces: ['runtime'], meaning: 'the mapping\'s transform returned something that is not an action override, an array, null or nothing' },

  // ---- protocol-level refusals (answered before a request is parsed) -----------------------------------
  bad_request: { status: [400], surfaces: ['runtime'], meaning: 'the request is not valid HTTP' },
  headers_too_large: { status: [431], surfaces: ['runtime'], meaning: 'the request headers are over Node\'s limit' },
  request_timeout: { status: [408], surfaces: ['runtime'], meaning: 'the request head did not arrive in time' },
  expectation_failed: { status: [417], surfaces: ['runtime'], meaning: 'an Expect header other than 100-continue' },

  // ---- our own failure ---------------------------------------------------------------------------------
  internal_error: { status: [500], surfaces: ['runtime', 'admin', 'gmail'], meaning: 'the server failed to handle the request; the reason is in its log, never in the answer' },

  // ---- the operator page's API -------------------------------------------------------------------------
  path_invalid: { status: [400], surfaces: ['admin'], meaning: 'the request target, or a segment of it, is not a valid (percent-encoded) path' },
  token_missing: { status: [401], surfaces: ['admin'], meaning: 'no admin token was sent' },
  token_invalid: { status: [401], surfaces: ['admin'], meaning: 'the admin token is not valid (a hook token is not an admin token)' },
  ui_missing: { status: [500], surfaces: ['admin'], meaning: 'the page was not built (npm run build)' },
  run_unknown: { status: [404], surfaces: ['admin'], meaning: 'no run with that id in the history' },
  if_match_required: { status: [428], surfaces: ['admin'], meaning: 'an edit without If-Match: the hash of the hooks.yaml it was made on' },
  config_changed: { status: [409], surfaces: ['admin'], meaning: 'hooks.yaml changed on disk since it was read; nothing was written' },
  config_invalid: { status: [422], surfaces: ['admin'], meaning: 'the edit does not compile, or hooks.yaml is not the shape an edit needs; nothing was written (findings by field)' },
  save_failed: { status: [500], surfaces: ['admin'], meaning: 'the checked edit could not be written; nothing was written' },
  try_failed: { status: [500], surfaces: ['admin'], meaning: 'the Test button\'s dry run failed or did not finish' },
  kind_invalid: { status: [400], surfaces: ['admin'], meaning: 'kind is not "trigger" or "task"' },
  agent_missing: { status: [400], surfaces: ['admin'], meaning: 'the edit names no agent' },
  agent_unknown: { status: [404], surfaces: ['admin'], meaning: 'no agent with that id is declared' },
  original_invalid: { status: [400], surfaces: ['admin'], meaning: 'original is neither the name of the definition being edited nor null' },
  definition_invalid: { status: [400], surfaces: ['admin'], meaning: 'the definition is not an object, or has fields a Trigger or Task does not have' },
  definition_unknown: { status: [404], surfaces: ['admin'], meaning: 'the agent has no Trigger or Task by that name' },

  // ---- the Gmail helper's push receiver ---------------------------------------------------------------
  invalid_push: { status: [400], surfaces: ['gmail'], meaning: 'the body is not a Pub/Sub push of a Gmail notification' },
  shutting_down: { status: [503], surfaces: ['gmail'], meaning: 'the helper is stopping; Pub/Sub redelivers (Retry-After)' },
  sync_failed: { status: [503], surfaces: ['gmail'], meaning: 'the mail could not be handed to the hook yet; Pub/Sub redelivers (Retry-After)' },
} as const satisfies Record<string, ErrorCodeEntry>

export type ErrorCode = keyof typeof ERROR_CODES
