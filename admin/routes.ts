// Every route the runtime serves, as the operator page lists them: the built-in /wake and /agent,
// the mappings and presets of hooks.yaml (read-only on the page: they are edited in the file) and
// the Triggers (edited on the page), each with its endpoint URL, action, agent and last run; and
// the name a run of each definition is shown by in the history (a Trigger's or Task's name, a
// mapping's id), so that the page never shows an id where a name is expected.
// The list comes from the compiled bundle's manifest (what is served, in the order it is matched;
// while hooks.yaml does not compile, the manifest of the bundle on disk), joined with hooks.yaml for
// what the manifest does not carry (a mapping's agent, workflow, signature).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { MANIFEST_FILE, type BundleManifest, type ManifestRoute } from '../runtime/bundle/format.js'
import { presets } from '../compiler/presets/index.js'
import type { AgentView } from './definitions.js'
import type { ConfigValue, Endpoint } from './endpoints.js'
import type { RunSummary } from './history.js'

export type RouteKind = 'built-in' | 'mapping' | 'preset' | 'trigger'

export interface RouteView {
  /** the definition id its runs carry (`github`, `preset:gmail`, `trigger:main:deploy-finished`, `wake`) */
  id: string
  kind: RouteKind
  /** what the page calls it: the mapping's id, the preset's name, the Trigger's name, /wake */
  title: string
  /** the name under the base path (`github`, `gmail`) */
  name: string
  url: string | null
  action: string
  /** the agent its runs go to; null for the built-ins (the request names it, else the default agent) */
  agentId: string | null
  workflow?: string
  /** set when the sender signs the body instead of sending the hook token (github, stripe, …) */
  signature?: string
  /** where it is declared in hooks.yaml */
  line?: number
  /** a Trigger: its name, for the link to its form */
  trigger?: { agentId: string; name: string }
  enabled: boolean
  lastRun: RunSummary | null
}

/**
 * The routes of a compiled config. `manifest` null: the config does not compile, and only the
 * built-ins are known. Disabled Triggers serve nothing (they are not in the manifest) and are not
 * listed here; the agent's own page lists them.
 */
export function routesOf(manifest: ManifestRoute[] | null, value: ConfigValue, agents: AgentView[], endpoint: (path: string) => Endpoint | null, last: Map<string, RunSummary>): RouteView[] {
  const defaultAgent = (agents.find((a) => a.default) ?? agents[0])?.id ?? null
  const url = (name: string) => endpoint(name)?.url ?? null
  const mappings = mappingsById(value)
  const out: RouteView[] = []
  if (value.hooks?.enabled === true) {
    for (const [id, action] of [['wake', 'wake'], ['agent', 'agent']] as const) {
      out.push({ id, kind: 'built-in', title: `/${id}`, name: id, url: url(id), action, agentId: null, enabled: true, lastRun: last.get(id) ?? null })
    }
  }
  for (const r of manifest ?? []) {
    const base = { id: r.id, name: r.name, url: url(r.name), action: r.action, line: r.line, enabled: true, lastRun: last.get(r.id) ?? null }
    if (r.definitionKind === 'trigger') {
      const owner = agents.find((a) => a.triggers.some((t) => t.id === r.id))
      const trigger = owner?.triggers.find((t) => t.id === r.id)
      out.push({ ...base, kind: 'trigger', title: String(trigger?.name ?? r.id), agentId: owner?.id ?? null, ...(typeof trigger?.workflow === 'string' ? { workflow: trigger.workflow } : {}), ...(owner && trigger ? { trigger: { agentId: owner.id, name: String(trigger.name) } } : {}) })
      continue
    }
    const found = mappings.get(r.id)
    const m = found?.mapping ?? {}
    out.push({
      ...base,
      kind: found?.preset ? 'preset' : 'mapping',
      title: found?.preset ?? r.id,
      agentId: typeof m.agentId === 'string' ? m.agentId : defaultAgent,
      ...(typeof m.workflow === 'string' ? { workflow: m.workflow } : {}),
      ...(typeof m.signature?.scheme === 'string' ? { signature: m.signature.scheme } : {}),
    })
  }
  return out
}

/**
 * The name a run of each definition id is shown by: a Trigger's or Task's name (a disabled one's
 * too: its earlier runs keep their name), a mapping's id, a preset's name, /wake and /agent. An id
 * hooks.yaml no longer has is not here (the page shows the id then). Read from hooks.yaml alone,
 * without compiling it: the history asks for it with every page of rows.
 */
export function definitionNames(value: ConfigValue, agents: AgentView[]): Map<string, string> {
  const names = new Map<string, string>([['wake', '/wake'], ['agent', '/agent']])
  for (const [id, m] of mappingsById(value)) names.set(id, m.preset ? `${m.preset} (preset)` : id)
  for (const a of agents) for (const d of [...a.triggers, ...a.tasks]) names.set(String(d.id), String(d.name))
  return names
}

/** The mappings of hooks.yaml and the presets it names, by the id their routes get (as compiler/expand.ts gives it). */
function mappingsById(value: ConfigValue): Map<string, { mapping: ConfigValue; preset?: string }> {
  const out = new Map<string, { mapping: ConfigValue; preset?: string }>()
  const list: unknown[] = Array.isArray(value.hooks?.mappings) ? value.hooks.mappings : []
  list.forEach((m, i) => {
    if (typeof m !== 'object' || m === null) return
    const mapping = m as ConfigValue
    out.set(typeof mapping.id === 'string' ? mapping.id : `mapping-${i + 1}`, { mapping })
  })
  const named: unknown[] = Array.isArray(value.hooks?.presets) ? value.hooks.presets : []
  for (const name of named) {
    const preset = typeof name === 'string' ? presets.get(name) : undefined
    if (!preset) continue
    let mapping: ConfigValue
    try { mapping = preset.mapping(value as never) as ConfigValue } catch { continue }
    out.set(typeof mapping.id === 'string' ? mapping.id : `preset:${name}`, { mapping, preset: name as string })
  }
  return out
}

/** A run's summary with the name of its definition in hooks.yaml (absent for an id the file no longer has). */
export function named<T extends Pick<RunSummary, 'definitionId'>>(row: T, names: Map<string, string>): T & { definitionName?: string } {
  const name = names.get(row.definitionId)
  return name === undefined ? row : { ...row, definitionName: name }
}

/** The manifest of the bundle in `outDir`: what the runtime serves while hooks.yaml does not compile. */
export function servedManifest(outDir: string): BundleManifest | null {
  try {
    return JSON.parse(readFileSync(join(outDir, MANIFEST_FILE), 'utf8')) as BundleManifest
  } catch {
    return null
  }
}
