// Runs every test file (build/test/**/*.test.js) in its own process, two at a time, plus the
// type check, and ends with the one line CI reads: `N passed, N failed`.
// Usage: node scripts/test.mjs [substring-filter ...]   (HOOKGATE_SKIP_TYPECHECK=1 skips tsc)
import { spawn } from 'node:child_process'
import { readdirSync, statSync } from 'node:fs'
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

function run(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' }, ...opts })
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
  return { passed, failed: total - passed - skipped, skipped }
}

let passed = 0, failed = 0, skipped = 0
const started = Date.now()

const files = listTests(join(root, 'build', 'test')).filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
const queue = [...files]
async function worker() {
  for (let file = queue.shift(); file; file = queue.shift()) {
    const t0 = Date.now()
    const r = await run(process.execPath, ['--enable-source-maps', file])
    const c = countsOf(r.output)
    const name = relative(join(root, 'build'), file)
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

const typecheck = filters.length === 0 && process.env.HOOKGATE_SKIP_TYPECHECK !== '1'
  ? Promise.all(['tsconfig.json', 'admin/ui/tsconfig.json'].map((p) => run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', p, '--noEmit'])))
    .then((rs) => ({ code: rs.every((r) => r.code === 0) ? 0 : 1, output: rs.map((r) => r.output).join('') }))
  : null
await Promise.all(Array.from({ length: concurrency }, worker))
if (typecheck) {
  const r = await typecheck
  if (r.code === 0) { passed += 1; process.stdout.write('ok   typecheck (tsc --noEmit)\n') }
  else { failed += 1; process.stdout.write(`FAIL typecheck (tsc --noEmit)\n${r.output}\n`) }
}
if (files.length === 0) { failed += 1; process.stdout.write('FAIL no test files found under build/test\n') }
process.stdout.write(`\n${files.length} test files in ${((Date.now() - started) / 1000).toFixed(1)} s${skipped ? `, ${skipped} skipped` : ''}\n`)
process.stdout.write(`${passed} passed, ${failed} failed\n`)
process.exitCode = failed === 0 ? 0 : 1
