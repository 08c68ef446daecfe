// Phase 5, compile: turns every template of every route (and of every workflow step) into JS
// source for a render function, reporting template mistakes at their line and column in hooks.yaml.
import type { DiagnosticBag } from './diagnostics.js'
import type { TemplateField } from './expand.js'
import type { LoadedConfig, PathSegment } from './load.js'
import type { ResolvedConfig, ResolvedRoute } from './resolve.js'
import { compileTemplate } from './templates.js'

/** What a templated text becomes when the config gives no template. */
export const DEFAULT_TEMPLATE = 'Webhook {{path}} received:\n{{payload}}'

export interface CompiledRoute {
  route: ResolvedRoute
  /** JS source of `(c, h) => string` per templated field */
  render: Partial<Record<TemplateField, string>>
}

export interface CompiledWorkflowStep {
  id: string
  render: { text?: string; message?: string }
}

export interface CompiledConfig {
  routes: CompiledRoute[]
  /** workflow id → step id → render sources */
  workflowSteps: Map<string, CompiledWorkflowStep[]>
}

export function compileTemplates(resolved: ResolvedConfig, loaded: LoadedConfig, bag: DiagnosticBag): CompiledConfig {
  const one = (text: string, path: PathSegment[]): string | undefined => {
    const result = compileTemplate(text)
    if (result.ok) return result.template.code
    for (const e of result.errors) {
      const where = loaded.locateText(path, text, e.offset, text.slice(e.offset, e.offset + Math.max(1, e.length)))
      bag.error(e.code, e.message, where, e.hint)
    }
    return undefined
  }

  const routes = resolved.routes.map((route) => {
    const render: CompiledRoute['render'] = {}
    for (const [field, t] of Object.entries(route.templates) as Array<[TemplateField, { text: string; path: PathSegment[] }]>) {
      const code = one(t.text, t.path)
      if (code !== undefined) render[field] = code
    }
    const mainField: TemplateField = route.action === 'wake' ? 'text' : 'message'
    if (route.templates[mainField] === undefined) render[mainField] = one(DEFAULT_TEMPLATE, route.configPath)!
    return { route, render }
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
  return { routes, workflowSteps }
}
