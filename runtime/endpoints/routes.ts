// The route table: every endpoint the runtime serves is an entry, built once per loaded bundle — the
// built-ins (wake, agent), one entry per mapped name, and the endpoints outside the base path
// (healthz, metrics; the probes to come). A request costs one Map lookup: by its exact path for the
// endpoints outside the base path, by its name under the base path for the rest. A new kind of
// endpoint is a new module and a line here, not another branch in the HTTP core. `hookgate try` and
// the page's Test button look names up in the same table, so they reach the same prepare.
import type { LoadedBundle } from '../bundle/load.js'
import { agentEndpoint } from './agent.js'
import type { DirectEndpoint, HookEndpoint } from './endpoint.js'
import { healthz } from './healthz.js'
import { MappedEndpoint } from './mapped.js'
import { metrics } from './metrics.js'
import { wakeEndpoint } from './wake.js'

export interface RouteTable {
  readonly basePath: string
  /** the endpoints under the base path, by their name there (decoded, no trailing slash) */
  readonly hooks: ReadonlyMap<string, HookEndpoint>
  /** the endpoints outside it, by exact path */
  readonly direct: ReadonlyMap<string, DirectEndpoint>
  /** a path of `direct` lies under the base path (a base path of /healthz): looked up there first */
  readonly directUnderBase: boolean
  /** some mapping authenticates by its sender's signature: names are looked up before auth */
  readonly signed: boolean
}

export interface RouteOptions {
  /** serve GET /metrics (the service gives a renderer) */
  metrics?: boolean
}

export function buildRouteTable(bundle: LoadedBundle, options: RouteOptions = {}): RouteTable {
  const config = bundle.config
  const hooks = new Map<string, HookEndpoint>()
  for (const [name, routes] of bundle.routeTable) hooks.set(name, new MappedEndpoint(name, routes, config))
  // Reserved: the compiler refuses a mapping on these names; were one there, the built-in wins.
  hooks.set('wake', wakeEndpoint(config))
  hooks.set('agent', agentEndpoint(config))
  const direct = new Map<string, DirectEndpoint>([[healthz.path, healthz]])
  if (options.metrics) direct.set(metrics.path, metrics)
  const base = config.basePath
  const directUnderBase = [...direct.keys()].some((p) => p === base || p.startsWith(base + '/'))
  return { basePath: base, hooks, direct, directUnderBase, signed: bundle.signed }
}
