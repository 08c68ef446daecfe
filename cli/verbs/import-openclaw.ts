// `hookgate import openclaw FILE`: an OpenClaw hooks config (JSON5) converted into a hooks.yaml by
// compiler/import-openclaw.ts, written, reported on stderr, and compiled in-process, so the exit
// status says whether it works: 0 written and compiles, every key carried (compiler warnings
// allowed); 1 written, but some key was not carried or the compiler found errors (both are
// printed); 2 usage error, unreadable or unparsable input, or an output that exists without --force.
import { cpSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { ExitCode } from '../exit-codes.js'
import { processIO, readCommandArgs, usageLine, type CommandIO, type CommandSpec } from '../flags.js'
import type { Conversion } from '../../compiler/import-openclaw.js'

export const spec: CommandSpec = {
  name: 'import openclaw',
  args: 'FILE',
  summary: 'convert an OpenClaw hooks config (JSON5) into a hooks.yaml',
  flags: [
    { name: 'out', value: 'FILE', default: 'hooks.yaml', description: 'where to write the converted config' },
    { name: 'force', description: 'overwrite --out (and a copied transforms folder) when it exists' },
  ],
  notes: [
    'FILE: the whole OpenClaw config (JSON5, e.g. ~/.openclaw/openclaw.json) or its hooks block alone',
    'exit 0 converted and compiles; 1 written, but keys not carried or compile errors; 2 usage error or unreadable input',
  ],
}

export async function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const values = parsed.values as { out: string; force?: boolean }
  const { positionals } = parsed
  const usage = (message: string): number => {
    io.stderr(`hookgate import: ${message}\n${usageLine(spec)}\n`)
    return ExitCode.usage
  }
  if (positionals.length !== 1) return usage(positionals.length < 1 ? 'name the OpenClaw config file' : 'one OpenClaw config file at a time')
  const file = positionals[0]!
  const outFile = resolve(values.out)
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    return usage(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
  }
  const { default: JSON5 } = await import('json5')
  let root: unknown
  try {
    root = JSON5.parse(text)
  } catch (err) {
    const e = err as Error & { lineNumber?: number; columnNumber?: number }
    // JSON5's message quotes at most the offending character, never the surrounding text (a token).
    return usage(`${file}${e.lineNumber ? `:${e.lineNumber}:${e.columnNumber}` : ''}: not JSON5: ${e.message.replace(/^JSON5: /, '')}`)
  }
  const { convertOpenClaw, isObject, renderYaml } = await import('../../compiler/import-openclaw.js')
  if (!isObject(root)) return usage(`${file} does not hold an object`)
  if (!isObject(root.hooks) && !['mappings', 'token', 'presets', 'enabled', 'gmail'].some((k) => k in root)) {
    return usage(`${file} has no hooks block (expected hooks: { … } at the top, or the hooks block itself)`)
  }
  if (existsSync(outFile) && !values.force) return usage(`${values.out} exists; pass --force to overwrite it`)

  const sourceName = relative(process.cwd(), resolve(file)) || file
  const outName = relative(process.cwd(), outFile) || outFile
  const conversion = convertOpenClaw(root, { sourceDir: dirname(resolve(file)), outDir: dirname(outFile), sourceName })
  const copy = conversion.copyTransforms
  if (copy) {
    if (!existsSync(copy.from) || !statSync(copy.from).isDirectory()) {
      conversion.report.notes.push(`the OpenClaw transforms folder ${copy.from} does not exist: put the transform modules into ${copy.to}`)
    } else if (existsSync(copy.to) && !values.force) {
      return usage(`${relative(process.cwd(), copy.to) || copy.to} exists; pass --force to copy the OpenClaw transforms over it`)
    } else {
      cpSync(copy.from, copy.to, { recursive: true, force: true })
    }
  }
  mkdirSync(dirname(outFile), { recursive: true })
  writeFileSync(outFile, renderYaml(conversion, sourceName))
  printReport(conversion, outName, sourceName, io)

  const { compileFile } = await import('../../compiler/index.js')
  const { formatText } = await import('../../compiler/diagnostics.js')
  const outcome = await compileFile(outFile, { outDir: join(dirname(outFile), 'dist'), check: true })
  for (const d of outcome.diagnostics) io.stderr(formatText(d) + '\n')
  const errors = outcome.diagnostics.filter((d) => d.severity === 'error').length
  if (!outcome.ok) {
    io.stderr(`${outName} does not compile yet: ${errors} error${errors === 1 ? '' : 's'} above\n`)
    return ExitCode.refused
  }
  io.stderr(`${outName} compiles${outcome.diagnostics.length > 0 ? ` (${outcome.diagnostics.length} warning${outcome.diagnostics.length === 1 ? '' : 's'})` : ''}\n`)
  if (conversion.report.notCarried.length > 0) {
    io.stderr(`${conversion.report.notCarried.length} key${conversion.report.notCarried.length === 1 ? ' was' : 's were'} not carried over (listed above): exit 1\n`)
    return ExitCode.refused
  }
  return ExitCode.ok
}

/** What was converted, left out and noted, and which variables to set: on stderr. */
function printReport(conversion: Conversion, outName: string, sourceName: string, io: CommandIO): void {
  const { report } = conversion
  const w = (s: string) => io.stderr(s + '\n')
  w(`hookgate import openclaw: wrote ${outName} from ${sourceName}`)
  if (report.converted.length > 0) {
    w('converted:')
    for (const c of report.converted) w(`  ${c}`)
  }
  if (report.notCarried.length > 0) {
    w(`not carried (${report.notCarried.length}):`)
    for (const n of report.notCarried) w(`  ${n.key}: ${n.reason}`)
  }
  if (report.notes.length > 0) {
    w('notes:')
    for (const n of report.notes) w(`  ${n}`)
  }
  const env = new Map<string, string>()
  for (const e of report.env) if (!env.has(e.name)) env.set(e.name, e.holds)
  if (env.size > 0) {
    w('set before `hookgate serve`:')
    for (const [name, holds] of env) w(`  ${name}: ${holds}`)
  }
}
