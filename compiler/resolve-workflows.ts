// Workflows, resolved: ids unique, every step's needs known and free of cycles, and per step kind
// the fields it needs, its header secrets and its transform module.
import { hintFrom, type DiagnosticBag } from './diagnostics.js'
import type { LoadedConfig, PathSegment } from './load.js'
import type { WorkflowConfig } from './schema.js'
import type { LeftOut } from './validate.js'
import type { ResolvedStep, StepTransform } from './resolved.js'
import { ENV_REF, envNameOf, resolveSecret } from './resolve-secrets.js'
import { resolveTransformModule } from './resolve-paths.js'
import type { SecretSpec } from '../runtime/bundle/format.js'

export function checkWorkflows(workflows: WorkflowConfig[], agentIds: Set<string>, loaded: LoadedConfig, bag: DiagnosticBag, leftOut: LeftOut): void {
  const ids = new Set<string>()
  workflows.forEach((wf, w) => {
    if (ids.has(wf.id)) bag.error('WORKFLOW_DUPLICATE_ID', `workflow id "${wf.id}" is declared twice`, loaded.locate(['workflows', w, 'id']))
    ids.add(wf.id)
    const steps = new Map<string, number>()
    wf.steps.forEach((step, s) => {
      if (steps.has(step.id)) bag.error('WORKFLOW_DUPLICATE_ID', `step id "${step.id}" is used twice in workflow "${wf.id}"`, loaded.locate(['workflows', w, 'steps', s, 'id']))
      steps.set(step.id, s)
      if (step.agentId !== undefined && !agentIds.has(step.agentId) && !leftOut.mayDeclare('agents', step.agentId)) {
        bag.error('AGENT_UNKNOWN', `agentId "${step.agentId}" names no agent declared under agents`, loaded.locate(['workflows', w, 'steps', s, 'agentId']), hintFrom(step.agentId, agentIds))
      }
    })
    wf.steps.forEach((step, s) => {
      // A step may need neither itself nor one that already needs it (that would be a cycle).
      const needable = (id: string) => !needsStep(wf, id, step.id)
      ;(step.needs ?? []).forEach((need, n) => {
        if (!steps.has(need)) bag.error('WORKFLOW_STEP_UNKNOWN', `step "${step.id}" needs "${need}", which is not a step of workflow "${wf.id}"`, loaded.locate(['workflows', w, 'steps', s, 'needs', n]), hintFrom(need, new Set(steps.keys()), needable))
      })
    })
    const cycle = findCycle(wf)
    if (cycle) {
      const first = steps.get(cycle[0]!) ?? 0
      bag.error('WORKFLOW_CYCLE', `workflow "${wf.id}" has a dependency cycle: ${cycle.join(' → ')}`, loaded.locate(['workflows', w, 'steps', first, 'needs']))
    }
  })
}

/** Per step kind, the fields it needs, its header secrets and its transform module. */
export function resolveWorkflowSteps(workflows: WorkflowConfig[], transformsDir: string | undefined, channelIds: Set<string>, token: SecretSpec | undefined, loaded: LoadedConfig, bag: DiagnosticBag, leftOut: LeftOut): Map<string, ResolvedStep> {
  const out = new Map<string, ResolvedStep>()
  workflows.forEach((wf, w) => {
    wf.steps.forEach((step, s) => {
      const at: PathSegment[] = ['workflows', w, 'steps', s]
      const missing = (field: string, example: string) => bag.error('WORKFLOW_STEP_FIELD_MISSING', `step "${step.id}" of workflow "${wf.id}" has action ${step.action} but no ${field}`, loaded.locate([...at, 'action']), `add ${example}`)
      const resolved: ResolvedStep = { secretHeaders: {} }
      if (step.action === 'http') {
        if (step.url === undefined) missing('url', 'url: https://api.example.com/items/{{payload.id}}')
        for (const [name, value] of Object.entries(step.headers ?? {})) {
          // A header written as a reference is a secret, resolved at start; any other string is a template.
          if (typeof value === 'object' || ENV_REF.test(value)) {
            const spec = resolveSecret(value, [...at, 'headers', name], loaded, bag, envNameOf(name))
            if (spec) resolved.secretHeaders[name.toLowerCase()] = spec
          }
        }
      } else if (step.action === 'transform') {
        if (step.transform === undefined) missing('transform', 'transform: { module: enrich.ts }')
        else {
          const path: PathSegment[] = [...at, 'transform', 'module']
          const t: StepTransform = { id: `workflow:${wf.id}/${step.id}`, configPath: at, transform: { module: step.transform.module, exportName: step.transform.export ?? 'default', timeoutMs: step.transform.timeoutMs ?? (step.timeoutSeconds !== undefined ? Math.min(60_000, Math.ceil(step.timeoutSeconds * 1000)) : 2000), env: step.transform.env ?? [], path } }
          if (!transformsDir) {
            if (!leftOut.has(['hooks', 'transformsDir'])) bag.error('TRANSFORMS_DIR_REQUIRED', `step "${step.id}" of workflow "${wf.id}" has a transform but hooks.transformsDir is not set`, loaded.locate(path))
          } else {
            const file = resolveTransformModule(step.transform.module, transformsDir, path, loaded, bag)
            if (file) t.transformFile = file
          }
          const tokenEnv = token?.kind === 'env' ? token.name : undefined
          const leaked = t.transform.env.indexOf(tokenEnv ?? '')
          if (tokenEnv !== undefined && leaked >= 0) bag.error('TRANSFORM_ENV_SECRET', `transform of step "${step.id}" lists ${tokenEnv}, the variable that holds hooks.token`, loaded.locate([...at, 'transform', 'env', leaked]), 'a transform never needs the hook token: remove it from transform.env')
          resolved.transform = t
        }
      } else if (step.action === 'deliver') {
        if (step.channel === undefined) missing('channel', 'channel: <id of a channel under channels>')
        else if (!channelIds.has(step.channel) && !leftOut.mayDeclare('channels', step.channel)) {
          bag.error('CHANNEL_UNKNOWN', `channel "${step.channel}" is not declared under channels`, loaded.locate([...at, 'channel']), hintFrom(step.channel, channelIds))
        }
      }
      out.set(`${wf.id}\0${step.id}`, resolved)
    })
  })
  return out
}

/** True when step `from` is `target` or needs it, directly or through other steps. */
export function needsStep(wf: WorkflowConfig, from: string, target: string): boolean {
  const needs = new Map(wf.steps.map((s) => [s.id, s.needs ?? []]))
  const seen = new Set<string>()
  const stack = [from]
  while (stack.length > 0) {
    const id = stack.pop()!
    if (id === target) return true
    if (seen.has(id)) continue
    seen.add(id)
    stack.push(...(needs.get(id) ?? []))
  }
  return false
}

/** Depth-first search over `needs`; returns the cycle as step ids (first repeated at the end). */
function findCycle(wf: WorkflowConfig): string[] | undefined {
  const needs = new Map(wf.steps.map((s) => [s.id, s.needs ?? []]))
  const state = new Map<string, 'open' | 'done'>()
  const stack: string[] = []
  const visit = (id: string): string[] | undefined => {
    if (state.get(id) === 'done' || !needs.has(id)) return undefined
    if (state.get(id) === 'open') return [...stack.slice(stack.indexOf(id)), id]
    state.set(id, 'open')
    stack.push(id)
    for (const n of needs.get(id)!) {
      const c = visit(n)
      if (c) return c
    }
    stack.pop()
    state.set(id, 'done')
    return undefined
  }
  for (const s of wf.steps) {
    const c = visit(s.id)
    if (c) return c
  }
  return undefined
}
