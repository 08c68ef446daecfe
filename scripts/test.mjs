// Runs every test file (build/test/**/*.test.js) in its own process, two at a time, plus the
// type check, and ends with the one line CI reads: `N passed, N failed`.
//
// The behaviour suites run twice: on the file store, then on PostgreSQL (HOOKGATE_TEST_STORE=postgres:
// each runtime a test starts gets a database of its own, test/helpers/stores.ts), the files under
// POSTGRES_PASS except those whose first lines say `// store: file only` (about the file store
// itself) or `// store: none` (no store at all).
// Usage: node scripts/test.mjs [substring-filter ...]   (HOOKGATE_SKIP_TYPECHECK=1 skips tsc).
// HOOKGATE_TEST_PASS=file runs the first pass alone, =postgres the second alone (CI may run them
// apart); with filters and no HOOKGATE_TEST_PASS, each matching file runs once, on the store
// HOOKGATE_TEST_STORE names (the file store by default).
import { spawn } from 'node:child_process'
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const filters = process.argv.slice(2)
const concurrency = Number(process.env.HOOKGATE_TEST_JOBS || 2)

function listTests(dir) {
  const out = []
  for (const name of readdirSync(dir)) {
    const full = join(dir, name)
    if (statSync(full).isDirectory()) out.push(...listTests(full))
    else if (name.endsWith('.test.js')) out.push(full)
  }
  return out.sort()
}

/** The folders (and files) of the behaviour suites, run a second time on PostgreSQL. */
const POSTGRES_PASS = ['test/runtime/http/', 'test/runtime/agents/', 'test/runtime/workflows/', 'test/runtime/notify/', 'test/runtime/scheduler/', 'test/cli/runs-replay.test.js']

/** Whether the test file's source says it runs on the file store only, or opens no store. */
function storeBound(file) {
  const source = join(root, relative(join(root, 'build'), file)).replace(/\.js$/, '.ts')
  const head = readFileSync(source, 'utf8').split('\n').slice(0, 40).join('\n')
  return !/^\/\/ store: (file only|none)\b/m.test(head)
}

function run(cmd, args, opts = {}, env = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', ...env }, ...opts })
    let output = ''
    child.stdout.on('data', (d) => { output += d })
    child.stderr.on('data', (d) => { output += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), Number(process.env.HOOKGATE_TEST_TIMEOUT_MS || 120_000))
    child.on('close', (code, signal) => { clearTimeout(timer); resolve({ code, signal, output }) })
  })
}

// uvu prints "Total: N", "Passed: N", "Skipped: N" when a file finishes.
function countsOf(output) {
  const grab = (label) => { const m = output.match(new RegExp(`${label}:\\s+(\\d+)`)); return m ? Number(m[1]) : undefined }
  const total = grab('Total'), passed = grab('Passed'), skipped = grab('Skipped') ?? 0
  if (total === undefined || passed === undefined) return undefined
  return { passed, failed: total - passed, skipped }
}

let passed = 0, failed = 0, skipped = 0
const started = Date.now()

const files = listTests(join(root, 'build', 'test')).filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
const pass = process.env.HOOKGATE_TEST_PASS ?? (filters.length > 0 ? 'one' : 'both')
const postgresPass = pass !== 'both' && pass !== 'postgres' ? []
  : files.filter((f) => POSTGRES_PASS.some((p) => relative(root, f).startsWith(join('build', p))) && storeBound(f))
const queue = [...(pass === 'postgres' ? [] : files.map((file) => ({ file, store: undefined }))), ...postgresPass.map((file) => ({ file, store: 'postgres' }))]
const queued = queue.length
/** per pass, the seconds its files took (two run at a time) */
const seconds = { file: 0, postgres: 0 }
async function worker() {
  for (let job = queue.shift(); job; job = queue.shift()) {
    const { file, store } = job
    const t0 = Date.now()
    const r = await run(process.execPath, ['--enable-source-maps', file], {}, store ? { HOOKGATE_TEST_STORE: store } : {})
    seconds[store ?? 'file'] += (Date.now() - t0) / 1000
    const c = countsOf(r.output)
    const name = `${store ? `[${store}] ` : ''}${relative(join(root, 'build'), file)}`
    if (!c || r.code !== 0 && c.failed === 0) {
      failed += 1
      if (c) { passed += c.passed; skipped += c.skipped }
      process.stdout.write(`FAIL ${name} (exit ${r.code ?? r.signal}, ${Date.now() - t0} ms)\n${r.output}\n`)
      continue
    }
    passed += c.passed; failed += c.failed; skipped += c.skipped
    const mark = c.failed ? 'FAIL' : 'ok  '
    process.stdout.write(`${mark} ${name}: ${c.passed} passed, ${c.failed} failed (${Date.now() - t0} ms)\n`)
    if (c.failed) process.stdout.write(r.output + '\n')
  }
}

const typecheck = filters.length === 0 && pass !== 'postgres' && process.env.HOOKGATE_SKIP_TYPECHECK !== '1'
  ? Promise.all(['tsconfig.json', 'admin/ui/tsconfig.json'].map((p) => run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', p, '--noEmit'])))
    .then((rs) => ({ code: rs.every((r) => r.code === 0) ? 0 : 1, output: rs.map((r) => r.output).join('') }))
  : null
await Promise.all(Array.from({ length: concurrency }, worker))
if (typecheck) {
  const r = await typecheck
  if (r.code === 0) { passed += 1; process.stdout.write('ok   typecheck (tsc --noEmit)\n') }
  else { failed += 1; process.stdout.write(`FAIL typecheck (tsc --noEmit)\n${r.output}\n`) }
}
if (queued === 0) { failed += 1; process.stdout.write('FAIL no test files found under build/test\n') }
const second = postgresPass.length > 0 ? `, and ${postgresPass.length} on PostgreSQL (their files took ${seconds.postgres.toFixed(0)} s of ${(seconds.file + seconds.postgres).toFixed(0)} s)` : ''
process.stdout.write(`\n${pass === 'postgres' ? 0 : files.length} test files${second} in ${((Date.now() - started) / 1000).toFixed(1)} s${skipped ? `, ${skipped} skipped` : ''}\n`)
process.stdout.write(`${passed} passed, ${failed} failed\n`)
process.exitCode = failed === 0 ? 0 : 1
