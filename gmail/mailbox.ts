// The Gmail API as the helper uses it: start (and renew) the watch that makes Gmail publish to
// the topic, read the history of added messages since a history id (every page), list the recent
// messages for a resync, and fetch one message as the preset's item: from, to, subject, date,
// snippet and the body as plain text, cut to a byte limit on a character boundary.
import { callGoogle, type CallOptions, type GoogleBases, type TokenSource } from './google.js'

export interface WatchResult { historyId: string; expiration: string }

export interface MailItem {
  id: string
  threadId: string
  historyId: string
  from: string
  to: string
  subject: string
  date: string
  snippet: string
  labelIds: string[]
  /** the body as text (text/plain, else text/html stripped of tags); '' when includeBody is off */
  body: string
  /** the body was cut to maxBytes */
  truncated?: boolean
}

function users(bases: GoogleBases, mailbox: string): string {
  return `${bases.gmailUrl}/gmail/v1/users/${encodeURIComponent(mailbox)}`
}

export async function startWatch(tokens: TokenSource, bases: GoogleBases, mailbox: string, topicName: string, labelIds: string[]): Promise<WatchResult> {
  const body: Record<string, unknown> = { topicName }
  if (labelIds.length > 0) Object.assign(body, { labelIds, labelFilterBehavior: 'include' })
  const r = await callGoogle<{ historyId?: unknown; expiration?: unknown }>(tokens, `${users(bases, mailbox)}/watch`, { method: 'POST', body })
  return { historyId: String(r.historyId ?? ''), expiration: String(r.expiration ?? '') }
}

export async function profile(tokens: TokenSource, bases: GoogleBases, mailbox: string, options: CallOptions = {}): Promise<{ emailAddress: string; historyId: string }> {
  const r = await callGoogle<{ emailAddress?: unknown; historyId?: unknown }>(tokens, `${users(bases, mailbox)}/profile`, options)
  return { emailAddress: String(r.emailAddress ?? ''), historyId: String(r.historyId ?? '') }
}

/**
 * The ids of messages added since `startHistoryId`, oldest first, and the history id to continue
 * from. An expired start id makes Gmail answer 404 (a GoogleError with status 404).
 */
export async function addedSince(tokens: TokenSource, bases: GoogleBases, mailbox: string, startHistoryId: string, labelId: string | undefined, options: CallOptions = {}): Promise<{ ids: string[]; historyId: string }> {
  const ids: string[] = []
  const seen = new Set<string>()
  let historyId = startHistoryId
  let pageToken: string | undefined
  do {
    const q = new URLSearchParams({ startHistoryId, historyTypes: 'messageAdded', maxResults: '500' })
    if (labelId) q.set('labelId', labelId)
    if (pageToken) q.set('pageToken', pageToken)
    const r = await callGoogle<{ history?: Array<{ messagesAdded?: Array<{ message?: { id?: string } }> }>; historyId?: unknown; nextPageToken?: string }>(tokens, `${users(bases, mailbox)}/history?${q}`, options)
    for (const h of r.history ?? []) {
      for (const added of h.messagesAdded ?? []) {
        const id = added.message?.id
        if (id && !seen.has(id)) { seen.add(id); ids.push(id) }
      }
    }
    if (r.historyId !== undefined) historyId = String(r.historyId)
    pageToken = r.nextPageToken
  } while (pageToken)
  return { ids, historyId }
}

/** Messages of the last `days` days (for a resync after the history id expired), oldest first. */
export async function recentMessageIds(tokens: TokenSource, bases: GoogleBases, mailbox: string, days: number, labelId: string | undefined, options: CallOptions = {}): Promise<string[]> {
  const ids: string[] = []
  let pageToken: string | undefined
  do {
    const q = new URLSearchParams({ q: `newer_than:${days}d`, maxResults: '500' })
    if (labelId) q.set('labelIds', labelId)
    if (pageToken) q.set('pageToken', pageToken)
    const r = await callGoogle<{ messages?: Array<{ id?: string }>; nextPageToken?: string }>(tokens, `${users(bases, mailbox)}/messages?${q}`, options)
    for (const m of r.messages ?? []) if (m.id) ids.push(m.id)
    pageToken = r.nextPageToken
  } while (pageToken)
  // Gmail lists newest first
  return ids.reverse()
}

interface Part { mimeType?: string; headers?: Array<{ name: string; value: string }>; body?: { data?: string; size?: number }; parts?: Part[] }

/** One message as the preset's item; undefined when it is gone (deleted since it was listed). */
export async function fetchMessage(tokens: TokenSource, bases: GoogleBases, mailbox: string, id: string, limits: { includeBody: boolean; maxBytes: number }, options: CallOptions = {}): Promise<MailItem | undefined> {
  let m: { id: string; threadId?: string; historyId?: string; snippet?: string; labelIds?: string[]; payload?: Part }
  try {
    m = await callGoogle(tokens, `${users(bases, mailbox)}/messages/${encodeURIComponent(id)}?format=full`, options)
  } catch (err) {
    if ((err as { status?: number }).status === 404) return undefined
    throw err
  }
  const header = (name: string) => m.payload?.headers?.find((h) => h.name.toLowerCase() === name)?.value ?? ''
  const item: MailItem = {
    id: m.id,
    threadId: m.threadId ?? '',
    historyId: String(m.historyId ?? ''),
    from: header('from'),
    to: header('to'),
    subject: header('subject'),
    date: header('date'),
    snippet: m.snippet ?? '',
    labelIds: m.labelIds ?? [],
    body: '',
  }
  if (limits.includeBody && m.payload) {
    const text = bodyText(m.payload)
    const cut = cutUtf8(text, limits.maxBytes)
    item.body = cut
    if (cut.length < text.length) item.truncated = true
  }
  return item
}

/** The text/plain part, else the text/html one with its tags dropped; '' when there is neither. */
export function bodyText(payload: Part): string {
  const plain = findPart(payload, 'text/plain')
  if (plain) return decode(plain)
  const html = findPart(payload, 'text/html')
  if (html) return htmlToText(decode(html))
  return ''
}

function findPart(part: Part, type: string): Part | undefined {
  if (part.mimeType?.toLowerCase() === type && part.body?.data) return part
  for (const p of part.parts ?? []) {
    const found = findPart(p, type)
    if (found) return found
  }
  return undefined
}

function decode(part: Part): string {
  return Buffer.from(part.body?.data ?? '', 'base64url').toString('utf8')
}

function htmlToText(html: string): string {
  return html
    .replace(/<(script|style)[^>]*>[\s\S]*?<\/\1>/gi, '')
    .replace(/<br\s*\/?>|<\/(p|div|li|tr|h[1-6])>/gi, '\n')
    .replace(/<[^>]+>/g, '')
    .replace(/&nbsp;/g, ' ').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&')
    .replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim()
}

/** The longest prefix of `text` whose UTF-8 encoding fits in `maxBytes`, never splitting a character. */
export function cutUtf8(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text
  const bytes = Buffer.from(text).subarray(0, maxBytes)
  // drop a partial character at the end (a continuation byte run without its full sequence)
  let end = bytes.length
  let i = end - 1
  while (i >= 0 && (bytes[i]! & 0xc0) === 0x80) i--
  if (i >= 0) {
    const lead = bytes[i]!
    const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1
    if (end - i < need) end = i
  }
  return bytes.subarray(0, end).toString('utf8')
}
