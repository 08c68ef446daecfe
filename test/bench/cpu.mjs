// Main-thread CPU per request, run by hand: a quick and fairly noise-proof figure for one path
// (CPU time the server's main thread and whole process used, from /proc utime+stime, over a fixed
// number of requests), for comparing a change against the durable floor on a busy machine. The
// whole process includes its child processes (the transform processes).
//
//   node test/bench/cpu.mjs [--path floor|floor-body|bare401|wake|template|transform|agent|auth] [--requests 60000] [--connections 50] [--body-kib N]
//
// --body-kib sends a body of that size (the bench's padded deploy payload) instead of ~200 bytes.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { execFileSync } from 'node:child_process'
import autocannon from 'autocannon'
import { BARE_SERVER, freePort, mainThreadCpuSeconds, procCpuSeconds, processTree, readCli, root, startServer, stopServer, requestBody, installExitHandlers } from './lib.mjs'

const USAGE = 'usage: node test/bench/cpu.mjs [--path floor|floor-body|bare401|wake|template|transform|agent|auth] [--requests N] [--connections N] [--body-kib N]'
const { values, number } = readCli('cpu', USAGE, {
  path: { type: 'string', default: 'wake' },
  requests: { type: 'string', default: '60000' },
  connections: { type: 'string', default: '50' },
  'body-kib': { type: 'string' },
})
const requests = number('requests', 1000, 10_000_000)
const connections = number('connections', 1, 1000)
const tmp = mkdtempSync(join(os.tmpdir(), 'hookgate-cpu-'))
installExitHandlers('cpu', () => rmSync(tmp, { recursive: true, force: true }))
const token = 'bench-token-0123456789abcdef0123'
const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
let server
let path = '/hooks/wake'
let body = values['body-kib'] ? requestBody(number('body-kib', 1, 1024) * 1024) : requestBody()
let hdrs = headers
if (values.path === 'floor' || values.path === 'floor-body' || values.path === 'bare401') {
  // the durable floor, or the bare server's refusal path (what the auth path is held against)
  const file = join(tmp, 'bare.mjs')
  writeFileSync(file, BARE_SERVER)
  // floor-body: the durable floor with the whole body in its line, as a service that stores each request writes it
  const env = values.path === 'bare401' ? { BENCH_TOKEN: token, BENCH_REFUSE: '1' } : { BENCH_TOKEN: token, BENCH_DURABLE_FILE: join(tmp, 'runs.jsonl'), ...(values.path === 'floor-body' ? { BENCH_DURABLE_BODY: '1' } : {}) }
  server = await startServer({ label: values.path, args: [file], env, stdout: 'pipe', readyPath: '/' })
  path = '/'
  if (values.path === 'bare401') hdrs = { ...headers, authorization: 'Bearer wrong-token-wrong-token-wrong' }
} else {
  const transform = values.path === 'transform'
  // the transform path: a wake whose small transform builds the text, in the transform processes
  if (transform) {
    mkdirSync(join(tmp, 'transforms'))
    writeFileSync(join(tmp, 'transforms', 'xform.ts'), 'export default function xform({ payload, headers }: { payload: { text?: unknown }; headers: Record<string, string> }): { text: string } {\n  return { text: `${String(payload.text)} from ${headers[\'x-source\'] ?? \'unknown\'}` }\n}\n')
  }
  writeFileSync(join(tmp, 'hooks.yaml'), `server:\n  concurrency: 32\n  maxPendingRuns: 500000\n  maxPendingBytes: 17179869184\n  maxBodyBytes: 1100000\nhooks:\n  enabled: true\n  token: \${HOOKGATE_TOKEN}\n${transform ? '  transformsDir: transforms\n' : ''}  mappings:\n    - id: bench\n      match: { path: bench }\n      action: wake\n      textTemplate: "{{payload.text}} {{headers.x-source}} at {{now}}"\n${transform ? '      transform: { module: xform.ts }\n' : ''}`)
  execFileSync(process.execPath, [join(root, 'bin/hookgate.js'), 'compile', join(tmp, 'hooks.yaml'), '--out', join(tmp, 'dist')], { stdio: 'ignore' })
  const port = await freePort()
  server = await startServer({ label: 'hookgate', args: [join(root, 'bin/hookgate.js'), 'serve', '--bundle', join(tmp, 'dist'), '--port', String(port), '--state', join(tmp, 'state')], env: { HOOKGATE_TOKEN: token }, stdout: 'ignore', readyPort: port, readyPath: '/healthz' })
  if (values.path === 'template' || transform) path = '/hooks/bench'
  if (values.path === 'agent') { path = '/hooks/agent'; body = JSON.stringify({ message: 'summarise ' + 'x'.repeat(120), deliver: false, wakeMode: 'next-heartbeat' }) }
  if (values.path === 'auth') hdrs = { ...headers, authorization: 'Bearer wrong-token-wrong-token-wrong' }
}
// autocannon ends a run by `amount` on its once-a-second tick: the rate is timed to the last answer
let lastAnswer = 0
const fire = (amount) => new Promise((resolve, reject) => {
  const instance = autocannon({ url: `http://127.0.0.1:${server.port}${path}`, method: 'POST', headers: hdrs, body, connections, amount, pipelining: 1 }, (err, r) => (err ? reject(err) : resolve(r)))
  instance.on('response', () => { lastAnswer = performance.now() })
})
await fire(Math.min(10_000, requests))
// the server and its children (transform processes, started by the warm-up)
const pids = processTree(server.pid)
const treeCpuSeconds = () => pids.reduce((n, pid) => n + procCpuSeconds(pid), 0)
const before = treeCpuSeconds()
const mainBefore = mainThreadCpuSeconds(server.pid)
const t0 = performance.now()
const r = await fire(requests)
const seconds = (lastAnswer - t0) / 1000
const cpu = treeCpuSeconds() - before
const main = mainThreadCpuSeconds(server.pid) - mainBefore
const answered = r['2xx'] + r.non2xx
const peak = Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024
const childRss = pids.slice(1).map((pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024)
process.stdout.write(`${values.path}: ${Math.round(answered / seconds)} req/s, peak RSS ${peak.toFixed(1)} MiB${childRss.length ? ` (+ ${childRss.length} child processes: ${childRss.map((m) => m.toFixed(1)).join(', ')} MiB)` : ''}, main thread ${(main * 1e6 / answered).toFixed(1)} µs/request, whole process ${(cpu * 1e6 / answered).toFixed(1)} µs/request, statuses ${JSON.stringify(Object.fromEntries(Object.entries(r.statusCodeStats).map(([k, v]) => [k, v.count])))}\n`)
await stopServer(server)
rmSync(tmp, { recursive: true, force: true })
process.exit(0)
