// The contract between compiler and runtime: file names, the format version and the shapes a
// bundle exports. The compiler imports this file; this file imports nothing.

/** Bump when a runtime of the previous version could not serve the new bundle correctly. */
export const FORMAT_VERSION = 1
export const BUNDLE_FILE = 'hookgate.bundle.mjs'
export const MANIFEST_FILE = 'manifest.json'

export type ActionKind = 'wake' | 'agent' | 'workflow'
export type WakeMode = 'now' | 'next-heartbeat'

export interface ManifestRoute {
  id: string
  name: string
  source?: string
  action: ActionKind
  definitionKind: 'hook' | 'trigger'
  file: string
  line: number
  column: number
  transform?: string
}

export interface BundleManifest {
  formatVersion: number
  compilerVersion: string
  inputsHash: string
  configFile: string
  basePath: string
  routes: ManifestRoute[]
}

export type SecretSpec =
  | { kind: 'env'; name: string }
  | { kind: 'file'; path: string }
  | { kind: 'generate' }
  /** a literal token written in hooks.yaml: only its SHA-256 reaches the bundle */
  | { kind: 'digest'; sha256: string }
  /** a value that is not secret (a plain webhook URL), kept as written */
  | { kind: 'value'; value: string }

export interface BundleProvider {
  id: string
  type: 'openai' | 'anthropic'
  baseUrl: string
  apiKey: SecretSpec | null
  timeoutMs: number
  maxRetries: number
}

export type ChannelType = 'webhook' | 'slack' | 'discord' | 'telegram' | 'file'

export interface BundleChannel {
  id: string
  type: ChannelType
  url: SecretSpec | null
  secret: SecretSpec | null
  botToken: SecretSpec | null
  chatId: string | null
  apiBaseUrl: string
  /** file channel: relative to the config directory unless absolute */
  path: string | null
  maxAttempts: number
  timeoutMs: number
}

export interface BundleConfig {
  enabled: boolean
  basePath: string
  token: SecretSpec | null
  policy: {
    allowedAgentIds: string[] | null
    allowRequestSessionKey: boolean
    defaultSessionKey: string | null
    allowedSessionKeyPrefixes: string[]
  }
  server: {
    host: string
    port: number
    maxBodyBytes: number
    bodyTimeoutMs: number
    authFailures: { limit: number; windowMs: number; lockoutMs: number; maxTrackedClients: number }
    trustedProxies: string[]
    stateDir: string
    concurrency: number
    maxPendingRuns: number
    idempotencyWindowMs: number
  }
  agents: Array<{ id: string; default: boolean; model: string; fallbackModels: string[]; heartbeatSeconds: number | null; maxQueuedEvents: number; delivery: { channel: string; to: string | null } | null }>
  providers: BundleProvider[]
  channels: BundleChannel[]
  defaultAgentId: string
  tasks: Array<{ id: string; agentId: string; name: string; schedule: string; target: ActionKind; workflow?: string; prompt?: string; timeoutSeconds?: number; notify: 'silent' | 'done' | 'state' }>
  gmail: Record<string, unknown> | null
  configDirFromBundle: string
}

import type { RenderContext, CompiledRender } from './template-helpers.js'
export type { RenderContext }
export type RenderFn = CompiledRender

export interface TransformInput {
  payload: unknown
  headers: Record<string, string>
  query: Record<string, string>
  path: string
}

export interface BundleRoute {
  id: string
  name: string
  source: string | null
  definitionKind: 'hook' | 'trigger'
  action: ActionKind
  wakeMode: WakeMode
  agentId: string | null
  deliver: boolean
  channel: string
  model: string | null
  thinking: string | null
  timeoutSeconds: number | null
  workflow: string | null
  maxBodyBytes: number | null
  allowUnsafeExternalContent: boolean
  notify: 'silent' | 'done' | 'state' | null
  render: Partial<Record<'text' | 'message' | 'name' | 'sessionKey' | 'to', RenderFn>>
  transform: { fn: (input: TransformInput) => unknown; exportName: string; module: string; timeoutMs: number } | null
}

export interface BundleWorkflow {
  id: string
  steps: Array<{ id: string; action: 'agent' | 'wake'; agentId: string | null; needs: string[]; timeoutSeconds: number | null; render: { text?: RenderFn; message?: RenderFn } }>
}

export interface BundleModule {
  manifest: BundleManifest
  config: BundleConfig
  routes: BundleRoute[]
  workflows: BundleWorkflow[]
}
