// Phase 3, expand: turns the validated config into one flat, ordered list of route specs
// (user mappings first, then Trigger definitions, then presets, so a user mapping on the same path
// shadows a preset), and fills every default, so later phases never ask "was this set?".
import type { AgentConfig, HooksConfig, MappingConfig, SignatureConfig } from './schema.js'
import { presets } from './presets/index.js'
import type { DiagnosticBag } from './diagnostics.js'
import type { LoadedConfig, PathSegment } from './load.js'
import { closest } from './diagnostics.js'

export type ActionKind = 'wake' | 'agent' | 'workflow'
export type WakeMode = 'now' | 'next-heartbeat'
export type TemplateField = 'text' | 'message' | 'name' | 'sessionKey' | 'to'

export interface RouteSpec {
  id: string
  /** 'hook' for mappings and presets, 'trigger' for Trigger definitions */
  definitionKind: 'hook' | 'trigger'
  /** where in hooks.yaml it was declared (a preset points at its entry in hooks.presets) */
  configPath: PathSegment[]
  preset?: string
  /** the name under the base path as written; resolve normalises it */
  matchPath: string
  matchSource?: string
  /** match.when as written, and where */
  when?: { value: unknown; path: PathSegment[] }
  action: ActionKind
  wakeMode: WakeMode
  /** template source and the config path it came from */
  templates: Partial<Record<TemplateField, { text: string; path: PathSegment[] }>>
  agentId?: string
  deliver: boolean
  channel: string
  model?: string
  thinking?: string
  timeoutSeconds?: number
  workflow?: string
  maxBodyBytes?: number
  /** fan-out: the forEach reference as written, and where */
  forEach?: { text: string; path: PathSegment[] }
  maxItems?: number
  waitForCompletion?: boolean
  waitTimeoutSeconds?: number
  allowUnsafeExternalContent: boolean
  transform?: { module: string; exportName: string; timeoutMs: number; env: string[]; path: PathSegment[] }
  notify?: 'silent' | 'done' | 'state'
  /** the signature block as written, and where */
  signature?: { value: SignatureConfig; path: PathSegment[] }
}

export interface ExpandedConfig {
  routes: RouteSpec[]
  agents: AgentConfig[]
  /** true when the config declared no agents and the built-in default was supplied */
  implicitAgent: boolean
}

export const DEFAULT_AGENT: AgentConfig = { id: 'main', default: true, model: 'builtin/echo', heartbeat: { every: '30m' } }
export const DEFAULT_TRANSFORM_TIMEOUT_MS = 2000

export function expandConfig(config: HooksConfig, loaded: LoadedConfig, bag: DiagnosticBag): ExpandedConfig {
  const routes: RouteSpec[] = []
  const mappings = config.hooks.mappings ?? []
  // The fallback id counts mappings as the file does, also when validate left some out.
  mappings.forEach((m, i) => routes.push(fromMapping(m, ['hooks', 'mappings', i], `mapping-${Number(loaded.sourcePath(['hooks', 'mappings', i])[2]) + 1}`)))

  const agents = config.agents && config.agents.length > 0 ? config.agents : [DEFAULT_AGENT]
  ;(config.agents ?? []).forEach((agent, a) => {
    const names = new Map<string, number>()
    ;(agent.triggers ?? []).forEach((t, i) => {
      const at: PathSegment[] = ['agents', a, 'triggers', i]
      // A Trigger's id (and so its run history) comes from its name, so two of one agent may not share one.
      const clash = names.get(slug(t.name))
      if (clash !== undefined) {
        bag.error('DEFINITION_DUPLICATE_NAME', `agent "${agent.id}" has two Triggers named "${t.name}" (the other is at line ${loaded.locate(['agents', a, 'triggers', clash]).line})`, loaded.locate([...at, 'name']), 'give each Trigger a name of its own')
        return
      }
      names.set(slug(t.name), i)
      // A disabled Trigger stays in the file, checked by the schema, and serves nothing.
      if (t.enabled === false) return
      const templates: RouteSpec['templates'] = {}
      if (t.prompt !== undefined) templates[t.target === 'wake' ? 'text' : 'message'] = { text: t.prompt, path: [...at, 'prompt'] }
      if (t.to !== undefined) templates.to = { text: t.to, path: [...at, 'to'] }
      routes.push({
        id: `trigger:${agent.id}:${slug(t.name)}`,
        definitionKind: 'trigger',
        configPath: at,
        matchPath: t.path,
        action: t.target,
        wakeMode: t.timing ?? 'now',
        templates,
        agentId: agent.id,
        deliver: t.delivery === 'deliver',
        channel: t.channel ?? 'last',
        ...(t.timeoutSeconds !== undefined ? { timeoutSeconds: t.timeoutSeconds } : {}),
        ...(t.workflow !== undefined ? { workflow: t.workflow } : {}),
        allowUnsafeExternalContent: false,
        notify: t.notify ?? 'done',
      })
    })
  })

  ;(config.hooks.presets ?? []).forEach((name, i) => {
    const preset = presets.get(name)
    const at: PathSegment[] = ['hooks', 'presets', i]
    if (!preset) {
      const guess = closest(name, presets.keys())
      bag.error('PRESET_UNKNOWN', `unknown preset "${name}"`, loaded.locate(at), guess ? `did you mean "${guess}"?` : `available presets: ${[...presets.keys()].join(', ')}`)
      return
    }
    const spec = fromMapping(preset.mapping(config), at, `preset:${name}`)
    // Preset templates are ours: their errors would point at the presets entry.
    for (const t of Object.values(spec.templates)) t.path = at
    if (spec.forEach) spec.forEach.path = at
    spec.preset = name
    routes.push(spec)
  })

  return { routes, agents, implicitAgent: agents[0] === DEFAULT_AGENT }
}

function fromMapping(m: MappingConfig, at: PathSegment[], fallbackId: string): RouteSpec {
  const templates: RouteSpec['templates'] = {}
  const addTemplate = (field: TemplateField, key: keyof MappingConfig) => {
    const v = m[key]
    if (typeof v === 'string') templates[field] = { text: v, path: [...at, key] }
  }
  addTemplate('text', 'textTemplate')
  addTemplate('message', 'messageTemplate')
  addTemplate('name', 'name')
  addTemplate('sessionKey', 'sessionKey')
  addTemplate('to', 'to')
  const spec: RouteSpec = {
    id: m.id ?? fallbackId,
    definitionKind: 'hook',
    configPath: at,
    matchPath: m.match.path,
    action: m.action,
    wakeMode: m.wakeMode ?? 'now',
    templates,
    deliver: m.deliver ?? true,
    channel: m.channel ?? 'last',
    allowUnsafeExternalContent: m.allowUnsafeExternalContent ?? false,
  }
  if (m.match.source !== undefined) spec.matchSource = m.match.source
  if (m.match.when !== undefined) spec.when = { value: m.match.when, path: [...at, 'match', 'when'] }
  if (m.agentId !== undefined) spec.agentId = m.agentId
  if (m.model !== undefined) spec.model = m.model
  if (m.thinking !== undefined) spec.thinking = m.thinking
  if (m.timeoutSeconds !== undefined) spec.timeoutSeconds = m.timeoutSeconds
  if (m.workflow !== undefined) spec.workflow = m.workflow
  if (m.maxBodyBytes !== undefined) spec.maxBodyBytes = m.maxBodyBytes
  if (m.forEach !== undefined) spec.forEach = { text: m.forEach, path: [...at, 'forEach'] }
  if (m.maxItems !== undefined) spec.maxItems = m.maxItems
  if (m.waitForCompletion !== undefined) spec.waitForCompletion = m.waitForCompletion
  if (m.waitTimeoutSeconds !== undefined) spec.waitTimeoutSeconds = m.waitTimeoutSeconds
  if (m.signature !== undefined) spec.signature = { value: m.signature, path: [...at, 'signature'] }
  if (m.transform) {
    spec.transform = {
      module: m.transform.module,
      exportName: m.transform.export ?? 'default',
      timeoutMs: m.transform.timeoutMs ?? DEFAULT_TRANSFORM_TIMEOUT_MS,
      env: m.transform.env ?? [],
      path: [...at, 'transform', 'module'],
    }
  }
  return spec
}

/** the id part made from a Trigger's or Task's name: `Deploy hook` → `deploy-hook` */
export function slug(name: string, fallback = 'trigger'): string {
  return name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '') || fallback
}
