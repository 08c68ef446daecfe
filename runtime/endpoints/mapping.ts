// The request-time half of a mapping: pick the route (match.source, then match.when), render its compiled
// templates, hand its transform (secret headers redacted) to the processes that run it, merge
// the transform's answer, and produce the action — or, when the mapping fans out (forEach, or a
// transform that returns an array), one action per element with the element as {{item}}. Used by
// the mapped endpoint's prepare (mapped.ts), which serve, `hookgate try` and the Test button share.
//
// Hot path: no file reads, no eval, no per-request allocation beyond the context and the action.
import { DEFAULT_MAX_ITEMS, type BundleRoute, type RenderContext, type TransformInput, type WakeMode } from '../bundle/format.js'
import { TransformFailed, TransformTimeout } from '../transforms/pool.js'
import { isSecretHeaderEntry, templateHelpers } from '../bundle/template-helpers.js'
import { ConditionTooCostly, beginConditionWork, conditionHelpers } from '../bundle/conditions.js'

/** What a mapping sees of a request: exactly what its templates can read. */
export type MappingInput = RenderContext

// The actions a request resolves into are the accepting side's contract (runtime/agents/acceptor.ts).
export type { AgentAction, HookAction, WakeAction, WorkflowAction } from '../agents/acceptor.js'
import type { AgentAction, HookAction, WakeAction, WorkflowAction } from '../agents/acceptor.js'

/** What a chosen route makes of a request. */
export type RouteOutcome =
  | { kind: 'action'; route: BundleRoute; action: HookAction; external: boolean }
  /** one action per element of the forEach array or of the array the transform returned, in order */
  | { kind: 'fan-out'; route: BundleRoute; actions: HookAction[]; items: unknown[]; external: boolean }
  /** `empty`: the mapping fans out and the array had no element */
  | { kind: 'skip'; route: BundleRoute; reason?: 'empty' }
  | { kind: 'error'; route: BundleRoute; status: 500; code: TransformErrorCode; error: string }
  /** the request's fan-out cannot be accepted: forEach found no array (400), or more elements than maxItems (413) */
  | { kind: 'error'; route: BundleRoute; status: 400 | 413; code: 'for_each_not_array' | 'too_many_items'; error: string }

/** A transform that failed: the run's row says how, the sender gets 500 with this code. */
export type TransformErrorCode = 'transform_failed' | 'transform_timeout' | 'transform_invalid_output'

/** Keys a transform may return, with the type each must have. */
const OVERRIDES: ReadonlyMap<string, 'string' | 'boolean' | 'number' | 'mode'> = new Map(Object.entries({
  text: 'string', message: 'string', name: 'string', agentId: 'string', sessionKey: 'string', mode: 'mode', wakeMode: 'mode',
  deliver: 'boolean', channel: 'string', to: 'string', model: 'string', thinking: 'string', timeoutSeconds: 'number',
} as const))

export type RouteSelection =
  | { kind: 'route'; route: BundleRoute }
  | { kind: 'filtered'; route: BundleRoute }
  | { kind: 'none' }
  /** the payload's text is too long for the patterns its match.when would run (413) */
  | { kind: 'too_costly'; route: BundleRoute; error: string }

const NONE: RouteSelection = { kind: 'none' }

/**
 * The first route on the name whose match.source fits the payload and whose match.when holds.
 * When routes fit the source but every `when` failed, the first of them is named as filtered.
 */
export function selectRoute(routes: readonly BundleRoute[], input: MappingInput): RouteSelection {
  const payload = input.payload
  const source = payload !== null && typeof payload === 'object' && Object.hasOwn(payload, 'source') ? (payload as Record<string, unknown>).source : undefined
  let filtered: BundleRoute | undefined
  beginConditionWork()
  for (const r of routes) {
    if (r.source !== null && r.source !== source) continue
    try {
      if (r.when === null || r.when.test(input, conditionHelpers)) return { kind: 'route', route: r }
    } catch (err) {
      if (err instanceof ConditionTooCostly) return { kind: 'too_costly', route: r, error: err.message }
      throw err
    }
    filtered ??= r
  }
  return filtered ? { kind: 'filtered', route: filtered } : NONE
}

/**
 * Runs a route's transform: always in a child process (runtime/transforms/pool.ts), for the server
 * and for `hookgate try` alike; transform code is never evaluated in the server's process.
 */
export type TransformRunner = (route: BundleRoute, input: TransformInput) => Promise<unknown>

/** The headers a transform sees: secret ones redacted exactly as `{{headers}}` shows them. */
function transformHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  for (const key of Object.keys(headers)) out[key] = isSecretHeaderEntry(key, headers[key]!) ? REDACTED : headers[key]!
  return out
}

const REDACTED = '[redacted]'

/** The chosen route's action(s) for the request: rendered, transformed, fanned out (selectRoute chose it). */
export async function applyRoute(route: BundleRoute, input: MappingInput, runTransform?: TransformRunner): Promise<RouteOutcome> {
  const ctx: RenderContext = Object.assign(Object.create(null), input)
  const render = (field: keyof BundleRoute['render']): string | null => {
    const fn = route.render[field]
    return fn ? fn(ctx, templateHelpers) : null
  }
  let override: unknown
  let items: unknown[] | undefined

  if (route.transform) {
    let out: unknown
    try {
      if (!runTransform) throw new TransformFailed('no transform processes')
      out = await runTransform(route, { payload: input.payload, headers: transformHeaders(input.headers), query: input.query, path: input.path })
    } catch (err) {
      if (err instanceof TransformTimeout) return { kind: 'error', route, status: 500, code: 'transform_timeout', error: `transform of mapping "${route.id}" did not finish within ${route.transform.timeoutMs} ms` }
      if (err instanceof TransformFailed && err.invalidOutput) return { kind: 'error', route, status: 500, code: 'transform_invalid_output', error: `transform of mapping "${route.id}" returned ${err.message}` }
      // the operator's to see (the run row, the error log line, `hookgate try`); the client gets a
      // generic sentence. The pool gives one bounded line: what the transform threw, or why its
      // process was stopped; never a stack.
      return { kind: 'error', route, status: 500, code: 'transform_failed', error: `transform of mapping "${route.id}" failed${err instanceof TransformFailed ? `: ${err.message}` : ''}` }
    }
    if (out === null) return { kind: 'skip', route }
    // An array is the elements to fan out over (it wins over forEach); an object overrides fields.
    if (Array.isArray(out)) items = out
    else override = out
  }
  if (items === undefined && route.forEach) {
    const found = templateHelpers.get(input.payload, route.forEach)
    if (!Array.isArray(found)) return { kind: 'error', route, status: 400, code: 'for_each_not_array', error: `mapping "${route.id}" runs once per element of ${forEachLabel(route.forEach)}, which is ${found === undefined ? 'missing' : `not an array but ${found === null ? 'null' : typeof found}`}` }
    items = found
  }
  const external = !route.allowUnsafeExternalContent
  if (items === undefined) {
    const action = withOverride(route, baseAction(route, render), override)
    return typeof action === 'string' ? invalidOutput(route, action) : { kind: 'action', route, action, external }
  }
  const maxItems = route.maxItems ?? DEFAULT_MAX_ITEMS
  if (items.length > maxItems) return { kind: 'error', route, status: 413, code: 'too_many_items', error: `mapping "${route.id}" would start ${items.length} runs; at most ${maxItems} (maxItems) are accepted per request` }
  if (items.length === 0) return { kind: 'skip', route, reason: 'empty' }
  const actions: HookAction[] = []
  for (let index = 0; index < items.length; index++) {
    ctx.item = items[index]
    ctx.index = index
    const action = withOverride(route, baseAction(route, render), override)
    if (typeof action === 'string') return invalidOutput(route, action)
    actions.push(action)
  }
  return { kind: 'fan-out', route, actions, items, external }
}

function withOverride(route: BundleRoute, action: HookAction, override: unknown): HookAction | string {
  return override === undefined ? action : mergeOverride(action, override)
}

function invalidOutput(route: BundleRoute, problem: string): RouteOutcome {
  return { kind: 'error', route, status: 500, code: 'transform_invalid_output', error: `transform of mapping "${route.id}" returned ${problem}` }
}

/** `payload.messages` for the keys ["messages"], as forEach was written (give or take `body`). */
function forEachLabel(keys: ReadonlyArray<string | number>): string {
  return 'payload' + keys.map((k) => (typeof k === 'number' ? `[${k}]` : `.${k}`)).join('')
}

function baseAction(route: BundleRoute, render: (f: keyof BundleRoute['render']) => string | null): HookAction {
  if (route.action === 'wake') {
    return { kind: 'wake', text: render('text') ?? '', mode: route.wakeMode, agentId: route.agentId }
  }
  if (route.action === 'workflow') {
    return { kind: 'workflow', workflow: route.workflow ?? '', name: render('name'), agentId: route.agentId, text: render('message') ?? '' }
  }
  return {
    kind: 'agent',
    message: render('message') ?? '',
    name: render('name'),
    agentId: route.agentId,
    sessionKey: render('sessionKey') || null,
    wakeMode: route.wakeMode,
    deliver: route.deliver,
    channel: route.channel,
    to: render('to') || null,
    model: route.model,
    thinking: route.thinking,
    timeoutSeconds: route.timeoutSeconds,
  }
}

/** Returns the merged action, or a sentence saying what is wrong with the transform's answer. */
function mergeOverride(action: HookAction, out: unknown): HookAction | string {
  if (typeof out !== 'object' || out === null || Array.isArray(out)) return `${typeof out}, not an object, an array, null or nothing`
  const next: Record<string, unknown> = { ...action }
  for (const key of Object.keys(out as object)) {
    const want = OVERRIDES.get(key)
    const value = (out as Record<string, unknown>)[key]
    if (!want) return `an unknown key "${key}" (allowed: ${[...OVERRIDES.keys()].join(', ')})`
    if (value === undefined) continue
    if (want === 'mode') {
      if (value !== 'now' && value !== 'next-heartbeat') return `${key} "${String(value)}" (must be now or next-heartbeat)`
      next[action.kind === 'wake' ? 'mode' : 'wakeMode'] = value
      continue
    }
    if (typeof value !== want) return `${key} of type ${typeof value} (must be ${want})`
    if (key === 'text' && action.kind === 'agent') next.message = value
    else if (key === 'message' && action.kind !== 'agent') next.text = value
    else if (key in next) next[key] = value
  }
  return next as unknown as HookAction
}
