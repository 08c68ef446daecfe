// The conversion behind `hookgate import openclaw FILE` (cli/verbs/import-openclaw.ts): the `hooks`
// block of an OpenClaw config (JSON5, parsed) into a hookgate hooks.yaml. Every key is either
// carried over or listed with the reason it was not; a secret written in the OpenClaw file becomes a
// `${ENV}` reference and never reaches the output or the report. Over 400 lines because it is one
// table of OpenClaw's keys, each with what becomes of it: split, the reasons would scatter.
import { isAbsolute, join, relative, resolve } from 'node:path'
import { Document, isMap, isSeq, type Node } from 'yaml'
import { WELL_KNOWN_PROVIDERS } from './resolve-agents.js'

type Json = Record<string, unknown>

/** What the conversion did, for the report on stderr and the comment at the top of the file. */
export interface ImportReport {
  converted: string[]
  /** keys left out of the output, each with the reason */
  notCarried: Array<{ key: string; reason: string }>
  /** carried, but changed on the way or needing the operator's attention */
  notes: string[]
  /** environment variables the operator must set before serving, and what goes in each */
  env: Array<{ name: string; holds: string }>
}

export interface ConvertOptions {
  /** folder of the OpenClaw config file: OpenClaw resolves transforms from `<it>/hooks/transforms` */
  sourceDir: string
  /** folder the hookgate config is written to: its paths are relative to it */
  outDir: string
  /** name of the OpenClaw file, for the messages */
  sourceName: string
}

export interface Conversion {
  config: Json
  report: ImportReport
  /** an OpenClaw transforms folder outside the output's tree, to be copied beside it */
  copyTransforms?: { from: string; to: string }
}

const MAPPING_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const ENV_REF = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/
const MODEL_REF = /^[a-z0-9][a-z0-9_-]*\/.+$/
const THINKING = new Set(['off', 'minimal', 'low', 'medium', 'high'])
const WAKE_MODES = new Set(['now', 'next-heartbeat'])
const TEMPLATE_ROOTS = new Set(['payload', 'body', 'headers', 'query', 'path', 'now'])
/** OpenClaw chat surfaces hookgate has a channel type for; the others have no hookgate equivalent. */
const CHANNELS: Record<string, { type: string; secretKey: 'url' | 'botToken'; env: string }> = {
  slack: { type: 'slack', secretKey: 'url', env: 'SLACK_WEBHOOK_URL' },
  discord: { type: 'discord', secretKey: 'url', env: 'DISCORD_WEBHOOK_URL' },
  telegram: { type: 'telegram', secretKey: 'botToken', env: 'TELEGRAM_BOT_TOKEN' },
}

/** Why each OpenClaw key outside mappings that hookgate has no place for is left out. */
const HOOKS_NOT_CARRIED: Record<string, string> = {
  sessionRetention: 'hookgate keeps run history in its store and has no pruning setting for hook sessions',
  internal: 'OpenClaw\'s internal event hooks (/new, /reset, gateway start-up) run inside the OpenClaw gateway; hookgate only serves inbound webhooks',
}
const GMAIL_NOT_CARRIED: Record<string, string> = {
  allowUnsafeExternalContent: 'hookgate\'s gmail preset always wraps mail in the untrusted-content envelope; write your own mapping on path gmail with allowUnsafeExternalContent to turn it off',
  serve: '`hookgate webhooks gmail run` posts to hookgate\'s own listener; it has no separate bind, port or path',
  tailscale: 'hookgate does not drive Tailscale; expose the listener with your own reverse proxy or tunnel',
  model: 'hookgate\'s gmail preset uses the default agent\'s model; write your own mapping on path gmail with model to choose another',
  thinking: 'hookgate\'s gmail preset has no thinking setting; write your own mapping on path gmail with thinking',
}
const GMAIL_CARRIED = ['account', 'label', 'topic', 'subscription', 'hookUrl', 'includeBody', 'maxBytes', 'renewEveryMinutes']
const MAPPING_NOT_YET: Record<string, string> = {
  forEach: 'hookgate has no forEach yet: a mapping produces one action per request (a transform cannot fan out either)',
  signature: 'hookgate has no per-mapping sender signature yet: requests to this mapping must carry the hook token',
}

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((s) => typeof s === 'string')
}

/** A model hookgate can run without a providers entry, else undefined. */
function usableModel(v: unknown): string | undefined {
  const model = isObject(v) ? v.primary : v
  if (typeof model !== 'string' || !MODEL_REF.test(model)) return undefined
  return Object.hasOwn(WELL_KNOWN_PROVIDERS, model.slice(0, model.indexOf('/'))) ? model : undefined
}

/**
 * OpenClaw reads a bare `{{messages[0].id}}` from the payload; hookgate names the root, so such an
 * expression gains `payload.`. Header names are lower-cased, as hookgate looks them up.
 */
export function rewriteTemplate(template: string): { text: string; changed: boolean } {
  let changed = false
  const text = template.replace(/\{\{\s*([^}]*?)\s*\}\}/g, (whole, expr: string) => {
    const root = /^[^.[\]]*/.exec(expr)![0]
    let next = TEMPLATE_ROOTS.has(root) ? expr : `payload.${expr}`
    if (root === 'headers') next = next.toLowerCase()
    const out = `{{${next}}}`
    if (out !== whole) changed = true
    return out
  })
  return { text, changed }
}

/** Converts a parsed OpenClaw config (the whole file, or just its hooks block). */
export function convertOpenClaw(root: unknown, options: ConvertOptions): Conversion {
  const report: ImportReport = { converted: [], notCarried: [], notes: [], env: [] }
  const notCarried = (key: string, reason: string) => report.notCarried.push({ key, reason })
  const whole = isObject(root) && isObject(root.hooks)
  const hooks: Json = whole ? (root as Json).hooks as Json : isObject(root) ? root : {}
  const prefix = whole ? 'hooks.' : ''
  if (whole) {
    const others = Object.keys(root as Json).filter((k) => k !== 'hooks')
    if (others.length > 0) report.notes.push(`the rest of ${options.sourceName} (${others.join(', ')}) is OpenClaw's own configuration: only the agents' ids and models were read from it`)
  }

  const out: Json = {}
  const server: Json = {}
  const channels = new Map<string, Json>()

  // Agents first: mapping models and thinking are checked against the agent they run on.
  const agentsBlock = whole && isObject((root as Json).agents) ? (root as Json).agents as Json : {}
  const defaults = isObject(agentsBlock.defaults) ? agentsBlock.defaults : {}
  const defaultModel = usableModel(defaults.model)
  if (defaults.model !== undefined && defaultModel === undefined) {
    report.notes.push(`agents.defaults.model names a model hookgate cannot run without a providers entry (an alias, or a provider it does not know): the agents get builtin/echo until you set one`)
  }
  interface AgentOut { id: string; default?: boolean; model: string; fallbackModels?: string[] }
  const agents: AgentOut[] = []
  const list = Array.isArray(agentsBlock.list) ? agentsBlock.list : []
  for (const a of list) {
    if (!isObject(a) || typeof a.id !== 'string' || !MAPPING_ID.test(a.id) || agents.some((x) => x.id === a.id)) continue
    const agent: AgentOut = { id: a.id, model: usableModel(a.model) ?? defaultModel ?? 'builtin/echo' }
    if (a.default === true && !agents.some((x) => x.default)) agent.default = true
    agents.push(agent)
  }
  const agentFor = (id: string | undefined): AgentOut => {
    const wanted = id ?? agents.find((a) => a.default)?.id ?? agents[0]?.id ?? 'main'
    let agent = agents.find((a) => a.id === wanted)
    if (!agent) {
      agent = { id: wanted, model: defaultModel ?? 'builtin/echo' }
      agents.push(agent)
    }
    return agent
  }
  agentFor(undefined) // the default agent exists before any mapping is routed to another

  // hooks.*
  const h: Json = {}
  out.hooks = h
  const seen = new Set<string>()
  const carried = (key: string) => report.converted.push(prefix + key)

  if ('enabled' in hooks) {
    seen.add('enabled')
    if (typeof hooks.enabled === 'boolean') { h.enabled = hooks.enabled; carried('enabled') } else notCarried(prefix + 'enabled', 'not true or false')
  }

  seen.add('token')
  h.token = convertToken(hooks.token, prefix + 'token', report, options.sourceName)

  if ('path' in hooks) {
    seen.add('path')
    const p = typeof hooks.path === 'string' ? hooks.path.trim() : ''
    if (p === '' || /^\/+$/.test(p)) notCarried(prefix + 'path', 'not a base path hookgate can serve (it must be a folder under /, not / itself)')
    else { h.path = '/' + p.replace(/^\/+|\/+$/g, ''); carried('path') }
  }

  if ('allowedAgentIds' in hooks) {
    seen.add('allowedAgentIds')
    if (isStringArray(hooks.allowedAgentIds)) { h.allowedAgentIds = hooks.allowedAgentIds; carried('allowedAgentIds') } else notCarried(prefix + 'allowedAgentIds', 'not a list of agent ids')
  }
  for (const key of ['allowRequestSessionKey', 'defaultSessionKey', 'allowedSessionKeyPrefixes'] as const) {
    if (!(key in hooks)) continue
    seen.add(key)
    const v = hooks[key]
    const ok = key === 'allowRequestSessionKey' ? typeof v === 'boolean' : key === 'defaultSessionKey' ? typeof v === 'string' && v !== '' : isStringArray(v)
    if (ok) { h[key] = v; carried(key) } else notCarried(prefix + key, 'not a value of the type OpenClaw allows here')
  }

  if ('presets' in hooks) {
    seen.add('presets')
    const kept: string[] = []
    if (!isStringArray(hooks.presets)) notCarried(prefix + 'presets', 'not a list of preset names')
    else hooks.presets.forEach((name, i) => {
      if (name === 'gmail') kept.push(name)
      else notCarried(`${prefix}presets[${i}]`, `hookgate has no "${name}" preset (it has gmail)`)
    })
    if (kept.length > 0) { h.presets = kept; carried('presets') }
  }

  if ('maxBodyBytes' in hooks) {
    seen.add('maxBodyBytes')
    const v = hooks.maxBodyBytes
    if (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 64 * 1024 * 1024) {
      server.maxBodyBytes = v
      report.converted.push(`${prefix}maxBodyBytes → server.maxBodyBytes`)
    } else notCarried(prefix + 'maxBodyBytes', 'not a whole number of bytes from 1 to 64 MiB')
  }

  if ('gmail' in hooks) {
    seen.add('gmail')
    const g = hooks.gmail
    if (!isObject(g)) notCarried(prefix + 'gmail', 'not an object')
    else {
      const gmail: Json = {}
      for (const [key, value] of Object.entries(g)) {
        const at = `${prefix}gmail.${key}`
        if (GMAIL_CARRIED.includes(key)) { gmail[key] = value; report.converted.push(at) } else if (key === 'pushToken') {
          gmail.pushToken = secretReference(value, 'HOOKGATE_GMAIL_PUSH_TOKEN', `the Gmail push token (${at} in ${options.sourceName})`, report)
          report.converted.push(`${at} (as a reference)`)
        } else notCarried(at, GMAIL_NOT_CARRIED[key] ?? 'not a gmail key hookgate knows')
      }
      if (Object.keys(gmail).length > 0) h.gmail = gmail
    }
  }

  // Mappings: OpenClaw's keys are hookgate's, so most carry as they are.
  const transformsUsed: string[] = []
  if ('mappings' in hooks) {
    seen.add('mappings')
    if (!Array.isArray(hooks.mappings)) notCarried(prefix + 'mappings', 'not a list')
    else {
      const mappings: Json[] = []
      hooks.mappings.forEach((m, i) => {
        const converted = convertMapping(m, i, `${prefix}mappings[${i}]`, { report, agentFor, channels })
        if (converted) {
          mappings.push(converted)
          const t = converted.transform
          if (isObject(t) && typeof t.module === 'string') transformsUsed.push(t.module)
        }
      })
      if (mappings.length > 0) h.mappings = mappings
    }
  }

  // transformsDir: OpenClaw resolves it under <config dir>/hooks/transforms; hookgate relative to hooks.yaml.
  let copyTransforms: Conversion['copyTransforms']
  if ('transformsDir' in hooks) seen.add('transformsDir')
  const base = join(options.sourceDir, 'hooks', 'transforms')
  const givenDir = typeof hooks.transformsDir === 'string' && hooks.transformsDir.trim() !== '' ? hooks.transformsDir.trim() : undefined
  const openclawDir = givenDir === undefined ? base : resolve(base, givenDir)
  if (transformsUsed.length === 0) {
    if (givenDir !== undefined) report.notes.push(`${prefix}transformsDir is left out: no mapping has a transform`)
  } else {
    const rel = relative(options.outDir, openclawDir)
    if (rel === '' || (!rel.startsWith('..') && !isAbsolute(rel))) {
      h.transformsDir = rel === '' ? '.' : rel.split('\\').join('/')
      report.converted.push(`${prefix}transformsDir → ${h.transformsDir} (OpenClaw reads transforms from ${openclawDir})`)
    } else {
      // hookgate refuses transforms outside the config's folder, so they come along.
      h.transformsDir = 'transforms'
      copyTransforms = { from: openclawDir, to: join(options.outDir, 'transforms') }
      report.converted.push(`${prefix}transformsDir → transforms (copied from ${openclawDir}: hookgate needs transforms inside the folder of its config)`)
    }
    report.notes.push(`transforms (${transformsUsed.join(', ')}): hookgate passes { payload, headers, query, path } (OpenClaw passed url, not query) and a returned kind is refused (a transform cannot switch between wake and agent): check them`)
  }

  for (const key of Object.keys(hooks)) {
    if (seen.has(key)) continue
    notCarried(prefix + key, HOOKS_NOT_CARRIED[key] ?? 'not an OpenClaw hooks key hookgate knows')
  }

  if (Object.keys(server).length > 0) out.server = server
  if (agents.length > 1 && !agents.some((a) => a.default)) agents[0]!.default = true
  out.agents = agents.map((a) => {
    const agent: Json = { id: a.id }
    if (agents.length > 1 && a.default) agent.default = true
    agent.model = a.model
    if (a.fallbackModels?.length) agent.fallbackModels = a.fallbackModels
    return agent
  })
  if (agents.some((a) => a.model === 'builtin/echo')) report.notes.push('agents without a model hookgate can run got builtin/echo (replies echo the message): set a real model, e.g. anthropic/claude-sonnet-4-5 or ollama/llama3.1')
  if (channels.size > 0) out.channels = [...channels.values()]
  report.notes.push('senders that authenticate with the x-openclaw-token header must send Authorization: Bearer <token> or x-hookgate-token instead')
  const conversion: Conversion = { config: out, report }
  if (copyTransforms) conversion.copyTransforms = copyTransforms
  return conversion
}

interface MappingContext {
  report: ImportReport
  agentFor(id: string | undefined): { id: string; model: string; fallbackModels?: string[] }
  channels: Map<string, Json>
}

function convertMapping(m: unknown, index: number, at: string, ctx: MappingContext): Json | undefined {
  const { report } = ctx
  const notCarried = (key: string, reason: string) => report.notCarried.push({ key: key === '' ? at : `${at}.${key}`, reason })
  if (!isObject(m)) {
    notCarried('', 'not an object')
    return undefined
  }
  const match = isObject(m.match) ? m.match : {}
  const path = typeof match.path === 'string' ? match.path.trim().replace(/^\/+|\/+$/g, '') : ''
  if (path === '') {
    notCarried('', 'it has no match.path: OpenClaw tries it on every hook path, hookgate routes each mapping by its path (write one mapping per path)')
    return undefined
  }
  if (path === 'wake' || path === 'agent') {
    notCarried('', `/${path} is the built-in endpoint, in OpenClaw as in hookgate, so this mapping never ran`)
    return undefined
  }
  const action = m.action ?? 'agent'
  if (action !== 'agent' && action !== 'wake') {
    notCarried('', `action "${String(action)}" is neither wake nor agent`)
    return undefined
  }

  const out: Json = {}
  const carried: string[] = []
  let id = typeof m.id === 'string' && m.id.trim() !== '' ? m.id.trim() : `mapping-${index + 1}`
  if (!MAPPING_ID.test(id)) {
    const safe = id.replace(/[^A-Za-z0-9_.:-]+/g, '-').replace(/^[^A-Za-z0-9]+/, '') || `mapping-${index + 1}`
    report.notes.push(`${at}.id "${id}" became "${safe}" (hookgate ids are letters, digits and _ . : -)`)
    id = safe
  }
  out.id = id
  if ('id' in m) carried.push('id')
  out.match = typeof match.source === 'string' && match.source.trim() !== '' ? { path, source: match.source.trim() } : { path }
  carried.push(typeof (out.match as Json).source === 'string' ? 'match.path, match.source' : 'match.path')
  for (const key of Object.keys(isObject(m.match) ? m.match : {})) {
    if (key !== 'path' && key !== 'source') notCarried(`match.${key}`, 'hookgate matches on path and source only')
  }
  if (m.match !== undefined && !isObject(m.match)) notCarried('match', 'not an object')
  out.action = action
  if ('action' in m) carried.push('action')
  else report.notes.push(`${at} had no action: OpenClaw's default, agent, is written out`)

  let agentId: string | undefined
  if ('agentId' in m) {
    if (typeof m.agentId === 'string' && MAPPING_ID.test(m.agentId.trim())) {
      agentId = m.agentId.trim()
      out.agentId = agentId
      carried.push('agentId')
    } else notCarried('agentId', 'not an agent id hookgate accepts (letters, digits and _ . : -)')
  }
  const agent = ctx.agentFor(agentId)

  const handled = new Set(['id', 'match', 'action', 'agentId'])
  for (const key of ['wakeMode', 'name', 'sessionKey', 'messageTemplate', 'textTemplate', 'deliver', 'allowUnsafeExternalContent', 'timeoutSeconds'] as const) {
    if (!(key in m)) continue
    handled.add(key)
    const v = m[key]
    if (key === 'wakeMode') {
      if (typeof v === 'string' && WAKE_MODES.has(v)) { out[key] = v; carried.push(key) } else notCarried(key, 'neither now nor next-heartbeat')
    } else if (key === 'deliver' || key === 'allowUnsafeExternalContent') {
      if (typeof v === 'boolean') { out[key] = v; carried.push(key) } else notCarried(key, 'not true or false')
    } else if (key === 'timeoutSeconds') {
      if (typeof v === 'number' && v > 0 && v <= 86400) { out[key] = v; carried.push(key) } else notCarried(key, 'not a number of seconds from 1 to 86400')
    } else if (typeof v === 'string') {
      const { text, changed } = rewriteTemplate(v)
      out[key] = text
      carried.push(key)
      if (changed) report.notes.push(`${at}.${key}: template expressions name their root now ("${text.length > 80 ? text.slice(0, 77) + '…' : text}")`.replace(/\n/g, '\\n'))
    } else notCarried(key, 'not a string')
  }

  if ('channel' in m) {
    handled.add('channel')
    const channel = m.channel
    if (channel === 'last') { out.channel = 'last'; carried.push('channel') } else if (typeof channel === 'string' && CHANNELS[channel]) {
      const spec = CHANNELS[channel]!
      if (!ctx.channels.has(channel)) {
        ctx.channels.set(channel, { id: channel, type: spec.type, [spec.secretKey]: `\${${spec.env}}` })
        report.env.push({ name: spec.env, holds: spec.type === 'telegram' ? 'the Telegram bot token replies are sent with' : `the ${spec.type} incoming-webhook URL replies are posted to` })
        report.notes.push(`channels: declared a ${spec.type} channel "${channel}" for ${at}; hookgate's ${spec.type} channel ${spec.type === 'telegram' ? 'sends with a bot token to the chat in to' : 'posts to an incoming-webhook URL (to names no chat there)'}`)
      }
      out.channel = channel
      carried.push('channel')
    } else {
      notCarried('channel', `hookgate has no ${typeof channel === 'string' ? `"${channel}"` : 'such'} channel (it delivers to last, slack, discord, telegram, a signed webhook or a file); replies go to the main session's last route`)
    }
  }
  if ('to' in m) {
    handled.add('to')
    if ('channel' in m && out.channel === undefined) notCarried('to', 'it addresses the channel that was not carried')
    else if (typeof m.to === 'string') {
      out.to = rewriteTemplate(m.to).text
      carried.push('to')
    } else notCarried('to', 'not a string')
  }

  if ('model' in m) {
    handled.add('model')
    const model = usableModel(m.model)
    if (model === undefined) {
      notCarried('model', `"${String(m.model)}" is an alias or names a provider hookgate does not know without a providers entry (known: ${Object.keys(WELL_KNOWN_PROVIDERS).join(', ')})`)
    } else {
      out.model = model
      carried.push('model')
      // hookgate runs a per-mapping model only when its agent lists it.
      if (model !== agent.model && !(agent.fallbackModels ?? []).includes(model)) {
        agent.fallbackModels = [...(agent.fallbackModels ?? []), model]
        report.notes.push(`agent "${agent.id}" lists ${model} under fallbackModels so that ${at} may run it`)
      }
    }
  }
  if ('thinking' in m) {
    handled.add('thinking')
    const effective = typeof out.model === 'string' ? out.model : agent.model
    if (typeof m.thinking !== 'string' || !THINKING.has(m.thinking)) notCarried('thinking', 'not one of off, minimal, low, medium, high')
    else if (m.thinking !== 'off' && effective.startsWith('builtin/')) notCarried('thinking', `this mapping runs on ${effective}, which has no reasoning setting; add thinking back once the agent has a real model`)
    else { out.thinking = m.thinking; carried.push('thinking') }
  }

  if ('transform' in m) {
    handled.add('transform')
    const t = m.transform
    if (!isObject(t) || typeof t.module !== 'string' || t.module.trim() === '') notCarried('transform', 'not { module, export? }')
    else {
      const transform: Json = { module: t.module.trim() }
      if (typeof t.export === 'string' && t.export.trim() !== '') transform.export = t.export.trim()
      for (const key of Object.keys(t)) if (key !== 'module' && key !== 'export') notCarried(`transform.${key}`, 'not a transform key OpenClaw or hookgate knows')
      out.transform = transform
      carried.push(transform.export ? 'transform.module, transform.export' : 'transform.module')
    }
  }

  for (const key of Object.keys(m)) {
    if (handled.has(key)) continue
    notCarried(key, MAPPING_NOT_YET[key] ?? 'not a mapping key hookgate knows')
  }
  report.converted.push(`${at} → mapping "${id}": ${carried.join(', ')}`)
  return out
}

/**
 * The hook token as a reference. A literal stays in the OpenClaw file: the output names a variable
 * and the report says to put the token there.
 */
function convertToken(token: unknown, at: string, report: ImportReport, sourceName: string): unknown {
  if (token === undefined) {
    report.notes.push(`${at} is not set: hookgate generates a token on first start ({ generate: true }) and prints it once`)
    return { generate: true }
  }
  report.converted.push(`${at} (as a reference)`)
  return secretReference(token, 'HOOKGATE_TOKEN', `the hook token (${at} in ${sourceName})`, report)
}

/** `${NAME}` for any OpenClaw secret form: kept when it already names a variable, else NAME = fallback. */
function secretReference(value: unknown, fallback: string, what: string, report: ImportReport): string {
  let name: string | undefined
  if (typeof value === 'string') name = ENV_REF.exec(value.trim())?.[1]
  else if (isObject(value) && value.source === 'env' && typeof value.id === 'string' && ENV_NAME.test(value.id)) name = value.id
  if (name === undefined) {
    if (isObject(value)) report.notes.push(`${what} is an OpenClaw ${typeof value.source === 'string' ? `"${value.source}"` : ''} secret reference hookgate cannot follow: put its value into ${fallback}`.replace(/ {2}/g, ' '))
    name = fallback
    report.env.push({ name, holds: `${what}; the value is not written to the output` })
  } else {
    report.env.push({ name, holds: `${what}, as in OpenClaw` })
  }
  return `\${${name}}`
}

/** The YAML text: a comment saying where it came from and what was left out, then the config. */
export function renderYaml(conversion: Conversion, sourceName: string): string {
  const doc = new Document(conversion.config)
  const { report } = conversion
  const lines = [
    ` Converted from the OpenClaw config ${sourceName} by \`hookgate import openclaw\`.`,
    ' Check it with `hookgate compile --check`.',
  ]
  if (report.env.length > 0) lines.push(' Set before serving: ' + [...new Set(report.env.map((e) => e.name))].join(', '))
  if (report.notCarried.length > 0) {
    lines.push(' Not carried over:')
    for (const n of report.notCarried) lines.push(`   ${n.key}: ${n.reason}`)
  }
  doc.commentBefore = lines.join('\n')
  const agents = doc.get('agents', true) as Node | undefined
  if (isSeq(agents) && conversion.config.agents && (conversion.config.agents as Array<{ model: string }>).some((a) => a.model === 'builtin/echo')) {
    agents.commentBefore = ' builtin/echo answers offline by echoing the message: set a real model (provider/model)'
  }
  const h = doc.get('hooks', true)
  if (isMap(h)) {
    const token = h.get('token', true) as Node | undefined
    if (token && typeof conversion.config.hooks === 'object') token.comment = ' the token itself stays out of this file'
  }
  return doc.toString({ lineWidth: 0 })
}
