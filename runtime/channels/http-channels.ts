// The four channels that POST to a URL: a generic webhook (Standard Webhooks signature when it has
// a secret), a Slack incoming webhook, a Discord webhook and the Telegram Bot API. Each one builds
// its request and judges the answer; the attempt loop, timeouts and retries are in attempts.ts.
import type { Dispatcher } from 'undici'
import type { ChannelType } from '../bundle/format.js'
import { DeliveryError, failedAnswer, noAnswerOutcome, parseJson, post, runAttempts, shortText, type DeliveryResult, type HttpAnswer, type Outcome } from './attempts.js'
import { signStandardWebhook } from './standard-webhooks.js'

export interface Delivery {
  runId: string
  agentId: string
  text: string
  to: string | null
  name: string | null
  correlationId: string
  /** set for a notification about a run's state (runtime/notify) rather than an agent's reply */
  event?: RunEvent
}

/** What a notification tells: the run's new status. Each one has its own message id, so receivers that drop repeats of an id keep every state. */
export interface RunEvent {
  status: string
  definitionKind: string
  definitionId: string
  /** unique per state change of the run */
  messageId: string
}

export interface Channel {
  readonly id: string
  readonly type: ChannelType
  deliver(d: Delivery, signal?: AbortSignal): Promise<DeliveryResult>
}

/** What every channel shares: the injected clock, sleep and HTTP dispatcher. */
export interface ChannelEnv {
  dispatcher?: Dispatcher
  now: () => number
  sleep: (ms: number) => Promise<void>
  random?: () => number
}

export interface HttpChannelSettings {
  id: string
  maxAttempts: number
  timeoutMs: number
  env: ChannelEnv
  /** removes this channel's credentials from a message */
  scrub: (text: string) => string
}

export const USER_AGENT = 'hookgate'
export const DISCORD_MAX_CHARS = 2000
export const TELEGRAM_MAX_CHARS = 4096
const JSON_HEADERS = { 'content-type': 'application/json', 'user-agent': USER_AGENT }

/** `text` cut to at most `max` UTF-16 units, ending with … when cut (never inside a surrogate pair). */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text
  let cut = max - 1
  const last = text.charCodeAt(cut - 1)
  if (last >= 0xd800 && last <= 0xdbff) cut -= 1
  return `${text.slice(0, cut)}…`
}

/** a blank `to` (say, a template that rendered nothing) counts as no `to` */
function target(to: string | null): string | null {
  return to !== null && to.trim() !== '' ? to : null
}

/** webhook-id must not contain '.', the separator of the signed content */
export function webhookMessageId(runId: string): string {
  return `msg_${runId.replace(/[^A-Za-z0-9_-]/g, '_')}`
}

abstract class HttpChannel implements Channel {
  abstract readonly type: ChannelType
  readonly id: string
  constructor(protected readonly settings: HttpChannelSettings) {
    this.id = settings.id
  }

  protected run(signal: AbortSignal | undefined, attempt: (n: number) => Promise<Outcome>): Promise<DeliveryResult> {
    const { env } = this.settings
    return runAttempts({ type: this.type, id: this.id, maxAttempts: this.settings.maxAttempts, now: env.now, sleep: env.sleep, random: env.random, scrub: this.settings.scrub, signal }, attempt)
  }

  /** One POST; an answer is judged by `judge`, no answer (timeout, connection) becomes a retryable outcome. */
  protected async exchange(url: string, headers: Record<string, string>, body: string, signal: AbortSignal | undefined, judge: (a: HttpAnswer) => Outcome): Promise<Outcome> {
    let answer: HttpAnswer
    try {
      answer = await post(url, headers, body, { dispatcher: this.settings.env.dispatcher, timeoutMs: this.settings.timeoutMs, signal })
    } catch (err) {
      return noAnswerOutcome(err, this.settings.timeoutMs)
    }
    // an answer may echo what it was sent: credentials go before anything is cut to length
    return judge({ ...answer, text: this.settings.scrub(answer.text) })
  }

  abstract deliver(d: Delivery, signal?: AbortSignal): Promise<DeliveryResult>
}

const ok2xx = (status: number) => status >= 200 && status < 300

export class WebhookChannel extends HttpChannel {
  readonly type = 'webhook' as const
  constructor(settings: HttpChannelSettings, private readonly url: string, private readonly key: Buffer | null) {
    super(settings)
  }

  deliver(d: Delivery, signal?: AbortSignal): Promise<DeliveryResult> {
    const { now } = this.settings.env
    // The body (and so its event timestamp) is fixed once, so every attempt carries the same
    // message; webhook-timestamp is the attempt's own time, as the specification describes.
    const data: Record<string, unknown> = { runId: d.runId, agentId: d.agentId, name: d.name, to: target(d.to), text: d.text, correlationId: d.correlationId }
    if (d.event) Object.assign(data, { status: d.event.status, definitionKind: d.event.definitionKind, definitionId: d.event.definitionId })
    const body = JSON.stringify({
      type: d.event ? 'run.status' : 'agent.reply',
      timestamp: new Date(now()).toISOString(),
      data,
    })
    const messageId = webhookMessageId(d.event?.messageId ?? d.runId)
    return this.run(signal, () => {
      const timestamp = Math.floor(now() / 1000)
      const headers: Record<string, string> = { ...JSON_HEADERS, 'webhook-id': messageId, 'webhook-timestamp': String(timestamp) }
      if (this.key) headers['webhook-signature'] = signStandardWebhook(this.key, messageId, timestamp, body)
      return this.exchange(this.url, headers, body, signal, (a) =>
        ok2xx(a.status) ? { ok: true, detail: `webhook ${a.status}` } : failedAnswer(a, shortText(a.text), now()))
    })
  }
}

/** Slack reads &, < and > as markup (<!channel> pings everyone), so they are escaped. */
export function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

export class SlackChannel extends HttpChannel {
  readonly type = 'slack' as const
  constructor(settings: HttpChannelSettings, private readonly url: string) {
    super(settings)
  }

  deliver(d: Delivery, signal?: AbortSignal): Promise<DeliveryResult> {
    const text = d.name ? `*${slackEscape(d.name)}*\n${slackEscape(d.text)}` : slackEscape(d.text)
    const to = target(d.to)
    // `channel` only matters to legacy webhooks; an app's webhook posts where it was installed.
    const body = JSON.stringify(to === null ? { text } : { text, channel: to })
    return this.run(signal, () => this.exchange(this.url, { ...JSON_HEADERS }, body, signal, (a) => {
      if (a.status === 200 && a.text.trim() === 'ok') return { ok: true, detail: 'slack 200' }
      if (ok2xx(a.status)) return { ok: false, retryable: false, reason: `answered ${a.status} without "ok"${shortText(a.text) ? ` (${shortText(a.text)})` : ''}` }
      return failedAnswer(a, shortText(a.text), this.settings.env.now())
    }))
  }
}

export class DiscordChannel extends HttpChannel {
  readonly type = 'discord' as const
  private readonly url: string
  constructor(settings: HttpChannelSettings, url: string) {
    super(settings)
    const u = new URL(url)
    u.searchParams.set('wait', 'true')
    this.url = u.toString()
  }

  deliver(d: Delivery, signal?: AbortSignal): Promise<DeliveryResult> {
    const content = truncate(d.name ? `**${d.name}**\n${d.text}` : d.text, DISCORD_MAX_CHARS)
    // parse: [] — no @everyone, @here, role or user mention in a reply can ping anyone
    const body = JSON.stringify({ content, allowed_mentions: { parse: [] } })
    return this.run(signal, () => this.exchange(this.url, { ...JSON_HEADERS }, body, signal, (a) => {
      const json = parseJson(a.text) as { id?: unknown; message?: unknown; retry_after?: unknown } | undefined
      if (ok2xx(a.status)) {
        const id = json?.id
        return { ok: true, detail: typeof id === 'string' || typeof id === 'number' ? `discord message ${id}` : `discord ${a.status}` }
      }
      const retryAfter = typeof json?.retry_after === 'number' ? Math.round(json.retry_after * 1000) : null
      return failedAnswer(a, shortText(json?.message) ?? shortText(a.text), this.settings.env.now(), retryAfter)
    }))
  }
}

export class TelegramChannel extends HttpChannel {
  readonly type = 'telegram' as const
  private readonly url: string
  constructor(settings: HttpChannelSettings, apiBaseUrl: string, token: string, private readonly chatId: string | null) {
    super(settings)
    this.url = `${apiBaseUrl.replace(/\/+$/, '')}/bot${token}/sendMessage`
  }

  deliver(d: Delivery, signal?: AbortSignal): Promise<DeliveryResult> {
    const chatId = target(d.to) ?? target(this.chatId)
    if (chatId === null) {
      return Promise.reject(new DeliveryError(`telegram channel ${JSON.stringify(this.id)} has no chat to send to: set chatId on the channel or a "to" on the route`, 0, false))
    }
    const text = truncate(d.name ? `${d.name}\n${d.text}` : d.text, TELEGRAM_MAX_CHARS)
    const body = JSON.stringify({ chat_id: chatId, text })
    return this.run(signal, () => this.exchange(this.url, { ...JSON_HEADERS }, body, signal, (a) => {
      const json = parseJson(a.text) as { ok?: unknown; result?: { message_id?: unknown }; description?: unknown; parameters?: { retry_after?: unknown } } | undefined
      if (ok2xx(a.status) && json?.ok === true) {
        const id = json.result?.message_id
        return { ok: true, detail: typeof id === 'number' || typeof id === 'string' ? `telegram message ${id}` : 'telegram ok' }
      }
      if (ok2xx(a.status)) return { ok: false, retryable: false, reason: `answered ${a.status} without "ok": true${shortText(json?.description) ? ` (${shortText(json?.description)})` : ''}` }
      const wait = json?.parameters?.retry_after
      return failedAnswer(a, shortText(json?.description) ?? shortText(a.text), this.settings.env.now(), typeof wait === 'number' ? wait * 1000 : null)
    }))
  }
}
