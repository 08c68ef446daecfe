// Delivery channels built from the bundle (DESIGN §4: `deliver` sends an agent's reply through a
// channel): a generic webhook signed per Standard Webhooks, Slack, Discord, Telegram and a log
// file. createChannels resolves every credential once, at start; a problem is reported then, naming
// the channel and the reference, never a value.
import { isAbsolute, resolve } from 'node:path'
import type { Dispatcher } from 'undici'
import type { BundleChannel, SecretSpec } from '../bundle/format.js'
import { resolveSecretValue, SecretError } from '../bundle/secrets.js'
import { realSleep } from './attempts.js'
import { FileChannel } from './file.js'
import { DiscordChannel, SlackChannel, TelegramChannel, WebhookChannel, type Channel, type ChannelEnv, type HttpChannelSettings } from './http-channels.js'
import { webhookSecretKey } from './standard-webhooks.js'

export { DeliveryError, type DeliveryResult } from './attempts.js'
export type { Channel, Delivery, RunEvent } from './http-channels.js'
export type { ChannelType } from '../bundle/format.js'
export { verifyStandardWebhook, signStandardWebhook, webhookSecretKey, type HeaderBag, type VerifyResult } from './standard-webhooks.js'

export interface ChannelOptions {
  /** an undici Dispatcher (tests pass an Agent; the default is undici's global one) */
  dispatcher?: Dispatcher
  /** the clock, in milliseconds (default Date.now) */
  now?: () => number
  /** the wait between attempts (default a real timer; tests pass one that returns at once) */
  sleep?: (ms: number) => Promise<void>
  /** the jitter source, in [0, 1) (default Math.random) */
  random?: () => number
}

/** How a reference is named in a message: `${NAME}`, the file, or the config itself. */
function describe(spec: SecretSpec): string {
  switch (spec.kind) {
    case 'env': return `\${${spec.name}}`
    case 'file': return `file ${spec.path}`
    case 'value': return 'the value written in hooks.yaml'
    case 'generate': return 'a generated token'
    case 'digest': return 'a literal token (only its digest is kept)'
  }
}

/** Replaces every credential in `text` with [redacted]; pieces shorter than 6 characters are left alone. */
function scrubber(secrets: string[]): (text: string) => string {
  const pieces = [...new Set(secrets.filter((s) => s.length >= 6))].sort((a, b) => b.length - a.length)
  return (text) => pieces.reduce((out, piece) => out.split(piece).join('[redacted]'), text)
}

/** the parts of a URL that may be credentials: all of it, its path and query, and each long path segment */
function urlSecrets(url: URL): string[] {
  const out = [url.href]
  if (url.pathname.length > 1) out.push(url.pathname + url.search, url.pathname)
  if (url.search.length > 1) out.push(url.search.slice(1))
  for (const segment of url.pathname.split('/')) {
    if (segment.length < 8) continue
    out.push(segment)
    try { out.push(decodeURIComponent(segment)) } catch { /* not percent-encoded text */ }
  }
  if (url.password) out.push(url.password)
  return out
}

/**
 * One Channel per bundle channel, keyed by id. Resolves every channel's secrets now: a missing or
 * unusable one throws a SecretError that names every problem (channel and reference, no value).
 * A file channel's relative path is taken from `configDir`.
 */
export function createChannels(channels: BundleChannel[], configDir: string, options: ChannelOptions = {}): Map<string, Channel> {
  const env: ChannelEnv = { dispatcher: options.dispatcher, now: options.now ?? Date.now, sleep: options.sleep ?? realSleep, random: options.random }
  const problems: string[] = []
  const out = new Map<string, Channel>()

  for (const c of channels) {
    const where = `channel ${JSON.stringify(c.id)}`
    const problem = (text: string) => { problems.push(`${where}: ${text}`) }
    if (out.has(c.id)) { problem('is declared twice'); continue }

    const read = (field: 'url' | 'secret' | 'botToken', required: boolean): string | null => {
      const spec = c[field]
      if (spec === null) {
        if (required) problem(`a ${c.type} channel needs ${field}`)
        return null
      }
      try {
        return resolveSecretValue(spec, configDir)
      } catch (err) {
        problem(err instanceof SecretError ? err.message : `${field} (${describe(spec)}) cannot be read`)
        return null
      }
    }
    const readUrl = (field: 'url' | 'apiBaseUrl', value: string | null, spec: SecretSpec | null): URL | null => {
      if (value === null) return null
      let url: URL | null = null
      try { url = new URL(value) } catch { /* reported below */ }
      const named = spec ? ` (${describe(spec)})` : ''
      if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) { problem(`${field}${named} is not an http(s) URL`); return null }
      if (url.hash) { problem(`${field}${named} must not have a #fragment`); return null }
      return url
    }
    const settings = (secrets: string[]): HttpChannelSettings => ({
      id: c.id,
      maxAttempts: Math.max(1, Math.floor(c.maxAttempts || 1)),
      timeoutMs: c.timeoutMs > 0 ? c.timeoutMs : 10_000,
      env,
      scrub: scrubber(secrets),
    })

    switch (c.type) {
      case 'webhook': {
        const url = readUrl('url', read('url', true), c.url)
        const secret = read('secret', false)
        let key: Buffer | null = null
        if (secret !== null) {
          try {
            key = webhookSecretKey(secret)
          } catch (err) {
            problem(`the signing secret (${describe(c.secret!)}) is not a Standard Webhooks secret: ${(err as Error).message} (expected whsec_ followed by base64)`)
          }
        }
        if (url && (secret === null || key)) out.set(c.id, new WebhookChannel(settings([...urlSecrets(url), ...(secret ? [secret, secret.slice(6)] : [])]), url.href, key))
        break
      }
      case 'slack':
      case 'discord': {
        const url = readUrl('url', read('url', true), c.url)
        if (!url) break
        const s = settings(urlSecrets(url))
        out.set(c.id, c.type === 'slack' ? new SlackChannel(s, url.href) : new DiscordChannel(s, url.href))
        break
      }
      case 'telegram': {
        const token = read('botToken', true)
        const base = readUrl('apiBaseUrl', c.apiBaseUrl || 'https://api.telegram.org', null)
        if (token !== null && !/^[A-Za-z0-9:_-]+$/.test(token)) { problem(`botToken (${describe(c.botToken!)}) has characters a bot token cannot have`); break }
        if (token === null || !base) break
        out.set(c.id, new TelegramChannel(settings([token]), base.href, token, c.chatId))
        break
      }
      case 'file': {
        if (!c.path) { problem('a file channel needs path'); break }
        out.set(c.id, new FileChannel(c.id, isAbsolute(c.path) ? c.path : resolve(configDir, c.path), c.path, env.now))
        break
      }
      default:
        problem(`has an unknown type ${JSON.stringify((c as { type: string }).type)}`)
    }
  }

  if (problems.length > 0) throw new SecretError(problems.length === 1 ? problems[0]! : `channels cannot start (${problems.length} problems):\n  ${problems.join('\n  ')}`)
  return out
}
