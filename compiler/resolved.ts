// What the resolve phase settles (compiler/resolve.ts and its resolve-* helpers), as the later
// phases (compile, emit) read it: types only.
import type { Location } from './diagnostics.js'
import type { RouteSpec } from './expand.js'
import type { PathSegment } from './load.js'
import type { WorkflowConfig } from './schema.js'
import type { BundleChannel, BundleConfig, BundleProvider, BundleSignature, BundleTask, SecretSpec } from '../runtime/bundle/format.js'

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
