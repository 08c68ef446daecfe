// Phase 5, compile: turns every template of every route (and of every workflow step) into JS
// source for a render function, every match.when into a predicate (conditions.ts, its patterns checked
// as RE2 by regex-safety.ts), reporting template mistakes at their line and column in hooks.yaml,
// and holding a mapping's sessionKey template to the session-key prefixes as far as its text can tell.
import { closest, type DiagnosticBag, type Location } from './diagnostics.js'
import type { TemplateField } from './expand.js'
import type { LoadedConfig, PathSegment } from './load.js'
import type { ResolvedConfig, ResolvedRoute } from './resolved.js'
import { needsStep } from './resolve-workflows.js'
import type { WorkflowConfig } from './schema.js'
import { compileTemplate, parseReference, type CompiledTemplate, type TemplateOptions } from './templates.js'
import { compileCondition, ConditionPool, type CompiledCondition } from './conditions.js'
import { dotSegmentIn } from '../runtime/bundle/step-url.js'

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

/** The templated fields of a workflow step. */
export type StepField = 'text' | 'message' | 'url' | 'body' | 'to' | 'if'

export interface CompiledWorkflowStep {
  id: string
  render: Partial<Record<StepField, string>>
  /** http: header name (lower case) → render source; secret headers are not here */
  headers: Record<string, string>
  /** http: the url's literal text before its first placeholder (all of it when constant): the scope every call stays in */
  urlScope?: string
}

export interface CompiledConfig {
  routes: CompiledRoute[]
  /** workflow id → step id → render sources */
  workflowSteps: Map<string, CompiledWorkflowStep[]>
  /** the regular expressions and constants every match.when predicate shares */
  conditions: ConditionPool
}

export function compileTemplates(resolved: ResolvedConfig, loaded: LoadedConfig, bag: DiagnosticBag): CompiledConfig {
  const one = (text: string, path: PathSegment[], check?: (t: CompiledTemplate) => void, options?: TemplateOptions): string | undefined => {
    const result = compileTemplate(text, options)
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
      const code = one(t.text, t.path, check, { item: fansOut })
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
    workflowSteps.set(wf.id, wf.steps.map((step, s) => compileStep(wf, w, step, s, loaded, bag, one)))
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

type CompileOne = (text: string, path: PathSegment[], check?: (t: CompiledTemplate) => void, options?: TemplateOptions) => string | undefined
type StepConfig = WorkflowConfig['steps'][number]

/**
 * A step's templates read the trigger's request and `{{steps.<id>.output…}}` of the steps it needs,
 * directly or through other steps (either way that output exists before the step runs).
 */
function compileStep(wf: WorkflowConfig, w: number, step: StepConfig, s: number, loaded: LoadedConfig, bag: DiagnosticBag, one: CompileOne): CompiledWorkflowStep {
  const at: PathSegment[] = ['workflows', w, 'steps', s]
  const ids = new Set(wf.steps.map((x) => x.id))
  const options: TemplateOptions = {
    steps: {
      check(ref) {
        if (!ids.has(ref)) {
          const guess = closest(ref, [...ids].filter((id) => id !== step.id))
          return { code: 'WORKFLOW_STEP_REF_UNKNOWN', message: `step "${ref}" is not a step of workflow "${wf.id}"`, hint: guess !== undefined ? `did you mean steps.${guess}?` : `the steps are: ${[...ids].join(', ')}` }
        }
        if (ref === step.id || !needsStep(wf, step.id, ref)) return { code: 'WORKFLOW_STEP_REF_NOT_NEEDED', message: `step "${step.id}" reads the output of step "${ref}" but does not need it`, hint: ref === step.id ? 'a step cannot read its own output' : `add needs: [${ref}] to step "${step.id}"` }
        return undefined
      },
    },
  }
  const render: CompiledWorkflowStep['render'] = {}
  const headers: Record<string, string> = {}
  let urlScope: string | undefined
  const add = (field: StepField, key: string, text: string | undefined, extra: Partial<TemplateOptions> = {}, check?: (t: CompiledTemplate) => void) => {
    if (text === undefined) return
    const code = one(text, [...at, key], check, { ...options, ...extra })
    if (code !== undefined) render[field] = code
  }
  if (step.action === 'agent') add('message', 'messageTemplate', step.messageTemplate ?? DEFAULT_TEMPLATE)
  if (step.action === 'wake' || step.action === 'deliver') add('text', 'textTemplate', step.textTemplate ?? DEFAULT_TEMPLATE)
  if (step.action === 'deliver') add('to', 'to', step.to)
  if (step.action === 'http') {
    add('url', 'url', step.url, { encodeUriComponents: true }, (t) => {
      if (checkStepUrl(t, step.url!, loaded.locate([...at, 'url']), bag)) urlScope = t.lead
    })
    add('body', 'body', step.body)
    for (const [name, value] of Object.entries(step.headers ?? {})) {
      if (typeof value !== 'string' || /^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(value)) continue // a secret: resolve.ts has it
      const code = one(value, [...at, 'headers', name], undefined, options)
      if (code !== undefined) headers[name.toLowerCase()] = code
    }
  }
  add('if', 'if', step.if)
  return urlScope === undefined ? { id: step.id, render, headers } : { id: step.id, render, headers, urlScope }
}

/**
 * The scheme and host of an http step are written out: a template may only stand after the first
 * "/" or "?" of the path, so no payload can send the call (and its secret headers) elsewhere. The
 * literal path holds no dot-segment: the runtime refuses any (a rendered value must never change
 * the URL's structure), so one written in the config would fail every call. True when the url is fine.
 */
function checkStepUrl(t: CompiledTemplate, url: string, where: Location, bag: DiagnosticBag): boolean {
  const m = /^(https?):\/\/([^/?#\s]+)([/?#]|$)/i.exec(t.lead)
  if (!m || (!t.constant && m[3] === '')) {
    if (/^https?:\/\//i.test(t.lead) || (!t.constant && /^h?t?t?p?s?:?\/?\/?$/i.test(t.lead))) {
      bag.error('WORKFLOW_HTTP_HOST_TEMPLATED', `url "${url}" has a template before its path: the scheme and host must be written out`, where, 'write the host, e.g. https://api.example.com/{{payload.path}}; only the path and query may hold templates')
    } else {
      bag.error('WORKFLOW_HTTP_URL_INVALID', `url "${url}" is not an absolute http or https URL`, where, 'write it like https://api.example.com/items')
    }
    return false
  }
  try {
    new URL(`${m[1]}://${m[2]}/`)
  } catch {
    bag.error('WORKFLOW_HTTP_URL_INVALID', `url "${url}" does not have a valid host`, where)
    return false
  }
  // each placeholder stands for a value that is never empty of meaning here: "x" keeps segments apart
  if (dotSegmentIn(url.replace(/\{\{[^]*?\}\}/g, 'x'))) {
    bag.error('WORKFLOW_HTTP_URL_INVALID', `url "${url}" has a "." or ".." segment in its path`, where, 'write the path it stands for, without dot-segments')
    return false
  }
  return true
}
