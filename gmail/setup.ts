// `hookgate webhooks gmail setup` (its flags are read by cli/verbs/webhooks-gmail-setup.ts):
// everything between a Google account and /hooks/gmail, each step checked first and left alone
// when it is already right, so running it again changes nothing:
//   1. the Pub/Sub topic exists;
//   2. Gmail's push service account may publish to it (IAM read-modify-write, other bindings kept);
//   3. the push subscription sends to the push endpoint, with the push token in its query (Pub/Sub
//      cannot send headers) and, when asked, an OIDC token signed as a service account;
//   4. the mailbox's watch publishes to the topic (renewed by `run`; it lasts 7 days);
//   5. hooks.yaml has hooks.gmail, presets: [gmail] and enabled: true, with comments kept; it is
//      saved through the control plane's one save path (admin/config-file.ts: compiled first, then
//      written with its bundle, both or neither); secrets in it are { file } references, never values.
// `--dry-run` prints the plan and calls nothing.
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { isAbsolute, join, relative, resolve } from 'node:path'
import { isMap, isSeq, type Document, type YAMLMap } from 'yaml'
import { formatText, hashText, preservingEdit, saveConfig } from '../admin/config-file.js'
import { googleBases, parseServiceAccountKey } from './google.js'
import { DEFAULTS, HelperConfigError, defaultHookUrl, PUSH_TOKEN_FILE, loadHelperConfig, readJsonFile, readRef, writeSecretFile, type GmailSettings, type HelperConfig, type Ref } from './config.js'
import { mailboxTokens, pubsubTokens } from './credentials.js'
import { ensurePublisher, ensureSubscription, ensureTopic, subscriptionName, topicName, type StepResult } from './pubsub.js'
import { startWatch } from './mailbox.js'
import { readCursor, writeCursor } from './outbox.js'

/** What setup knows of the watch it started: `run` starts reading history from its historyId. */
export const WATCH_FILE = 'watch.json'
export interface WatchRecord { account: string; topicName: string; labels: string[]; historyId: string; expiration: string; startedAt: string }

/** A watch with more than this left is kept as it is. */
const WATCH_FRESH_MS = 24 * 3_600_000

/** setup's flags as parsed (cli/verbs/webhooks-gmail-setup.ts checks their shapes first). */
export type SetupFlags = Record<string, string | string[] | boolean | undefined> & { config: string; state?: string; out: string; label: string[] }

/** Where setup says what it does (stdout) and why it refused (stderr). */
export interface SetupOutput { stdout(text: string): void; stderr(text: string): void }

/**
 * Runs setup, or with `dry-run` prints its plan: true when done (or planned), false when the
 * config refused the edit (said on stderr). A Google refusal or a config problem is thrown, as a
 * sentence meant for the operator.
 */
export async function setup(v: SetupFlags, io: SetupOutput): Promise<boolean> {
  const config = loadHelperConfig(v.config, v.state)
  const settings = mergeFlags(config, v)
  const dryRun = v['dry-run'] === true
  const topic = topicName(settings.project!, settings.topic)
  const subscription = subscriptionName(settings.project!, settings.subscription)
  const pushTokenPath = join(config.helperDir, PUSH_TOKEN_FILE)
  const oidc = settings.oidc ? { serviceAccountEmail: settings.oidc.serviceAccountEmail, audience: settings.oidc.audience ?? settings.pushEndpoint! } : undefined

  const say = (line: string) => io.stdout(line + '\n')
  say(`${dryRun ? 'plan (dry run: nothing is called, nothing is written)' : 'setting up Gmail push'} for ${settings.account} in project ${settings.project}:`)
  if (dryRun) {
    say(`  1. topic ${topic}: create it unless it exists`)
    say(`  2. topic IAM: grant roles/pubsub.publisher to gmail-api-push@system.gserviceaccount.com, keeping every other binding`)
    say(`  3. subscription ${subscription}: push to ${settings.pushEndpoint} (push token in its query${oidc ? `, OIDC token as ${oidc.serviceAccountEmail} for ${oidc.audience}` : ''}), ack deadline ${DEFAULTS.ackDeadlineSeconds} s`)
    say(`  4. watch ${settings.account}${settings.labels.length ? ` (labels ${settings.labels.join(', ')})` : ''}: publish to ${topic}, unless a watch with over a day left does already`)
    say(`  5. ${relative(process.cwd(), config.file) || config.file}: hooks.gmail, presets: [gmail], enabled: true${settings.pushToken ? '' : `; a push token generated into ${pushTokenPath}`}`)
    return true
  }

  // Credentials are read (and refused) before the first call.
  const bases = googleBases()
  const withCreds: HelperConfig = { ...config, gmail: settings }
  const pubsub = pubsubTokens(withCreds, bases)
  const mailbox = mailboxTokens(withCreds, bases)

  let pushTokenRef = settings.pushToken
  let pushToken: string
  if (pushTokenRef) {
    pushToken = readRef(pushTokenRef, config.dir, 'hooks.gmail.pushToken')
  } else {
    pushToken = existsSync(pushTokenPath) ? readFileSync(pushTokenPath, 'utf8').trim() : ''
    if (pushToken.length < 24) {
      pushToken = randomBytes(24).toString('base64url')
      writeSecretFile(pushTokenPath, pushToken + '\n')
    }
    pushTokenRef = { file: refPath(config.dir, pushTokenPath) }
    settings.pushToken = pushTokenRef
  }

  const step = (n: number, what: string, result: StepResult | string) => say(`  ${n}. ${what}: ${result === 'unchanged' ? 'already right' : result}`)
  step(1, `topic ${topic}`, await ensureTopic(pubsub, bases, topic))
  step(2, 'topic IAM: Gmail may publish', await ensurePublisher(pubsub, bases, topic))
  step(3, `subscription ${subscription}`, await ensureSubscription(pubsub, bases, {
    name: subscription,
    topic,
    pushEndpoint: withToken(settings.pushEndpoint!, pushToken),
    ...(oidc ? { oidc } : {}),
    ackDeadlineSeconds: DEFAULTS.ackDeadlineSeconds,
  }))

  const watchFile = join(config.helperDir, WATCH_FILE)
  const previous = readJsonFile<WatchRecord>(watchFile)
  const fresh = previous && previous.account === settings.account && previous.topicName === topic && sameList(previous.labels, settings.labels) && Number(previous.expiration) - Date.now() > WATCH_FRESH_MS
  if (fresh) {
    step(4, `watch ${settings.account}`, 'unchanged')
  } else {
    const watch = await startWatch(mailbox, bases, settings.account!, topic, settings.labels)
    const record: WatchRecord = { account: settings.account!, topicName: topic, labels: settings.labels, historyId: watch.historyId, expiration: watch.expiration, startedAt: new Date().toISOString() }
    writeSecretFile(watchFile, JSON.stringify(record, null, 2) + '\n')
    // run reads from here: mail that comes between setup and the first run is not missed
    const cursor = readCursor(config.helperDir)
    cursor.mailbox = settings.account!
    cursor.historyId ??= watch.historyId
    cursor.watchExpiration = watch.expiration
    cursor.lastRenewalAt = record.startedAt
    writeCursor(config.helperDir, cursor)
    step(4, `watch ${settings.account}`, `started (history ${watch.historyId}, until ${new Date(Number(watch.expiration)).toISOString()})`)
  }

  const written = await writeConfig(config, settings, v.out, io)
  if (written === undefined) return false
  step(5, relative(process.cwd(), config.file) || config.file, written ? 'hooks.gmail, presets: [gmail], enabled: true written' : 'unchanged')

  say('')
  say('next:')
  if (written) say(`  the bundle in ${v.out} has /hooks/gmail now: a running hookgate serve --bundle ${v.out} reloads it (npm start compiles itself)`)
  say(`  hookgate webhooks gmail run --config ${relative(process.cwd(), config.file) || config.file}   (receives pushes on http://${settings.receiver.host}:${settings.receiver.port}${settings.receiver.path})`)
  say(`  make ${settings.pushEndpoint} reach that receiver (a reverse proxy or tunnel with TLS; Pub/Sub pushes only to https)`)
  return true
}

/** hooks.gmail as it stands, with each flag given over it; what is still missing is refused here. */
function mergeFlags(config: HelperConfig, v: SetupFlags): GmailSettings {
  const s: GmailSettings = structuredClone(config.gmail)
  const str = (name: string) => (typeof v[name] === 'string' ? (v[name] as string) : undefined)
  const file = (name: string): Ref | undefined => {
    const path = str(name)
    if (path === undefined) return undefined
    if (!existsSync(path)) throw new HelperConfigError(`--${name}: ${path} does not exist`)
    return { file: refPath(config.dir, resolve(path)) }
  }
  if (str('account')) s.account = str('account')
  if (str('topic')) s.topic = str('topic')!
  if (str('subscription')) s.subscription = str('subscription')!
  if (v.label.length > 0) s.labels = v.label.flatMap((l) => l.split(',')).map((l) => l.trim()).filter(Boolean)
  if (str('push-endpoint')) s.pushEndpoint = str('push-endpoint')
  if (str('hook-url')) s.hookUrl = str('hook-url')!
  if (str('receiver-host')) s.receiver.host = str('receiver-host')!
  if (str('receiver-port')) s.receiver.port = Number(str('receiver-port'))
  if (str('receiver-path')) s.receiver.path = str('receiver-path')!
  if (str('include-body')) s.includeBody = str('include-body') === 'yes'
  if (str('max-bytes')) s.maxBytes = Number(str('max-bytes'))
  if (str('renew-every-minutes')) s.renewEveryMinutes = Number(str('renew-every-minutes'))
  const pubsubKey = file('pubsub-key')
  if (pubsubKey) s.credentials.pubsub = pubsubKey
  const oauthClient = file('oauth-client')
  const gmailKey = file('gmail-key')
  if (oauthClient) s.credentials.gmail = { oauthClient }
  if (gmailKey) s.credentials.gmail = { serviceAccount: gmailKey, ...(str('subject') ? { subject: str('subject')! } : {}) }
  else if (str('subject') && s.credentials.gmail) s.credentials.gmail.subject = str('subject')!
  if (str('oidc-service-account')) s.oidc = { serviceAccountEmail: str('oidc-service-account')!, ...(str('oidc-audience') ? { audience: str('oidc-audience')! } : {}) }
  else if (str('oidc-audience')) {
    if (!s.oidc) throw new HelperConfigError('--oidc-audience needs --oidc-service-account (the service account Pub/Sub signs pushes as)')
    s.oidc.audience = str('oidc-audience')!
  }
  if (str('project')) s.project = str('project')
  if (!s.project && s.credentials.pubsub) {
    // The Pub/Sub key names its project: the usual place for the topic.
    try {
      s.project = parseServiceAccountKey(readRef(s.credentials.pubsub, config.dir, 'hooks.gmail.credentials.pubsub'), 'the Pub/Sub key').project_id
    } catch { /* refused below with a plainer message */ }
  }
  const missing = [
    !s.account && '--account EMAIL',
    !s.project && '--project ID',
    !s.pushEndpoint && '--push-endpoint URL',
    !s.credentials.pubsub && '--pubsub-key FILE',
    !s.credentials.gmail && '--oauth-client FILE (after login) or --gmail-key FILE',
  ].filter(Boolean)
  if (missing.length > 0) throw new HelperConfigError(`missing ${missing.join(', ')} (nothing in hooks.gmail gives them yet)`)
  return s
}

/** A path as hooks.yaml refers to it: relative to the config's folder when inside it. */
function refPath(configDir: string, absPath: string): string {
  const rel = relative(configDir, absPath)
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : absPath
}

function withToken(endpoint: string, token: string): string {
  const url = new URL(endpoint)
  url.searchParams.set('token', token)
  return url.toString()
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i])
}

/** The hooks.gmail block setup writes: only what differs from the defaults, plus what run needs. */
function gmailBlock(s: GmailSettings, value: Record<string, any>): Record<string, unknown> {
  const block: Record<string, unknown> = {
    account: s.account,
    project: s.project,
    topic: s.topic,
    subscription: s.subscription,
    labels: s.labels,
    // the one-label spelling gives way to labels
    label: undefined,
    pushEndpoint: s.pushEndpoint,
    pushToken: s.pushToken,
  }
  if (s.hookUrl !== defaultHookUrl(value)) block.hookUrl = s.hookUrl
  if (s.receiver.host !== DEFAULTS.receiverHost || s.receiver.port !== DEFAULTS.receiverPort || s.receiver.path !== DEFAULTS.receiverPath) block.receiver = { ...s.receiver }
  block.includeBody = s.includeBody
  block.maxBytes = s.maxBytes
  block.renewEveryMinutes = s.renewEveryMinutes
  block.credentials = s.credentials
  if (s.oidc) block.oidc = s.oidc
  return block
}

/** Writes hooks.gmail, the preset and enabled into hooks.yaml when they differ; undefined after a refusal (said on stderr). */
async function writeConfig(config: HelperConfig, settings: GmailSettings, outDir: string, io: SetupOutput): Promise<boolean | undefined> {
  const block = gmailBlock(settings, config.value)
  const text = preservingEdit(config.text, (doc: Document) => {
    const current = doc.getIn(['hooks', 'gmail'], true)
    if (isMap(current)) {
      // key by key, so that comments and order inside hooks.gmail stay
      for (const [k, value] of Object.entries(block)) {
        if (value === undefined) (current as YAMLMap).delete(k)
        else if (JSON.stringify((doc.getIn(['hooks', 'gmail', k]) as any)?.toJSON?.() ?? doc.getIn(['hooks', 'gmail', k])) !== JSON.stringify(value)) (current as YAMLMap).set(k, doc.createNode(value))
      }
    } else {
      doc.setIn(['hooks', 'gmail'], doc.createNode(JSON.parse(JSON.stringify(block))))
    }
    const presets = doc.getIn(['hooks', 'presets'], true)
    if (isSeq(presets)) {
      if (!presets.items.some((i) => String((i as any)?.value ?? i) === 'gmail')) presets.add('gmail')
    } else {
      doc.setIn(['hooks', 'presets'], doc.createNode(['gmail']))
    }
    if (doc.getIn(['hooks', 'enabled']) !== true) doc.setIn(['hooks', 'enabled'], true)
  })
  if (text === config.text) return false
  return save(config, text, outDir, io)
}

/** Through the control plane's one save path: compiled first, then hooks.yaml and the bundle written, both or neither. */
async function save(config: HelperConfig, text: string, outDir: string, io: SetupOutput): Promise<boolean | undefined> {
  const shown = relative(process.cwd(), config.file) || config.file
  const saved = await saveConfig({ file: config.file, outDir, text, baseHash: hashText(config.text) })
  if (saved.ok) return true
  if (saved.code === 'config_invalid') {
    io.stderr(`hookgate webhooks gmail setup: ${shown} would not compile with hooks.gmail written; nothing was written. The findings (lines as the file would read):\n`)
    for (const d of (saved.diagnostics ?? []).filter((x) => x.severity === 'error')) io.stderr(formatText(d) + '\n')
  } else if (saved.code === 'config_changed') {
    io.stderr(`hookgate webhooks gmail setup: ${config.file} changed on disk while setup ran; run it again (every step already done is kept)\n`)
  } else {
    io.stderr(`hookgate webhooks gmail setup: ${saved.error}\n`)
  }
  return undefined
}
