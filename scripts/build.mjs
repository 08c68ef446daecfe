// Transpiles the TypeScript sources (compiler/, runtime/, admin/, test/) to build/, one .js file per
// .ts file, so that `node` runs them without a loader; bundles the runtime that `hookgate serve`
// loads into build/serve/, and the operator page (admin/ui/, a browser script with its own
// tsconfig) into build/admin/ui/. Type checking is `npm run typecheck`.
//
// `--package` (npm's prepack, run by `npm pack` and `npm publish`) builds what the package ships:
// no test/ and no source maps (they were three quarters of its size). npm runs prepare after
// prepack when it packs: that prepare leaves the package's build as it is.
import { build } from 'esbuild'
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const forPackage = process.argv.includes('--package')
if (!forPackage && process.env.npm_lifecycle_event === 'prepare' && ['pack', 'publish'].includes(process.env.npm_command ?? '')) process.exit(0)
// the package's build starts empty: nothing a development build left (tests, maps) may ship
if (forPackage) rmSync(join(root, 'build'), { recursive: true, force: true })
const sourceDirs = ['cli', 'compiler', 'runtime', 'admin', 'gmail', ...(forPackage ? [] : ['test'])]
// The page runs in the browser: bundled on its own below, never transpiled for node.
const uiDir = join(root, 'admin', 'ui')

function listTypeScript(dir) {
  const out = []
  for (const name of readdirSync(dir)) {
    const full = join(dir, name)
    if (statSync(full).isDirectory()) {
      if (name === 'node_modules' || name === 'fixtures' || full === uiDir) continue
      out.push(...listTypeScript(full))
    } else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) {
      out.push(full)
    }
  }
  return out
}

const entryPoints = sourceDirs.flatMap((d) => listTypeScript(join(root, d)))
const started = Date.now()
await build({
  entryPoints,
  outdir: join(root, 'build'),
  outbase: root,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: forPackage ? false : 'inline',
  logLevel: 'warning',
})
// `hookgate serve` loads the runtime as one file (see cli/serve-main.ts), and the transform
// worker beside it, as the standalone runtime does; packages (undici) stay imports, loaded lazily.
await build({
  entryPoints: { 'hookgate-serve': join(root, 'cli', 'serve-main.ts'), 'hookgate-worker': join(root, 'runtime', 'transforms', 'hookgate-worker.ts') },
  outdir: join(root, 'build', 'serve'),
  outExtension: { '.js': '.mjs' },
  bundle: true,
  packages: 'external',
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: forPackage ? false : 'linked',
  logLevel: 'warning',
})
const uiOut = join(root, 'build', 'admin', 'ui')
mkdirSync(uiOut, { recursive: true })
await build({
  entryPoints: [join(uiDir, 'app.ts')],
  outfile: join(uiOut, 'app.js'),
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: 'chrome120',
  minify: true,
  logLevel: 'warning',
})
for (const file of ['index.html', 'app.css', 'favicon.svg']) copyFileSync(join(uiDir, file), join(uiOut, file))
// Drop outputs whose source is gone, so a deleted test never runs from a stale build.
function pruneStale(dir) {
  if (!existsSync(dir)) return
  for (const name of readdirSync(dir)) {
    const full = join(dir, name)
    if (statSync(full).isDirectory()) pruneStale(full)
    else if (name.endsWith('.js') && !existsSync(join(root, relative(join(root, 'build'), full)).replace(/\.js$/, '.ts'))) rmSync(full)
  }
}
pruneStale(join(root, 'build'))
if (process.env.HOOKGATE_BUILD_QUIET !== '1') {
  process.stderr.write(`build: ${entryPoints.length} files to ${relative(process.cwd(), join(root, 'build')) || '.'} in ${Date.now() - started} ms\n`)
}
