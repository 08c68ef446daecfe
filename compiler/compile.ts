// Phase 5, compile: turns every template of every route (and of every workflow step) into JS
// source for a render function, every match.when into a predicate (conditions.ts), reporting template mistakes at their line and column in hooks.yaml,
// and holding a mapping's sessionKey template to the session-key prefixes as far as its text can tell.
import type { DiagnosticBag, Location } from './diagnostics.js'
import type { TemplateField } from './expand.js'
import type { LoadedConfig, PathSegment } from './load.js'
import type { ResolvedConfig, ResolvedRoute } from './resolve.js'
import { compileTemplate, parseReference, type CompiledTemplate } from './templates.js'
import { compileCondition, ConditionPool, type CompiledCondition } from './conditions.js'

/** What a templated text becomes when the config gives no template. */
export const DEFAULT_TEMPLATE = 'Webhook {{path}} received:\n{{payload}}'

export interface CompiledRoute {
  route: ResolvedRoute
  /** JS source of `(c, h) => string` per templated field */
  render: Partial<Record<TemplateField, string>>
  when?: CompiledCondition
  /** forEach: the payload path whose array the mapping fans out over */
  forEach?: Array<string | number>
}

export interface CompiledWorkflowStep {
  id: string
  render: { text?: string; message?: string }
}

export interface CompiledConfig {
  routes: CompiledRoute[]
  /** workflow id → step id → render sources */
  workflowSteps: Map<string, CompiledWorkflowStep[]>
  /** the regular expressions and constants every match.when predicate shares */
  conditions: ConditionPool
}

export function compileTemplates(resolved: ResolvedConfig, loaded: LoadedConfig, bag: DiagnosticBag): CompiledConfig {
  const one = (text: string, path: PathSegment[], check?: (t: CompiledTemplate) => void, item = false): string | undefined => {
    const result = compileTemplate(text, { item })
    if (result.ok) {
      check?.(result.template)
      return result.template.code
    }
    for (const e of result.errors) {
      const where = loaded.locateText(path, text, e.offset, text.slice(e.offset, e.offset + Math.max(1, e.length)))
      bag.error(e.code, e.message, where, e.hint)
    }
    return undefined
  }

  const conditions = new ConditionPool()
  const routes = resolved.routes.map((route) => {
    const render: CompiledRoute['render'] = {}
    // {{item}} and {{index}} exist only where a request can fan out into several runs.
    const fansOut = route.forEach !== undefined || route.transform !== undefined
    for (const [field, t] of Object.entries(route.templates) as Array<[TemplateField, { text: string; path: PathSegment[] }]>) {
      const check = field === 'sessionKey' && route.action === 'agent' ? (c: CompiledTemplate) => checkSessionKeyTemplate(c, resolved.policy.allowedSessionKeyPrefixes, loaded.locate(t.path), bag) : undefined
      const code = one(t.text, t.path, check, fansOut)
      if (code !== undefined) render[field] = code
    }
    const mainField: TemplateField = route.action === 'wake' ? 'text' : 'message'
    if (route.templates[mainField] === undefined) render[mainField] = one(DEFAULT_TEMPLATE, route.configPath)!
    const when = route.when && compileCondition(route.when.value, route.when.path, loaded, bag, conditions)
    const compiled: CompiledRoute = when ? { route, render, when } : { route, render }
    if (route.forEach) {
      const keys = compileForEach(route.forEach.text, route.forEach.path, loaded, bag)
      if (keys) compiled.forEach = keys
    }
    return compiled
  })

  const workflowSteps = new Map<string, CompiledWorkflowStep[]>()
  resolved.workflows.forEach((wf, w) => {
    workflowSteps.set(wf.id, wf.steps.map((step, s) => {
      const at: PathSegment[] = ['workflows', w, 'steps', s]
      const field = step.action === 'wake' ? 'text' : 'message'
      const source = step.action === 'wake' ? step.textTemplate : step.messageTemplate
      const code = one(source ?? DEFAULT_TEMPLATE, [...at, step.action === 'wake' ? 'textTemplate' : 'messageTemplate'])
      return { id: step.id, render: code !== undefined ? { [field]: code } : {} }
    }))
  })
  return { routes, workflowSteps, conditions }
}

/**
 * forEach names an array, not text: exactly one `{{payload…}}` reference, whose keys the runtime
 * follows to the array (a value that is not an array is refused per request with 400).
 */
function compileForEach(text: string, path: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag): Array<string | number> | undefined {
  const inner = /^\s*\{\{\s*([^{}]*?)\s*\}\}\s*$/.exec(text)
  const hint = 'write one reference to an array in the payload, e.g. forEach: "{{payload.messages}}"'
  if (!inner) {
    bag.error('FOR_EACH_INVALID', 'forEach must be a single {{…}} reference to an array, with no text around it', loaded.locate(path), hint)
    return undefined
  }
  const parsed = parseReference(inner[1]!)
  if (!parsed.ok) {
    const e = parsed.errors[0]!
    bag.error(e.code, e.message, loaded.locate(path), e.hint)
    return undefined
  }
  if (parsed.reference.root !== 'payload' && parsed.reference.root !== 'body') {
    bag.error('FOR_EACH_INVALID', `forEach reads the payload, not ${parsed.reference.root}`, loaded.locate(path), hint)
    return undefined
  }
  return parsed.reference.keys
}

/**
 * Every key a template renders starts with its literal lead. A constant key outside the prefixes,
 * or a lead that no allowed prefix can start with, would have every request refused at run time.
 * A lead that is itself a beginning of a prefix (e.g. "hook" for "hook:") is left to the runtime.
 */
function checkSessionKeyTemplate(t: CompiledTemplate, prefixes: string[], at: Location, bag: DiagnosticBag): void {
  if (prefixes.length === 0 || prefixes.some((p) => t.lead.startsWith(p) || (!t.constant && p.startsWith(t.lead)))) return
  const allowed = prefixes.map((p) => JSON.stringify(p)).join(', ')
  if (t.constant) bag.error('SESSION_KEY_PREFIX', `sessionKey "${t.lead}" does not start with any of hooks.allowedSessionKeyPrefixes (${allowed})`, at)
  else bag.error('SESSION_KEY_PREFIX', `every key the sessionKey template renders starts with "${t.lead}", which starts with none of hooks.allowedSessionKeyPrefixes (${allowed})`, at, `start the template with an allowed prefix, e.g. ${prefixes[0]}{{payload.id}}`)
}
