// The thin CLI over the compiler library: `hookgate compile` and `hookgate schema`.
// Machine output on stdout, human text on stderr, silent `--check` on success.
import { parseArgs } from 'node:util'
import { join, relative } from 'node:path'
import { compileFile } from './index.js'
import { ExitCode, formatGithub, formatJson, formatText, type Diagnostic } from './diagnostics.js'
import { jsonSchemaDocument } from './schema.js'
import { COMPILER_VERSION } from './emit.js'
import { STANDALONE_FILE, writeStandalone } from './standalone.js'

export const COMPILE_USAGE = `usage: hookgate compile [hooks.yaml] [--out dist] [--check] [--format text|json|github] [--max-errors N] [--standalone]`

export async function main(command: string, argv: string[]): Promise<number> {
  if (command === 'schema') {
    process.stdout.write(JSON.stringify(jsonSchemaDocument(), null, 2) + '\n')
    return ExitCode.ok
  }
  return compileCommand(argv)
}

async function compileCommand(argv: string[]): Promise<number> {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        out: { type: 'string', default: 'dist' },
        check: { type: 'boolean', default: false },
        format: { type: 'string', default: 'text' },
        'max-errors': { type: 'string', default: '100' },
        standalone: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    })
  } catch (err) {
    process.stderr.write(`hookgate compile: ${(err as Error).message}\n${COMPILE_USAGE}\n`)
    return ExitCode.usageOrInternal
  }
  const { values, positionals } = parsed
  if (values.help) {
    process.stdout.write(COMPILE_USAGE + '\n')
    return ExitCode.ok
  }
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
  const outcome = await compileFile(file, { outDir: values.out!, check: values.check! })
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
  if (format === 'json') {
    process.stdout.write(formatJson(list) + '\n')
    return
  }
  const errors = list.filter((d) => d.severity === 'error')
  const shown = [...list.filter((d) => d.severity === 'warning'), ...errors.slice(0, maxErrors)].sort((a, b) => list.indexOf(a) - list.indexOf(b))
  const out = format === 'github' ? process.stdout : process.stderr
  for (const d of shown) out.write((format === 'github' ? formatGithub(d) : formatText(d)) + '\n')
  if (errors.length > maxErrors) out.write(`… and ${errors.length - maxErrors} more errors (TOO_MANY_ERRORS); raise --max-errors to see them\n`)
  if (format === 'text' && errors.length > 0) out.write(`${errors.length} error${errors.length === 1 ? '' : 's'}, ${list.length - errors.length} warning${list.length - errors.length === 1 ? '' : 's'}\n`)
}
