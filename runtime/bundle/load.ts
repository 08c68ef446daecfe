// Loads a compiled bundle: finds the file, checks the format version (and says which side to
// upgrade), and builds the frozen route table that a request looks up once. No YAML, no schema,
// no eval here: the bundle is plain ES module code emitted by the compiler, and holds no
// transform code (that is imported by the transform processes only). A bundle with `matches`
// conditions is handed the pattern engine (runtime/bundle/regex.ts, loaded only then), which compiles
// each pattern once, here, never per request.
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { BANNER_HASH, BUNDLE_FILE, FORMAT_VERSION, type BundleConfig, type BundleEngines, type BundleExports, type BundleManifest, type BundleModule, type BundleRoute, type BundleWorkflow } from './format.js'
import { loadPatternCompiler } from './regex.js'

export interface LoadedBundle {
  file: string
  manifest: BundleManifest
  config: BundleConfig
  /** absolute directory that relative config paths (secret files, stateDir) start from */
  configDir: string
  /** name under the base path → the routes on that name, in match order */
  routeTable: ReadonlyMap<string, readonly BundleRoute[]>
  /** true when some route authenticates by a sender signature: only then is the route found before auth */
  signed: boolean
  workflows: ReadonlyMap<string, BundleWorkflow>
}

export class BundleLoadError extends Error {
  override name = 'BundleLoadError'
}

/** `PATH` is the compile --out directory or the bundle file in it. */
export function bundleFileOf(pathOrDir: string): string {
  const abs = resolve(pathOrDir)
  if (existsSync(abs)) return statSync(abs).isDirectory() ? join(abs, BUNDLE_FILE) : abs
  // Not there yet: a name ending in .mjs/.js means the file, anything else the --out directory.
  return /\.m?js$/.test(abs) ? abs : join(abs, BUNDLE_FILE)
}

let loads = 0

/**
 * The inputs hash on the bundle's first line, read from its first 512 bytes without importing it;
 * undefined when the file is missing or carries no such line (then only importing it can tell).
 */
export function readBundleHash(file: string): string | undefined {
  let fd: number | undefined
  try {
    fd = openSync(file, 'r')
    const head = Buffer.alloc(512)
    const n = readSync(fd, head, 0, head.length, 0)
    return BANNER_HASH.exec(head.subarray(0, n).toString('utf8'))?.[1]
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

export async function loadBundle(pathOrDir: string): Promise<LoadedBundle> {
  const file = bundleFileOf(pathOrDir)
  if (!existsSync(file)) {
    throw new BundleLoadError(`no bundle at ${file}: run \`hookgate compile hooks.yaml --out ${dirname(file)}\` first`)
  }
  let mod: Partial<BundleModule>
  try {
    // A fresh URL per load, so that a reload sees the new file rather than the module cache.
    const exported = await import(`${pathToFileURL(file).href}?load=${++loads}&mtime=${statSync(file).mtimeMs}`) as Partial<BundleModule> & Partial<BundleExports>
    const engines: BundleEngines = exported.needsPatterns === true ? { compilePattern: await loadPatternCompiler() } : {}
    // Format 2 builds its contents in bundle(), so that they can be freed after a reload (the
    // module itself never is); an older bundle exports them, which is enough to name its format.
    mod = typeof exported.bundle === 'function' ? exported.bundle(engines) : exported
  } catch (err) {
    throw new BundleLoadError(`cannot load bundle ${file}: ${(err as Error).message}`)
  }
  return checkBundle(mod, file)
}

export function checkBundle(mod: Partial<BundleModule>, file: string): LoadedBundle {
  const manifest = mod.manifest
  if (!manifest || typeof manifest.formatVersion !== 'number' || !mod.config || !Array.isArray(mod.routes)) {
    throw new BundleLoadError(`${file} is not a hookgate bundle (no manifest); compile it with \`hookgate compile\``)
  }
  if (manifest.formatVersion > FORMAT_VERSION) {
    throw new BundleLoadError(`bundle format ${manifest.formatVersion} (hookgate ${manifest.compilerVersion}) is newer than this runtime understands (format ${FORMAT_VERSION}): upgrade hookgate on this host`)
  }
  if (manifest.formatVersion < FORMAT_VERSION) {
    throw new BundleLoadError(`bundle format ${manifest.formatVersion} (hookgate ${manifest.compilerVersion}) is older than this runtime needs (format ${FORMAT_VERSION}): recompile the bundle with this hookgate version`)
  }
  const table = new Map<string, BundleRoute[]>()
  let signed = false
  for (const route of mod.routes) {
    if (route.signature) signed = true
    const list = table.get(route.name) ?? []
    list.push(Object.freeze(route))
    table.set(route.name, list)
  }
  for (const list of table.values()) Object.freeze(list)
  const workflows = new Map((mod.workflows ?? []).map((w) => [w.id, w]))
  return Object.freeze({
    file,
    manifest,
    config: mod.config,
    configDir: resolve(dirname(file), mod.config.configDirFromBundle ?? '.'),
    routeTable: table,
    signed,
    workflows,
  })
}
