// The config schema in TypeBox: every key hooks.yaml may hold. It is the single source for
// validation (validate.ts), for the TypeScript types of the later phases, and for the JSON Schema
// that `hookgate schema` prints for editors. Unknown keys are errors everywhere.
import Type, { type Static, type TSchema } from 'typebox'

const closed = { additionalProperties: false } as const

/**
 * A shared type (an id, a template, a secret reference) with what this key holds as its description.
 * Every key says what it is: docs/reference/config.md is generated from these descriptions
 * (scripts/docs.mjs), and test/docs/references.test.ts fails on a key that has none of its own.
 */
/** Marks a shared type with the name the config reference gives it (a property JSON leaves out). */
function format<T extends TSchema>(name: string, schema: T): T {
  return Object.defineProperty(schema, '~format', { value: name, enumerable: false })
}

function described<T extends TSchema>(schema: T, description: string): T {
  return Object.defineProperties({}, { ...Object.getOwnPropertyDescriptors(schema), description: { value: description, enumerable: true, writable: true, configurable: true } }) as T
}

const Id = format('id', Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9][A-Za-z0-9_.:-]*$', description: 'letters, digits, and _ . : - (not first)' }))

/** `${ENV_NAME}`, `{ env: NAME }`, `{ file: path }` or `{ generate: true }` (token only). */
export const SecretRefObject = format('secret file or env', Type.Union([
  Type.Object({ env: Type.String({ minLength: 1, pattern: '^[A-Za-z_][A-Za-z0-9_]*$', description: 'environment variable that holds the secret' }) }, closed),
  Type.Object({ file: Type.String({ minLength: 1, description: 'file that holds the secret (surrounding whitespace trimmed); relative to hooks.yaml' }) }, closed),
], { description: '{ env: NAME } (an environment variable) or { file: path } (a file, relative to hooks.yaml) holding the secret' }))
const SecretString = format('env reference', Type.String({ minLength: 1, description: 'a reference written as ${ENV_NAME}' }))
export const SecretRef = format('secret reference', Type.Union([SecretString, SecretRefObject], { description: 'a secret, never written in the file: ${ENV_NAME}, { env: NAME } or { file: path }' }))
/** A signing secret: a reference, or one generated into the state directory for the sender to be given. */
const SigningSecretRef = format('signing secret', Type.Union([
  SecretString,
  SecretRefObject,
  Type.Object({ generate: Type.Literal(true, { description: 'generate a signing secret into <state>/signing-secrets/<mapping id> on first start (0600) and keep using it' }) }, closed),
], { description: 'a secret reference (${ENV_NAME}, { env }, { file }), or { generate: true }: generated into <state>/signing-secrets/<mapping id> on first start (0600), for the sender to be given' }))
const TokenRef = Type.Union([
  SecretString,
  SecretRefObject,
  Type.Object({ generate: Type.Literal(true, { description: 'generate a token into the state directory on first start (0600) and keep using it' }) }, closed),
], { description: 'the hook token: ${ENV}, { env }, { file } or { generate: true }; a literal value is accepted with a warning' })

const Duration = format('duration', Type.String({ pattern: '^(off|\\d+(\\.\\d+)?(ms|s|m|h|d))$', description: 'a duration like 30s, 5m, 1h, or off' }))
const WakeMode = Type.Enum(['now', 'next-heartbeat'])
const Thinking = Type.Enum(['off', 'minimal', 'low', 'medium', 'high'], { description: 'reasoning effort for the run' })
const ModelRef = format('model', Type.String({ minLength: 3, pattern: '^[a-z0-9][a-z0-9_-]*/.+$', description: 'provider/model, e.g. builtin/echo, openai/gpt-4o-mini, ollama/llama3.1' }))
const Template = format('template', Type.String({ description: 'a template: {{payload.x}}, {{headers.name}}, {{query.name}}, {{path}}, {{now}}' }))
const TimeoutSeconds = Type.Number({ exclusiveMinimum: 0, maximum: 86400 })
const BodyBytes = Type.Integer({ minimum: 1, maximum: 64 * 1024 * 1024 })

/**
 * Checked by compiler/conditions.ts rather than here, so that a mistake in it gets its own code at
 * its own line (CONDITION_OPERATOR_UNKNOWN, CONDITION_PATH_INVALID, …) instead of a schema union error.
 */
const When = Type.Object({}, {
  additionalProperties: true,
  description: 'conditions that must all hold for this mapping to be chosen: a path (payload.x, headers.name, query.name) with a value (equals) or one of { equals }, { in: [...] }, { exists: true|false }, { matches: regex (RE2 syntax), flags?: imsu }; or all: [...], any: [...], not: {...}. Otherwise the next mapping on the path is tried; when none is chosen the answer is 204',
  examples: [{ 'headers.x-github-event': 'pull_request', 'payload.action': { in: ['opened', 'reopened'] } }],
})

export const TransformSchema = Type.Object({
  module: Type.String({ minLength: 1, description: 'module path relative to hooks.transformsDir (.js, .mjs, .ts, .mts)' }),
  export: Type.Optional(Type.String({ minLength: 1, pattern: '^[A-Za-z_$][A-Za-z0-9_$]*$', description: 'exported function name, default: default' })),
  timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 60000, description: 'a transform running longer fails the request with 500; default 2000' })),
  env: Type.Optional(Type.Array(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$', description: 'an environment variable name: letters, digits and _, not starting with a digit' }), { uniqueItems: true, maxItems: 64, description: 'environment variables the transform may read from process.env; it sees no other (default none)' })),
}, closed)

const HeaderName = format('header name', Type.String({ minLength: 1, maxLength: 128, pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$", description: 'an HTTP header name' }))

/**
 * The sender's signature over the raw body, instead of the hook token. Which keys a scheme uses and
 * the roots of signedString are checked by compiler/signatures.ts, each mistake with its own code.
 */
export const SignatureSchema = Type.Object({
  scheme: Type.Enum(['standard-webhooks', 'github', 'stripe', 'slack', 'hmac'], { description: 'standard-webhooks (webhook-id/-timestamp/-signature, or Svix svix-id/-timestamp/-signature; v1 HMAC and v1a Ed25519), github (X-Hub-Signature-256), stripe (Stripe-Signature), slack (X-Slack-Signature), or hmac (generic: header, algorithm, encoding, prefix, timestampHeader, idHeader, signedString)' }),
  secret: Type.Union([SigningSecretRef, Type.Array(SigningSecretRef, { minItems: 1, maxItems: 8 })], { description: 'the signing secret as a reference (${ENV}, { env }, { file }, or { generate: true } to make one in the state directory on first start), or a list of them while rotating: any may match. standard-webhooks: whsec_<base64> (HMAC) or whpk_<base64> (Ed25519 public key)' }),
  toleranceSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400, description: 'how far a signed timestamp may be from now, either way; default 300 (schemes with a timestamp only)' })),
  answerPing: Type.Optional(Type.Boolean({ description: 'github only: answer the ping event 200 {"ok":true,"ping":true} without a run; default true' })),
  header: Type.Optional(HeaderName),
  algorithm: Type.Optional(Type.Enum(['sha1', 'sha256', 'sha512'], { description: 'hmac only: default sha256' })),
  encoding: Type.Optional(Type.Enum(['hex', 'base64'], { description: 'hmac only: how the signature header writes the digest, default hex' })),
  prefix: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'hmac only: text before the digest in the header, e.g. sha256=' })),
  timestampHeader: Type.Optional(HeaderName),
  idHeader: Type.Optional(HeaderName),
  signedString: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'hmac only: what is signed, over {{timestamp}}, {{id}} and {{body}}; default {{body}}' })),
}, { ...closed, description: 'verify the sender\'s signature over the raw body; a signed mapping needs no hook token and must be alone on its path' })

export const MappingSchema = Type.Object({
  id: Type.Optional(Id),
  match: Type.Object({
    path: Type.String({ minLength: 1, description: 'the name under the base path: /hooks/<path>' }),
    source: Type.Optional(Type.String({ minLength: 1, description: 'only match when the payload field "source" equals this' })),
    when: Type.Optional(When),
  }, closed),
  action: Type.Enum(['wake', 'agent', 'workflow']),
  wakeMode: Type.Optional(WakeMode),
  name: Type.Optional(Template),
  agentId: Type.Optional(Id),
  sessionKey: Type.Optional(Type.String({ maxLength: 512, description: 'a template for the session key of the isolated turn, at most 512 characters; held to allowedSessionKeyPrefixes' })),
  messageTemplate: Type.Optional(Template),
  textTemplate: Type.Optional(Template),
  deliver: Type.Optional(Type.Boolean()),
  channel: Type.Optional(Type.String({ minLength: 1 })),
  to: Type.Optional(Template),
  model: Type.Optional(ModelRef),
  thinking: Type.Optional(Thinking),
  timeoutSeconds: Type.Optional(TimeoutSeconds),
  transform: Type.Optional(TransformSchema),
  allowUnsafeExternalContent: Type.Optional(Type.Boolean()),
  // hookgate's own keys beside OpenClaw's
  workflow: Type.Optional(Id),
  maxBodyBytes: Type.Optional(BodyBytes),
  signature: Type.Optional(SignatureSchema),
  forEach: Type.Optional(Type.String({ minLength: 1, description: 'fan-out: one run per element of this array, e.g. "{{payload.messages}}"; templates read the element as {{item}} and its position as {{index}}' })),
  maxItems: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, description: 'fan-out: most runs one request may start; more → 413 too_many_items, default 200' })),
  waitForCompletion: Type.Optional(Type.Boolean({ description: 'answer 200 with the outcome when the run ends within waitTimeoutSeconds, else the usual 202' })),
  waitTimeoutSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 3600, description: 'how long waitForCompletion waits, capped by server.maxWaitSeconds (default that maximum)' })),
}, { ...closed, description: 'a mapped path: /hooks/<match.path> → wake, agent or workflow' })

export const GmailSchema = Type.Object({
  account: Type.Optional(Type.String({ minLength: 3, description: 'the mailbox to watch' })),
  project: Type.Optional(Type.String({ minLength: 1, description: 'the Google Cloud project holding the Pub/Sub topic' })),
  label: Type.Optional(Type.String({ minLength: 1, description: 'one label to watch (labels takes several)' })),
  labels: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'watch only mail with these labels, e.g. [INBOX]' })),
  topic: Type.Optional(Type.String({ minLength: 1, description: 'the Pub/Sub topic Gmail publishes to (a name in project, or projects/<p>/topics/<t>)' })),
  subscription: Type.Optional(Type.String({ minLength: 1, description: 'the Pub/Sub push subscription' })),
  pushEndpoint: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$', description: 'the public URL Pub/Sub pushes to; it must reach the receiver (the push token is added to its query)' })),
  pushToken: Type.Optional(SecretRef),
  hookUrl: Type.Optional(Type.String({ minLength: 1, description: 'where the helper posts mail: this hookgate\'s /hooks/gmail, default http://127.0.0.1:8787/hooks/gmail' })),
  receiver: Type.Optional(Type.Object({
    host: Type.Optional(Type.String({ minLength: 1, description: 'default 127.0.0.1' })),
    port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, description: 'default 8788' })),
    path: Type.Optional(Type.String({ pattern: '^/', description: 'default /gmail-pubsub' })),
  }, { ...closed, description: 'where `hookgate webhooks gmail run` listens for pushes' })),
  includeBody: Type.Optional(Type.Boolean()),
  maxBytes: Type.Optional(Type.Integer({ minimum: 1 })),
  renewEveryMinutes: Type.Optional(Type.Integer({ minimum: 1 })),
  credentials: Type.Optional(Type.Object({
    pubsub: Type.Optional(SecretRefObject),
    gmail: Type.Optional(Type.Object({
      oauthClient: Type.Optional(SecretRefObject),
      serviceAccount: Type.Optional(SecretRefObject),
      subject: Type.Optional(Type.String({ minLength: 3, description: 'the mailbox a service account with domain-wide delegation acts as' })),
    }, { ...closed, description: 'who reads the mailbox: an OAuth client (refresh token from `hookgate webhooks gmail login`, kept in the state directory) or a service account with domain-wide delegation' })),
  }, { ...closed, description: 'key and client files, as { file } or { env } references: pubsub may administer Pub/Sub in the project' })),
  oidc: Type.Optional(Type.Object({
    serviceAccountEmail: Type.String({ minLength: 3, description: 'the service account Pub/Sub signs pushes as' }),
    audience: Type.Optional(Type.String({ minLength: 1, description: 'the audience of the push\'s ID token, default pushEndpoint' })),
  }, { ...closed, description: 'check the OIDC token Pub/Sub sends with each push (signature, issuer, audience, email)' })),
}, { ...closed, description: 'written by `hookgate webhooks gmail setup`' })

export const HooksSchema = Type.Object({
  enabled: Type.Optional(Type.Boolean()),
  token: Type.Optional(TokenRef),
  path: Type.Optional(Type.String({ minLength: 1, description: 'base path, default /hooks' })),
  allowedAgentIds: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'omitted or ["*"]: any; []: explicit agentId routing blocked' })),
  allowRequestSessionKey: Type.Optional(Type.Boolean()),
  defaultSessionKey: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  allowedSessionKeyPrefixes: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
  presets: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
  mappings: Type.Optional(Type.Array(MappingSchema)),
  transformsDir: Type.Optional(Type.String({ minLength: 1 })),
  gmail: Type.Optional(GmailSchema),
}, closed)

export const TriggerSchema = Type.Object({
  name: Type.String({ minLength: 1, description: 'human label' }),
  path: Type.String({ minLength: 1, description: 'endpoint path under the base path' }),
  target: Type.Enum(['agent', 'workflow', 'wake'], { description: 'run target: Agent prompt, Workflow / graph, Heartbeat wake' }),
  timing: Type.Optional(WakeMode),
  workflow: Type.Optional(Id),
  delivery: Type.Optional(Type.Enum(['internal', 'deliver'])),
  prompt: Type.Optional(Template),
  channel: Type.Optional(Type.String({ minLength: 1 })),
  to: Type.Optional(Template),
  timeoutSeconds: Type.Optional(TimeoutSeconds),
  notify: Type.Optional(Type.Enum(['silent', 'done', 'state'])),
  enabled: Type.Optional(Type.Boolean({ description: 'false keeps the Trigger in the file but does not serve its path (404); default true' })),
}, { ...closed, description: 'a Trigger definition: an outside system calling over HTTP' })

export const TaskSchema = Type.Object({
  name: Type.String({ minLength: 1 }),
  schedule: Type.Optional(Type.String({ minLength: 1, description: 'five-field cron expression or @hourly, @daily, @weekly, @monthly, @yearly (in timezone, default UTC)' })),
  every: Type.Optional(Type.String({ minLength: 1, description: 'a fixed interval instead of schedule, e.g. 90s, 15m, 2h, 1d' })),
  timezone: Type.Optional(Type.String({ minLength: 1, description: 'IANA time zone the schedule is read in, e.g. Europe/Berlin; default UTC' })),
  catchUp: Type.Optional(Type.Enum(['skip', 'once'], { description: 'a slot missed while the service was down: once (default) runs it at start, skip does not' })),
  target: Type.Enum(['agent', 'workflow', 'wake']),
  workflow: Type.Optional(Id),
  prompt: Type.Optional(Type.String()),
  timeoutSeconds: Type.Optional(TimeoutSeconds),
  notify: Type.Optional(Type.Enum(['silent', 'done', 'state'])),
  enabled: Type.Optional(Type.Boolean({ description: 'false keeps the Task in the file but does not schedule it; default true' })),
}, { ...closed, description: 'a scheduled Task: the service running something on its own' })

export const AgentSchema = Type.Object({
  id: Id,
  default: Type.Optional(Type.Boolean()),
  model: ModelRef,
  fallbackModels: Type.Optional(Type.Array(ModelRef, { description: 'tried in order when the model fails' })),
  heartbeat: Type.Optional(Type.Object({
    every: Duration,
    maxQueuedEvents: Type.Optional(Type.Integer({ minimum: 1, maximum: 100000, description: 'system events kept for the next turn; the oldest are dropped first, default 1000' })),
  }, closed)),
  delivery: Type.Optional(Type.Object({
    channel: Type.String({ minLength: 1, description: 'a channel id: where replies go while no other route was used' }),
    to: Type.Optional(Type.String({ minLength: 1 })),
  }, { ...closed, description: 'the main session\'s route until a delivery names another (channel: last uses it)' })),
  triggers: Type.Optional(Type.Array(TriggerSchema)),
  tasks: Type.Optional(Type.Array(TaskSchema)),
}, closed)

export const WorkflowStepSchema = Type.Object({
  id: Id,
  action: Type.Enum(['agent', 'wake', 'http', 'transform', 'deliver'], { description: 'agent: a turn (messageTemplate); wake: a system event (textTemplate); http: a call (method, url, headers, body, expect); transform: a module under transformsDir; deliver: a message through a channel (channel, to, textTemplate)' }),
  agentId: Type.Optional(Id),
  messageTemplate: Type.Optional(Template),
  textTemplate: Type.Optional(Template),
  needs: Type.Optional(Type.Array(Id, { description: 'steps that must have succeeded first; a template may read their outputs as {{steps.<id>.output…}}' })),
  timeoutSeconds: Type.Optional(TimeoutSeconds),
  if: Type.Optional(Type.String({ description: 'a template: the step is skipped when it renders to "", "false", "0" or "null" (after trimming)' })),
  retries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, description: 'attempts after the first when the step fails or times out, default 0' })),
  backoffSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 3600, description: 'wait before the first retry, doubled for each next one (at most 300 s); default 1' })),
  method: Type.Optional(Type.Enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'], { description: 'http only: default GET, or POST when there is a body' })),
  url: Type.Optional(Type.String({ minLength: 1, description: 'http only: scheme and host written out; only the path and query may hold templates, e.g. https://api.example.com/items/{{payload.id}}' })),
  headers: Type.Optional(Type.Record(Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$" }), Type.Union([Template, SecretRefObject]), { description: 'http only: header values are templates, or secrets written ${ENV}, { env } or { file }' })),
  body: Type.Optional(Template),
  expect: Type.Optional(Type.Array(Type.Integer({ minimum: 100, maximum: 599 }), { minItems: 1, description: 'http only: statuses that count as success, default any 2xx' })),
  transform: Type.Optional(TransformSchema),
  channel: Type.Optional(Type.String({ minLength: 1, description: 'deliver only: a channel id' })),
  to: Type.Optional(Template),
}, closed)

export const WorkflowSchema = Type.Object({
  id: Id,
  description: Type.Optional(Type.String()),
  steps: Type.Array(WorkflowStepSchema, { minItems: 1 }),
}, { ...closed, description: 'a saved workflow / graph: steps with dependencies, no cycles' })

/**
 * Where the runs and sessions live when several runtimes share them: a PostgreSQL URL, always as a
 * reference (it carries the database password), alone or with the store's timings. Absent: the
 * file store in the state directory.
 */
const StoreSchema = Type.Union([
  SecretString,
  SecretRefObject,
  Type.Object({
    url: SecretRef,
    hostTtlSeconds: Type.Optional(Type.Number({ minimum: 1, maximum: 3600, description: 'a runtime whose lease was not renewed for this long is dead to the others, which take its unfinished runs over; default 15' })),
    sweepSeconds: Type.Optional(Type.Number({ minimum: 0.1, maximum: 3600, description: 'how often a runtime looks for a dead one\'s runs to take over; default 5' })),
    maxConnections: Type.Optional(Type.Integer({ minimum: 2, maximum: 100, description: 'database connections this runtime opens at most, default 10' })),
  }, closed),
], { description: 'keep runs and sessions in PostgreSQL, shared by several runtimes: the postgres:// URL as a reference (${HOOKGATE_STORE_URL}, { env }, { file }), or { url, hostTtlSeconds, sweepSeconds, maxConnections }; absent: the file store in the state directory' })

export const ServerSchema = Type.Object({
  host: Type.Optional(Type.String({ minLength: 1, description: 'bind address, default 127.0.0.1' })),
  port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, description: 'default 8787; 0 picks a free port' })),
  maxBodyBytes: Type.Optional(BodyBytes),
  bodyTimeoutSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 3600 })),
  authFailures: Type.Optional(Type.Object({
    limit: Type.Optional(Type.Integer({ minimum: 1, description: 'failures allowed per window before 429, default 20' })),
    windowSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'default 60' })),
    lockoutSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'default 60' })),
    maxTrackedClients: Type.Optional(Type.Integer({ minimum: 1, description: 'memory bound, default 10000' })),
  }, closed)),
  trustedProxies: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'addresses or CIDR ranges whose X-Forwarded-For is believed' })),
  stateDir: Type.Optional(Type.String({ minLength: 1, description: 'default .hookgate beside hooks.yaml' })),
  concurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: 256, description: 'isolated agent turns running at once, default 4' })),
  maxPendingRuns: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000_000, description: 'agent and workflow runs accepted but not finished; past it new ones get 503, default 10000' })),
  maxPendingBytes: Type.Optional(Type.Integer({ minimum: 1_048_576, maximum: 1_099_511_627_776, description: 'what agent and workflow runs accepted but not finished hold in memory (their requests, payloads included), in bytes; past it new ones get 503, default 268435456 (256 MiB)' })),
  idempotencyWindowSeconds: Type.Optional(Type.Number({ minimum: 1, maximum: 30 * 86400, description: 'how long an Idempotency-Key is remembered, default 86400' })),
  transformMemoryMiB: Type.Optional(Type.Integer({ minimum: 16, maximum: 4096, description: 'memory cap of each transform process (heap, Buffers and everything else it holds); a transform over it fails its request with 500, default 128' })),
  history: Type.Optional(Type.Object({
    keepRuns: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000_000, description: 'finished runs a compaction keeps, newest first (unfinished runs are always kept), default 50000' })),
    compactAboveMiB: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_048_576, description: 'at start, runs.jsonl past this size is compacted, default 64' })),
    keepRequestMiB: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_048_576, description: 'stored requests (for resume and replay) of finished runs a compaction keeps, newest first, default 32' })),
  }, { ...closed, description: 'how much run history is kept (hookgate runs, replay)' })),
  maxWaitSeconds: Type.Optional(Type.Number({ minimum: 0, maximum: 3600, description: 'the longest a request with waitForCompletion is held open, default 30; 0 never waits' })),
  store: Type.Optional(StoreSchema),
}, closed)

export const ProviderSchema = Type.Object({
  id: Id,
  type: Type.Enum(['openai', 'anthropic'], { description: 'openai: any OpenAI-compatible chat completions API (OpenAI, Ollama, vLLM, LM Studio, OpenRouter, llama.cpp); anthropic: the Messages API' }),
  baseUrl: Type.String({ pattern: '^https?://[^\\s]+$', description: 'e.g. https://api.openai.com/v1, http://127.0.0.1:11434/v1, https://api.anthropic.com' }),
  apiKey: Type.Optional(SecretRef),
  timeoutSeconds: Type.Optional(TimeoutSeconds),
  maxRetries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, description: 'retries of a 429, 5xx or connection error, with backoff; default 2' })),
}, { ...closed, description: 'a model provider, referenced by models written <provider id>/<model>' })

export const ChannelSchema = Type.Object({
  id: Id,
  type: Type.Enum(['webhook', 'slack', 'discord', 'telegram', 'file']),
  url: Type.Optional(SecretRef),
  secret: Type.Optional(SecretRef),
  botToken: Type.Optional(SecretRef),
  chatId: Type.Optional(Type.String({ minLength: 1 })),
  apiBaseUrl: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$', description: 'telegram only: the Bot API base, default https://api.telegram.org' })),
  path: Type.Optional(Type.String({ minLength: 1, description: 'file only: a JSON-lines file, relative to hooks.yaml' })),
  maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, description: 'delivery attempts with backoff, default 5' })),
  timeoutSeconds: Type.Optional(TimeoutSeconds),
}, { ...closed, description: 'where agent replies are delivered: webhook (Standard Webhooks signed), slack, discord, telegram, file' })

export const ConfigSchema = Type.Object({
  $schema: Type.Optional(Type.String()),
  server: Type.Optional(ServerSchema),
  hooks: HooksSchema,
  agents: Type.Optional(Type.Array(AgentSchema)),
  providers: Type.Optional(Type.Array(ProviderSchema)),
  channels: Type.Optional(Type.Array(ChannelSchema)),
  workflows: Type.Optional(Type.Array(WorkflowSchema)),
}, { ...closed, title: 'hookgate config (hooks.yaml)' })

export type HooksConfig = Static<typeof ConfigSchema>
export type MappingConfig = Static<typeof MappingSchema>
export type SignatureConfig = Static<typeof SignatureSchema>
export type AgentConfig = Static<typeof AgentSchema>
export type TriggerConfig = Static<typeof TriggerSchema>
export type TaskConfig = Static<typeof TaskSchema>
export type WorkflowConfig = Static<typeof WorkflowSchema>
export type TokenRefConfig = Static<typeof TokenRef>
export type SecretRefConfig = Static<typeof SecretRef>
export type ProviderConfig = Static<typeof ProviderSchema>
export type ChannelConfig = Static<typeof ChannelSchema>

/** The shared types the config reference names instead of spelling them out (scripts/docs.mjs). */
export const SCHEMA_FORMATS: Readonly<Record<string, TSchema>> = {
  id: Id,
  template: Template,
  duration: Duration,
  model: ModelRef,
  'secret reference': SecretRef,
  'env reference': SecretString,
  'secret file or env': SecretRefObject,
  'signing secret': SigningSecretRef,
  'header name': HeaderName,
}

/**
 * What a value of this schema must look like, for a diagnostic's hint: a shared type's own
 * description (the form of an id, of a secret reference), not the key's (what the key is for).
 */
export function formOf(schema: Record<string, unknown> | undefined): string | undefined {
  const name = schema?.['~format']
  const shared = typeof name === 'string' ? SCHEMA_FORMATS[name] : undefined
  return shared ? shared.description : schema?.description as string | undefined
}

/** The JSON Schema document printed by `hookgate schema`. */
export function jsonSchemaDocument(): Record<string, unknown> {
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    $id: 'https://hookgate.dev/schema/hooks.json',
    ...JSON.parse(JSON.stringify(ConfigSchema)),
  }
}
