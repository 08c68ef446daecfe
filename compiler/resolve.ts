// Phase 4, resolve: every check the schema alone cannot make. Paths are normalised and held
// inside the config tree, references (agents, workflows, presets) are looked up, secrets become
// references the runtime resolves at start, and defaults for the server are filled in. The parts
// with rules of their own have files beside this one: resolve-agents (agents, providers, channels),
// resolve-workflows, resolve-secrets, resolve-paths, and signatures; what it settles is typed in resolved.ts.
import { hintFrom, type DiagnosticBag } from './diagnostics.js'
import { slug, type ExpandedConfig } from './expand.js'
import type { LoadedConfig, PathSegment } from './load.js'
import type { HooksConfig, SecretRefConfig, TaskConfig } from './schema.js'
import { compileCron, compileEvery, isKnownTimeZone } from './cron.js'
import { LeftOut } from './validate.js'
import type { ResolvedConfig, ResolvedRoute, ResolvedTask, ServerSettings } from './resolved.js'
import { resolveSecret, resolveToken } from './resolve-secrets.js'
import { resolveTransformModule, resolveTransformsDir } from './resolve-paths.js'
import { checkWorkflows, resolveWorkflowSteps } from './resolve-workflows.js'
import { resolveSignature } from './signatures.js'
import { resolveAgents, resolveChannels, resolveProviders, checkRouteModel } from './resolve-agents.js'
import { DEFAULT_COMPACT_ABOVE_BYTES, DEFAULT_KEEP_HISTORY, DEFAULT_KEEP_REQUEST_BYTES, DEFAULT_MAX_PENDING_BYTES, DEFAULT_MAX_WAIT_SECONDS, type BundleSchedule, type BundleStore, type SecretSpec } from '../runtime/bundle/format.js'
import { hookName, normaliseBasePath } from '../runtime/bundle/hook-path.js'

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

