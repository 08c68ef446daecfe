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
  header: Type.Optional(described(HeaderName, 'hmac only: the header that carries the signature')),
  algorithm: Type.Optional(Type.Enum(['sha1', 'sha256', 'sha512'], { description: 'hmac only: default sha256' })),
  encoding: Type.Optional(Type.Enum(['hex', 'base64'], { description: 'hmac only: how the signature header writes the digest, default hex' })),
  prefix: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'hmac only: text before the digest in the header, e.g. sha256=' })),
  timestampHeader: Type.Optional(described(HeaderName, 'hmac only: the header that carries the signed timestamp (checked against toleranceSeconds), if the sender sends one')),
  idHeader: Type.Optional(described(HeaderName, 'hmac only: the header that carries the delivery id, for {{id}} in signedString')),
  signedString: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'hmac only: what is signed, over {{timestamp}}, {{id}} and {{body}}; default {{body}}' })),
}, { ...closed, description: 'verify the sender\'s signature over the raw body; a signed mapping needs no hook token and must be alone on its path' })

export const MappingSchema = Type.Object({
  id: Type.Optional(described(Id, 'the mapping\'s id in the run history and the logs; default: made from match.path (and its position when several share it)')),
  match: Type.Object({
    path: Type.String({ minLength: 1, description: 'the name under the base path: /hooks/<path>' }),
    source: Type.Optional(Type.String({ minLength: 1, description: 'only match when the payload field "source" equals this' })),
    when: Type.Optional(When),
  }, { ...closed, description: 'which requests this mapping takes: its path, and optionally the payload\'s source and conditions' }),
  action: Type.Enum(['wake', 'agent', 'workflow'], { description: 'wake: a system event for the agent\'s main session; agent: an isolated agent turn; workflow: a run of a saved workflow' }),
  wakeMode: Type.Optional(described(WakeMode, 'now (default): wake the main session at once; next-heartbeat: leave the event for its next heartbeat (an agent turn\'s summary too)')),
  name: Type.Optional(described(Template, 'a template for the run\'s name, shown in the run history and given to the channel with the reply')),
  agentId: Type.Optional(described(Id, 'the agent that runs it (default: the default agent); held to hooks.allowedAgentIds')),
  sessionKey: Type.Optional(Type.String({ maxLength: 512, description: 'a template for the session key of the isolated turn, at most 512 characters; held to allowedSessionKeyPrefixes' })),
  messageTemplate: Type.Optional(described(Template, 'agent and workflow: a template for the prompt of the turn (a workflow\'s input text)')),
  textTemplate: Type.Optional(described(Template, 'wake: a template for the system event\'s text')),
  deliver: Type.Optional(Type.Boolean({ description: 'agent: send the reply through a channel; default true (false keeps it in the run history)' })),
  channel: Type.Optional(Type.String({ minLength: 1, description: 'agent: the channel id the reply goes to; default last (the main session\'s last route, else the agent\'s delivery)' })),
  to: Type.Optional(described(Template, 'agent: a template for the target within the channel (a chat id, an address); default the channel\'s own')),
  model: Type.Optional(described(ModelRef, 'agent: the model of the turn instead of the agent\'s (one the agent is configured with)')),
  thinking: Type.Optional(Thinking),
  timeoutSeconds: Type.Optional(described(TimeoutSeconds, 'how long the run may take, in seconds; an agent turn\'s default is 120')),
  transform: Type.Optional(described(TransformSchema, 'a module under hooks.transformsDir that may change the action for each request (or drop it: null)')),
  allowUnsafeExternalContent: Type.Optional(Type.Boolean({ description: 'give the payload to the agent without the external, untrusted content envelope; default false (keep it false for anything from outside)' })),
  // hookgate's own keys beside OpenClaw's
  workflow: Type.Optional(described(Id, 'workflow: the id of the saved workflow (under workflows) it runs')),
  maxBodyBytes: Type.Optional(described(BodyBytes, 'the largest body this mapping takes, in bytes, instead of server.maxBodyBytes; more → 413 payload_too_large')),
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
  pushToken: Type.Optional(described(SecretRef, 'the token Pub/Sub sends in the push URL\'s query, checked by the receiver (setup writes it)')),
  hookUrl: Type.Optional(Type.String({ minLength: 1, description: 'where the helper posts mail: this hookgate\'s /hooks/gmail, default http://127.0.0.1:8787/hooks/gmail' })),
  receiver: Type.Optional(Type.Object({
    host: Type.Optional(Type.String({ minLength: 1, description: 'default 127.0.0.1' })),
    port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, description: 'default 8788' })),
    path: Type.Optional(Type.String({ pattern: '^/', description: 'default /gmail-pubsub' })),
  }, { ...closed, description: 'where `hookgate webhooks gmail run` listens for pushes' })),
  includeBody: Type.Optional(Type.Boolean({ description: 'send each message\'s body as text, not only its snippet; default true' })),
  maxBytes: Type.Optional(Type.Integer({ minimum: 1, description: 'the most body bytes sent per message; default 20000' })),
  renewEveryMinutes: Type.Optional(Type.Integer({ minimum: 1, description: 'how often the helper renews the Gmail watch (which lasts 7 days); default 720' })),
  credentials: Type.Optional(Type.Object({
    pubsub: Type.Optional(described(SecretRefObject, 'a service-account key file that may administer Pub/Sub in the project')),
    gmail: Type.Optional(Type.Object({
      oauthClient: Type.Optional(described(SecretRefObject, 'the OAuth client file whose refresh token `hookgate webhooks gmail login` stored')),
      serviceAccount: Type.Optional(described(SecretRefObject, 'instead of oauthClient: a service-account key with domain-wide delegation')),
      subject: Type.Optional(Type.String({ minLength: 3, description: 'the mailbox a service account with domain-wide delegation acts as' })),
    }, { ...closed, description: 'who reads the mailbox: an OAuth client (refresh token from `hookgate webhooks gmail login`, kept in the state directory) or a service account with domain-wide delegation' })),
  }, { ...closed, description: 'key and client files, as { file } or { env } references: pubsub may administer Pub/Sub in the project' })),
  oidc: Type.Optional(Type.Object({
    serviceAccountEmail: Type.String({ minLength: 3, description: 'the service account Pub/Sub signs pushes as' }),
    audience: Type.Optional(Type.String({ minLength: 1, description: 'the audience of the push\'s ID token, default pushEndpoint' })),
  }, { ...closed, description: 'check the OIDC token Pub/Sub sends with each push (signature, issuer, audience, email)' })),
}, { ...closed, description: 'written by `hookgate webhooks gmail setup`' })

export const HooksSchema = Type.Object({
  enabled: Type.Optional(Type.Boolean({ description: 'serve the hooks; default false: every path under the base path answers 404 hooks_disabled' })),
  token: Type.Optional(TokenRef),
  path: Type.Optional(Type.String({ minLength: 1, description: 'base path, default /hooks' })),
  allowedAgentIds: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'omitted or ["*"]: any; []: explicit agentId routing blocked' })),
  allowRequestSessionKey: Type.Optional(Type.Boolean({ description: 'accept a sessionKey in an /agent request body; default false' })),
  defaultSessionKey: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'the session key of an isolated turn that names none; default: a new hook:<uuid> for each run' })),
  allowedSessionKeyPrefixes: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'session keys (from requests, templates or defaultSessionKey) must start with one of these; default: any' })),
  presets: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'built-in mappings to serve, by name: gmail (/hooks/gmail, for the Gmail helper)' })),
  mappings: Type.Optional(Type.Array(MappingSchema, { description: 'the mapped paths, tried in order: the first whose match holds takes the request' })),
  transformsDir: Type.Optional(Type.String({ minLength: 1, description: 'the folder transform modules are looked up in, relative to hooks.yaml; needed by any transform' })),
  gmail: Type.Optional(GmailSchema),
}, closed)

export const TriggerSchema = Type.Object({
  name: Type.String({ minLength: 1, description: 'human label' }),
  path: Type.String({ minLength: 1, description: 'endpoint path under the base path' }),
  target: Type.Enum(['agent', 'workflow', 'wake'], { description: 'run target: Agent prompt, Workflow / graph, Heartbeat wake' }),
  timing: Type.Optional(described(WakeMode, 'run timing: now (default), or next-heartbeat (leave it for the main session\'s next heartbeat)')),
  workflow: Type.Optional(described(Id, 'target workflow: the id of the saved workflow it runs')),
  delivery: Type.Optional(Type.Enum(['internal', 'deliver'], { description: 'target agent: internal (default) keeps the reply in the run history; deliver sends it through channel' })),
  prompt: Type.Optional(described(Template, 'a template for the agent\'s prompt, or the wake\'s text')),
  channel: Type.Optional(Type.String({ minLength: 1, description: 'reply channel (delivery deliver): a channel id; default last' })),
  to: Type.Optional(described(Template, 'reply target within the channel: a template')),
  timeoutSeconds: Type.Optional(described(TimeoutSeconds, 'how long the run may take, in seconds; an agent turn\'s default is 120')),
  notify: Type.Optional(Type.Enum(['silent', 'done', 'state'], { description: 'what the reply channel is told about each run it starts: silent nothing, done (default) its final status, state every change of status' })),
  enabled: Type.Optional(Type.Boolean({ description: 'false keeps the Trigger in the file but does not serve its path (404); default true' })),
}, { ...closed, description: 'a Trigger definition: an outside system calling over HTTP' })

export const TaskSchema = Type.Object({
  name: Type.String({ minLength: 1, description: 'human label; the Task\'s id is made from it' }),
  schedule: Type.Optional(Type.String({ minLength: 1, description: 'five-field cron expression or @hourly, @daily, @weekly, @monthly, @yearly (in timezone, default UTC)' })),
  every: Type.Optional(Type.String({ minLength: 1, description: 'a fixed interval instead of schedule, e.g. 90s, 15m, 2h, 1d' })),
  timezone: Type.Optional(Type.String({ minLength: 1, description: 'IANA time zone the schedule is read in, e.g. Europe/Berlin; default UTC' })),
  catchUp: Type.Optional(Type.Enum(['skip', 'once'], { description: 'a slot missed while the service was down: once (default) runs it at start, skip does not' })),
  target: Type.Enum(['agent', 'workflow', 'wake'], { description: 'what each firing runs: an agent turn, a saved workflow, or a wake of the main session' }),
  workflow: Type.Optional(described(Id, 'target workflow: the id of the saved workflow it runs')),
  prompt: Type.Optional(Type.String({ description: 'the agent\'s prompt, or the wake\'s text (plain text: a Task has no request to template from)' })),
  timeoutSeconds: Type.Optional(described(TimeoutSeconds, 'how long each run may take, in seconds; an agent turn\'s default is 120')),
  notify: Type.Optional(Type.Enum(['silent', 'done', 'state'], { description: 'what the reply channel is told about each run it starts: silent nothing, done (default) its final status, state every change of status' })),
  enabled: Type.Optional(Type.Boolean({ description: 'false keeps the Task in the file but does not schedule it; default true' })),
}, { ...closed, description: 'a scheduled Task: the service running something on its own' })

export const AgentSchema = Type.Object({
  id: described(Id, 'the agent\'s id: requests, mappings, Triggers and Tasks name it'),
  default: Type.Optional(Type.Boolean({ description: 'the agent of requests and mappings that name none; default: the first agent' })),
  model: described(ModelRef, 'the model of its turns'),
  fallbackModels: Type.Optional(Type.Array(ModelRef, { description: 'tried in order when the model fails' })),
  heartbeat: Type.Optional(Type.Object({
    every: described(Duration, 'how often the main session takes a turn over the system events queued for it (off: only a wake with mode now starts one)'),
    maxQueuedEvents: Type.Optional(Type.Integer({ minimum: 1, maximum: 100000, description: 'system events kept for the next turn; the oldest are dropped first, default 1000' })),
  }, { ...closed, description: 'the main session\'s heartbeat: its period and the events kept for it' })),
  delivery: Type.Optional(Type.Object({
    channel: Type.String({ minLength: 1, description: 'a channel id: where replies go while no other route was used' }),
    to: Type.Optional(Type.String({ minLength: 1, description: 'the target within the channel (a chat id, an address); default the channel\'s own' })),
  }, { ...closed, description: 'the main session\'s route until a delivery names another (channel: last uses it)' })),
  triggers: Type.Optional(Type.Array(TriggerSchema, { description: 'this agent\'s Webhook Triggers (edited by the operator page and `hookgate trigger add|rm`)' })),
  tasks: Type.Optional(Type.Array(TaskSchema, { description: 'this agent\'s scheduled Tasks (edited by the operator page and `hookgate task add|rm`)' })),
}, { ...closed, description: 'an agent: its model, its main session\'s heartbeat and delivery route, its Triggers and Tasks' })

export const WorkflowStepSchema = Type.Object({
  id: described(Id, 'the step\'s id: needs and {{steps.<id>.output}} name it; the run history shows it'),
  action: Type.Enum(['agent', 'wake', 'http', 'transform', 'deliver'], { description: 'agent: a turn (messageTemplate); wake: a system event (textTemplate); http: a call (method, url, headers, body, expect); transform: a module under transformsDir; deliver: a message through a channel (channel, to, textTemplate)' }),
  agentId: Type.Optional(described(Id, 'agent and wake: the agent (default: the run\'s agent)')),
  messageTemplate: Type.Optional(described(Template, 'agent only: a template for the prompt of the turn')),
  textTemplate: Type.Optional(described(Template, 'wake and deliver: a template for the text')),
  needs: Type.Optional(Type.Array(Id, { description: 'steps that must have succeeded first; a template may read their outputs as {{steps.<id>.output…}}' })),
  timeoutSeconds: Type.Optional(described(TimeoutSeconds, 'how long the step may take, in seconds; default agent 120, wake 30, http 30, transform 60, deliver 300')),
  if: Type.Optional(Type.String({ description: 'a template: the step is skipped when it renders to "", "false", "0" or "null" (after trimming)' })),
  retries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, description: 'attempts after the first when the step fails or times out, default 0' })),
  backoffSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 3600, description: 'wait before the first retry, doubled for each next one (at most 300 s); default 1' })),
  method: Type.Optional(Type.Enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'], { description: 'http only: default GET, or POST when there is a body' })),
  url: Type.Optional(Type.String({ minLength: 1, description: 'http only: scheme and host written out; only the path and query may hold templates, e.g. https://api.example.com/items/{{payload.id}}' })),
  headers: Type.Optional(Type.Record(Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$" }), Type.Union([Template, SecretRefObject]), { description: 'http only: header values are templates, or secrets written ${ENV}, { env } or { file }' })),
  body: Type.Optional(described(Template, 'http only: a template for the request body')),
  expect: Type.Optional(Type.Array(Type.Integer({ minimum: 100, maximum: 599 }), { minItems: 1, description: 'http only: statuses that count as success, default any 2xx' })),
  transform: Type.Optional(described(TransformSchema, 'transform only: the module to run; its answer is the step\'s output')),
  channel: Type.Optional(Type.String({ minLength: 1, description: 'deliver only: a channel id' })),
  to: Type.Optional(described(Template, 'deliver only: a template for the target within the channel')),
}, { ...closed, description: 'one step of a workflow: what it does, what it needs first, its timeout and retries' })

export const WorkflowSchema = Type.Object({
  id: described(Id, 'the workflow\'s id: mappings, Triggers and Tasks name it'),
  description: Type.Optional(Type.String({ description: 'what it is for, for people (the compiler ignores it)' })),
  steps: Type.Array(WorkflowStepSchema, { minItems: 1, description: 'its steps; they run as their needs allow, several at once' }),
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
    url: described(SecretRef, 'the postgres:// URL, as a reference (it carries the database password)'),
    hostTtlSeconds: Type.Optional(Type.Number({ minimum: 1, maximum: 3600, description: 'a runtime whose lease was not renewed for this long is dead to the others, which take its unfinished runs over; default 15' })),
    sweepSeconds: Type.Optional(Type.Number({ minimum: 0.1, maximum: 3600, description: 'how often a runtime looks for a dead one\'s runs to take over; default 5' })),
    maxConnections: Type.Optional(Type.Integer({ minimum: 2, maximum: 100, description: 'database connections this runtime opens at most, default 10' })),
  }, closed),
], { description: 'keep runs and sessions in PostgreSQL, shared by several runtimes: the postgres:// URL as a reference (${HOOKGATE_STORE_URL}, { env }, { file }), or { url, hostTtlSeconds, sweepSeconds, maxConnections }; absent: the file store in the state directory' })

export const ServerSchema = Type.Object({
  host: Type.Optional(Type.String({ minLength: 1, description: 'bind address, default 127.0.0.1' })),
  port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, description: 'the port to listen on, default 8787; 0 picks a free port' })),
  maxBodyBytes: Type.Optional(described(BodyBytes, 'the largest request body taken, in bytes (a mapping may set its own); more → 413 payload_too_large; default 262144 (256 KiB)')),
  bodyTimeoutSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 3600, description: 'how long the whole body may take to arrive, else 408 body_timeout; default 10' })),
  authFailures: Type.Optional(Type.Object({
    limit: Type.Optional(Type.Integer({ minimum: 1, description: 'failures allowed per window before 429, default 20' })),
    windowSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'the window failures are counted over, in seconds; default 60' })),
    lockoutSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'how long a locked-out client address is refused, in seconds (Retry-After); default 60' })),
    maxTrackedClients: Type.Optional(Type.Integer({ minimum: 1, description: 'client addresses whose failures are remembered at once (the memory bound); default 10000' })),
  }, { ...closed, description: 'the lock-out: a client address with too many failed tokens or signatures is answered 429 too_many_auth_failures for a while' })),
  trustedProxies: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'addresses or CIDR ranges whose X-Forwarded-For is believed' })),
  stateDir: Type.Optional(Type.String({ minLength: 1, description: 'the state directory: run history, sessions, generated tokens; default .hookgate beside hooks.yaml' })),
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
  id: described(Id, 'the provider\'s id: the part before the / of a model, e.g. openai in openai/gpt-4o-mini'),
  type: Type.Enum(['openai', 'anthropic'], { description: 'openai: any OpenAI-compatible chat completions API (OpenAI, Ollama, vLLM, LM Studio, OpenRouter, llama.cpp); anthropic: the Messages API' }),
  baseUrl: Type.String({ pattern: '^https?://[^\\s]+$', description: 'e.g. https://api.openai.com/v1, http://127.0.0.1:11434/v1, https://api.anthropic.com' }),
  apiKey: Type.Optional(described(SecretRef, 'the API key (none for a local server such as Ollama)')),
  timeoutSeconds: Type.Optional(described(TimeoutSeconds, 'how long one call may take, in seconds; default 60')),
  maxRetries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, description: 'retries of a 429, 5xx or connection error, with backoff; default 2' })),
}, { ...closed, description: 'a model provider, referenced by models written <provider id>/<model>' })

export const ChannelSchema = Type.Object({
  id: described(Id, 'the channel\'s id: deliveries, Triggers and agents name it'),
  type: Type.Enum(['webhook', 'slack', 'discord', 'telegram', 'file'], { description: 'webhook: a signed POST to url; slack, discord: their incoming-webhook url; telegram: the Bot API (botToken, chatId); file: lines appended to path' }),
  url: Type.Optional(described(SecretRef, 'webhook, slack, discord: the URL posted to, as a reference (it is often the secret)')),
  secret: Type.Optional(described(SecretRef, 'webhook only: the Standard Webhooks signing secret (whsec_…) the receiver checks')),
  botToken: Type.Optional(described(SecretRef, 'telegram only: the bot\'s token')),
  chatId: Type.Optional(Type.String({ minLength: 1, description: 'telegram only: the chat replies go to when a delivery names none' })),
  apiBaseUrl: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$', description: 'telegram only: the Bot API base, default https://api.telegram.org' })),
  path: Type.Optional(Type.String({ minLength: 1, description: 'file only: a JSON-lines file, relative to hooks.yaml' })),
  maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, description: 'delivery attempts with backoff, default 5' })),
  timeoutSeconds: Type.Optional(described(TimeoutSeconds, 'how long one delivery attempt may take, in seconds; default 10')),
}, { ...closed, description: 'where agent replies are delivered: webhook (Standard Webhooks signed), slack, discord, telegram, file' })

export const ConfigSchema = Type.Object({
  $schema: Type.Optional(Type.String({ description: 'the JSON Schema an editor checks the file with, e.g. ./hooks.schema.json (the compiler ignores it)' })),
  server: Type.Optional(described(ServerSchema, 'the runtime\'s listener, limits, state directory and store')),
  hooks: described(HooksSchema, 'the endpoints: the token, the base path, the policy, presets and mappings'),
  agents: Type.Optional(Type.Array(AgentSchema, { description: 'the agents; none declared: one agent, main, on builtin/echo with a 30m heartbeat' })),
  providers: Type.Optional(Type.Array(ProviderSchema, { description: 'the model providers the agents\' models name' })),
  channels: Type.Optional(Type.Array(ChannelSchema, { description: 'where replies and notifications are delivered' })),
  workflows: Type.Optional(Type.Array(WorkflowSchema, { description: 'saved workflows that mappings, Triggers and Tasks run' })),
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
  return shared ? (shared as { description?: string }).description : schema?.description as string | undefined
}

/** The JSON Schema document printed by `hookgate schema`. */
export function jsonSchemaDocument(): Record<string, unknown> {
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    $id: 'https://hookgate.dev/schema/hooks.json',
    ...JSON.parse(JSON.stringify(ConfigSchema)),
  }
}
