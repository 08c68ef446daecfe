// Accepted agent calls per second with durable writes, beside the same load with the store in its
// no-fsync mode, measured in one run (run by hand, not part of npm test):
//
//   node test/bench/agent.bench.mjs [--connections 50] [--duration 10] [--json]
//
// Each mode gets its own `hookgate serve` child on 127.0.0.1 with a fresh state dir; autocannon
// runs in this process. An accepted call is a 202 whose run row (and request) was on disk before the
// answer (fdatasync'ed with fsync on; written but not synced with --no-fsync). The turns themselves
// run on builtin/echo after the answer, up to server.concurrency (32 here) at once.
import autocannon from 'autocannon'
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin', 'hookgate.js')
const { values } = parseArgs({ options: { connections: { type: 'string', default: '50' }, duration: { type: 'string', default: '10' }, json: { type: 'boolean', default: false } } })
const connections = Number(values.connections)
const duration = Number(values.duration)
const token = 'agent-bench-token-0123456789abcdef'
const dir = mkdtempSync(join(os.tmpdir(), 'hookgate-agent-bench-'))
const children = new Set()
const cleanup = () => { for (const c of children) c.kill('SIGKILL'); rmSync(dir, { recursive: true, force: true }) }
process.on('exit', cleanup)
process.on('SIGINT', () => process.exit(130))

// room for every call of the run: it measures accepting, not backpressure (503 past maxPendingRuns)
writeFileSync(join(dir, 'hooks.yaml'), `server: { concurrency: 32, maxPendingRuns: 500000, maxPendingBytes: 17179869184 }
hooks:
  enabled: true
  token: \${HOOKGATE_TOKEN}
agents:
  - { id: main, model: builtin/echo, heartbeat: { every: "off" } }
`)
execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { env: { ...process.env, HOOKGATE_BUILD_QUIET: '1' } })
execFileSync(process.execPath, [bin, 'compile', join(dir, 'hooks.yaml'), '--out', join(dir, 'dist')], { stdio: 'ignore' })

function rssMiB(pid) {
  try { return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024 } catch { return NaN }
}

async function measure(label, extra) {
  const state = join(dir, `state-${label}`)
  const child = spawn(process.execPath, [bin, 'serve', '--bundle', join(dir, 'dist'), '--port', '0', '--state', state, ...extra], { env: { ...process.env, HOOKGATE_TOKEN: token }, stdio: ['ignore', 'pipe', 'inherit'] })
  children.add(child)
  const url = await new Promise((resolve, reject) => {
    let buf = ''
    const timer = setTimeout(() => reject(new Error('the server did not start')), 20_000)
    child.stdout.on('data', (d) => {
      buf += d
      const m = /listening on (http:\/\/\S+?)\/hooks/.exec(buf)
      if (m) { clearTimeout(timer); resolve(m[1]); child.stdout.resume() }
    })
  })
  child.stdout.on('data', () => {})
  const body = JSON.stringify({ message: 'summarise the deploy of api: ' + 'x'.repeat(120), deliver: false, wakeMode: 'next-heartbeat' })
  const opts = { url: `${url}/hooks/agent`, method: 'POST', connections, pipelining: 1, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body }
  await autocannon({ ...opts, duration: 2 })
  let peak = 0
  const sampler = setInterval(() => { peak = Math.max(peak, rssMiB(child.pid)) }, 200)
  const r = await autocannon({ ...opts, duration })
  clearInterval(sampler)
  const accepted = r['2xx']
  child.kill('SIGTERM')
  await new Promise((ok) => child.on('exit', ok))
  children.delete(child)
  return { label, acceptedPerSecond: accepted / duration, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors, peakRssMiB: Math.round(peak) }
}

const rows = [await measure('fsync', []), await measure('no-fsync', ['--no-fsync'])]
if (values.json) {
  process.stdout.write(JSON.stringify({ node: process.version, cpu: os.cpus()[0].model, cores: os.cpus().length, connections, duration, rows }, null, 2) + '\n')
} else {
  process.stdout.write(`POST /hooks/agent, ${connections} connections, ${duration} s (after 2 s warm-up), node ${process.version}, ${os.cpus()[0].model} × ${os.cpus().length}\n`)
  process.stdout.write('store mode | accepted calls/s | p50 ms | p99 ms | non-2xx | errors | peak RSS MiB\n')
  process.stdout.write('-----------+------------------+--------+--------+---------+--------+-------------\n')
  for (const r of rows) process.stdout.write(`${r.label.padEnd(10)} | ${r.acceptedPerSecond.toFixed(0).padStart(16)} | ${String(r.p50).padStart(6)} | ${String(r.p99).padStart(6)} | ${String(r.non2xx).padStart(7)} | ${String(r.errors).padStart(6)} | ${String(r.peakRssMiB).padStart(12)}\n`)
  process.stdout.write(`fsync costs ${(100 - (rows[0].acceptedPerSecond / rows[1].acceptedPerSecond) * 100).toFixed(0)}% of the no-fsync throughput\n`)
}
