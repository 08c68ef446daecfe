// What `hookgate trigger|task add|list|rm` share (each verb is a module under cli/verbs/): they make
// the operator page's edits from the command line through the same ConfigFile (admin/config-file.ts):
// the same checks by the compiler, the same If-unchanged write of hooks.yaml, the same bundle.
// The control plane is loaded when a command runs (the command table loads no library).
import { existsSync, readFileSync } from 'node:fs'
import { ExitCode } from './exit-codes.js'
import { readCommandArgs, usageLine, type CommandIO, type CommandSpec } from './flags.js'
import type { SaveResult } from '../admin/config-file.js'
import type { Definition, DefinitionKind } from '../admin/definitions.js'

/** The config's text and parsed value, or why it cannot be read (said on stderr). */
export async function readConfig(command: string, file: string, io: CommandIO): Promise<{ text: string; value: Record<string, any> } | undefined> {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    io.stderr(`hookgate ${command}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}\n`)
    return undefined
  }
  const { readConfigValue } = await import('../admin/definitions.js')
  const read = readConfigValue(text)
  if ('error' in read) {
    io.stderr(`hookgate ${command}: ${file}: ${read.error}\n`)
    return undefined
  }
  return { text, value: read.value }
}

/** Flag values → the definition's fields (numbers where the schema wants them; a bad one is left for the compiler to name). */
async function definitionFromFlags(kind: DefinitionKind, v: Record<string, unknown>): Promise<Definition> {
  const { cleanDefinition } = await import('../admin/definitions.js')
  const timeout = v.timeout === undefined ? undefined : /^\d+(\.\d+)?$/.test(String(v.timeout)) ? Number(v.timeout) : v.timeout
  const common = { name: v.name, target: v.target, workflow: v.workflow, prompt: v.prompt, timeoutSeconds: timeout, notify: v.notify, enabled: v.disabled === true ? false : undefined }
  if (kind === 'trigger') return cleanDefinition('trigger', { ...common, path: v.path, timing: v.timing, delivery: v.delivery, channel: v.channel, to: v.to })
  return cleanDefinition('task', { ...common, schedule: v.schedule, every: v.every, timezone: v.timezone, catchUp: v['catch-up'] })
}

async function defaultAgent(value: Record<string, any>): Promise<string> {
  const { listAgents } = await import('../admin/definitions.js')
  const agents = listAgents(value)
  return (agents.find((a) => a.default) ?? agents[0]!).id
}

/** `hookgate trigger add` and `task add`: the definition from the flags, saved through the control plane's ConfigFile. */
export async function addDefinition(spec: CommandSpec, kind: DefinitionKind, argv: string[], io: CommandIO): Promise<number> {
  const name = spec.name
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const v = parsed.values as Record<string, string | boolean | undefined> & { config: string; out: string; state?: string }
  const read = await readConfig(name, v.config, io)
  if (!read) return ExitCode.refused
  const { configValue, definitionId, listAgents } = await import('../admin/definitions.js')
  const { displayPath, endpointsOf, stateDirOf } = await import('../admin/endpoints.js')
  const agentId = typeof v.agent === 'string' ? v.agent : await defaultAgent(read.value)
  const definition = await definitionFromFlags(kind, v)
  const label = kind === 'trigger' ? 'Trigger' : 'Task'
  const existing = listAgents(read.value).find((a) => a.id === agentId)?.[kind === 'trigger' ? 'triggers' : 'tasks'].find((d) => d.id === definitionId(kind, agentId, String(definition.name)))
  if (existing && v.replace !== true) {
    io.stderr(`hookgate ${name}: agent "${agentId}" already has a ${label} named "${String(existing.name)}"; add --replace to change it\n`)
    return ExitCode.refused
  }
  const stateDir = stateDirOf(v.config, read.value, v.state)
  const { ConfigFile } = await import('../admin/config-file.js')
  const file = new ConfigFile(v.config, v.out, stateDir)
  const result = await file.save({ kind, agentId, original: existing ? String(existing.name) : null, definition }, undefined)
  if (!result.ok) return refused(name, result, io)
  const { formatText } = await import('../compiler/diagnostics.js')
  io.stderr(`${existing ? 'replaced' : 'added'} ${label} "${String(definition.name)}" (${result.id}) in ${displayPath(file.file)}; compiled ${result.routes} routes into ${v.out}\n`)
  for (const w of result.warnings) io.stderr(formatText(w) + '\n')
  if (result.tokenGenerated) io.stderr(`generated a hook token into ${displayPath(result.tokenGenerated)} (mode 0600); hooks.token now reads it\n`)
  if (kind === 'trigger') {
    // the path compiled, so it has a URL
    const endpoint = endpointsOf(configValue(readFileSync(file.file, 'utf8')) ?? {}, { stateDir })(String(definition.path))!
    io.stdout(`${endpoint.url}\n${endpoint.curl}\n`)
  } else {
    const { nextFirings } = await import('../admin/server.js')
    const next = nextFirings(definition)
    if (definition.enabled !== false && next.length > 0) io.stdout(`next firings:\n${next.map((t) => `  ${t}`).join('\n')}\n`)
  }
  return ExitCode.ok
}

/** `hookgate trigger rm` and `task rm`: the definition removed through the control plane's ConfigFile. */
export async function removeDefinition(spec: CommandSpec, kind: DefinitionKind, argv: string[], io: CommandIO): Promise<number> {
  const name = spec.name
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  if (parsed.positionals.length !== 1 || parsed.positionals[0]!.trim() === '') {
    io.stderr(`hookgate ${name}: name one ${kind === 'trigger' ? 'Trigger' : 'Task'}\n${usageLine(spec)}\n`)
    return ExitCode.usage
  }
  const v = parsed.values as Record<string, string | boolean | undefined> & { config: string; out: string; state?: string }
  const read = await readConfig(name, v.config, io)
  if (!read) return ExitCode.refused
  const { displayPath, stateDirOf } = await import('../admin/endpoints.js')
  const { ConfigFile } = await import('../admin/config-file.js')
  const agentId = typeof v.agent === 'string' ? v.agent : await defaultAgent(read.value)
  const file = new ConfigFile(v.config, v.out, stateDirOf(v.config, read.value, v.state))
  const result = await file.save({ kind, agentId, original: parsed.positionals[0]!, definition: null }, undefined)
  if (!result.ok) return refused(name, result, io)
  io.stderr(`removed ${kind === 'trigger' ? 'Trigger' : 'Task'} "${parsed.positionals[0]}" of agent "${agentId}" from ${displayPath(file.file)}; compiled ${result.routes} routes into ${v.out}\n`)
  return ExitCode.ok
}

async function refused(command: string, result: Extract<SaveResult, { ok: false }>, io: CommandIO): Promise<number> {
  const { formatText } = await import('../compiler/diagnostics.js')
  io.stderr(`hookgate ${command}: ${result.error}\n`)
  // The findings point into the file as the edit would have left it, which was not written.
  if (result.diagnostics?.length) io.stderr(`(lines as the file would read with the edit)\n`)
  for (const d of result.diagnostics ?? []) io.stderr(formatText(d) + (d.hint ? `\n  hint: ${d.hint}` : '') + '\n')
  // a file that could not be written is no refusal of the edit: exit 2, as for any internal error
  return result.status >= 500 ? ExitCode.internal : ExitCode.refused
}

/** `hookgate trigger list` and `task list`: the definitions in hooks.yaml, each with its endpoint or next firings and its last run. */
export async function listDefinitions(spec: CommandSpec, kind: DefinitionKind, argv: string[], io: CommandIO): Promise<number> {
  const name = spec.name
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const v = parsed.values as { agent?: string; json?: boolean; config: string; state?: string }
  const read = await readConfig(name, v.config, io)
  if (!read) return ExitCode.refused
  const { listAgents } = await import('../admin/definitions.js')
  const { endpointsOf, stateDirOf } = await import('../admin/endpoints.js')
  const { History } = await import('../admin/history.js')
  const { nextFirings } = await import('../admin/server.js')
  const stateDir = stateDirOf(v.config, read.value, v.state)
  const last = existsSync(stateDir) ? await new History(stateDir).lastRuns() : new Map()
  const agents = listAgents(read.value).filter((a) => !v.agent || a.id === v.agent)
  if (v.agent && agents.length === 0) {
    io.stderr(`hookgate ${name}: no agent "${v.agent}" in ${v.config}\n`)
    return ExitCode.refused
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
    return ExitCode.ok
  }
  if (rows.length === 0) {
    io.stderr(`no ${kind === 'trigger' ? 'Triggers' : 'Tasks'} in ${v.config}\n`)
    return ExitCode.ok
  }
  for (const r of rows) {
    const lastRun = r.lastRun ? `${r.lastRun.status} ${r.lastRun.createdAt}` : 'never run'
    const what = kind === 'trigger' ? `${String(r.target)} ← ${(r as { endpoint?: string | null }).endpoint ?? `(no URL: the path "${String(r.path)}" does not compile)`}` : `${String(r.target)} ${r.schedule !== undefined ? `${String(r.schedule)}${r.timezone ? ` (${String(r.timezone)})` : ''}` : `every ${String(r.every)}`}${(r as { next?: string[] }).next?.[0] ? `, next ${(r as { next?: string[] }).next![0]}` : ''}`
    io.stdout(`${String(r.id)}  ${String(r.name)}${r.enabled ? '' : '  (disabled)'}\n  ${what}\n  last run: ${lastRun}\n`)
  }
  return ExitCode.ok
}

