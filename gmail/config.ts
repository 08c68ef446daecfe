// The Gmail helper's settings: `hooks.gmail` in hooks.yaml (written by setup) with its defaults,
// the secrets it names resolved from their references (key files, the push token, the hook token),
// and the helper's own files in <state>/gmail. The helper is not the runtime: it reads the config
// itself and reaches the runtime only over HTTP (the hook URL).
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync, openSync, fsyncSync, closeSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { parseDocument } from 'yaml'
import { basePathOf, documentValue, hookTokenValue, localRuntimeUrl, secretSpecOf, stateDirOf } from '../admin/config-file.js'
import { resolveSecretValue } from '../runtime/bundle/secrets.js'

export const DEFAULTS = {
  topic: 'hookgate-gmail',
  subscription: 'hookgate-gmail-push',
  labels: ['INBOX'],
  receiverHost: '127.0.0.1',
  receiverPort: 8788,
  receiverPath: '/gmail-pubsub',
  includeBody: true,
  maxBytes: 20_000,
  renewEveryMinutes: 720,
  ackDeadlineSeconds: 60,
} as const

/** A `{ file }` / `{ env }` / `${ENV}` reference as hooks.yaml holds it. */
export type Ref = { file: string } | { env: string } | string

export interface GmailSettings {
  account?: string
  project?: string
  topic: string
  subscription: string
  labels: string[]
  pushEndpoint?: string
  pushToken?: Ref
  hookUrl: string
  receiver: { host: string; port: number; path: string }
  includeBody: boolean
  maxBytes: number
  renewEveryMinutes: number
  credentials: { pubsub?: Ref; gmail?: { oauthClient?: Ref; serviceAccount?: Ref; subject?: string } }
  oidc?: { serviceAccountEmail: string; audience?: string }
}

export interface HelperConfig {
  /** absolute path of hooks.yaml */
  file: string
  dir: string
  text: string
  /** the whole config as plain data */
  value: Record<string, any>
  stateDir: string
  /** <state>/gmail: the helper's cursor, refresh token, push token, lock */
  helperDir: string
  gmail: GmailSettings
  /** hooks.gmail was in the file */
  configured: boolean
}

export class HelperConfigError extends Error {
  override name = 'HelperConfigError'
}

export function loadHelperConfig(file: string, stateFlag?: string): HelperConfig {
  const abs = resolve(file)
  let text: string
  try {
    text = readFileSync(abs, 'utf8')
  } catch (err) {
    throw new HelperConfigError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`)
  }
  const doc = parseDocument(text)
  if (doc.errors.length > 0) throw new HelperConfigError(`${file} is not valid YAML: ${doc.errors[0]!.message.split('\n')[0]}`)
  // as the compiler reads it: an alias bomb is refused before it is expanded
  const read = documentValue(doc)
  if (!read.ok) throw new HelperConfigError(`${file}: ${read.message}`)
  const value = (read.value ?? {}) as Record<string, any>
  const dir = dirname(abs)
  const stateDir = stateDirOf(abs, value, stateFlag)
  const g = (value.hooks?.gmail ?? {}) as Record<string, any>
  const labels = Array.isArray(g.labels) ? g.labels.map(String) : typeof g.label === 'string' ? [g.label] : [...DEFAULTS.labels]
  const gmail: GmailSettings = {
    ...(typeof g.account === 'string' ? { account: g.account } : {}),
    ...(typeof g.project === 'string' ? { project: g.project } : {}),
    topic: typeof g.topic === 'string' ? g.topic : DEFAULTS.topic,
    subscription: typeof g.subscription === 'string' ? g.subscription : DEFAULTS.subscription,
    labels,
    ...(typeof g.pushEndpoint === 'string' ? { pushEndpoint: g.pushEndpoint } : {}),
    ...(g.pushToken !== undefined ? { pushToken: g.pushToken as Ref } : {}),
    hookUrl: typeof g.hookUrl === 'string' ? g.hookUrl : defaultHookUrl(value),
    receiver: {
      host: typeof g.receiver?.host === 'string' ? g.receiver.host : DEFAULTS.receiverHost,
      port: Number.isInteger(g.receiver?.port) ? g.receiver.port : DEFAULTS.receiverPort,
      path: typeof g.receiver?.path === 'string' ? g.receiver.path : DEFAULTS.receiverPath,
    },
    includeBody: typeof g.includeBody === 'boolean' ? g.includeBody : DEFAULTS.includeBody,
    maxBytes: Number.isInteger(g.maxBytes) && g.maxBytes > 0 ? g.maxBytes : DEFAULTS.maxBytes,
    renewEveryMinutes: Number.isInteger(g.renewEveryMinutes) && g.renewEveryMinutes > 0 ? g.renewEveryMinutes : DEFAULTS.renewEveryMinutes,
    credentials: typeof g.credentials === 'object' && g.credentials !== null ? g.credentials : {},
    ...(typeof g.oidc?.serviceAccountEmail === 'string' ? { oidc: { serviceAccountEmail: g.oidc.serviceAccountEmail, ...(typeof g.oidc.audience === 'string' ? { audience: g.oidc.audience } : {}) } } : {}),
  }
  return { file: abs, dir, text, value, stateDir, helperDir: join(stateDir, 'gmail'), gmail, configured: value.hooks?.gmail !== undefined }
}

/** This hookgate's /hooks/gmail, found as the operator page finds a Trigger's endpoint. */
export function defaultHookUrl(value: Record<string, any>): string {
  return `${localRuntimeUrl(value)}${basePathOf(value)}/gmail`
}

/** The text a reference points at (a key file's JSON, a token); errors name the reference, never a value. */
export function readRef(ref: Ref, configDir: string, what: string): string {
  const spec = secretSpecOf(ref)
  if (spec === undefined || spec.kind === 'value' || spec.kind === 'generate') throw new HelperConfigError(`${what} must be a reference (\${ENV}, { env } or { file }), never the secret itself`)
  try {
    return resolveSecretValue(spec, configDir)
  } catch (err) {
    throw new HelperConfigError(`${what}: ${(err as Error).message}`)
  }
}

/** The hook token the helper posts with (hooks.token, as the runtime resolves it). */
export function hookToken(config: HelperConfig): string {
  const value = hookTokenValue(config.value.hooks?.token, config.dir, config.stateDir)
  if (value === undefined || value === '') throw new HelperConfigError('the hook token cannot be read: set hooks.token to ${ENV}, { env }, { file } or { generate: true } (start `hookgate serve` once to generate it)')
  return value
}

export const REFRESH_TOKEN_FILE = 'refresh-token.json'
export const PUSH_TOKEN_FILE = 'push-token'
export const CURSOR_FILE = 'cursor.json'

/** Writes a file the way the helper's state needs: 0600, synced, renamed into place. */
export function writeSecretFile(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, text, { mode: 0o600 })
  chmodSync(tmp, 0o600)
  const fd = openSync(tmp, 'r')
  try { fsyncSync(fd) } finally { closeSync(fd) }
  renameSync(tmp, path)
}

export function readJsonFile<T>(path: string): T | undefined {
  if (!existsSync(path)) return undefined
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as T
  } catch {
    throw new HelperConfigError(`${path} is damaged (not JSON); delete it to start over`)
  }
}
