// A child process that compiles configs for the compiler fuzzer (compiler-target.ts): the library
// entry (compileFile, check only) runs here and not in the fuzzer's own process, so that a compile
// that never ends or runs out of memory is killed with its process and counted, and the fuzzer goes on.
import { compileFile } from '../../compiler/index.js'

interface Job { id: number; file: string; outDir: string }

export interface CompileReply {
  id: number
  ok?: boolean
  diagnostics?: Array<{ code: string; severity: string; message: string; file: string; line: number; column: number; path: string }>
  /** bytes of the bundle and of its transform modules, when it compiled */
  bundleBytes?: number
  /** the compiler threw instead of reporting (message and stack) */
  threw?: string
}

process.on('message', (job: Job) => {
  compileFile(job.file, { outDir: job.outDir, check: true }).then(
    (outcome) => {
      const bundleBytes = outcome.result ? Buffer.byteLength(outcome.result.code) + outcome.result.transformModules.reduce((n, m) => n + Buffer.byteLength(m.code), 0) : undefined
      const reply: CompileReply = { id: job.id, ok: outcome.ok, diagnostics: outcome.diagnostics.map((d) => ({ code: d.code, severity: d.severity, message: d.message, file: d.file, line: d.line, column: d.column, path: d.path })) }
      if (bundleBytes !== undefined) reply.bundleBytes = bundleBytes
      process.send!(reply)
    },
    (err: unknown) => process.send!({ id: job.id, threw: String((err as Error)?.stack ?? err) } satisfies CompileReply),
  )
})
process.send!({ id: 0 } satisfies CompileReply)
