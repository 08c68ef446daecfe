// Part of phase 4 (resolve), split from resolve.ts by concern: agents, the model providers their
// models name (declared, or one of the well-known defaults), the channels replies are delivered
// through (no credential written in a URL), and the per-route model and thinking checks.
import type { BundleChannel, BundleConfig, BundleProvider, ChannelType, SecretSpec } from '../runtime/bundle/format.js'
import { closest, hintFrom, type DiagnosticBag } from './diagnostics.js'
import type { ExpandedConfig } from './expand.js'
import type { LoadedConfig, PathSegment } from './load.js'
import type { ChannelConfig, HooksConfig } from './schema.js'
import type { ResolvedRoute } from './resolved.js'
import { envNameOf, resolveSecret } from './resolve-secrets.js'
import type { LeftOut } from './validate.js'

type ResolvedAgent = BundleConfig['agents'][number]

/** Providers a model may name without declaring them; a declared provider of the same id wins. */
export const WELL_KNOWN_PROVIDERS: Readonly<Record<string, Omit<BundleProvider, 'id' | 'timeoutMs' | 'maxRetries'>>> = {
  openai: { type: 'openai', baseUrl: 'https://api.openai.com/v1', apiKey: { kind: 'env', name: 'OPENAI_API_KEY' } },
  anthropic: { type: 'anthropic', baseUrl: 'https://api.anthropic.com', apiKey: { kind: 'env', name: 'ANTHROPIC_API_KEY' } },
  openrouter: { type: 'openai', baseUrl: 'https://openrouter.ai/api/v1', apiKey: { kind: 'env', name: 'OPENROUTER_API_KEY' } },
  ollama: { type: 'openai', baseUrl: 'http://127.0.0.1:11434/v1', apiKey: null },
  vllm: { type: 'openai', baseUrl: 'http://127.0.0.1:8000/v1', apiKey: null },
  lmstudio: { type: 'openai', baseUrl: 'http://127.0.0.1:1234/v1', apiKey: null },
  llamacpp: { type: 'openai', baseUrl: 'http://127.0.0.1:8080/v1', apiKey: null },
}
const DEFAULT_PROVIDER_TIMEOUT_MS = 60_000
const DEFAULT_MAX_RETRIES = 2

export function resolveAgents(config: HooksConfig, expanded: ExpandedConfig, loaded: LoadedConfig, bag: DiagnosticBag, channelIds: Set<string>, leftOut: LeftOut): ResolvedAgent[] {
  const declared = config.agents ?? []
  const seen = new Set<string>()
  declared.forEach((a, i) => {
    if (seen.has(a.id)) bag.error('AGENT_DUPLICATE_ID', `agent id "${a.id}" is declared twice`, loaded.locate(['agents', i, 'id']))
    seen.add(a.id)
    if (a.delivery && !channelIds.has(a.delivery.channel) && !leftOut.mayDeclare('channels', a.delivery.channel)) {
      bag.error('CHANNEL_UNKNOWN', `channel "${a.delivery.channel}" is not declared under channels`, loaded.locate(['agents', i, 'delivery', 'channel']), hintFrom(a.delivery.channel, channelIds))
    }
  })
  const defaults = declared.map((a, i) => ({ a, i })).filter(({ a }) => a.default === true)
  // With an agent left out, which one is the default cannot be told.
  if (declared.length > 1 && defaults.length !== 1 && !leftOut.any('agents')) {
    const where = defaults.length > 1 ? loaded.locate(['agents', defaults[1]!.i, 'default']) : loaded.locate(['agents'])
    bag.error('AGENT_DEFAULT', defaults.length > 1 ? `${defaults.length} agents are marked default: true; exactly one may be` : `${declared.length} agents are declared and none is marked default: true`, where, 'mark exactly one agent with default: true')
  }
  return expanded.agents.map((a) => ({
    id: a.id,
    default: declared.length <= 1 ? true : a.default === true,
    model: a.model,
    fallbackModels: a.fallbackModels ?? [],
    heartbeatSeconds: parseDurationSeconds(a.heartbeat?.every ?? '30m'),
    maxQueuedEvents: a.heartbeat?.maxQueuedEvents ?? 1000,
    delivery: a.delivery ? { channel: a.delivery.channel, to: a.delivery.to ?? null } : null,
  }))
}

/** The providers the bundle needs: every one a model names, checked against declared and well-known ids. */
export function resolveProviders(config: HooksConfig, agents: ResolvedAgent[], loaded: LoadedConfig, bag: DiagnosticBag, leftOut: LeftOut): BundleProvider[] {
  const declared = new Map<string, BundleProvider>()
  ;(config.providers ?? []).forEach((p, i) => {
    const at: PathSegment[] = ['providers', i]
    if (declared.has(p.id) || p.id === 'builtin') {
      bag.error('PROVIDER_DUPLICATE_ID', p.id === 'builtin' ? 'provider id "builtin" is reserved for the built-in model' : `provider id "${p.id}" is declared twice`, loaded.locate([...at, 'id']))
      return
    }
    const keyVariable = `${envNameOf(p.id)}_API_KEY`
    refuseUrlCredentials(p.baseUrl, 'baseUrl', [...at, 'baseUrl'], loaded, bag, `the key belongs in apiKey: \${${keyVariable}}, not in the base URL`)
    const apiKey = p.apiKey === undefined ? null : resolveSecret(p.apiKey, [...at, 'apiKey'], loaded, bag, keyVariable) ?? null
    declared.set(p.id, { id: p.id, type: p.type, baseUrl: p.baseUrl.replace(/\/+$/, ''), apiKey, timeoutMs: Math.round((p.timeoutSeconds ?? DEFAULT_PROVIDER_TIMEOUT_MS / 1000) * 1000), maxRetries: p.maxRetries ?? DEFAULT_MAX_RETRIES })
  })
  const used = new Map<string, BundleProvider>()
  const known = new Set(['builtin', ...declared.keys(), ...Object.keys(WELL_KNOWN_PROVIDERS)])
  const use = (model: string, path: PathSegment[]) => {
    const provider = model.slice(0, model.indexOf('/'))
    if (provider === 'builtin') {
      if (model !== 'builtin/echo') bag.error('MODEL_INVALID', `unknown built-in model "${model}"`, loaded.locate(path), 'the built-in model is builtin/echo')
      return
    }
    const found = declared.get(provider) ?? (WELL_KNOWN_PROVIDERS[provider] ? { id: provider, ...WELL_KNOWN_PROVIDERS[provider]!, timeoutMs: DEFAULT_PROVIDER_TIMEOUT_MS, maxRetries: DEFAULT_MAX_RETRIES } : undefined)
    if (!found) {
      if (leftOut.mayDeclare('providers', provider)) return
      // The hint offers the whole model with its provider corrected: that is what the value must become.
      const guess = closest(provider, known)
      const fixed = guess === undefined || (guess === 'builtin' && !model.endsWith('/echo')) ? undefined : guess + model.slice(provider.length)
      bag.error('MODEL_INVALID', `model "${model}" names provider "${provider}", which is neither declared under providers nor one hookgate knows`, loaded.locate(path),
        fixed ? `did you mean "${fixed}"?` : `declared: ${[...known].join(', ')}`)
      return
    }
    used.set(provider, found)
  }
  ;(config.agents ?? []).forEach((a, i) => {
    use(a.model, ['agents', i, 'model'])
    ;(a.fallbackModels ?? []).forEach((m, j) => use(m, ['agents', i, 'fallbackModels', j]))
  })
  if (!config.agents?.length) for (const a of agents) use(a.model, ['agents'])
  ;(config.hooks.mappings ?? []).forEach((m, i) => { if (m.model) use(m.model, ['hooks', 'mappings', i, 'model']) })
  return [...used.values()].sort((a, b) => (a.id < b.id ? -1 : 1))
}

/** What each channel type needs (and the keys it would ignore). */
const CHANNEL_FIELDS: Record<ChannelType, { needs: Array<keyof ChannelConfig>; uses: Array<keyof ChannelConfig> }> = {
  webhook: { needs: ['url'], uses: ['url', 'secret'] },
  slack: { needs: ['url'], uses: ['url'] },
  discord: { needs: ['url'], uses: ['url'] },
  telegram: { needs: ['botToken'], uses: ['botToken', 'chatId', 'apiBaseUrl'] },
  file: { needs: ['path'], uses: ['path'] },
}
const CHANNEL_KEYS: Array<keyof ChannelConfig> = ['url', 'secret', 'botToken', 'chatId', 'apiBaseUrl', 'path']

export function resolveChannels(config: HooksConfig, loaded: LoadedConfig, bag: DiagnosticBag): BundleChannel[] {
  const out: BundleChannel[] = []
  const seen = new Set<string>()
  ;(config.channels ?? []).forEach((c, i) => {
    const at: PathSegment[] = ['channels', i]
    if (seen.has(c.id) || c.id === 'last') {
      bag.error('CHANNEL_DUPLICATE_ID', c.id === 'last' ? 'channel id "last" is reserved: it means the main session\'s last route' : `channel id "${c.id}" is declared twice`, loaded.locate([...at, 'id']))
      return
    }
    seen.add(c.id)
    const rule = CHANNEL_FIELDS[c.type]
    for (const key of rule.needs) {
      if (c[key] === undefined) bag.error('CHANNEL_FIELD_MISSING', `a ${c.type} channel needs ${key}`, loaded.locate(at))
    }
    for (const key of CHANNEL_KEYS) {
      if (c[key] !== undefined && !rule.uses.includes(key)) bag.warning('CHANNEL_FIELD_IGNORED', `${key} has no effect on a ${c.type} channel`, loaded.locate([...at, key], 'key'))
    }
    const url = c.url === undefined ? null : channelUrl(c, [...at, 'url'], loaded, bag)
    if (c.apiBaseUrl !== undefined) refuseUrlCredentials(c.apiBaseUrl, 'apiBaseUrl', [...at, 'apiBaseUrl'], loaded, bag, 'the bot token belongs in botToken: ${TELEGRAM_BOT_TOKEN}, not in the base URL')
    out.push({
      id: c.id,
      type: c.type,
      url,
      secret: c.secret === undefined ? null : resolveSecret(c.secret, [...at, 'secret'], loaded, bag, 'WEBHOOK_SECRET') ?? null,
      botToken: c.botToken === undefined ? null : resolveSecret(c.botToken, [...at, 'botToken'], loaded, bag, 'TELEGRAM_BOT_TOKEN') ?? null,
      chatId: c.chatId ?? null,
      apiBaseUrl: (c.apiBaseUrl ?? 'https://api.telegram.org').replace(/\/+$/, ''),
      path: c.path ?? null,
      maxAttempts: c.maxAttempts ?? 5,
      timeoutMs: Math.round((c.timeoutSeconds ?? 10) * 1000),
    })
  })
  return out
}

/**
 * A Slack or Discord webhook URL is itself the credential, so it must be a reference. A generic
 * webhook URL may be written in the file, unless it carries a credential of its own.
 */
function channelUrl(c: ChannelConfig, path: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag): SecretSpec | null {
  if (typeof c.url !== 'string' || c.url.includes('${')) return resolveSecret(c.url!, path, loaded, bag, webhookUrlVariable(undefined, c.type)) ?? null
  const variable = webhookUrlVariable(c.url, c.type)
  if (c.type !== 'webhook') {
    const service = webhookService(c.url)
    const mismatch = service !== undefined && service !== c.type ? `; the address is a ${service === 'slack' ? 'Slack' : 'Discord'} webhook, so the channel wants type: ${service}` : ''
    bag.error('SECRET_LITERAL', `the ${c.type} webhook URL is a credential written in the file`, loaded.locate(path), `write url: \${${variable}} (or { file: path })${mismatch}`)
    return null
  }
  if (refuseUrlCredentials(c.url, 'url', path, loaded, bag, `write url: \${${variable}} (or { file: path }) and keep the whole URL out of the file`)) return null
  return { kind: 'value', value: c.url }
}

/** Whose webhook address a URL is, by its host: the kind of secret it is, whatever the channel type says. */
function webhookService(url: string): 'slack' | 'discord' | undefined {
  if (SLACK_WEBHOOK_URL.test(url)) return 'slack'
  if (DISCORD_WEBHOOK_URL.test(url)) return 'discord'
  return undefined
}

/** The variable a hint names for a channel's URL: a Discord address is a DISCORD_WEBHOOK_URL even on a slack channel. */
function webhookUrlVariable(url: string | undefined, type: ChannelType): string {
  const service = (url !== undefined ? webhookService(url) : undefined) ?? (type === 'slack' || type === 'discord' ? type : undefined)
  return service ? `${service.toUpperCase()}_WEBHOOK_URL` : 'WEBHOOK_URL'
}

/** Query parameter names that carry a credential (api_key, access_token, sig, client_secret, …). */
const CREDENTIAL_PARAM = /key|token|secret|sig|pass|pwd|auth|credential|hmac|session/i

/** Hosts whose webhook URLs are bearer credentials, whatever the channel type says. */
const SLACK_WEBHOOK_URL = /^https?:\/\/hooks\.slack\.com\//i
const DISCORD_WEBHOOK_URL = /^https?:\/\/(?:[a-z]+\.)?discord(?:app)?\.com\/api\/webhooks\//i

/** What in a URL written in the file is a credential, or undefined. */
export function urlCredentials(text: string): string | undefined {
  let u: URL
  try {
    u = new URL(text)
  } catch {
    return undefined // the schema's pattern reports a malformed URL
  }
  if (u.username !== '' || u.password !== '') return 'a user name or password'
  for (const name of u.searchParams.keys()) {
    if (CREDENTIAL_PARAM.test(name)) return `the query parameter "${name}"`
  }
  if (webhookService(text)) return 'a Slack or Discord webhook address, which is itself the credential'
  return undefined
}

/** Reports a URL that carries a credential in the file; true when it did. `hint` says where the credential belongs. */
function refuseUrlCredentials(text: string, key: 'url' | 'apiBaseUrl' | 'baseUrl', path: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag, hint: string): boolean {
  const found = urlCredentials(text)
  if (found === undefined) return false
  bag.error('URL_CREDENTIALS', `${key} carries ${found}: written in the file it would enter the repo and the bundle`, loaded.locate(path), hint)
  return true
}

/** A route's model must be one its agent can run, and thinking needs a provider with a reasoning setting. */
export function checkRouteModel(route: ResolvedRoute, agents: ResolvedAgent[], defaultAgentId: string, loaded: LoadedConfig, bag: DiagnosticBag, leftOut: LeftOut): void {
  // The route's agent may be one validate left out: its models are not known.
  if (leftOut.any('agents') && !agents.some((a) => a.id === route.agentId)) return
  const agent = agents.find((a) => a.id === (route.agentId ?? defaultAgentId)) ?? agents.find((a) => a.id === defaultAgentId)
  if (!agent) return
  if (route.model && route.definitionKind === 'hook' && ![agent.model, ...agent.fallbackModels].includes(route.model)) {
    bag.error('MODEL_INVALID', `model "${route.model}" is not configured for agent "${agent.id}" (its model or fallbackModels)`, loaded.locate([...route.configPath, 'model']), `configured: ${[agent.model, ...agent.fallbackModels].join(', ')}`)
  }
  const model = route.model ?? agent.model
  if (route.thinking && route.thinking !== 'off' && model.startsWith('builtin/')) {
    bag.error('THINKING_UNSUPPORTED', `thinking "${route.thinking}" has no effect on ${model}, which has no reasoning setting`, loaded.locate([...route.configPath, 'thinking']))
  }
}

/** '30s' → 30, '5m' → 300, 'off' → null (the schema already checked the form). */
function parseDurationSeconds(text: string): number | null {
  if (text === 'off') return null
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text)
  if (!m) return null
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd']
  return Number(m[1]) * unit
}
