// Where a Trigger answers: the URL an outside system posts to, and a ready-to-copy curl line that
// reads the hook token from where it is kept (the variable or file hooks.token names), so neither
// the page nor the command line ever shows the token itself.
import { readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parseDocument } from 'yaml'
import { ADDRESS_FILE } from '../runtime/service.js'

export interface EndpointBase {
  stateDir: string
  /** the runtime's public URL (--public-url), when it is not the address it listens on */
  publicUrl?: string
}

export interface Endpoint { url: string; curl: string }

export function endpointOf(text: string, triggerPath: string, where: EndpointBase): Endpoint {
  const base = where.publicUrl?.replace(/\/+$/, '') ?? runtimeAddress(where.stateDir)?.url ?? defaultRuntimeUrl(text)
  const url = `${base}${basePathOf(text)}/${triggerPath.replace(/^\/+|\/+$/g, '')}`
  return { url, curl: `curl -X POST '${url}' -H 'Content-Type: application/json' -H "Authorization: Bearer ${tokenExpression(text, where.stateDir)}" -d '{"hello":"world"}'` }
}

/** Where the runtime owning the state directory listens (it writes <state>/address.json while it runs). */
export function runtimeAddress(stateDir: string): { url: string; basePath: string } | undefined {
  try {
    const a = JSON.parse(readFileSync(join(stateDir, ADDRESS_FILE), 'utf8')) as { url?: unknown; basePath?: unknown }
    return typeof a.url === 'string' ? { url: a.url, basePath: String(a.basePath ?? '/hooks') } : undefined
  } catch {
    return undefined
  }
}

/** hooks.path as the compiler normalises it (default /hooks). */
export function basePathOf(text: string): string {
  const raw = config(text)?.hooks?.path
  const p = typeof raw === 'string' && raw.trim() !== '' ? raw.trim() : '/hooks'
  return ('/' + p.replace(/^\/+|\/+$/g, '')).replace(/\/{2,}/g, '/')
}

/** A shell expression for the hook token: `$HOOKGATE_TOKEN`, `$(cat .hookgate/token)`. */
function tokenExpression(text: string, stateDir: string): string {
  const ref = config(text)?.hooks?.token
  if (typeof ref === 'string') {
    const m = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(ref.trim())
    return m ? `$${m[1]}` : '<the hook token written in hooks.yaml>'
  }
  if (typeof ref?.env === 'string') return `$${ref.env}`
  if (typeof ref?.file === 'string') return `$(cat ${ref.file})`
  return `$(cat ${displayPath(join(stateDir, 'token'))})`
}

function defaultRuntimeUrl(text: string): string {
  const server = config(text)?.server ?? {}
  const host = typeof server.host === 'string' ? server.host : '127.0.0.1'
  const port = Number.isInteger(server.port) && server.port > 0 ? server.port : 8787
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function config(text: string): any {
  const doc = parseDocument(text)
  return doc.errors.length > 0 ? undefined : doc.toJS()
}

/** Relative to the working directory when under it. */
export function displayPath(p: string): string {
  const rel = relative(process.cwd(), p)
  return rel && !rel.startsWith('..') ? rel : p
}
