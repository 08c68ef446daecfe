// The operator page's server: the static page (built by esbuild, served with a strict CSP and no
// inline script) and a JSON API behind the admin token, sent as a header (no cookies, so no CSRF).
// Every edit goes through ConfigFile: hooks.yaml stays the source of truth, the compiler checks
// it, and the runtime (watching its bundle) picks the new bundle up. The run history is read from
// the runtime's state directory.
//
// API (all JSON; `Authorization: Bearer <admin token>` or `x-hookgate-admin-token`):
//   GET    /api/overview                         agents with their Triggers and Tasks, every route served (admin/routes.ts), workflows, channels, the runtime
//   POST   /api/check                            { kind, agentId, original, definition } → findings by field, next firings
//   POST   /api/try                              { agentId, definition, payload, headers? } → what the Trigger would do (in a recycled worker: dry-runs.ts)
//   POST   /api/agents/:agent/triggers           create      (If-Match: the file hash the page read)
//   PUT    /api/agents/:agent/triggers/:name     replace     (disable: enabled false)
//   DELETE /api/agents/:agent/triggers/:name     delete
//   …and the same three under /tasks
//   GET    /api/runs?kind&status&definition&since&until&page&limit   newest first, paged; each row with its definitionName and durationMs
//   GET    /api/runs/changes?after=VERSION       waits (wait= seconds, at most 25) until the history changes
//   GET    /api/runs/:id                         one run with its steps, correlated runs, replays, deliveries
import { readFileSync, existsSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { compileSource } from '../compiler/index.js'
import { writeBundle } from '../compiler/emit.js'
import { AuthLimiter, presentedToken, tokenMatches } from '../runtime/http/auth.js'
import { HttpError, sendError, sendJson, type ErrorCode } from '../runtime/http/errors.js'
import { DryRunFailed, DryRuns } from './dry-runs.js'
import { basePathOf, displayPath, endpointsOf, runtimeAddress } from './endpoints.js'
import { hookName } from '../runtime/bundle/hook-path.js'
import { applyEdit, cleanDefinition, configValue, definitionId, EditError, listAgents, nextFirings, type DefinitionKind, type Edit } from './definitions.js'
import { ConfigFile, splitFindings } from './config-file.js'
import { History } from './history.js'
import { definitionNames, named, routesOf, servedManifest } from './routes.js'
import { YamlEditError } from './yaml-edit.js'
import type { AdminToken } from './tokens.js'

// `hookgate task` shows a Task's next firings as the page does (cli/definitions.ts imports them from here)
export { nextFirings }

export interface AdminOptions {
  config: string
  outDir: string
  stateDir: string
  host: string
  port: number
  publicUrl?: string
  token: AdminToken
  log?: (line: string) => void
  /** how long a save waits for the runtime to serve the new bundle (default 5000 ms) */
  reloadWaitMs?: number
  /** a PostgreSQL store whose run history the page shows, instead of the state directory's */
  store?: string
}

export interface AdminServer {
  url: string
  server: Server
  close(): Promise<void>
}

const UI_DIR = fileURLToPath(new URL('./ui/', import.meta.url))
const STATIC: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/index.html': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/app.css': { file: 'app.css', type: 'text/css; charset=utf-8' },
  // Browsers ask for /favicon.ico whatever the page links; both names answer with the one SVG.
  '/favicon.svg': { file: 'favicon.svg', type: 'image/svg+xml' },
  '/favicon.ico': { file: 'favicon.svg', type: 'image/svg+xml' },
}
/** No inline script or style, nothing from elsewhere, no framing, no form posts. */
export const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
const MAX_BODY = 1024 * 1024
const LONG_POLL_MS = 25_000

export async function startAdmin(options: AdminOptions): Promise<AdminServer> {
  const config = new ConfigFile(options.config, options.outDir, options.stateDir)
  const history = new History(options.stateDir, options.store)
  const dryRuns = new DryRuns()
  const limiter = new AuthLimiter({ limit: 20, windowMs: 60_000, lockoutMs: 60_000, maxTrackedClients: 10_000 })
  const log = options.log ?? ((line: string) => process.stdout.write(line + '\n'))
  const files = new Map<string, Buffer>()
  for (const { file } of Object.values(STATIC)) {
    const path = join(UI_DIR, file)
    if (existsSync(path)) files.set(file, readFileSync(path))
  }
  const pending = new Set<ServerResponse>()
  const where = { stateDir: options.stateDir, ...(options.publicUrl ? { publicUrl: options.publicUrl } : {}) }

  const server = createServer({ requestTimeout: 60_000, headersTimeout: 20_000, keepAliveTimeout: 5000 }, (req, res) => {
    handle(req, res).catch((err: Error) => {
      log(JSON.stringify({ t: new Date().toISOString(), level: 'error', msg: 'admin request failed', path: (req.url ?? '').split('?')[0], error: err.message }))
      if (!res.headersSent) fail(res, new HttpError(500, 'internal_error', 'the admin server could not answer; see its log'))
      else res.destroy()
    })
  })

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL
    try {
      url = new URL(req.url ?? '/', 'http://admin')
    } catch {
      return fail(res, new HttpError(400, 'path_invalid', 'the request target is not a valid URL path'))
    }
    const path = url.pathname
    const asset = STATIC[path]
    if (asset && (req.method === 'GET' || req.method === 'HEAD')) {
      const body = files.get(asset.file)
      if (!body) return fail(res, new HttpError(500, 'ui_missing', 'the page was not built; run npm run build'))
      res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': asset.type, 'content-length': body.length, 'cache-control': 'no-cache' })
      res.end(req.method === 'HEAD' ? undefined : body)
      return
    }
    if (!path.startsWith('/api/')) return fail(res, new HttpError(404, 'not_found', `nothing is served at ${path.slice(0, 200)}`))
    // As the runtime does with hook tokens: the right token passes even while locked out and
    // clears the count; a wrong or missing one counts, 401 until the limit, then 429.
    const client = req.socket.remoteAddress ?? 'unknown'
    const now = Date.now()
    const presented = req.headers['x-hookgate-admin-token'] !== undefined ? String(req.headers['x-hookgate-admin-token']) : presentedToken(req.headers)
    if (tokenMatches(presented, options.token.digest)) {
      limiter.succeed(client)
    } else {
      const locked = limiter.retryAfter(client, now) || limiter.fail(client, now)
      if (locked > 0) return fail(res, new HttpError(429, 'too_many_auth_failures', `too many failed admin logins; try again in ${locked} s`, { 'retry-after': String(locked) }))
      return fail(res, presented === undefined ? new HttpError(401, 'token_missing', 'send the admin token in the Authorization: Bearer header') : new HttpError(401, 'token_invalid', 'the admin token is not valid'))
    }
    try {
      await route(req, res, url)
    } catch (err) {
      if (err instanceof HttpError) return fail(res, err)
      // the config-editing library's refusals, with the codes of the registry (runtime/http/error-codes.ts)
      if (err instanceof EditError) return fail(res, new HttpError(err.status, err.code as ErrorCode, err.message))
      if (err instanceof YamlEditError) return fail(res, new HttpError(422, 'config_invalid', err.message))
      throw err
    }
  }

  async function route(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const path = url.pathname
    const method = req.method ?? 'GET'
    if (path === '/api/overview') return method === 'GET' ? send(res, 200, await overview()) : notAllowed('GET')
    if (path === '/api/check') return method === 'POST' ? send(res, 200, await check(await readJson(req))) : notAllowed('POST')
    if (path === '/api/try') return method === 'POST' ? send(res, 200, await tryDefinition(await readJson(req))) : notAllowed('POST')
    if (path === '/api/runs') {
      if (method !== 'GET') return notAllowed('GET')
      const p = url.searchParams
      const num = (k: string) => (p.has(k) ? Number(p.get(k)) : undefined)
      const names = namesNow()
      const found = await history.query({
        kind: p.get('kind') || undefined,
        status: p.getAll('status').flatMap((s) => s.split(',')),
        definition: p.get('definition') || undefined,
        since: p.get('since') || undefined,
        until: p.get('until') || undefined,
        page: num('page'),
        limit: num('limit'),
      })
      return send(res, 200, { ...found, rows: found.rows.map((r) => named(r, names)) })
    }
    if (path === '/api/runs/changes') {
      if (method !== 'GET') return notAllowed('GET')
      pending.add(res)
      res.once('close', () => pending.delete(res))
      // wait: seconds, 0 answers at once, at most (and by default) 25
      const asked = Number(url.searchParams.get('wait') ?? LONG_POLL_MS / 1000)
      const waitMs = Number.isFinite(asked) && asked >= 0 ? Math.min(asked * 1000, LONG_POLL_MS) : LONG_POLL_MS
      const version = await history.changes(url.searchParams.get('after') ?? '', waitMs)
      pending.delete(res)
      return send(res, 200, { version })
    }
    const run = /^\/api\/runs\/([^/]+)$/.exec(path)
    if (run) {
      if (method !== 'GET') return notAllowed('GET')
      const detail = await history.detail(pathParam(run[1]!, 'run id'))
      if (!detail) return fail(res, new HttpError(404, 'run_unknown', 'no run with that id in the history'))
      const names = namesNow()
      return send(res, 200, { ...detail, run: named(detail.run, names), steps: detail.steps.map((r) => named(r, names)), correlated: detail.correlated.map((r) => named(r, names)), replays: detail.replays.map((r) => named(r, names)) })
    }
    const defs = /^\/api\/agents\/([^/]+)\/(triggers|tasks)(?:\/([^/]+))?$/.exec(path)
    if (defs) {
      const agentId = pathParam(defs[1]!, 'agent id')
      const kind: DefinitionKind = defs[2] === 'triggers' ? 'trigger' : 'task'
      const name = defs[3] === undefined ? null : pathParam(defs[3], `${kind === 'trigger' ? 'Trigger' : 'Task'} name`)
      if (name === null && method !== 'POST') return notAllowed('POST')
      if (name !== null && method !== 'PUT' && method !== 'DELETE') return notAllowed('PUT, DELETE')
      const ifMatch = req.headers['if-match']?.replace(/^W\//, '').replace(/^"|"$/g, '')
      if (!ifMatch) throw new HttpError(428, 'if_match_required', 'send If-Match with the hash of hooks.yaml the edit was made on (overview.config.hash)')
      const definition = method === 'DELETE' ? null : cleanDefinition(kind, (await readJson(req) as { definition?: unknown }).definition)
      const result = await config.save({ kind, agentId, original: name, definition }, ifMatch)
      if (!result.ok) return fail(res, new HttpError(result.status, result.code as ErrorCode, result.error, undefined, { ...(result.hash ? { hash: result.hash } : {}), ...(result.findings ? { findings: result.findings } : {}) }))
      log(JSON.stringify({ t: new Date().toISOString(), level: 'info', msg: `${method === 'POST' ? 'created' : method === 'PUT' ? 'saved' : 'deleted'} a ${kind}`, agent: agentId, name: definition?.name ?? name, bundle: result.bundleHash }))
      const runtime = await waitForRuntime(result.bundleHash)
      const endpoint = kind === 'trigger' && definition ? endpointsOf(configValue(config.read().text) ?? {}, where)(String(definition.path ?? '')) : undefined
      return send(res, method === 'POST' ? 201 : 200, {
        ok: true,
        hash: result.hash,
        id: result.id,
        bundle: { hash: result.bundleHash, routes: result.routes },
        warnings: result.warnings,
        runtime,
        ...(result.tokenGenerated ? { tokenGenerated: displayPath(result.tokenGenerated) } : {}),
        ...(endpoint ? { endpoint } : {}),
      })
    }
    fail(res, new HttpError(404, 'not_found', `no admin endpoint ${path.slice(0, 200)}`))
  }

  /** What each definition id is called in hooks.yaml as it is now (admin/routes.ts). */
  function namesNow(): Map<string, string> {
    const value = configValue(config.read().text) ?? {}
    return definitionNames(value, listAgents(value))
  }

  function notAllowed(allow: string): never {
    throw new HttpError(405, 'method_not_allowed', `use ${allow}`)
  }

  async function overview(): Promise<Record<string, unknown>> {
    const { text, hash } = config.read()
    const outcome = await compileSource(text, config.file, { outDir: options.outDir, check: true })
    const parsed = configValue(text)
    const value = parsed ?? {}
    const last = await history.lastRuns()
    const endpoint = endpointsOf(value, where)
    const listed = listAgents(parsed)
    // what hooks.yaml compiles to; while it does not compile, what the runtime serves from the bundle on disk
    const manifest = outcome.result?.manifest ?? servedManifest(options.outDir)
    const routes = routesOf(manifest?.routes ?? null, value, listed, endpoint, last)
    const agents = listed.map((a) => ({
      ...a,
      triggers: a.triggers.map((t) => ({ ...t, enabled: t.enabled !== false, lastRun: last.get(String(t.id)) ?? null, endpoint: endpoint(String(t.path ?? '')) })),
      tasks: a.tasks.map((t) => ({ ...t, enabled: t.enabled !== false, lastRun: last.get(String(t.id)) ?? null, next: t.enabled === false ? [] : nextFirings(t) })),
    }))
    return {
      config: { file: displayPath(config.file), hash, enabled: value.hooks?.enabled === true, basePath: basePathOf(value), tokenConfigured: value.hooks?.token !== undefined },
      diagnostics: outcome.diagnostics,
      agents,
      routes,
      routesFrom: outcome.result ? 'hooks.yaml' : manifest ? 'bundle' : null,
      workflows: (Array.isArray(value.workflows) ? value.workflows : []).filter((w: any) => typeof w?.id === 'string').map((w: any) => ({ id: w.id, ...(typeof w.description === 'string' ? { description: w.description } : {}) })),
      channels: (Array.isArray(value.channels) ? value.channels : []).filter((c: any) => typeof c?.id === 'string').map((c: any) => ({ id: c.id, type: String(c.type ?? '') })),
      runtime: await runtimeStatus(),
      history: { version: await history.version() },
    }
  }

  async function check(body: unknown): Promise<Record<string, unknown>> {
    const edit = editFrom(body)
    const result = await config.check(edit)
    const out: Record<string, unknown> = { ok: result.outcome.ok, findings: result.findings }
    if (edit.kind === 'trigger' && edit.definition) out.endpoint = endpointsOf(configValue(config.read().text) ?? {}, where)(String(edit.definition.path ?? ''))
    if (edit.kind === 'trigger' && edit.definition) out.id = definitionId('trigger', edit.agentId, String(edit.definition.name ?? ''))
    if (edit.kind === 'task' && edit.definition) out.next = nextFirings(edit.definition)
    return out
  }

  /** The Trigger as drafted, compiled into a scratch bundle and dry-run like `hookgate try`. */
  async function tryDefinition(body: unknown): Promise<Record<string, unknown>> {
    const b = (body ?? {}) as { agentId?: unknown; original?: unknown; definition?: unknown; payload?: unknown; headers?: unknown }
    const edit = editFrom({ kind: 'trigger', agentId: b.agentId, original: b.original ?? null, definition: b.definition })
    const applied = applyEdit(config.read().text, edit)
    const scratch = mkdtempSync(join(tmpdir(), 'hookgate-admin-try-'))
    try {
      const outcome = await compileSource(applied.text, config.file, { outDir: scratch, check: true })
      if (!outcome.ok || !outcome.result) {
        throw new HttpError(422, 'config_invalid', 'the Trigger does not compile; fix the fields marked first', undefined, { findings: splitFindings(outcome.diagnostics, applied.at) })
      }
      writeBundle(scratch, outcome.result)
      const headers: Record<string, string> = {}
      if (typeof b.headers === 'object' && b.headers !== null) for (const [k, v] of Object.entries(b.headers)) headers[k.toLowerCase()] = String(v)
      const name = hookName(String(edit.definition!.path ?? '')) ?? ''
      // in a worker that is recycled: an imported bundle is never freed (admin/dry-runs.ts)
      let answer
      try {
        answer = await dryRuns.run(scratch, name, b.payload ?? {}, headers)
      } catch (err) {
        if (err instanceof DryRunFailed) throw new HttpError(500, 'try_failed', `the dry run failed: ${err.message}`)
        throw err
      }
      return { status: answer.status, ...answer.body }
    } finally {
      rmSync(scratch, { recursive: true, force: true })
    }
  }

  function editFrom(body: unknown): Edit {
    const b = (body ?? {}) as { kind?: unknown; agentId?: unknown; original?: unknown; definition?: unknown }
    if (b.kind !== 'trigger' && b.kind !== 'task') throw new HttpError(400, 'kind_invalid', 'kind must be "trigger" or "task"')
    if (typeof b.agentId !== 'string' || b.agentId === '') throw new HttpError(400, 'agent_missing', 'name the agent (agentId)')
    if (b.original !== null && b.original !== undefined && typeof b.original !== 'string') throw new HttpError(400, 'original_invalid', 'original is the name of the definition being edited, or null for a new one')
    return { kind: b.kind, agentId: b.agentId, original: (b.original as string | null | undefined) ?? null, definition: cleanDefinition(b.kind, b.definition) }
  }

  async function runtimeStatus(): Promise<{ url: string | null; bundle: string | null; status: string }> {
    const address = runtimeAddress(options.stateDir)
    if (!address) return { url: null, bundle: null, status: 'not running' }
    try {
      const r = await fetch(`${address.url}/healthz`, { signal: AbortSignal.timeout(1000) })
      const body = await r.json() as { bundle?: string; status?: string }
      return { url: address.url, bundle: body.bundle ?? null, status: body.status ?? String(r.status) }
    } catch {
      return { url: address.url, bundle: null, status: 'not answering' }
    }
  }

  /** After a save: until the runtime serves the new bundle (it reloads when the bundle file changes), or the wait is over. */
  async function waitForRuntime(bundleHash: string): Promise<{ url: string | null; serving: boolean; status: string }> {
    const deadline = Date.now() + (options.reloadWaitMs ?? 5000)
    for (;;) {
      const s = await runtimeStatus()
      if (s.bundle === bundleHash) return { url: s.url, serving: true, status: s.status }
      // Nothing answers at the address (a runtime that stopped without removing address.json):
      // waiting would only delay every save; the bundle is on disk for when it starts.
      if (s.url === null || s.status === 'not answering' || Date.now() >= deadline) return { url: s.url, serving: false, status: s.status }
      await new Promise((r) => setTimeout(r, 100))
    }
  }

  await new Promise<void>((ok, fail) => {
    server.once('error', fail)
    server.listen(options.port, options.host, () => { server.off('error', fail); ok() })
  })
  const address = server.address() as AddressInfo
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return {
    url: `http://${shownHost}:${address.port}`,
    server,
    close: async () => {
      history.close()
      await dryRuns.close()
      for (const res of pending) res.destroy()
      await new Promise<void>((ok) => server.close(() => ok()))
      server.closeAllConnections()
    },
  }
}

const SECURITY_HEADERS = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
}

/**
 * A segment of the request path, percent-decoded: the one place the API decodes one (the query is
 * read through URLSearchParams, which never throws). Broken percent-encoding is the client's
 * mistake, a 400 in the error shape, never a 500.
 */
function pathParam(raw: string, what: string): string {
  try {
    return decodeURIComponent(raw)
  } catch {
    throw new HttpError(400, 'path_invalid', `the ${what} in the path is not valid percent-encoding`)
  }
}

/** A JSON answer, with the page's security headers. */
function send(res: ServerResponse, status: number, body: unknown): void {
  sendJson(res, status, body, undefined, SECURITY_HEADERS)
}

/** A refusal in the one error shape (runtime/http/errors.ts), with the page's security headers. */
function fail(res: ServerResponse, err: HttpError): void {
  sendError(res, err, SECURITY_HEADERS)
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const type = String(req.headers['content-type'] ?? '')
  if (!/^application\/json\b/i.test(type)) throw new HttpError(415, 'unsupported_media_type', 'send the body as Content-Type: application/json')
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > MAX_BODY) throw new HttpError(413, 'payload_too_large', 'the body is larger than 1 MiB')
    chunks.push(chunk as Buffer)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null')
  } catch (err) {
    throw new HttpError(400, 'invalid_json', `the body is not valid JSON: ${(err as Error).message}`)
  }
}
