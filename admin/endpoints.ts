// Where things are, as hooks.yaml (already parsed) says: the state directory, this hookgate's own
// address and base path, and where a Trigger answers — the URL an outside system posts to, and a
// ready-to-copy curl line that reads the hook token from where it is kept (the variable or file
// hooks.token names), so neither the page nor the command line ever shows the token itself.
// The Gmail helper finds /hooks/gmail the same way.
import { dirname, join, relative, resolve } from 'node:path'
import { readRuntimeAddress } from '../runtime/lib/address-file.js'
import { hookName, normaliseBasePath } from '../runtime/bundle/hook-path.js'

/** hooks.yaml as plain data (what yaml's toJS gives; {} for an empty file). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ConfigValue = Record<string, any>

export interface EndpointBase {
  stateDir: string
  /** the runtime's public URL (--public-url), when it is not the address it listens on */
  publicUrl?: string
}

export interface Endpoint { url: string; curl: string }

/**
 * The endpoint of each Trigger path of one config (null for a path the compiler refuses): the base URL, base path and token expression
 * are worked out once (the runtime's address file read once), however many paths are asked for.
 */
export function endpointsOf(value: ConfigValue, where: EndpointBase): (triggerPath: string) => Endpoint | null {
  const base = (where.publicUrl?.replace(/\/+$/, '') ?? runtimeAddress(where.stateDir)?.url ?? localRuntimeUrl(value)) + basePathOf(value)
  const token = tokenExpression(value, where.stateDir)
  return (triggerPath) => {
    // The name as the compiler puts it in the route table (runtime/bundle/hook-path.ts); a path it refuses has no URL.
    const name = hookName(triggerPath)
    if (name === undefined) return null
    const url = `${base}/${name}`
    return { url, curl: `curl -X POST '${url}' -H 'Content-Type: application/json' -H "Authorization: Bearer ${token}" -d '{"hello":"world"}'` }
  }
}

/** Where the runtime owning the state directory listens (it writes <state>/address.json while it runs). */
export const runtimeAddress = readRuntimeAddress

/** hooks.path as the compiler normalises it (default /hooks). */
export function basePathOf(value: ConfigValue): string {
  const raw = value.hooks?.path
  const normal = normaliseBasePath(typeof raw === 'string' ? raw : '/hooks')
  return normal === 'root' || normal === 'invalid' ? '/hooks' : normal
}

/** This hookgate as reached from its own host: server.host (a wildcard bind as 127.0.0.1) and server.port (default 8787). */
export function localRuntimeUrl(value: ConfigValue): string {
  const server = value.server ?? {}
  const host = typeof server.host === 'string' && server.host !== '0.0.0.0' && server.host !== '::' ? server.host : '127.0.0.1'
  const port = Number.isInteger(server.port) && server.port > 0 ? server.port : 8787
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`
}

/** --state, else server.stateDir, else .hookgate, beside the config (as `hookgate serve` finds it from the bundle). */
export function stateDirOf(configFile: string, value: ConfigValue, flag: string | undefined): string {
  if (flag) return resolve(flag)
  return resolve(dirname(resolve(configFile)), typeof value.server?.stateDir === 'string' ? value.server.stateDir : '.hookgate')
}

/** A shell expression for the hook token: `$HOOKGATE_TOKEN`, `$(cat .hookgate/token)`. */
function tokenExpression(value: ConfigValue, stateDir: string): string {
  const ref = value.hooks?.token
  if (typeof ref === 'string') {
    const m = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(ref.trim())
    return m ? `$${m[1]}` : '<the hook token written in hooks.yaml>'
  }
  if (typeof ref?.env === 'string') return `$${ref.env}`
  if (typeof ref?.file === 'string') return `$(cat ${ref.file})`
  return `$(cat ${displayPath(join(stateDir, 'token'))})`
}

/** Relative to the working directory when under it. */
export function displayPath(p: string): string {
  const rel = relative(process.cwd(), p)
  return rel && !rel.startsWith('..') ? rel : p
}
