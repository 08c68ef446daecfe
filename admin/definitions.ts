// Trigger and Task definitions as the operator page and `hookgate trigger|task` edit them: under
// their agent in hooks.yaml, found by name (their ids are made from it), written field by field in
// the spec's order. Nothing here checks a value: the compiler does, on the edited text, so the page
// and the command line give the very findings `hookgate compile` would. A Task's next firings, as
// the page and `hookgate task` show them, are worked out here too.
import { isMap, isScalar, isSeq, parseDocument, type Document, type YAMLMap, type YAMLSeq } from 'yaml'
import { DEFAULT_AGENT, slug } from '../compiler/expand.js'
import { documentValue, type PathSegment } from '../compiler/load.js'
import { preservingEdit } from './yaml-edit.js'
import { compileCron, compileEvery } from '../compiler/cron.js'
import { slotClock } from '../runtime/scheduler/cron.js'

export type DefinitionKind = 'trigger' | 'task'

/** The spec's Trigger fields (Name, Path, Run target, Run timing, Workflow target, Delivery, Prompt template, Reply channel/target, Timeout, Notify), in its order. */
export const TRIGGER_FIELDS = ['name', 'path', 'target', 'timing', 'workflow', 'delivery', 'prompt', 'channel', 'to', 'timeoutSeconds', 'notify', 'enabled'] as const
export const TASK_FIELDS = ['name', 'schedule', 'every', 'timezone', 'catchUp', 'target', 'workflow', 'prompt', 'timeoutSeconds', 'notify', 'enabled'] as const

export type Definition = Record<string, unknown>

export class EditError extends Error {
  override name = 'EditError'
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message)
  }
}

/** One edit: create (`original` null), replace (`definition` set) or delete (`definition` null). */
export interface Edit {
  kind: DefinitionKind
  agentId: string
  /** the name of the definition being replaced or deleted; null creates one */
  original: string | null
  definition: Definition | null
}

export interface EditOutcome {
  text: string
  /** where the definition now stands (null after a delete) */
  at: PathSegment[] | null
  /** hooks.token was missing and is now `{ generate: true }` */
  tokenAdded: boolean
}

export function fieldsOf(kind: DefinitionKind): readonly string[] {
  return kind === 'trigger' ? TRIGGER_FIELDS : TASK_FIELDS
}

/** The id a definition compiles to: `trigger:main:deploy-finished`, `task:main:nightly`. */
export function definitionId(kind: DefinitionKind, agentId: string, name: string): string {
  return `${kind}:${agentId}:${slug(name, kind)}`
}

/**
 * A definition as sent by the page or built from flags: only its known fields, in order, with
 * empty values left out (an empty form field means "not set"). Values keep their types: a wrong
 * one is for the compiler to name.
 */
export function cleanDefinition(kind: DefinitionKind, input: unknown): Definition {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new EditError(400, 'definition_invalid', 'the definition must be a JSON object')
  const source = input as Record<string, unknown>
  const unknown = Object.keys(source).filter((k) => !fieldsOf(kind).includes(k))
  if (unknown.length > 0) throw new EditError(400, 'definition_invalid', `a ${kind === 'trigger' ? 'Trigger' : 'Task'} has no field ${unknown.map((k) => `"${k}"`).join(', ')}; its fields are ${fieldsOf(kind).join(', ')}`)
  const out: Definition = {}
  for (const key of fieldsOf(kind)) {
    let v = source[key]
    if (typeof v === 'string' && key !== 'prompt') v = v.trim()
    if (v === undefined || v === null || v === '') continue
    // enabled is written only when it is false: true is the default
    if (key === 'enabled' && v === true) continue
    out[key] = v
  }
  return out
}

/** Applies one edit to the text of hooks.yaml (plus hooks.enabled and a token reference when a definition is written). */
export function applyEdit(text: string, edit: Edit): EditOutcome {
  let at: PathSegment[] | null = null
  let tokenAdded = false
  const listKey = edit.kind === 'trigger' ? 'triggers' : 'tasks'
  const out = preservingEdit(text, (doc) => {
    const agents = agentSeq(doc, edit.agentId, edit.definition !== null)
    const a = agents.items.findIndex((item) => isMap(item) && String(item.get('id')) === edit.agentId)
    if (a < 0) throw new EditError(404, 'agent_unknown', `no agent "${edit.agentId}" is declared under agents`)
    const agent = agents.items[a] as YAMLMap
    let list = agent.get(listKey, true) as YAMLSeq | undefined
    if (list !== undefined && !isSeq(list)) throw new EditError(422, 'config_invalid', `agents[${a}].${listKey} is not a list`)
    const index = edit.original === null || !list ? -1 : list.items.findIndex((item) => isMap(item) && sameName(item.get('name'), edit.original!))
    if (edit.original !== null && index < 0) throw new EditError(404, 'definition_unknown', `agent "${edit.agentId}" has no ${edit.kind === 'trigger' ? 'Trigger' : 'Task'} named "${edit.original}"`)
    if (edit.definition === null) {
      list!.items.splice(index, 1)
      if (list!.items.length === 0) agent.delete(listKey)
      return
    }
    if (!list) {
      list = doc.createNode([]) as YAMLSeq
      agent.set(listKey, list)
    }
    if (index < 0) {
      list.items.push(doc.createNode(edit.definition) as YAMLMap)
      at = ['agents', a, listKey, list.items.length - 1]
    } else {
      const node = list.items[index] as YAMLMap
      const fields = fieldsOf(edit.kind)
      for (const [f, key] of fields.entries()) {
        if (!(key in edit.definition)) node.delete(key)
        else if (node.has(key)) node.set(key, edit.definition[key])
        else {
          // a field the definition did not have goes where the spec's order puts it, after the
          // nearest field before it, not at the end
          const after = node.items.findLastIndex((p) => { const i = fields.indexOf(keyName(p.key)); return i >= 0 && i < f })
          node.items.splice(after + 1, 0, doc.createPair(key, edit.definition[key]))
        }
      }
      at = ['agents', a, listKey, index]
    }
    // The spec's UI flow: saving a Trigger turns ingress on and makes sure there is a token.
    if (edit.kind === 'trigger') {
      if (doc.getIn(['hooks', 'enabled']) !== true) doc.setIn(['hooks', 'enabled'], true)
    }
    if (!doc.hasIn(['hooks', 'token'])) {
      const ref = doc.createNode({ generate: true })
      ref.flow = true
      doc.setIn(['hooks', 'token'], ref)
      tokenAdded = true
    }
  })
  return { text: out, at, tokenAdded }
}

/** The agents list; a config that declares none gets the built-in default agent written out when something is added to it. */
function agentSeq(doc: Document, agentId: string, adding: boolean): YAMLSeq {
  const agents = doc.get('agents', true)
  if (agents !== undefined && agents !== null && !isSeq(agents)) throw new EditError(422, 'config_invalid', 'agents is not a list')
  if (agents && (agents as YAMLSeq).items.length > 0) return agents as YAMLSeq
  if (agentId !== DEFAULT_AGENT.id || !adding) throw new EditError(404, 'agent_unknown', `no agent "${agentId}" is declared under agents`)
  const seq = doc.createNode([{ id: DEFAULT_AGENT.id, default: true, model: DEFAULT_AGENT.model, heartbeat: { every: DEFAULT_AGENT.heartbeat!.every } }]) as YAMLSeq
  doc.set('agents', seq)
  return seq
}

function keyName(key: unknown): string {
  return String(isScalar(key) ? key.value : key)
}

/** Names match as ids do: `Deploy finished` and `deploy-finished` are the same definition. */
function sameName(value: unknown, name: string): boolean {
  return typeof value === 'string' && slug(value) === slug(name)
}

export interface AgentView {
  id: string
  default: boolean
  model: string
  /** declared in hooks.yaml, or the built-in default used when none is */
  implicit: boolean
  triggers: Definition[]
  tasks: Definition[]
}

/** hooks.yaml as plain data, or undefined when it is not valid YAML (an empty file is {}). */
export function configValue(text: string): Record<string, any> | undefined {
  const read = readConfigValue(text)
  return 'value' in read ? read.value : undefined
}

/** hooks.yaml as plain data, or why not: not YAML, or aliases that would expand past the compiler's limit. */
export function readConfigValue(text: string): { value: Record<string, any> } | { error: string } {
  const doc = parseDocument(text)
  if (doc.errors.length > 0) return { error: `not valid YAML: ${doc.errors[0]!.message.split('\n')[0]}` }
  // as the compiler reads it: an alias bomb is refused before it is expanded (compiler/load.ts)
  const read = documentValue(doc)
  if (!read.ok) return { error: read.message }
  return { value: (read.value ?? {}) as Record<string, any> }
}

/** The agents with their definitions as the file has them (tolerant of a file that does not compile); none for a file that is not YAML. */
export function listAgents(value: Record<string, any> | undefined): AgentView[] {
  if (value === undefined) return []
  const agents = Array.isArray(value?.agents) ? value!.agents : []
  const views: AgentView[] = []
  for (const raw of agents) {
    if (typeof raw !== 'object' || raw === null || typeof (raw as { id?: unknown }).id !== 'string') continue
    const a = raw as Record<string, unknown>
    const pick = (list: unknown, kind: DefinitionKind) => (Array.isArray(list) ? list : []).filter((d): d is Definition => typeof d === 'object' && d !== null && typeof (d as Definition).name === 'string').map((d) => ({ ...d, id: definitionId(kind, String(a.id), d.name as string) }))
    views.push({ id: String(a.id), default: a.default === true || agents.length === 1, model: String(a.model ?? ''), implicit: false, triggers: pick(a.triggers, 'trigger'), tasks: pick(a.tasks, 'task') })
  }
  if (views.length === 0) views.push({ id: DEFAULT_AGENT.id, default: true, model: DEFAULT_AGENT.model, implicit: true, triggers: [], tasks: [] })
  return views
}

/** The next five slots of a Task as drafted, or [] while its schedule does not compile. */
export function nextFirings(def: Record<string, unknown>, count = 5, now = Date.now()): string[] {
  let clock
  if (typeof def.schedule === 'string' && def.every === undefined) {
    const cron = compileCron(def.schedule, typeof def.timezone === 'string' ? def.timezone : 'UTC')
    if (!cron.ok) return []
    try { clock = slotClock(cron.schedule) } catch { return [] }
  } else if (typeof def.every === 'string' && def.schedule === undefined) {
    const ms = compileEvery(def.every)
    if (typeof ms === 'string') return []
    clock = slotClock({ kind: 'every', everyMs: ms })
  } else {
    return []
  }
  const out: string[] = []
  try {
    for (let at = now, i = 0; i < count; i++) {
      at = clock.next(at)
      out.push(new Date(at).toISOString())
    }
  } catch {
    return []
  }
  return out
}
