// The compiler as a library: load → validate → expand → resolve → compile → emit.
// Each phase reports into one DiagnosticBag, and every phase runs in every compile: a schema error
// leaves its part of the config out of the later phases (validate.ts) instead of stopping them, so
// one run shows every finding. Only a file that cannot be read or parsed stops the run, and the
// bundle is written only when nothing at all is wrong.
import { DiagnosticBag, type Diagnostic } from './diagnostics.js'
import { loadConfig, parseConfigSource, type LoadedConfig } from './load.js'
import { validateParts } from './validate.js'
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
  return compileLoaded(loadConfig(file, bag), bag, options)
}

/**
 * Compiles YAML text as if it were the file `absFile` (its directory is the config tree: transforms
 * and secret files are found from there). The operator page checks an edit this way before it
 * writes anything: the findings name the real file, and a refused edit leaves the disk untouched.
 */
export async function compileSource(source: string, absFile: string, options: CompileOptions): Promise<CompileOutcome> {
  const bag = new DiagnosticBag()
  return compileLoaded(parseConfigSource(source, absFile, bag), bag, options)
}

async function compileLoaded(read: LoadedConfig | undefined, bag: DiagnosticBag, options: CompileOptions): Promise<CompileOutcome> {
  const valid = read && validateParts(read, bag)
  if (!valid) return { diagnostics: bag.sorted(), ok: false }
  const { config, loaded, leftOut } = valid
  const expanded = expandConfig(config, loaded, bag)
  const resolved = resolveConfig(config, expanded, loaded, bag, leftOut)
  const compiled = compileTemplates(resolved, loaded, bag)
  // With errors already found, emit still checks the transforms (their builds and exports) and then stops.
  const result = await emitBundle(resolved, compiled, loaded, bag, options.outDir)
  if (!result || bag.hasErrors) return { diagnostics: bag.sorted(), ok: false }
  const outcome: CompileOutcome = { diagnostics: bag.sorted(), ok: true, result }
  if (!options.check) outcome.bundlePath = writeBundle(options.outDir, result)
  return outcome
}

export { DiagnosticBag }
