// Phase 6, emit: bundles the transforms with esbuild (their build errors mapped to file:line:col),
// checks their exports, and writes one ESM bundle (manifest + config + route table + compiled
// templates), manifest.json, and the transform modules beside them (one per transform.env list),
// which only the runtime's worker threads import: no transform code runs on the main thread. User
// text enters the generated code only through JSON.stringify; the output is byte-identical for
// identical inputs. The files are written beside their places and renamed in (stageBundle), so a
// write that fails leaves the out dir as it was.
// Over 400 lines because the generated module's text is written here in one place (the manifest,
// the config, the route table, the templates): its shape is read top to bottom, as it is emitted.
import { createHash, randomBytes } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join, relative, resolve, sep } from 'node:path'
import { build, type Message, type Metafile, type Plugin } from 'esbuild'
import type { DiagnosticBag } from './diagnostics.js'
import { displayPath, type LoadedConfig } from './load.js'
import type { CompiledConfig } from './compile.js'
import type { ResolvedConfig, StepTransform } from './resolved.js'
import { isInside } from './resolve-paths.js'
import { BUNDLE_FILE, DEFAULT_MAX_ITEMS, DEFAULT_MAX_WAIT_SECONDS, FORMAT_VERSION, MANIFEST_FILE, TRANSFORMS_FILE, bundleBanner, type BundleManifest } from '../runtime/bundle/format.js'

export { BUNDLE_FILE, MANIFEST_FILE }

export const COMPILER_VERSION: string = readPackageVersion()

/**
 * Transforms compile with these fixed settings and never with a tsconfig.json found on disk: its
 * `paths` could pull files from anywhere into the bundle, and the inputs hash could not see it.
 */
const TRANSFORM_TSCONFIG = '{}'

export interface EmitResult {
  code: string
  manifest: BundleManifest
  /** the transform modules to write beside the bundle, by file name */
  transformModules: Array<{ file: string; code: string }>
}

export async function emitBundle(resolved: ResolvedConfig, compiled: CompiledConfig, loaded: LoadedConfig, bag: DiagnosticBag, outDir: string): Promise<EmitResult | undefined> {
  const configDir = loaded.dir
  const transformFiles = [...new Set(transformUsers(compiled, resolved).map((r) => r.transformFile).filter((f): f is string => !!f))].sort()
  let inputs: string[] = []

  if (transformFiles.length > 0) {
    const checked = await checkTransforms(transformFiles, resolved, compiled, loaded, bag)
    if (!checked) return undefined
    inputs = checked
  }
  if (bag.hasErrors) return undefined

  const inputsHash = hashInputs(loaded, inputs)
  const manifest: BundleManifest = {
    formatVersion: FORMAT_VERSION,
    compilerVersion: COMPILER_VERSION,
    inputsHash,
    configFile: relative(configDir, loaded.absFile),
    basePath: resolved.basePath,
    routes: compiled.routes.map(({ route }) => ({
      id: route.id,
      name: route.name,
      ...(route.matchSource !== undefined ? { source: route.matchSource } : {}),
      ...(route.when !== undefined ? { when: true as const } : {}),
      action: route.action,
      definitionKind: route.definitionKind,
      file: relative(configDir, loaded.absFile),
      line: route.location.line,
      column: route.location.column,
      ...(route.transformFile ? { transform: toPosix(relative(configDir, route.transformFile)) } : {}),
    })),
  }

  const transformModules: EmitResult['transformModules'] = []
  const transformFileOf = new Map<string, string>()
  for (const [envKey, routes] of transformGroups(compiled, resolved)) {
    const code = await esbuildEntry(generateTransformsEntry(routes, configDir), configDir, loaded, bag, `// hookgate transforms (format ${FORMAT_VERSION}): imported only by transform worker threads, do not edit`)
    if (code === undefined) return undefined
    const file = `hookgate.transforms.${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`
    transformModules.push({ file, code })
    transformFileOf.set(envKey, file)
  }
  const entry = generateEntry(resolved, compiled, manifest, configDir, resolve(outDir), transformFileOf)
  const code = await esbuildEntry(entry, configDir, loaded, bag, bundleBanner(inputsHash, manifest.configFile, COMPILER_VERSION))
  if (code === undefined) return undefined
  return { code, manifest, transformModules }
}

/** The key a transform's worker group goes by: workers differ only in the environment they get. */
function envKey(env: readonly string[]): string {
  return JSON.stringify([...env].sort())
}

/** Whatever has a transform: mappings, and workflow steps with action transform. */
type TransformUser = Pick<StepTransform, 'id' | 'transform' | 'configPath' | 'transformFile'>

function transformUsers(compiled: CompiledConfig, resolved: ResolvedConfig): TransformUser[] {
  const out: TransformUser[] = []
  for (const { route } of compiled.routes) if (route.transform) out.push(route as TransformUser)
  for (const step of resolved.steps.values()) if (step.transform) out.push(step.transform)
  return out
}

/** Transform users, grouped by their env list, in route order, then step order. */
function transformGroups(compiled: CompiledConfig, resolved: ResolvedConfig): Map<string, TransformUser[]> {
  const groups = new Map<string, TransformUser[]>()
  for (const route of transformUsers(compiled, resolved)) {
    if (!route.transform || !route.transformFile) continue
    const key = envKey(route.transform.env)
    groups.set(key, [...(groups.get(key) ?? []), route])
  }
  return groups
}

async function esbuildEntry(entry: string, configDir: string, loaded: LoadedConfig, bag: DiagnosticBag, banner: string): Promise<string | undefined> {
  const result = await build({
    stdin: { contents: entry, resolveDir: configDir, sourcefile: 'hookgate-entry.js', loader: 'js' },
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    absWorkingDir: configDir,
    legalComments: 'none',
    charset: 'utf8',
    logLevel: 'silent',
    tsconfigRaw: TRANSFORM_TSCONFIG,
    banner: { js: banner },
  }).catch((err: { errors?: Message[] }) => {
    reportEsbuildErrors(err.errors ?? [], configDir, loaded, bag)
    return undefined
  })
  return result?.outputFiles[0]!.text
}

/**
 * Atomic: a runtime watching the directory never sees half a bundle, and the transform modules a
 * new bundle names are in place before it. Transform modules neither the new nor the previous
 * bundle names are removed; the previous one's stay, for a runtime still serving it.
 */
export function writeBundle(outDir: string, result: EmitResult): string {
  const staged = stageBundle(outDir, result)
  return staged.commit()
}

/** A bundle written beside its place and not yet in it: commit() puts it there, discard() leaves the out dir as it was. */
export interface StagedBundle {
  /** renames the bundle into place (its transform modules, manifest.json, then the bundle: the file the runtime watches); all of it or, on a failure (thrown), none */
  commit(): string
  /** removes what staging wrote (the out dir too, when staging created it) */
  discard(): void
}

/**
 * Writes every file of the bundle to a temp name in `outDir`: whatever fails here (an out dir that
 * cannot be made, a full disk) fails before any file the runtime or a reader sees has changed.
 * The control plane stages the bundle before it replaces hooks.yaml, so that a save is whole or
 * nothing (admin/config-file.ts).
 */
export function stageBundle(outDir: string, result: EmitResult): StagedBundle {
  const created = mkdirSync(outDir, { recursive: true })
  const bundlePath = join(outDir, BUNDLE_FILE)
  const manifestPath = join(outDir, MANIFEST_FILE)
  const readOr = (path: string): string | undefined => { try { return readFileSync(path, 'utf8') } catch { return undefined } }
  const previous = readOr(bundlePath) ?? ''
  const previousManifest = readOr(manifestPath)
  // [temp, final] in commit order; a transform module already there has the same content (its name is its hash)
  const moves: Array<[string, string]> = []
  const newModules: string[] = []
  const discard = (): void => {
    for (const [tmp] of moves) rmSync(tmp, { force: true })
    if (created !== undefined) rmSync(created, { recursive: true, force: true })
  }
  try {
    for (const m of result.transformModules) {
      const path = join(outDir, m.file)
      if (readOr(path) === m.code) continue
      moves.push([writeTemp(path, m.code), path])
      newModules.push(path)
    }
    moves.push([writeTemp(manifestPath, JSON.stringify(result.manifest, null, 2) + '\n'), manifestPath])
    moves.push([writeTemp(bundlePath, result.code), bundlePath])
  } catch (err) {
    discard()
    throw err
  }
  return {
    discard,
    commit() {
      let done = 0
      try {
        for (const [tmp, path] of moves) {
          renameSync(tmp, path)
          done++
        }
      } catch (err) {
        // Undo in reverse: the manifest as it was (or none), the new transform modules gone.
        for (const [tmp] of moves.slice(done)) rmSync(tmp, { force: true })
        try {
          if (done > moves.length - 2) {
            if (previousManifest === undefined) rmSync(manifestPath, { force: true })
            else writeAtomic(manifestPath, previousManifest)
          }
          for (const path of newModules) rmSync(path, { force: true })
        } catch (undo) {
          throw new Error(`${(err as Error).message}; and putting ${MANIFEST_FILE} back failed too: ${(undo as Error).message}`)
        }
        throw err
      }
      const keep = new Set([...result.transformModules.map((m) => m.file), ...(previous.match(/hookgate\.transforms\.[0-9a-f]{16}\.mjs/g) ?? [])])
      for (const name of readdirSync(outDir)) {
        if (TRANSFORMS_FILE.test(name) && !keep.has(name)) rmSync(join(outDir, name), { force: true })
      }
      return bundlePath
    },
  }
}

function writeTemp(path: string, text: string): string {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  try {
    writeFileSync(tmp, text)
  } catch (err) {
    rmSync(tmp, { force: true })
    throw err
  }
  return tmp
}

function writeAtomic(path: string, text: string): void {
  renameSync(writeTemp(path, text), path)
}

/** Builds every transform once: maps build errors, holds imports inside transformsDir, checks exports. Returns the input files. */
async function checkTransforms(files: string[], resolved: ResolvedConfig, compiled: CompiledConfig, loaded: LoadedConfig, bag: DiagnosticBag): Promise<string[] | undefined> {
  const configDir = loaded.dir
  const transformsDir = resolved.transformsDir!
  let metafile: Metafile | undefined
  try {
    const r = await build({
      entryPoints: files,
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      metafile: true,
      outdir: join(configDir, '.hookgate-check'),
      outbase: configDir,
      absWorkingDir: configDir,
      logLevel: 'silent',
      tsconfigRaw: TRANSFORM_TSCONFIG,
      plugins: [confineImports(transformsDir, configDir)],
    })
    metafile = r.metafile
  } catch (err) {
    reportEsbuildErrors((err as { errors?: Message[] }).errors ?? [{ text: (err as Error).message } as Message], configDir, loaded, bag)
    return undefined
  }
  const exportsOf = new Map<string, string[]>()
  for (const out of Object.values(metafile.outputs)) {
    if (out.entryPoint) exportsOf.set(resolve(configDir, out.entryPoint), out.exports)
  }
  for (const route of transformUsers(compiled, resolved)) {
    if (!route.transform || !route.transformFile) continue
    const exported = exportsOf.get(route.transformFile) ?? []
    if (!exported.includes(route.transform.exportName)) {
      const at = route.transform.exportName === 'default' ? route.transform.path : [...route.configPath, 'transform', 'export']
      bag.error('TRANSFORM_EXPORT_MISSING', `${toPosix(relative(configDir, route.transformFile))} has no export named "${route.transform.exportName}"`, loaded.locate(at),
        exported.length ? `it exports: ${exported.join(', ')}` : 'it exports nothing: write export default function (input) { … }')
    }
  }
  return Object.keys(metafile.inputs).map((p) => resolve(configDir, p)).sort()
}

/**
 * Every file a transform pulls in must lie inside transformsDir (symlinks followed), or be a
 * package from a node_modules folder; node built-ins stay external.
 */
function confineImports(transformsDir: string, configDir: string): Plugin {
  return {
    name: 'hookgate-confine-transforms',
    setup(b) {
      b.onResolve({ filter: /.*/ }, async (args) => {
        if (args.pluginData?.confined || args.kind === 'entry-point') return undefined
        const r = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: { confined: true } })
        if (r.errors.length > 0 || r.external || !r.path) return r
        let real = r.path
        try { real = realpathSync(r.path) } catch { /* esbuild reports missing files itself */ }
        const bare = !args.path.startsWith('.') && !args.path.startsWith('/')
        if (isInside(real, transformsDir) || (bare && real.split(sep).includes('node_modules'))) return r
        return { errors: [{ text: `import "${args.path}" resolves to ${toPosix(relative(configDir, real))}, outside transformsDir (TRANSFORM_PATH_ESCAPE)` }] }
      })
    },
  }
}

function reportEsbuildErrors(errors: Message[], configDir: string, loaded: LoadedConfig, bag: DiagnosticBag): void {
  for (const e of errors) {
    const loc = e.location
    const escape = e.text.endsWith('(TRANSFORM_PATH_ESCAPE)')
    const text = escape ? e.text.replace(/ \(TRANSFORM_PATH_ESCAPE\)$/, '') : e.text
    const message = text.charAt(0).toLowerCase() + text.slice(1).replace(/\.$/, '')
    if (loc) {
      // esbuild columns are 0-based UTF-8 byte offsets; ours are 1-based characters.
      const column = Buffer.from(loc.lineText, 'utf8').subarray(0, loc.column).toString('utf8').length + 1
      bag.error(escape ? 'TRANSFORM_PATH_ESCAPE' : 'TRANSFORM_BUILD', message, { file: displayPath(resolve(configDir, loc.file)), line: loc.line, column, path: '' })
    } else {
      bag.error('TRANSFORM_BUILD', message, { file: loaded.file, line: 1, column: 1, path: '' })
    }
  }
}

function hashInputs(loaded: LoadedConfig, inputs: string[]): string {
  const h = createHash('sha256')
  h.update(`hookgate-bundle/${FORMAT_VERSION}\0${COMPILER_VERSION}\0`)
  h.update(`${relative(loaded.dir, loaded.absFile)}\0`).update(loaded.source).update('\0')
  for (const file of inputs) {
    h.update(`${toPosix(relative(loaded.dir, file))}\0`).update(readFileSync(file)).update('\0')
  }
  return 'sha256:' + h.digest('hex')
}

/** The entry module esbuild bundles: data through JSON.stringify, render functions from compile.ts. */
function generateEntry(resolved: ResolvedConfig, compiled: CompiledConfig, manifest: BundleManifest, configDir: string, outDir: string, transformFileOf: ReadonlyMap<string, string>): string {
  const lines: string[] = []
  const runtimeConfig = {
    enabled: resolved.enabled,
    basePath: resolved.basePath,
    token: resolved.token ?? null,
    policy: resolved.policy,
    server: resolved.server,
    agents: resolved.agents,
    providers: resolved.providers,
    channels: resolved.channels,
    defaultAgentId: resolved.defaultAgentId,
    tasks: resolved.tasks,
    gmail: resolved.gmail ?? null,
    // where relative paths in the config (secret files, stateDir) start, seen from the bundle
    configDirFromBundle: toPosix(relative(outDir, configDir)) || '.',
  }
  // Everything sits inside one exported function and is built when the runtime calls it: Node never
  // frees an imported module, but what the function returns is freed once a reload replaces it;
  // only the module's source and its code stay behind.
  const pool = compiled.conditions
  // A bundle with patterns asks for the runtime's pattern engine (RE2, runtime/bundle/regex.ts); one
  // without never makes the runtime load it.
  if (pool.regexes.length > 0) lines.push('export const needsPatterns = true;')
  lines.push('export function bundle(engines) {')
  // Data as JSON text: one string constant instead of bytecode building each object literal.
  const parse = (v: unknown) => `JSON.parse(${lit(JSON.stringify(v))})`
  lines.push(`const manifest = ${parse(manifest)};`)
  lines.push(`const config = ${parse(runtimeConfig)};`)
  // match.when constants: patterns compiled here by the runtime's RE2 engine, once per load, never
  // per request. A runtime of an older format hands no engine: it gets none, and refuses the bundle
  // by its format version (checked once bundle() returns) instead of failing here.
  const patterns = pool.regexes.map((r) => `compilePattern(${lit(r.source)}, ${lit(r.flags)})`).join(', ')
  lines.push(`const compilePattern = engines?.compilePattern;`)
  lines.push(`const whenRegex = compilePattern ? [${patterns}] : [];`)
  lines.push(`const whenValues = ${parse(pool.values)};`)
  const routeData: unknown[] = []
  const routeLines: string[] = []
  const whenLines: string[] = []
  for (const { route, render, when, forEach } of compiled.routes) {
    const data = {
      id: route.id,
      name: route.name,
      source: route.matchSource ?? null,
      definitionKind: route.definitionKind,
      action: route.action,
      wakeMode: route.wakeMode,
      agentId: route.agentId ?? null,
      deliver: route.deliver,
      channel: route.channel,
      model: route.model ?? null,
      thinking: route.thinking ?? null,
      timeoutSeconds: route.timeoutSeconds ?? null,
      workflow: route.workflow ?? null,
      maxBodyBytes: route.maxBodyBytes ?? null,
      signature: route.verifiedBy ?? null,
      allowUnsafeExternalContent: route.allowUnsafeExternalContent,
      notify: route.notify ?? null,
      forEach: forEach ?? null,
      maxItems: route.maxItems ?? DEFAULT_MAX_ITEMS,
      waitSeconds: route.waitForCompletion ? Math.min(route.waitTimeoutSeconds ?? Infinity, resolved.server.maxWaitSeconds ?? DEFAULT_MAX_WAIT_SECONDS) : null,
    }
    const renders = Object.entries(render).map(([field, code]) => `${lit(field)}: ${code}`).join(', ')
    const transform = route.transform && route.transformFile
      ? { exportName: route.transform.exportName, module: route.transform.module, timeoutMs: route.transform.timeoutMs, file: transformFileOf.get(envKey(route.transform.env)), env: [...route.transform.env].sort() }
      : null
    routeData.push({ ...data, transform, when: when ? { leaves: when.leaves, tree: when.tree } : null })
    routeLines.push(`  { ${renders} },`)
    whenLines.push(`  ${when ? when.code : 'null'},`)
  }
  lines.push(`const routeData = ${parse(routeData)};`)
  lines.push('const renders = [', ...routeLines, '];')
  lines.push('const whens = [', ...whenLines, '];')
  lines.push('const routes = routeData.map((d, i) => ({ ...d, render: renders[i], when: d.when && { ...d.when, test: whens[i] } }));')
  lines.push('const workflows = [')
  for (const wf of resolved.workflows) {
    const steps = compiled.workflowSteps.get(wf.id) ?? []
    const stepCode = wf.steps.map((s, i) => {
      const renders = Object.entries(steps[i]?.render ?? {}).map(([field, code]) => `${lit(field)}: ${code}`).join(', ')
      const headers = Object.entries(steps[i]?.headers ?? {}).map(([name, code]) => `${lit(name)}: ${code}`).join(', ')
      const extra = resolved.steps.get(`${wf.id}\0${s.id}`)
      const t = extra?.transform
      const transform = t && t.transformFile ? { id: t.id, exportName: t.transform.exportName, module: t.transform.module, timeoutMs: t.transform.timeoutMs, file: transformFileOf.get(envKey(t.transform.env)), env: [...t.transform.env].sort() } : null
      const data = {
        id: s.id, action: s.action, agentId: s.agentId ?? null, needs: s.needs ?? [], timeoutSeconds: s.timeoutSeconds ?? null,
        retries: s.retries ?? 0, backoffSeconds: s.backoffSeconds ?? null, method: s.method ?? null, expect: s.expect ?? null,
        secretHeaders: extra?.secretHeaders ?? {}, channel: s.channel ?? null, transform, urlScope: steps[i]?.urlScope ?? null,
      }
      return `{ ...${parse(data)}, render: { ${renders} }, headers: { ${headers} } }`
    })
    lines.push(`  { id: ${lit(wf.id)}, steps: [${stepCode.join(', ')}] },`)
  }
  lines.push('];')
  lines.push('return { manifest, config, routes, workflows };')
  lines.push('}')
  return lines.join('\n') + '\n'
}

/** A transforms module: the transform function of each mapping (in this env group) by mapping id. */
function generateTransformsEntry(routes: TransformUser[], configDir: string): string {
  const lines: string[] = []
  const imports = new Map<string, string>()
  const entries: string[] = []
  for (const route of routes) {
    let name = imports.get(route.transformFile!)
    if (name === undefined) {
      name = `transform${imports.size}`
      imports.set(route.transformFile!, name)
      lines.push(`import * as ${name} from ${lit('./' + toPosix(relative(configDir, route.transformFile!)))};`)
    }
    entries.push(`  ${lit(route.id)}: ${name}[${lit(route.transform!.exportName)}],`)
  }
  lines.push('export const transforms = {', ...entries, '};')
  return lines.join('\n') + '\n'
}

function lit(v: unknown): string {
  return JSON.stringify(v).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
}

function toPosix(p: string): string {
  return p.split(sep).join('/')
}

function readPackageVersion(): string {
  // build/compiler/emit.js and compiler/emit.ts both sit two levels under the package root
  for (const up of ['../../package.json', '../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string }
      if (pkg.name === 'hookgate' && pkg.version) return pkg.version
    } catch { /* try the next */ }
  }
  return '0.0.0'
}
