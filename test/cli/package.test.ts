// The package as a user gets it: `npm pack` of a copy of this checkout (the package's build is made
// by its prepack, never the worktree's own build/, which other tests run from), installed with
// `npm install -g --prefix <temp>` (its dependencies from npm's cache, else the registry), then run
// from a directory that is not the checkout: `hookgate --version`, `hookgate compile --check` of a
// config with a TypeScript transform (esbuild from the installed dependencies), and `hookgate serve`
// answering a wake. A package that ships a file the CLI loads from outside `files`, needs TypeScript
// or a build step on the user's side, or ships the tests or the sources, fails here.
// store: none
import { spawn } from 'node:child_process'
import { cpSync, existsSync, readdirSync, readFileSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { repoRoot, scratchDir, writeTree } from '../helpers/paths.js'
import { spawnServer } from '../runtime/http/harness.js'

interface Ran { code: number | null; stdout: string; stderr: string }

/** Runs `command` (found on `PATH` as a shell would find it) and collects its output; killed after `timeoutMs`. */
function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 120_000): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d })
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('error', (err) => { clearTimeout(timer); resolve({ code: null, stdout, stderr: stderr + err.message }) })
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }) })
  })
}

const TOKEN = 'package-test-hook-token-0123456789'
const CONFIG = `hooks:
  enabled: true
  token: \${HOOKGATE_TOKEN}
  transformsDir: transforms
  mappings:
    - id: github
      match: { path: github }
      action: agent
      messageTemplate: "{{payload.action}}"
      transform: { module: github.ts }
agents:
  - id: main
    default: true
    model: builtin/echo
`

interface Installed { prefix: string; home: string; pkgDir: string; env: NodeJS.ProcessEnv; packed: { size: number; unpackedSize: number; files: Array<{ path: string }> } }

let installed: Installed | undefined

/** Packs a copy of the checkout and installs the tarball into a temporary prefix (once per file). */
async function install(): Promise<Installed> {
  if (installed) return installed
  const copy = scratchDir('checkout-')
  for (const name of readdirSync(repoRoot)) {
    if (['node_modules', 'build', 'dist', '.git', '.hookgate', 'test'].includes(name)) continue
    cpSync(join(repoRoot, name), join(copy, name), { recursive: true })
  }
  symlinkSync(join(repoRoot, 'node_modules'), join(copy, 'node_modules'))
  const out = scratchDir('tarball-')
  const env = { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false', NO_COLOR: '1' }
  const pack = await run('npm', ['pack', '--json', '--pack-destination', out], copy, env)
  assert.is(pack.code, 0, `npm pack failed:\n${pack.stderr}`)
  const packed = (JSON.parse(pack.stdout) as Installed['packed'][])[0]!
  const tarball = join(out, readdirSync(out).find((f) => f.endsWith('.tgz'))!)
  const prefix = scratchDir('prefix-')
  const inst = await run('npm', ['install', '--global', '--prefix', prefix, '--prefer-offline', '--allow-scripts=esbuild', tarball], out, env, 300_000)
  assert.is(inst.code, 0, `npm install -g failed:\n${inst.stderr}`)
  // the user's shell: the prefix's bin first on PATH, a directory that is not the checkout
  const home = scratchDir('elsewhere-')
  installed = { prefix, home, pkgDir: join(prefix, 'lib', 'node_modules', 'hookgate'), packed, env: { ...env, PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}` } }
  return installed
}

const pkg = suite('the npm package')

pkg('the tarball ships the CLI, its build and the docs, and no tests, sources or source maps', async () => {
  const { packed } = await install()
  const files = packed.files.map((f) => f.path)
  const roots = new Set(files.map((f) => f.split('/')[0]))
  assert.equal([...roots].sort(), ['LICENSE', 'README.md', 'bin', 'build', 'docs', 'hooks.schema.json', 'package.json'])
  assert.ok(files.includes('bin/hookgate.js'))
  assert.ok(files.includes('build/cli/commands.js') && files.includes('build/serve/hookgate-serve.mjs') && files.includes('build/admin/ui/app.js'))
  assert.equal(files.filter((f) => f.startsWith('build/test/') || f.endsWith('.ts') || f.endsWith('.map')), [])
  assert.equal(files.filter((f) => f.startsWith('docs/') && !f.endsWith('.md')), [])
})

pkg('installed globally, hookgate --version runs from another directory and names the package version', async () => {
  const i = await install()
  const r = await run('hookgate', ['--version'], i.home, i.env)
  assert.is(r.code, 0, r.stderr)
  const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version
  assert.is(r.stdout, `hookgate ${version}\n`)
  // nothing of the development side came with it
  assert.not.ok(existsSync(join(i.pkgDir, 'node_modules', 'typescript')), 'typescript was installed')
  assert.not.ok(existsSync(join(i.pkgDir, 'node_modules', 'uvu')), 'a dev dependency was installed')
})

pkg('the installed hookgate compiles a config with a TypeScript transform (--check, then into dist/) outside the checkout', async () => {
  const i = await install()
  const dir = scratchDir('project-')
  writeTree(dir, { 'hooks.yaml': CONFIG, 'transforms/github.ts': readFileSync(join(repoRoot, 'transforms', 'github.ts'), 'utf8') })
  const env = { ...i.env, HOOKGATE_TOKEN: TOKEN }
  const check = await run('hookgate', ['compile', '--check'], dir, env)
  assert.is(check.code, 0, check.stdout + check.stderr)
  assert.not.ok(existsSync(join(dir, 'dist')), '--check wrote a bundle')
  writeTree(dir, { 'broken.yaml': 'hooks:\n  enabled: yes please\n' })
  const broken = await run('hookgate', ['compile', 'broken.yaml', '--check'], dir, env)
  assert.is.not(broken.code, 0)
  assert.match(broken.stdout + broken.stderr, /broken\.yaml:2:\d+/)
})

pkg('the installed hookgate serve answers a wake with the hook token, from a project outside the checkout', async () => {
  const i = await install()
  const dir = scratchDir('serve-')
  writeTree(dir, { 'hooks.yaml': CONFIG, 'transforms/github.ts': readFileSync(join(repoRoot, 'transforms', 'github.ts'), 'utf8') })
  const env = { ...i.env, HOOKGATE_TOKEN: TOKEN }
  const compiled = await run('hookgate', ['compile'], dir, env)
  assert.is(compiled.code, 0, compiled.stdout + compiled.stderr)
  const bin = join(i.prefix, 'bin', 'hookgate')
  const server = await spawnServer([bin, 'serve', '--port', '0', '--state', join(dir, 'state')], { cwd: dir, env })
  try {
    const url = `${server.origin}/hooks/wake`
    const unauthorized = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"text":"hello"}' })
    assert.is(unauthorized.status, 401)
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body: '{"text":"hello from the package"}' })
    const body = await res.json() as { ok: boolean }
    assert.is(res.status, 200, JSON.stringify(body))
    assert.is(body.ok, true)
  } finally {
    server.child.kill('SIGTERM')
    await server.exited
  }
})

pkg.run()
