// The thin CLI over the compiler library: `hookgate compile` and `hookgate schema`.
// Machine output on stdout, human text on stderr, silent `--check` on success.
import { join, relative } from 'node:path'
import { compileFile } from '../compiler/index.js'
import { ExitCode, capErrors, formatGithub, formatJson, formatText, tooManyErrors, type Diagnostic } from '../compiler/diagnostics.js'
import { jsonSchemaDocument } from '../compiler/schema.js'
import { getCommand, readCommandArgs, usageLine } from './commands.js'

/** The usage line, generated from the command table like every other command's. */
export const COMPILE_USAGE = usageLine(getCommand('compile'))
import { COMPILER_VERSION } from '../compiler/emit.js'
import { STANDALONE_FILE, writeStandalone } from '../compiler/standalone.js'

export async function main(command: string, argv: string[]): Promise<number> {
  if (command === 'schema') {
    const parsed = readCommandArgs('schema', argv)
    if (parsed.kind !== 'ok') return parsed.exit!
    process.stdout.write(JSON.stringify(jsonSchemaDocument(), null, 2) + '\n')
    return ExitCode.ok
  }
  return compileCommand(argv)
}

async function compileCommand(argv: string[]): Promise<number> {
  const parsed = readCommandArgs('compile', argv)
  if (parsed.kind !== 'ok') return parsed.exit!
  const { positionals } = parsed
  const values = parsed.values as { out: string; check?: boolean; format: string; 'max-errors': string; standalone?: boolean }
  const format = values.format
  const maxErrors = Number(values['max-errors'])
  if (format !== 'text' && format !== 'json' && format !== 'github') {
    process.stderr.write(`hookgate compile: --format must be text, json or github, not "${format}"\n${COMPILE_USAGE}\n`)
    return ExitCode.usageOrInternal
  }
  if (!Number.isInteger(maxErrors) || maxErrors < 1) {
    process.stderr.write(`hookgate compile: --max-errors takes a whole number from 1 up\n${COMPILE_USAGE}\n`)
    return ExitCode.usageOrInternal
  }
  if (positionals.length > 1) {
    process.stderr.write(`hookgate compile: one config file at a time (got ${positionals.length})\n${COMPILE_USAGE}\n`)
    return ExitCode.usageOrInternal
  }
  const file = positionals[0] ?? 'hooks.yaml'
  const started = Date.now()
  const outcome = await compileFile(file, { outDir: values.out, check: values.check === true })
  report(outcome.diagnostics, format, maxErrors)
  if (!outcome.ok) return ExitCode.configErrors
  if (!values.check && format === 'text' && outcome.result && outcome.bundlePath) {
    const kib = (Buffer.byteLength(outcome.result.code) / 1024).toFixed(1)
    process.stderr.write(`compiled ${outcome.result.manifest.routes.length} routes into ${relative(process.cwd(), outcome.bundlePath) || outcome.bundlePath} (${kib} KiB) in ${Date.now() - started} ms\n`)
  }
  if (values.standalone && !values.check) {
    let files
    try {
      files = await writeStandalone(values.out!, COMPILER_VERSION)
    } catch (err) {
      process.stderr.write(`hookgate compile: cannot write the standalone runtime: ${(err as Error).message}\n`)
      return ExitCode.usageOrInternal
    }
    if (format === 'text') {
      const list = files.map((f) => `${relative(process.cwd(), f.file) || f.file} (${(f.bytes / 1024).toFixed(1)} KiB)`).join(', ')
      process.stderr.write(`wrote the standalone runtime: ${list}; run it with node ${join(values.out!, STANDALONE_FILE)}\n`)
    }
  }
  return ExitCode.ok
}

function report(list: Diagnostic[], format: 'text' | 'json' | 'github', maxErrors: number): void {
  const { shown, hiddenErrors } = capErrors(list, maxErrors)
  const more = hiddenErrors > 0 ? tooManyErrors(hiddenErrors, list[0]!.file) : undefined
  if (format === 'json') {
    process.stdout.write(formatJson(more ? [...shown, more] : shown) + '\n')
    return
  }
  const errors = list.filter((d) => d.severity === 'error')
  const out = format === 'github' ? process.stdout : process.stderr
  for (const d of shown) out.write((format === 'github' ? formatGithub(d) : formatText(d)) + '\n')
  if (more) out.write(format === 'github' ? formatGithub(more) + '\n' : `… and ${hiddenErrors} more errors (TOO_MANY_ERRORS); raise --max-errors to see them\n`)
  if (format === 'text' && errors.length > 0) out.write(`${errors.length} error${errors.length === 1 ? '' : 's'}, ${list.length - errors.length} warning${list.length - errors.length === 1 ? '' : 's'}\n`)
}
