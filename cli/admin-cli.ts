// The control plane's commands: `hookgate admin` (the operator page) and `hookgate trigger|task
// add|list|rm`, which make the page's edits from the command line through the same ConfigFile:
// the same checks by the compiler, the same If-unchanged write of hooks.yaml, the same bundle.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { formatText } from '../compiler/diagnostics.js'
import { processIO, readCommandArgs, usageLine, getCommand } from './commands.js'
import { ConfigFile } from '../admin/config-file.js'
import { cleanDefinition, configValue, readConfigValue, definitionId, listAgents, type DefinitionKind, type Definition } from '../admin/definitions.js'
import { displayPath, endpointsOf, stateDirOf } from '../admin/endpoints.js'
import { History } from '../admin/history.js'
import { storeFlagOk } from './runs.js'
import { storeUrlOf } from '../runtime/store/open.js'
import { adminToken, hookTokenValue, sameToken, secretSpecOf } from '../admin/tokens.js'
import { nextFirings, startAdmin } from '../admin/server.js'

const EXIT = { ok: 0, refused: 1, usage: 2, failed: 2 } as const

export interface CommandIO { stdout(text: string): void; stderr(text: string): void }

export async function main(command: string, argv: string[], io: CommandIO = processIO): Promise<number> {
  switch (command) {
    case 'admin': return adminCommand(argv, io)
    case 'trigger add': return addCommand('trigger', argv, io)
    case 'task add': return addCommand('task', argv, io)
    case 'trigger rm': return removeCommand('trigger', argv, io)
    case 'task rm': return removeCommand('task', argv, io)
    case 'trigger list': return listCommand('trigger', argv, io)
    case 'task list': return listCommand('task', argv, io)
  }
  io.stderr(`hookgate ${command}: not available in this build yet\n`)
  return EXIT.usage
}

/** The config's text and parsed value, or why it cannot be read (said on stderr). */
function readConfig(command: string, file: string, io: CommandIO): { text: string; value: Record<string, any> } | undefined {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    io.stderr(`hookgate ${command}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}\n`)
    return undefined
  }
  const read = readConfigValue(text)
  if ('error' in read) {
    io.stderr(`hookgate ${command}: ${file}: ${read.error}\n`)
    return undefined
  }
  return { text, value: read.value }
}

async function adminCommand(argv: string[], io: CommandIO): Promise<number> {
  const parsed = readCommandArgs('admin', argv, io)
  if (parsed.kind !== 'ok') return parsed.exit!
  const v = parsed.values as { config: string; out: string; state?: string; store?: string; host: string; port: string; 'public-url'?: string }
  if (!storeFlagOk('admin', v.store, io)) return EXIT.usage
  const port = Number(v.port)
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    io.stderr(`hookgate admin: --port takes a number from 0 to 65535\n${usageLine(getCommand('admin'))}\n`)
    return EXIT.usage
  }
  if (v['public-url'] !== undefined && !/^https?:\/\/[^\s/]+/.test(v['public-url'])) {
    io.stderr(`hookgate admin: --public-url takes an http(s) URL, e.g. https://hooks.example.com\n`)
    return EXIT.usage
  }
  const read = readConfig('admin', v.config, io)
  if (!read) return EXIT.refused
  const stateDir = stateDirOf(v.config, read.value, v.state)
  let token
  try {
    token = adminToken(stateDir)
  } catch (err) {
    io.stderr(`hookgate admin: ${(err as Error).message}\n`)
    return EXIT.refused
  }
  if (sameToken(token.digest, hookTokenValue(read.value.hooks?.token, dirname(resolve(v.config)), stateDir))) {
    io.stderr(`hookgate admin: the admin token (${token.describe}) is the hook token; every webhook sender would hold the control plane. Give the page a token of its own\n`)
    return EXIT.refused
  }
  // --store wins; else the database the runtime of this config writes to. One that cannot be named
  // here stops the page rather than show the state directory's history, which would be the wrong one.
  let store = v.store
  try {
    store ??= configuredStore(read.value, v.config)
  } catch (err) {
    io.stderr(`hookgate admin: ${(err as Error).message} (or name the store with --store URL)\n`)
    return EXIT.refused
  }
  let admin
  try {
    admin = await startAdmin({ config: v.config, outDir: v.out, stateDir, host: v.host, port, token, ...(v['public-url'] ? { publicUrl: v['public-url'] } : {}), ...(store !== undefined ? { store } : {}), log: (line) => io.stdout(line + '\n') })
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    io.stderr(`hookgate admin: cannot start: ${e.code === 'EADDRINUSE' ? `the address is already in use (${v.host}:${port})` : e.message}\n`)
    return EXIT.refused
  }
  // Listening for SIGTERM before saying it is up: a stop sent as soon as the line is read must
  // close the page, not kill the process (a race a test hit).
  const stopped = new Promise<void>((done) => {
    const stop = () => { admin.close().then(done, done) }
    process.once('SIGTERM', stop)
    process.once('SIGINT', stop)
  })
  if (token.generated) io.stdout(`generated an admin token (saved in ${displayPath(token.describe)}, mode 0600; it is printed only this once):\n  ${token.generated}\n`)
  io.stdout(`hookgate admin on ${admin.url}/ (config ${displayPath(resolve(v.config))}, bundle ${v.out}, state ${displayPath(stateDir)}, admin token ${token.describe.startsWith('$') ? token.describe : displayPath(token.describe)})\n`)
  await stopped
  return EXIT.ok
}

/** The PostgreSQL URL server.store names, read as the runtime reads it; undefined for the file store. */
function configuredStore(value: Record<string, any>, configFile: string): string | undefined {
  const ref: unknown = value.server?.store
  if (ref === undefined) return undefined
  const url = secretSpecOf(typeof ref === 'object' && ref !== null && 'url' in ref ? (ref as { url: unknown }).url : ref)
  if (url === undefined) throw new Error('server.store is not a reference (${HOOKGATE_STORE_URL}, { env }, { file }); hookgate compile says why')
  return storeUrlOf({ url }, dirname(resolve(configFile)))
}

/** Flag values → the definition's fields (numbers where the schema wants them; a bad one is left for the compiler to name). */
function definitionFromFlags(kind: DefinitionKind, v: Record<string, unknown>): Definition {
  const timeout = v.timeout === undefined ? undefined : /^\d+(\.\d+)?$/.test(String(v.timeout)) ? Number(v.timeout) : v.timeout
  const common = { name: v.name, target: v.target, workflow: v.workflow, prompt: v.prompt, timeoutSeconds: timeout, notify: v.notify, enabled: v.disabled === true ? false : undefined }
  if (kind === 'trigger') return cleanDefinition('trigger', { ...common, path: v.path, timing: v.timing, delivery: v.delivery, channel: v.channel, to: v.to })
  return cleanDefinition('task', { ...common, schedule: v.schedule, every: v.every, timezone: v.timezone, catchUp: v['catch-up'] })
}

function defaultAgent(value: Record<string, any>): string {
  const agents = listAgents(value)
  return (agents.find((a) => a.default) ?? agents[0]!).id
}

async function addCommand(kind: DefinitionKind, argv: string[], io: CommandIO): Promise<number> {
  const name = `${kind} add`
  const parsed = readCommandArgs(name, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit!
  const v = parsed.values as Record<string, string | boolean | undefined> & { config: string; out: string; state?: string }
  const read = readConfig(name, v.config, io)
  if (!read) return EXIT.refused
  const agentId = typeof v.agent === 'string' ? v.agent : defaultAgent(read.value)
  const definition = definitionFromFlags(kind, v)
  const label = kind === 'trigger' ? 'Trigger' : 'Task'
  const existing = listAgents(read.value).find((a) => a.id === agentId)?.[kind === 'trigger' ? 'triggers' : 'tasks'].find((d) => d.id === definitionId(kind, agentId, String(definition.name)))
  if (existing && v.replace !== true) {
    io.stderr(`hookgate ${name}: agent "${agentId}" already has a ${label} named "${String(existing.name)}"; add --replace to change it\n`)
    return EXIT.refused
  }
  const stateDir = stateDirOf(v.config, read.value, v.state)
  const file = new ConfigFile(v.config, v.out, stateDir)
  const result = await file.save({ kind, agentId, original: existing ? String(existing.name) : null, definition }, undefined)
  if (!result.ok) return refused(name, result, io)
  io.stderr(`${existing ? 'replaced' : 'added'} ${label} "${String(definition.name)}" (${result.id}) in ${displayPath(file.file)}; compiled ${result.routes} routes into ${v.out}\n`)
  for (const w of result.warnings) io.stderr(formatText(w) + '\n')
  if (result.tokenGenerated) io.stderr(`generated a hook token into ${displayPath(result.tokenGenerated)} (mode 0600); hooks.token now reads it\n`)
  if (kind === 'trigger') {
    // the path compiled, so it has a URL
    const endpoint = endpointsOf(configValue(readFileSync(file.file, 'utf8')) ?? {}, { stateDir })(String(definition.path))!
    io.stdout(`${endpoint.url}\n${endpoint.curl}\n`)
  } else {
    const next = nextFirings(definition)
    if (definition.enabled !== false && next.length > 0) io.stdout(`next firings:\n${next.map((t) => `  ${t}`).join('\n')}\n`)
  }
  return EXIT.ok
}

async function removeCommand(kind: DefinitionKind, argv: string[], io: CommandIO): Promise<number> {
  const name = `${kind} rm`
  const parsed = readCommandArgs(name, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit!
  if (parsed.positionals.length !== 1 || parsed.positionals[0]!.trim() === '') {
    io.stderr(`hookgate ${name}: name one ${kind === 'trigger' ? 'Trigger' : 'Task'}\n${usageLine(getCommand(name))}\n`)
    return EXIT.usage
  }
  const v = parsed.values as Record<string, string | boolean | undefined> & { config: string; out: string; state?: string }
  const read = readConfig(name, v.config, io)
  if (!read) return EXIT.refused
  const agentId = typeof v.agent === 'string' ? v.agent : defaultAgent(read.value)
  const file = new ConfigFile(v.config, v.out, stateDirOf(v.config, read.value, v.state))
  const result = await file.save({ kind, agentId, original: parsed.positionals[0]!, definition: null }, undefined)
  if (!result.ok) return refused(name, result, io)
  io.stderr(`removed ${kind === 'trigger' ? 'Trigger' : 'Task'} "${parsed.positionals[0]}" of agent "${agentId}" from ${displayPath(file.file)}; compiled ${result.routes} routes into ${v.out}\n`)
  return EXIT.ok
}

function refused(command: string, result: Extract<Awaited<ReturnType<ConfigFile['save']>>, { ok: false }>, io: CommandIO): number {
  io.stderr(`hookgate ${command}: ${result.error}\n`)
  // The findings point into the file as the edit would have left it, which was not written.
  if (result.diagnostics?.length) io.stderr(`(lines as the file would read with the edit)\n`)
  for (const d of result.diagnostics ?? []) io.stderr(formatText(d) + (d.hint ? `\n  hint: ${d.hint}` : '') + '\n')
  // a file that could not be written is no refusal of the edit: exit 2, as for any internal error
  return result.status >= 500 ? EXIT.failed : EXIT.refused
}

async function listCommand(kind: DefinitionKind, argv: string[], io: CommandIO): Promise<number> {
  const name = `${kind} list`
  const parsed = readCommandArgs(name, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit!
  const v = parsed.values as { agent?: string; json?: boolean; config: string; state?: string }
  const read = readConfig(name, v.config, io)
  if (!read) return EXIT.refused
  const stateDir = stateDirOf(v.config, read.value, v.state)
  const last = existsSync(stateDir) ? await new History(stateDir).lastRuns() : new Map()
  const agents = listAgents(read.value).filter((a) => !v.agent || a.id === v.agent)
  if (v.agent && agents.length === 0) {
    io.stderr(`hookgate ${name}: no agent "${v.agent}" in ${v.config}\n`)
    return EXIT.refused
  }
  const endpoint = endpointsOf(read.value, { stateDir })
  const rows: Array<Record<string, any>> = agents.flatMap((a) => (kind === 'trigger' ? a.triggers : a.tasks).map((d) => ({
    agentId: a.id,
    ...d,
    enabled: d.enabled !== false,
    ...(kind === 'trigger' ? { endpoint: endpoint(String(d.path ?? ''))?.url ?? null } : { next: d.enabled === false ? [] : nextFirings(d) }),
    lastRun: last.get(String(d.id)) ?? null,
  })))
  if (v.json) {
    io.stdout(JSON.stringify(rows, null, 2) + '\n')
    return EXIT.ok
  }
  if (rows.length === 0) {
    io.stderr(`no ${kind === 'trigger' ? 'Triggers' : 'Tasks'} in ${v.config}\n`)
    return EXIT.ok
  }
  for (const r of rows) {
    const lastRun = r.lastRun ? `${r.lastRun.status} ${r.lastRun.createdAt}` : 'never run'
    const what = kind === 'trigger' ? `${String(r.target)} ← ${(r as { endpoint?: string | null }).endpoint ?? `(no URL: the path "${String(r.path)}" does not compile)`}` : `${String(r.target)} ${r.schedule !== undefined ? `${String(r.schedule)}${r.timezone ? ` (${String(r.timezone)})` : ''}` : `every ${String(r.every)}`}${(r as { next?: string[] }).next?.[0] ? `, next ${(r as { next?: string[] }).next![0]}` : ''}`
    io.stdout(`${String(r.id)}  ${String(r.name)}${r.enabled ? '' : '  (disabled)'}\n  ${what}\n  last run: ${lastRun}\n`)
  }
  return EXIT.ok
}

