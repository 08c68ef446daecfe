// Where the server's time goes on one path, run by hand (not part of `npm test`):
//
//   node test/bench/profile.mjs [--path wake|bench|agent|auth|bare|bare401|floor] [--duration 5] [--connections 50] [--top 25] [--keep DIR] [--no-fsync]
//
// Starts `hookgate serve` (or the bare node:http floor) under `node --cpu-prof` with a fresh state
// dir, loads it with autocannon from this process for `--duration` seconds, stops it with SIGTERM
// (which writes the profile) and prints the functions with the most self time, then the same time
// grouped by where the code lives (hookgate's runtime, node:http, streams, fs, GC …). `--keep DIR`
// keeps the .cpuprofile for Chrome DevTools.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { BARE_SERVER, fail, fmtInt, freePort, installExitHandlers, load, readCli, root, run, startServer, stopServer } from './lib.mjs'

const USAGE = 'usage: node test/bench/profile.mjs [--path wake|bench|agent|auth|bare|bare401|floor] [--duration S] [--connections N] [--top N] [--keep DIR] [--no-fsync]'

const { values, number, usageError } = readCli('profile', USAGE, {
  path: { type: 'string', default: 'wake' },
  duration: { type: 'string', default: '5' },
  connections: { type: 'string', default: '50' },
  top: { type: 'string', default: '25' },
  keep: { type: 'string' },
  'no-fsync': { type: 'boolean', default: false },
})
const BARE = ['bare', 'bare401', 'floor']
if (!['wake', 'bench', 'agent', 'auth', ...BARE].includes(values.path)) usageError(`--path takes wake, bench, agent, auth, bare, bare401 or floor, not "${values.path}"`)
const duration = number('duration', 1, 600)
const connections = number('connections', 1, 1000)
const top = number('top', 1, 500)

const tmp = mkdtempSync(join(os.tmpdir(), 'hookgate-profile-'))
installExitHandlers('profile', () => rmSync(tmp, { recursive: true, force: true }))
const token = 'profile-' + 'x'.repeat(32)
const profDir = join(tmp, 'prof')
mkdirSync(profDir)
const nodeProf = ['--cpu-prof', '--cpu-prof-dir', profDir]

let server
if (BARE.includes(values.path)) {
  // bare: the non-durable server; bare401: its refusal path; floor: the durable floor (fdatasync'ed line)
  const file = join(tmp, 'bare-server.mjs')
  writeFileSync(file, BARE_SERVER)
  const env = { BENCH_TOKEN: token }
  if (values.path === 'bare401') env.BENCH_REFUSE = '1'
  if (values.path === 'floor') env.BENCH_DURABLE_FILE = join(tmp, 'floor.jsonl')
  server = await startServer({ label: values.path, args: [...nodeProf, file], env, stdout: 'pipe', readyPath: '/' })
} else {
  const dir = join(tmp, 'project')
  mkdirSync(dir)
  writeFileSync(join(dir, 'hooks.yaml'), [
    // as the bench's agent row runs: turns 32 at a time, a backlog that never refuses
    ...(values.path === 'agent' ? ['server:', '  concurrency: 32', '  maxPendingRuns: 500000', '  maxPendingBytes: 17179869184'] : []),
    'hooks:', '  enabled: true', '  token: ${HOOKGATE_TOKEN}', '  path: /hooks', '  mappings:',
    '    - id: bench', '      match: { path: bench }', '      action: wake', '      textTemplate: "{{payload.event}} from {{headers.x-source}} at {{now}}"',
    'agents:', '  - id: main', '    default: true', '    model: builtin/echo', '    heartbeat: { every: "off" }', '',
  ].join('\n'))
  const c = await run([join(root, 'bin', 'hookgate.js'), 'compile', join(dir, 'hooks.yaml'), '--out', join(dir, 'dist')], { HOOKGATE_TOKEN: token })
  if (c.code !== 0) fail(`hookgate compile exited with ${c.code}:\n${c.out}`)
  const port = await freePort()
  const args = [...nodeProf, join(root, 'bin', 'hookgate.js'), 'serve', '--bundle', join(dir, 'dist'), '--host', '127.0.0.1', '--port', String(port), '--state', join(tmp, 'state'), '--grace-seconds', '1', ...(values['no-fsync'] ? ['--no-fsync'] : [])]
  server = await startServer({ label: 'hookgate', args, env: { HOOKGATE_TOKEN: token }, stdout: 'ignore', readyPort: port, readyPath: '/healthz' })
}

const path = BARE.includes(values.path) ? '/' : values.path === 'auth' ? '/hooks/wake' : `/hooks/${values.path}`
const body = values.path === 'agent'
  ? JSON.stringify({ message: 'summarise the deploy of acme/web', deliver: false, wakeMode: 'next-heartbeat' })
  : JSON.stringify({ text: 'deploy of acme/web finished on web-1', event: 'deploy.finished', repository: 'acme/web', attempt: 1 })
const headers = { authorization: `Bearer ${values.path === 'auth' || values.path === 'bare401' ? 'wrong-' + token : token}`, 'content-type': 'application/json', 'x-source': 'bench' }
process.stderr.write(`profiling ${path} (pid ${server.pid}): ${duration} s × ${connections} connections …\n`)
const result = await load({ port: server.port, path, headers, body, connections, duration })
await stopServer(server)
const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'))
if (!file) fail(`no profile was written (the server exited with ${server.exited}): ${server.stderr.slice(0, 2000)}`)
if (values.keep) { mkdirSync(values.keep, { recursive: true }); writeFileSync(join(values.keep, file), readFileSync(join(profDir, file))) }

// ---- the profile: self time per function and per place ------------------------------------------
const profile = JSON.parse(readFileSync(join(profDir, file), 'utf8'))
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const self = new Map()
const dt = profile.timeDeltas
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i]
  self.set(id, (self.get(id) ?? 0) + (dt[i] ?? 0))
}
const total = [...self.values()].reduce((a, b) => a + b, 0)
const idle = [...self].filter(([id]) => byId.get(id).callFrame.functionName === '(idle)').reduce((a, [, t]) => a + t, 0)
const busy = total - idle
// `serve` runs the runtime bundled into build/serve/hookgate-serve.mjs: its functions are hookgate's too
const isHookgate = (url) => url.includes('/build/runtime/') || url.includes('/build/serve/')
const short = (url) => url.replace(/^file:\/\//, '').replace(root, '').replace(/^node:/, 'node:')
const place = (frame) => {
  const u = frame.url
  if (!u) return frame.functionName.startsWith('(') ? frame.functionName : '(native)'
  if (u.includes('/build/runtime/')) return 'hookgate ' + u.slice(u.indexOf('/build/runtime/') + 15).replace(/\.js$/, '')
  if (u.includes('/build/serve/')) return 'hookgate (bundled serve)'
  if (u.startsWith('node:')) return u.replace(/^node:internal\//, 'node:').replace(/\/.*$/, '')
  return short(u)
}
const fns = new Map()
const places = new Map()
for (const [id, t] of self) {
  const f = byId.get(id).callFrame
  if (f.functionName === '(idle)') continue
  const key = `${f.functionName || '(anonymous)'}  ${f.url ? `${short(f.url)}:${f.lineNumber + 1}` : ''}`
  fns.set(key, (fns.get(key) ?? 0) + t)
  const p = place(f)
  places.set(p, (places.get(p) ?? 0) + t)
}
// inclusive: each sample counts once for every distinct hookgate function on its stack
const parent = new Map()
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
const inclusive = new Map()
for (const [id, t] of self) {
  if (byId.get(id).callFrame.functionName === '(idle)') continue
  const seen = new Set()
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const f = byId.get(at).callFrame
    if (!isHookgate(f.url)) continue
    const key = `${f.functionName || '(anonymous)'}  ${short(f.url)}:${f.lineNumber + 1}`
    if (seen.has(key)) continue
    seen.add(key)
    inclusive.set(key, (inclusive.get(key) ?? 0) + t)
  }
}
// attributed: each sample to the nearest hookgate function on its stack (so node internals count
// for the hookgate code that called them); samples with none go to the leaf's place
const attributed = new Map()
for (const [id, t] of self) {
  const leaf = byId.get(id).callFrame
  if (leaf.functionName === '(idle)') continue
  let key = null
  for (let at = id; at !== undefined && key === null; at = parent.get(at)) {
    const f = byId.get(at).callFrame
    if (isHookgate(f.url)) key = `${f.functionName || '(anonymous)'}  ${short(f.url)}:${f.lineNumber + 1}`
  }
  key ??= `[${place(leaf)}]`
  attributed.set(key, (attributed.get(key) ?? 0) + t)
}
const pct = (t) => `${((t / busy) * 100).toFixed(1).padStart(5)} %`
const out = []
out.push(`${fmtInt(result.requests.average)} req/s over ${duration} s (${fmtInt(result.requests.total)} requests, statuses ${JSON.stringify(Object.fromEntries(Object.entries(result.statusCodeStats).map(([k, v]) => [k, v.count])))})`)
out.push(`main thread busy ${(busy / 1e6).toFixed(2)} s of ${(total / 1e6).toFixed(2)} s profiled; ${((busy / result.requests.total)).toFixed(1)} µs of main-thread time per request`)
out.push('', `top ${top} functions by self time (share of busy time):`)
for (const [k, t] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, top)) out.push(`  ${pct(t)}  ${k}`)
if (inclusive.size) {
  out.push('', `top ${top} hookgate functions by total time (self and callees):`)
  for (const [k, t] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top)) out.push(`  ${pct(t)}  ${k}`)
}
out.push('', `top ${top} by nearest hookgate caller (node internals counted for the hookgate code that called them; [place] when none):`)
for (const [k, t] of [...attributed].sort((a, b) => b[1] - a[1]).slice(0, top)) out.push(`  ${pct(t)}  ${k}`)
out.push('', 'by place:')
for (const [k, t] of [...places].sort((a, b) => b[1] - a[1]).slice(0, top)) out.push(`  ${pct(t)}  ${k}`)
process.stdout.write(out.join('\n') + '\n')
