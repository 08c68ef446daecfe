// The compiler as a library: load → validate → expand → resolve → compile → emit.
// Each phase reports into one DiagnosticBag; a phase runs only if the ones before it left no error
// that would make its findings noise.
import { DiagnosticBag, type Diagnostic } from './diagnostics.js'
import { loadConfig } from './load.js'
import { validateConfig } from './validate.js'
import { expandConfig } from './expand.js'
import { resolveConfig } from './resolve.js'
import { compileTemplates } from './compile.js'
import { emitBundle, writeBundle, type EmitResult } from './emit.js'

export interface CompileOptions {
  /** output directory for the bundle and manifest.json (also used to locate the config from the bundle) */
  outDir: string
  /** check only: write nothing */
  check?: boolean
}

export interface CompileOutcome {
  diagnostics: Diagnostic[]
  ok: boolean
  result?: EmitResult
  bundlePath?: string
}

export async function compileFile(file: string, options: CompileOptions): Promise<CompileOutcome> {
  const bag = new DiagnosticBag()
  const loaded = loadConfig(file, bag)
  const config = loaded && validateConfig(loaded, bag)
  if (!loaded || !config) return { diagnostics: bag.sorted(), ok: false }
  const expanded = expandConfig(config, loaded, bag)
  const resolved = resolveConfig(config, expanded, loaded, bag)
  const compiled = compileTemplates(resolved, loaded, bag)
  const result = bag.hasErrors ? undefined : await emitBundle(resolved, compiled, loaded, bag, options.outDir)
  if (!result || bag.hasErrors) return { diagnostics: bag.sorted(), ok: false }
  const outcome: CompileOutcome = { diagnostics: bag.sorted(), ok: true, result }
  if (!options.check) outcome.bundlePath = writeBundle(options.outDir, result)
  return outcome
}

export { DiagnosticBag }
