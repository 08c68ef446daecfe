// `hookgate compile [hooks.yaml]`: the thin CLI over the compiler library (compiler/index.ts).
// Machine output on stdout, human text on stderr, silent `--check` on success; exit 0 good,
// 1 config errors, 2 usage or internal error.
import { join, relative } from 'node:path'
import { ExitCode } from '../exit-codes.js'
import { processIO, readCommandArgs, usageLine, type CommandIO, type CommandSpec } from '../flags.js'
import type { Diagnostic } from '../../compiler/diagnostics.js'

export const spec: CommandSpec = {
  name: 'compile',
  args: '[hooks.yaml]',
  summary: 'compile the config into a bundle (exit 0 good, 1 config errors, 2 usage or internal error)',
  flags: [
    { name: 'out', value: 'DIR', default: 'dist', description: 'the folder to write the bundle and manifest into' },
    { name: 'check', description: 'check only: write nothing, print nothing on success' },
    { name: 'format', value: 'text|json|github', default: 'text', description: 'findings as text lines on stderr, one JSON document on stdout, or GitHub Actions annotations' },
    { name: 'max-errors', value: 'N', default: '100', description: 'show at most N errors (warnings are always shown)' },
    { name: 'standalone', description: 'also write the runtime as one self-contained file (dist/hookgate-serve.mjs)' },
  ],
}

/** The usage line, generated from the spec like every other command's. */
export const COMPILE_USAGE = usageLine(spec)

export async function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const { positionals } = parsed
  const values = parsed.values as { out: string; check?: boolean; format: string; 'max-errors': string; standalone?: boolean }
  const format = values.format
  const maxErrors = Number(values['max-errors'])
  if (format !== 'text' && format !== 'json' && format !== 'github') {
    io.stderr(`hookgate compile: --format must be text, json or github, not "${format}"\n${COMPILE_USAGE}\n`)
    return ExitCode.usage
  }
  if (!Number.isInteger(maxErrors) || maxErrors < 1) {
    io.stderr(`hookgate compile: --max-errors takes a whole number from 1 up\n${COMPILE_USAGE}\n`)
    return ExitCode.usage
  }
  if (positionals.length > 1) {
    io.stderr(`hookgate compile: one config file at a time (got ${positionals.length})\n${COMPILE_USAGE}\n`)
    return ExitCode.usage
  }
  const file = positionals[0] ?? 'hooks.yaml'
  const started = Date.now()
  const { compileFile } = await import('../../compiler/index.js')
  const outcome = await compileFile(file, { outDir: values.out, check: values.check === true })
  await report(outcome.diagnostics, format, maxErrors, io)
  if (!outcome.ok) return ExitCode.refused
  if (!values.check && format === 'text' && outcome.result && outcome.bundlePath) {
    const kib = (Buffer.byteLength(outcome.result.code) / 1024).toFixed(1)
    io.stderr(`compiled ${outcome.result.manifest.routes.length} routes into ${relative(process.cwd(), outcome.bundlePath) || outcome.bundlePath} (${kib} KiB) in ${Date.now() - started} ms\n`)
  }
  if (values.standalone && !values.check) {
    const { COMPILER_VERSION } = await import('../../compiler/emit.js')
    const { STANDALONE_FILE, writeStandalone } = await import('../../compiler/standalone.js')
    let files
    try {
      files = await writeStandalone(values.out, COMPILER_VERSION)
    } catch (err) {
      io.stderr(`hookgate compile: cannot write the standalone runtime: ${(err as Error).message}\n`)
      return ExitCode.internal
    }
    if (format === 'text') {
      const list = files.map((f) => `${relative(process.cwd(), f.file) || f.file} (${(f.bytes / 1024).toFixed(1)} KiB)`).join(', ')
      io.stderr(`wrote the standalone runtime: ${list}; run it with node ${join(values.out, STANDALONE_FILE)}\n`)
    }
  }
  return ExitCode.ok
}

async function report(list: Diagnostic[], format: 'text' | 'json' | 'github', maxErrors: number, io: CommandIO): Promise<void> {
  const { capErrors, formatGithub, formatJson, formatText, tooManyErrors } = await import('../../compiler/diagnostics.js')
  const { shown, hiddenErrors } = capErrors(list, maxErrors)
  const more = hiddenErrors > 0 ? tooManyErrors(hiddenErrors, list[0]!.file) : undefined
  if (format === 'json') {
    io.stdout(formatJson(more ? [...shown, more] : shown) + '\n')
    return
  }
  const errors = list.filter((d) => d.severity === 'error')
  const out = format === 'github' ? io.stdout : io.stderr
  for (const d of shown) out((format === 'github' ? formatGithub(d) : formatText(d)) + '\n')
  if (more) out(format === 'github' ? formatGithub(more) + '\n' : `… and ${hiddenErrors} more errors (TOO_MANY_ERRORS); raise --max-errors to see them\n`)
  if (format === 'text' && errors.length > 0) out(`${errors.length} error${errors.length === 1 ? '' : 's'}, ${list.length - errors.length} warning${list.length - errors.length === 1 ? '' : 's'}\n`)
}
