// Phase 4, resolve: every check the schema alone cannot make. Paths are normalised and held
// inside the config tree, references (agents, workflows, presets) are looked up, secrets become
// references the runtime resolves at start, and defaults for the server are filled in.
import { createHash } from 'node:crypto'
import { existsSync, realpathSync, statSync } from 'node:fs'
import { basename, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { closest, type DiagnosticBag, type Location } from './diagnostics.js'
import { slug, type ExpandedConfig, type RouteSpec } from './expand.js'
import type { LoadedConfig, PathSegment } from './load.js'
import type { HooksConfig, SecretRefConfig, TaskConfig, TokenRefConfig, WorkflowConfig } from './schema.js'
import { compileCron, compileEvery, isKnownTimeZone } from './cron.js'
import { LeftOut } from './validate.js'

import type { BundleChannel, BundleConfig, BundleProvider, BundleSchedule, BundleSignature, BundleStore, BundleTask, SecretSpec } from '../runtime/bundle/format.js'
import { DEFAULT_COMPACT_ABOVE_BYTES, DEFAULT_KEEP_HISTORY, DEFAULT_KEEP_REQUEST_BYTES } from '../runtime/store/open.js'
import { DEFAULT_MAX_PENDING_BYTES, DEFAULT_MAX_WAIT_SECONDS } from '../runtime/bundle/format.js'
import { hookName, normaliseBasePath } from '../runtime/bundle/hook-path.js'
import { resolveSignature } from './signatures.js'
import { resolveAgents, resolveChannels, resolveProviders, checkRouteModel } from './resolve-agents.js'
export type { SecretSpec }

export interface ResolvedRoute extends RouteSpec {
  /** normalised name under the base path, e.g. `github` or `a/b` */
  name: string
  location: Location
  /** absolute real path of the transform module */
  transformFile?: string
  /** the checked signature block: the route authenticates by it instead of the hook token */
  verifiedBy?: BundleSignature
}

export type ResolvedAgent = BundleConfig['agents'][number]

export type ResolvedTask = BundleTask

/** A transform that is not a mapping's: a workflow step's, keyed `workflow:<workflow id>/<step id>`. */
export interface StepTransform {
  id: string
  transform: { module: string; exportName: string; timeoutMs: number; env: string[]; path: PathSegment[] }
  configPath: PathSegment[]
  transformFile?: string
}

/** What resolve settles for one workflow step beyond its config: header secrets, its transform. */
export interface ResolvedStep {
  secretHeaders: Record<string, SecretSpec>
  transform?: StepTransform
}


export type ServerSettings = BundleConfig['server']

export interface ResolvedConfig {
  enabled: boolean
  basePath: string
  token?: SecretSpec
  policy: {
    /** null: any agent id; [] blocks explicit routing */
    allowedAgentIds: string[] | null
    allowRequestSessionKey: boolean
    defaultSessionKey: string | null
    allowedSessionKeyPrefixes: string[]
  }
  server: ServerSettings
  agents: ResolvedAgent[]
  providers: BundleProvider[]
  channels: BundleChannel[]
  defaultAgentId: string
  workflows: WorkflowConfig[]
  /** `<workflow id>\0<step id>` → what resolve settled for that step */
  steps: Map<string, ResolvedStep>
  tasks: ResolvedTask[]
  routes: ResolvedRoute[]
  transformsDir?: string
  gmail?: Record<string, unknown>
}

export const DEFAULT_SERVER: ServerSettings = {
  host: '127.0.0.1',
  port: 8787,
  maxBodyBytes: 262144,
  bodyTimeoutMs: 10_000,
  authFailures: { limit: 20, windowMs: 60_000, lockoutMs: 60_000, maxTrackedClients: 10_000 },
  trustedProxies: [],
  stateDir: '.hookgate',
  concurrency: 4,
  maxPendingRuns: 10_000,
  maxPendingBytes: DEFAULT_MAX_PENDING_BYTES,
  idempotencyWindowMs: 86_400_000,
  transformMemoryMiB: 128,
  history: { keepRuns: DEFAULT_KEEP_HISTORY, compactAboveBytes: DEFAULT_COMPACT_ABOVE_BYTES, keepRequestBytes: DEFAULT_KEEP_REQUEST_BYTES },
  maxWaitSeconds: DEFAULT_MAX_WAIT_SECONDS,
}

const MIB = 1024 * 1024

/** server.store's timings when hooks.yaml gives only the URL: the issue's 15 s + 5 s takeover bound, ten connections. */
export const DEFAULT_STORE = { hostTtlMs: 15_000, sweepMs: 5_000, maxConnections: 10 } as const
/** The variable the hint names: the one the README and `hookgate store migrate` use. */
const STORE_URL_ENV = 'HOOKGATE_STORE_URL'

const RESERVED_NAMES = new Set(['wake', 'agent'])
const ENV_REF = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/
const TRANSFORM_EXTENSIONS = ['.ts', '.mts', '.js', '.mjs']

/** `leftOut`: the parts validate left out of `config`; references into them are not reported. */
export function resolveConfig(config: HooksConfig, expanded: ExpandedConfig, loaded: LoadedConfig, bag: DiagnosticBag, leftOut = new LeftOut(undefined, [])): ResolvedConfig {
  const at = (path: PathSegment[], prefer: 'key' | 'value' = 'value') => loaded.locate(path, prefer)
  const hooks = config.hooks
  const enabled = hooks.enabled ?? false
  // Said at compile time: otherwise the first sign is a server refusing every hook.
  if (hooks.enabled === false) bag.warning('HOOKS_DISABLED', 'hooks.enabled is false: the server will answer 404 hooks_disabled on every hook path', at(['hooks', 'enabled']), 'to accept webhooks, write enabled: true')

  // token
  let token: SecretSpec | undefined
  if (hooks.token === undefined) {
    if (enabled && !leftOut.has(['hooks', 'token'])) bag.error('TOKEN_REQUIRED', 'hooks.token is required when hooks.enabled is true', at(['hooks', 'enabled']), 'write token: ${HOOKGATE_TOKEN} (or { file: path }, or { generate: true })')
  } else {
    token = resolveToken(hooks.token, ['hooks', 'token'], loaded, bag)
  }

  const basePath = resolveBasePath(hooks.path ?? '/hooks', loaded, bag)

  // session keys
  const prefixes = hooks.allowedSessionKeyPrefixes ?? []
  if (hooks.defaultSessionKey !== undefined && prefixes.length > 0 && !prefixes.some((p) => hooks.defaultSessionKey!.startsWith(p))) {
    bag.error('SESSION_KEY_PREFIX', `defaultSessionKey "${hooks.defaultSessionKey}" does not start with any of hooks.allowedSessionKeyPrefixes (${prefixes.map((p) => JSON.stringify(p)).join(', ')})`, at(['hooks', 'defaultSessionKey']))
  }

  // agents, the providers their models name, the channels replies go to
  const channels = resolveChannels(config, loaded, bag)
  const channelIds = new Set(channels.map((c) => c.id))
  const agents = resolveAgents(config, expanded, loaded, bag, channelIds, leftOut)
  const providers = resolveProviders(config, agents, loaded, bag, leftOut)
  const defaultAgentId = agents.find((a) => a.default)?.id ?? agents[0]!.id
  const agentIds = new Set(agents.map((a) => a.id))
  const allowed = hooks.allowedAgentIds === undefined || hooks.allowedAgentIds.includes('*') ? null : hooks.allowedAgentIds

  // workflows
  const workflows = config.workflows ?? []
  checkWorkflows(workflows, agentIds, loaded, bag, leftOut)
  const workflowIds = new Set(workflows.map((w) => w.id))

  // transforms directory
  const transformsDir = hooks.transformsDir !== undefined ? resolveTransformsDir(hooks.transformsDir, loaded, bag) : undefined

  // routes
  const routes: ResolvedRoute[] = []
  const seenIds = new Map<string, ResolvedRoute>()
  const byName = new Map<string, ResolvedRoute[]>()
  for (const spec of expanded.routes) {
    const location = at(spec.configPath)
    const matchPathAt = spec.preset ? spec.configPath : spec.definitionKind === 'trigger' ? [...spec.configPath, 'path'] : [...spec.configPath, 'match', 'path']
    const name = hookName(spec.matchPath)
    if (name === undefined) {
      // `a//b`: refused rather than served as `a/b`, since a sender given the path as written would get 404.
      const single = hookName(spec.matchPath.replace(/\/{2,}/g, '/'))
      if (single !== undefined) bag.error('MATCH_PATH_INVALID', `path "${spec.matchPath}" has an empty segment (//): ${basePath}/${spec.matchPath.replace(/^\/+|\/+$/g, '')} would answer 404`, at(matchPathAt), `write path: ${single}`)
      else bag.error('MATCH_PATH_INVALID', `path "${spec.matchPath}" is not a usable name under ${basePath}: use segments of letters, digits and - _ . ~ separated by /`, at(matchPathAt))
      continue
    }
    if (RESERVED_NAMES.has(name)) {
      bag.error('RESERVED_PATH', `${basePath}/${name} is reserved for the built-in ${name} endpoint and cannot be mapped`, at(matchPathAt), 'choose another path')
      continue
    }
    const route: ResolvedRoute = { ...spec, name, location }

    const clash = seenIds.get(route.id)
    if (clash) {
      bag.error('DUPLICATE_MAPPING_ID', `mapping id "${route.id}" is already used at line ${clash.location.line}`, spec.preset ? location : at([...spec.configPath, 'id']))
    } else {
      seenIds.set(route.id, route)
    }

    const earlier = byName.get(name) ?? []
    // A mapping with a match.when lets some requests through to the next one: neither a twin nor a catch-all.
    const identical = route.when ? undefined : earlier.find((e) => e.matchSource === route.matchSource && !e.when)
    const catchAll = earlier.find((e) => e.matchSource === undefined && !e.when)
    // The route is found before auth by its path alone: a signed path cannot be shared, or a
    // request could pick which of two credentials (the signature or the token) it is held to.
    const signedPeer = route.signature ? earlier[0] : earlier.find((e) => e.signature)
    if (signedPeer) {
      const [signed, other] = route.signature ? [route, signedPeer] : [signedPeer, route]
      bag.error('SIGNATURE_PATH_SHARED', `mapping "${signed.id}" verifies a sender signature, so no other mapping may match its path "${name}", but ${other.preset ? `the ${other.preset} preset's mapping` : `mapping "${other.id}"`} (line ${other === route ? location.line : other.location.line}) does`, at(matchPathAt), 'give the signed mapping a path of its own')
    } else if (identical && route.preset) {
      bag.warning('PRESET_SHADOWED', `the ${route.preset} preset's mapping on "${name}" is shadowed by mapping "${identical.id}" (line ${identical.location.line})`, location)
    } else if (identical) {
      bag.error('DUPLICATE_MATCH', `mapping "${route.id}" matches the same path "${name}"${route.matchSource ? ` and source "${route.matchSource}"` : ''} as mapping "${identical.id}" (line ${identical.location.line})`, at(matchPathAt))
    } else if (catchAll) {
      bag.warning('UNREACHABLE_MAPPING', `mapping "${route.id}" can never match: mapping "${catchAll.id}" (line ${catchAll.location.line}) already takes every request to "${name}"`, at(matchPathAt), 'move the mapping with match.source before the one without')
    }
    earlier.push(route)
    byName.set(name, earlier)
    if (route.signature) {
      const verifiedBy = resolveSignature(route.signature.value, route.signature.path, route.id, loaded, bag)
      if (verifiedBy) route.verifiedBy = verifiedBy
    }

    if (route.agentId !== undefined && spec.definitionKind === 'hook') {
      const agentAt = at([...spec.configPath, 'agentId'])
      if (!agentIds.has(route.agentId)) {
        // Only an agent the allowlist lets through would compile here.
        if (!leftOut.mayDeclare('agents', route.agentId)) bag.error('AGENT_UNKNOWN', `agentId "${route.agentId}" names no agent declared under agents`, agentAt, hintFrom(route.agentId, agentIds, (id) => allowed === null || allowed.includes(id)))
      } else if (allowed !== null && !allowed.includes(route.agentId)) {
        bag.error('AGENT_NOT_ALLOWED', `agentId "${route.agentId}" is not in hooks.allowedAgentIds, so every request to this mapping would be refused`, agentAt)
      }
    }

    if (route.action === 'workflow') {
      const wfAt = at([...spec.configPath, 'workflow'])
      if (route.workflow === undefined) {
        bag.error('WORKFLOW_MISSING', `mapping "${route.id}" has action workflow but no workflow target`, location, 'add workflow: <id of a workflow under workflows>')
      } else if (!workflowIds.has(route.workflow) && !leftOut.mayDeclare('workflows', route.workflow)) {
        bag.error('WORKFLOW_UNKNOWN', `workflow "${route.workflow}" is not declared under workflows`, wfAt, hintFrom(route.workflow, workflowIds))
      }
    }
    warnIgnoredFields(route, loaded, bag)

    if (route.transform) {
      if (!transformsDir) {
        // A transformsDir that was set but refused has its own error already.
        if (hooks.transformsDir === undefined && !leftOut.has(['hooks', 'transformsDir'])) bag.error('TRANSFORMS_DIR_REQUIRED', `mapping "${route.id}" has a transform but hooks.transformsDir is not set`, at(route.transform.path))
      } else {
        const file = resolveTransformModule(route.transform.module, transformsDir, route.transform.path, loaded, bag)
        if (file) route.transformFile = file
      }
      // The hook token authenticates every sender: no transform code gets to read it.
      const tokenEnv = token?.kind === 'env' ? token.name : undefined
      const leaked = route.transform.env.indexOf(tokenEnv ?? '')
      if (tokenEnv !== undefined && leaked >= 0) {
        bag.error('TRANSFORM_ENV_SECRET', `transform of mapping "${route.id}" lists ${tokenEnv}, the variable that holds hooks.token`, at([...spec.configPath, 'transform', 'env', leaked]), 'a transform never needs the hook token: remove it from transform.env')
      }
    }
    checkRouteModel(route, agents, defaultAgentId, loaded, bag, leftOut)
    if (route.channel !== 'last' && !channelIds.has(route.channel) && !leftOut.mayDeclare('channels', route.channel)) {
      bag.error('CHANNEL_UNKNOWN', `channel "${route.channel}" is not declared under channels`, at([...spec.configPath, 'channel']), hintFrom(route.channel, channelIds) ?? 'declare it under channels, or use channel: last')
    }
    routes.push(route)
  }

  const tasks = resolveTasks(config, loaded, bag, workflowIds, leftOut)

  const s = config.server ?? {}
  const server: ServerSettings = {
    host: s.host ?? DEFAULT_SERVER.host,
    port: s.port ?? DEFAULT_SERVER.port,
    maxBodyBytes: s.maxBodyBytes ?? DEFAULT_SERVER.maxBodyBytes,
    bodyTimeoutMs: s.bodyTimeoutSeconds !== undefined ? Math.round(s.bodyTimeoutSeconds * 1000) : DEFAULT_SERVER.bodyTimeoutMs,
    authFailures: {
      limit: s.authFailures?.limit ?? DEFAULT_SERVER.authFailures.limit,
      windowMs: s.authFailures?.windowSeconds !== undefined ? Math.round(s.authFailures.windowSeconds * 1000) : DEFAULT_SERVER.authFailures.windowMs,
      lockoutMs: s.authFailures?.lockoutSeconds !== undefined ? Math.round(s.authFailures.lockoutSeconds * 1000) : DEFAULT_SERVER.authFailures.lockoutMs,
      maxTrackedClients: s.authFailures?.maxTrackedClients ?? DEFAULT_SERVER.authFailures.maxTrackedClients,
    },
    trustedProxies: checkTrustedProxies(s.trustedProxies ?? [], loaded, bag),
    stateDir: s.stateDir ?? DEFAULT_SERVER.stateDir,
    concurrency: s.concurrency ?? DEFAULT_SERVER.concurrency,
    maxPendingRuns: s.maxPendingRuns ?? DEFAULT_SERVER.maxPendingRuns,
    maxPendingBytes: s.maxPendingBytes ?? DEFAULT_SERVER.maxPendingBytes!,
    idempotencyWindowMs: s.idempotencyWindowSeconds !== undefined ? Math.round(s.idempotencyWindowSeconds * 1000) : DEFAULT_SERVER.idempotencyWindowMs,
    transformMemoryMiB: s.transformMemoryMiB ?? DEFAULT_SERVER.transformMemoryMiB,
    history: {
      keepRuns: s.history?.keepRuns ?? DEFAULT_SERVER.history!.keepRuns,
      compactAboveBytes: s.history?.compactAboveMiB !== undefined ? s.history.compactAboveMiB * MIB : DEFAULT_SERVER.history!.compactAboveBytes,
      keepRequestBytes: s.history?.keepRequestMiB !== undefined ? s.history.keepRequestMiB * MIB : DEFAULT_SERVER.history!.keepRequestBytes,
    },
    maxWaitSeconds: s.maxWaitSeconds ?? DEFAULT_SERVER.maxWaitSeconds!,
  }
  const store = s.store !== undefined ? resolveStore(s.store, loaded, bag) : undefined
  if (store) server.store = store

  let gmail: Record<string, unknown> | undefined
  if (hooks.gmail) {
    const { pushToken, ...rest } = hooks.gmail
    gmail = { ...rest }
    if (pushToken !== undefined) gmail.pushToken = resolveSecret(pushToken, ['hooks', 'gmail', 'pushToken'], loaded, bag, 'GMAIL_PUSH_TOKEN')
  }

  const resolved: ResolvedConfig = {
    enabled,
    basePath,
    policy: {
      allowedAgentIds: allowed,
      allowRequestSessionKey: hooks.allowRequestSessionKey ?? false,
      defaultSessionKey: hooks.defaultSessionKey ?? null,
      allowedSessionKeyPrefixes: prefixes,
    },
    server,
    agents,
    providers,
    channels,
    defaultAgentId,
    workflows,
    steps: resolveWorkflowSteps(workflows, transformsDir, channelIds, token, loaded, bag, leftOut),
    tasks,
    routes,
  }
  if (token) resolved.token = token
  if (transformsDir) resolved.transformsDir = transformsDir
  if (gmail) resolved.gmail = gmail
  return resolved
}

function resolveToken(ref: TokenRefConfig, path: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag): SecretSpec | undefined {
  if (typeof ref === 'object' && 'generate' in ref) return { kind: 'generate' }
  if (typeof ref === 'string' && !ENV_REF.test(ref) && !ref.includes('${')) {
    const where = loaded.locate(path)
    bag.warning('TOKEN_LITERAL', 'hooks.token is written in the file; anyone who can read the repo can call the hooks', where, 'use token: ${HOOKGATE_TOKEN} or token: { file: /run/secrets/hook-token }; only a SHA-256 of the literal reaches the bundle')
    if (ref.length < 24) bag.warning('TOKEN_SHORT', `hooks.token has ${ref.length} characters; use at least 24 random ones`, where, 'e.g. openssl rand -hex 24')
    return { kind: 'digest', sha256: createHash('sha256').update(ref).digest('hex') }
  }
  return resolveSecret(ref, path, loaded, bag)
}

/**
 * server.store: the URL alone, or { url, … } with the timings. The URL is a reference like every
 * secret (a postgres:// URL carries the password), so a literal is an error rather than a value
 * copied into the bundle.
 */
function resolveStore(ref: NonNullable<NonNullable<HooksConfig['server']>['store']>, loaded: LoadedConfig, bag: DiagnosticBag): BundleStore | undefined {
  const settings = typeof ref === 'object' && 'url' in ref ? ref : undefined
  const url = settings ? resolveSecret(settings.url, ['server', 'store', 'url'], loaded, bag, STORE_URL_ENV) : resolveSecret(ref as SecretRefConfig, ['server', 'store'], loaded, bag, STORE_URL_ENV)
  if (!url) return undefined
  return {
    url,
    hostTtlMs: settings?.hostTtlSeconds !== undefined ? Math.round(settings.hostTtlSeconds * 1000) : DEFAULT_STORE.hostTtlMs,
    sweepMs: settings?.sweepSeconds !== undefined ? Math.round(settings.sweepSeconds * 1000) : DEFAULT_STORE.sweepMs,
    maxConnections: settings?.maxConnections ?? DEFAULT_STORE.maxConnections,
  }
}

/** `variable`: the environment variable the hint names for this secret (by default one named after its key). */
export function resolveSecret(ref: SecretRefConfig | { generate: true }, path: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag, variable = envNameOf(String(path[path.length - 1]))): SecretSpec | undefined {
  if (typeof ref === 'object') {
    if ('env' in ref) return { kind: 'env', name: ref.env }
    // Only where the schema allows it (a signing secret): made in the state directory at start.
    if ('generate' in ref) return { kind: 'generate' }
    return { kind: 'file', path: ref.file }
  }
  const m = ENV_REF.exec(ref)
  if (m) return { kind: 'env', name: m[1]! }
  if (ref.includes('${')) {
    bag.error('SECRET_REF_INVALID', `"${ref}" is not a secret reference: write \${NAME} with letters, digits and _ only, and nothing around it`, loaded.locate(path))
    return undefined
  }
  bag.error('SECRET_LITERAL', `${path.join('.')} must be a reference, not the secret itself`, loaded.locate(path), `write ${String(path[path.length - 1])}: \${${variable}} (or { file: path })`)
  return undefined
}

/** `pushToken` → `PUSH_TOKEN`, `ops-box` → `OPS_BOX`: an environment variable name for a hint. */
export function envNameOf(words: string): string {
  const name = words.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/[^A-Za-z0-9]+/g, '_').replace(/^_+|_+$/g, '').toUpperCase()
  return /^[A-Z_]/.test(name) ? name : `_${name}`
}

/** '/hooks/' → '/hooks'; '/' and paths with '?', '#', '..' or spaces are errors (runtime/bundle/hook-path.ts). */
function resolveBasePath(raw: string, loaded: LoadedConfig, bag: DiagnosticBag): string {
  const where = loaded.locate(['hooks', 'path'])
  const normal = normaliseBasePath(raw)
  if (normal === 'root') {
    bag.error('BASE_PATH_INVALID', `hooks.path "${raw}" would put the hooks at the root of the server`, where, 'use a path like /hooks')
    return '/hooks'
  }
  if (normal === 'invalid') {
    bag.error('BASE_PATH_INVALID', `hooks.path "${raw}" is not a plain URL path (no ?, #, %, spaces, "." or ".." segments)`, where)
    return '/hooks'
  }
  if (normal !== raw) bag.warning('BASE_PATH_NORMALISED', `hooks.path "${raw}" is served as "${normal}"`, where, `write path: ${normal}`)
  return normal
}

/** '30s' → 30, '5m' → 300, 'off' → null (the schema already checked the form). */
export function parseDurationSeconds(text: string): number | null {
  if (text === 'off') return null
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text)
  if (!m) return null
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd']
  return Number(m[1]) * unit
}

function checkWorkflows(workflows: WorkflowConfig[], agentIds: Set<string>, loaded: LoadedConfig, bag: DiagnosticBag, leftOut: LeftOut): void {
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
function resolveWorkflowSteps(workflows: WorkflowConfig[], transformsDir: string | undefined, channelIds: Set<string>, token: SecretSpec | undefined, loaded: LoadedConfig, bag: DiagnosticBag, leftOut: LeftOut): Map<string, ResolvedStep> {
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

function resolveTransformsDir(raw: string, loaded: LoadedConfig, bag: DiagnosticBag): string | undefined {
  const where = loaded.locate(['hooks', 'transformsDir'])
  const configRoot = realpathSync(loaded.dir)
  const wanted = resolve(loaded.dir, raw)
  if (!isInside(wanted, loaded.dir) && !isInside(wanted, configRoot)) {
    bag.error('TRANSFORMS_DIR_ESCAPE', `transformsDir "${raw}" is outside the directory of ${basename(loaded.absFile)}`, where, 'keep transforms in a folder beside hooks.yaml, e.g. transformsDir: transforms')
    return undefined
  }
  if (!existsSync(wanted) || !statSync(wanted).isDirectory()) {
    bag.error('TRANSFORMS_DIR_MISSING', `transformsDir "${raw}" does not exist or is not a directory`, where)
    return undefined
  }
  const real = realpathSync(wanted)
  if (!isInside(real, configRoot)) {
    bag.error('TRANSFORMS_DIR_ESCAPE', `transformsDir "${raw}" resolves through a symlink to a folder outside the directory of ${basename(loaded.absFile)}`, where)
    return undefined
  }
  return real
}

function resolveTransformModule(raw: string, dir: string, path: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag): string | undefined {
  const where = loaded.locate(path)
  if (isAbsolute(raw) || /^[A-Za-z]:[\\/]/.test(raw) || raw.startsWith('\\')) {
    bag.error('TRANSFORM_PATH_ESCAPE', `transform "${raw}" is an absolute path; write it relative to transformsDir`, where)
    return undefined
  }
  if (raw.split(/[\\/]/).includes('..')) {
    bag.error('TRANSFORM_PATH_ESCAPE', `transform "${raw}" is outside transformsDir ("..")`, where)
    return undefined
  }
  const candidates = [raw, ...TRANSFORM_EXTENSIONS.map((e) => raw + e)].map((c) => join(dir, c))
  const found = candidates.find((c) => existsSync(c) && statSync(c).isFile())
  if (!found) {
    bag.error('TRANSFORM_NOT_FOUND', `transform "${raw}" does not exist in transformsDir`, where, `looked for ${raw}${extname(raw) ? '' : ` and ${raw}{${TRANSFORM_EXTENSIONS.join(',')}}`}`)
    return undefined
  }
  const real = realpathSync(found)
  if (!isInside(real, dir)) {
    bag.error('TRANSFORM_PATH_ESCAPE', `transform "${raw}" is a symlink to a file outside transformsDir`, where)
    return undefined
  }
  return real
}

function extname(p: string): string {
  const m = /\.[A-Za-z0-9]+$/.exec(p)
  return m ? m[0] : ''
}

/** True when `child` is `parent` or lies below it (both absolute, already real paths where it matters). */
export function isInside(child: string, parent: string): boolean {
  const rel = relative(parent, child)
  return rel === '' || (!rel.startsWith('..' + sep) && rel !== '..' && !isAbsolute(rel))
}

function checkTrustedProxies(list: string[], loaded: LoadedConfig, bag: DiagnosticBag): string[] {
  list.forEach((entry, i) => {
    if (!isAddressOrCidr(entry)) {
      bag.error('SCHEMA_FORMAT', `trustedProxies entry "${entry}" is not an IP address or CIDR range`, loaded.locate(['server', 'trustedProxies', i]), 'e.g. 127.0.0.1, 10.0.0.0/8, ::1, fd00::/8')
    }
  })
  return list
}

function isAddressOrCidr(text: string): boolean {
  const [addr, bits, extra] = text.split('/')
  if (extra !== undefined || !addr) return false
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(addr)
  const isV4 = !!v4 && v4.slice(1).every((o) => Number(o) <= 255)
  const isV6 = !isV4 && /^[0-9a-fA-F:]+$/.test(addr) && addr.includes(':') && (addr.match(/::/g)?.length ?? 0) <= 1
  if (!isV4 && !isV6) return false
  if (bits === undefined) return true
  const n = /^\d{1,3}$/.test(bits) ? Number(bits) : -1
  return n >= 0 && n <= (isV4 ? 32 : 128)
}

function resolveTasks(config: HooksConfig, loaded: LoadedConfig, bag: DiagnosticBag, workflowIds: Set<string>, leftOut: LeftOut): ResolvedTask[] {
  const tasks: ResolvedTask[] = []
  ;(config.agents ?? []).forEach((agent, a) => {
    const names = new Map<string, number>()
    ;(agent.tasks ?? []).forEach((t, i) => {
      const at: PathSegment[] = ['agents', a, 'tasks', i]
      // The id, and so the task's history and its last firing, follows its name, not its place in the list.
      const id = `task:${agent.id}:${slug(t.name, 'task')}`
      const clash = names.get(id)
      if (clash !== undefined) {
        bag.error('DEFINITION_DUPLICATE_NAME', `agent "${agent.id}" has two Tasks named "${t.name}" (the other is at line ${loaded.locate(['agents', a, 'tasks', clash]).line})`, loaded.locate([...at, 'name']), 'give each Task a name of its own')
        return
      }
      names.set(id, i)
      const when = resolveTaskSchedule(t, at, loaded, bag)
      if (t.target === 'workflow') {
        if (t.workflow === undefined) bag.error('WORKFLOW_MISSING', `task "${t.name}" has target workflow but no workflow`, loaded.locate(at))
        else if (!workflowIds.has(t.workflow) && !leftOut.mayDeclare('workflows', t.workflow)) bag.error('WORKFLOW_UNKNOWN', `workflow "${t.workflow}" is not declared under workflows`, loaded.locate([...at, 'workflow']), hintFrom(t.workflow, workflowIds))
      }
      // A disabled Task is checked like any other and then left out of the schedule.
      if (t.enabled === false) return
      const task: ResolvedTask = { id, agentId: agent.id, name: t.name, schedule: t.schedule ?? `every ${t.every ?? ''}`, target: t.target, notify: t.notify ?? 'done', catchUp: t.catchUp ?? 'once' }
      if (when) task.when = when
      if (t.workflow !== undefined) task.workflow = t.workflow
      if (t.prompt !== undefined) task.prompt = t.prompt
      if (t.timeoutSeconds !== undefined) task.timeoutSeconds = t.timeoutSeconds
      tasks.push(task)
    })
  })
  return tasks
}

/** A task's `schedule` or `every` (exactly one) and its `timezone`, compiled; undefined after an error. */
function resolveTaskSchedule(t: TaskConfig, at: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag): BundleSchedule | undefined {
  if (t.schedule === undefined && t.every === undefined) {
    bag.error('TASK_SCHEDULE_MISSING', `task "${t.name}" has neither schedule nor every`, loaded.locate(at), 'write schedule: "0 9 * * MON-FRI" (cron) or every: 15m (a fixed interval)')
    return undefined
  }
  if (t.schedule !== undefined && t.every !== undefined) {
    bag.error('TASK_SCHEDULE_TWICE', `task "${t.name}" has both schedule and every`, loaded.locate([...at, 'every'], 'key'), 'keep one: schedule for a cron expression, every for a fixed interval')
    return undefined
  }
  if (t.every !== undefined) {
    if (t.timezone !== undefined) bag.error('TASK_TIMEZONE_WITH_EVERY', `task "${t.name}": timezone applies to schedule, not to every`, loaded.locate([...at, 'timezone'], 'key'), 'an interval runs every so many seconds whatever the zone; drop timezone or use schedule')
    const ms = compileEvery(t.every)
    if (typeof ms === 'string') {
      bag.error('EVERY_INVALID', `every ${ms}`, loaded.locate([...at, 'every']), 'e.g. every: 90s, 15m, 2h or 1d')
      return undefined
    }
    return { kind: 'every', everyMs: ms }
  }
  const timezone = t.timezone ?? 'UTC'
  let zoneOk = true
  if (!isKnownTimeZone(timezone)) {
    bag.error('TIMEZONE_UNKNOWN', `timezone "${timezone}" is not an IANA time zone name`, loaded.locate([...at, 'timezone']), 'e.g. UTC, Europe/Berlin, America/New_York')
    zoneOk = false
  }
  const cron = compileCron(t.schedule!, timezone)
  if (!cron.ok) {
    bag.error(cron.code, `schedule "${t.schedule}": ${cron.problem}`, loaded.locate([...at, 'schedule']), cron.code === 'CRON_INVALID' ? 'five fields: minute hour day-of-month month day-of-week, e.g. "*/15 * * * *", or @hourly, @daily, @weekly, @monthly, @yearly' : undefined)
    return undefined
  }
  return zoneOk ? cron.schedule : undefined
}

function warnIgnoredFields(route: ResolvedRoute, loaded: LoadedConfig, bag: DiagnosticBag): void {
  if (route.definitionKind !== 'hook' || route.preset) return
  const ignored: Array<[string, boolean]> = route.action === 'wake'
    ? [['messageTemplate', route.templates.message !== undefined], ['workflow', route.workflow !== undefined], ['model', route.model !== undefined], ['thinking', route.thinking !== undefined], ['timeoutSeconds', route.timeoutSeconds !== undefined]]
    : [['textTemplate', route.templates.text !== undefined], ...(route.action === 'agent' ? [['workflow', route.workflow !== undefined] as [string, boolean]] : [])]
  for (const [key, set] of ignored) {
    if (set) bag.warning('ACTION_FIELD_IGNORED', `${key} has no effect on ${route.action === 'agent' ? 'an' : 'a'} ${route.action} mapping`, loaded.locate([...route.configPath, key], 'key'))
  }
}

/** "Did you mean" one of the options that `fits` where the word stands, else the list of all of them. */
export function hintFrom(word: string, options: Set<string>, fits: (option: string) => boolean = () => true): string | undefined {
  const guess = closest(word, [...options].filter(fits))
  if (guess !== undefined) return `did you mean "${guess}"?`
  return options.size > 0 ? `declared: ${[...options].join(', ')}` : undefined
}
