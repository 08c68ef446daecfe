#!/usr/bin/env node
// What a pending run holds in memory, measured: the figures runtime/agents/backlog.ts weighs runs
// by. A `hookgate serve` (in this process, run with --expose-gc) whose model never answers takes
// N requests of one kind; the heap (with Buffers) after a full GC, before and after, divided by N,
// is what each pending run holds; beside it, what the backlog counts for it (hookgate_backlog_bytes
// over hookgate_backlog_runs). Each scenario runs in a child process of its own.
//
// Not part of `npm test`. Usage: node test/bench/pending-bytes.mjs [--runs 100] [--kib 255] [--json] [--only NAME ...]
import { execFileSync, spawnSync } from 'node:child_process'
import { createServer } from 'node:http'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { readCli } from './lib.mjs'

const USAGE = 'usage: node test/bench/pending-bytes.mjs [--runs 100] [--kib 255] [--json] [--only NAME ...]'
const { values: opts, number } = readCli('pending-bytes', USAGE, {
  runs: { type: 'string', default: '100' },
  kib: { type: 'string', default: '255' },
  json: { type: 'boolean', default: false },
  only: { type: 'string', multiple: true, default: [] },
  // internal: the child that measures one scenario
  scenario: { type: 'string' },
})
const RUNS = number('runs', 10, 100_000)
const KIB = number('kib', 1, 4096)
const root = fileURLToPath(new URL('../../', import.meta.url))

/** Each scenario: the path, and the body of about KIB KiB it sends. */
const text = (kib, char) => char.repeat(Math.floor((kib * 1024 - 64) / Buffer.byteLength(char)))
const SCENARIOS = {
  'agent call': { path: '/hooks/agent', body: (kib) => ({ message: text(kib, 'x'), deliver: false, wakeMode: 'next-heartbeat' }) },
  'mapped agent, field': { path: '/hooks/field', body: (kib) => ({ text: text(kib, 'x') }) },
  'mapped agent, field, two-byte text': { path: '/hooks/field', body: (kib) => ({ text: text(kib, 'ж') }) },
  'mapped agent, {{payload}}': { path: '/hooks/whole', body: (kib) => ({ text: text(kib, 'x') }) },
  'mapped agent, small message': { path: '/hooks/small', body: (kib) => ({ id: 1, text: text(kib, 'x') }) },
  'workflow, one string': { path: '/hooks/flow', body: (kib) => ({ id: 1, text: text(kib, 'x') }) },
  'workflow, many small objects': { path: '/hooks/flow', body: (kib) => ({ id: 1, items: Array.from({ length: Math.floor((kib * 1024) / 16) }, (_, n) => ({ n })) }) },
}

if (opts.scenario !== undefined) await measure(opts.scenario)
else await main()

async function main() {
  const names = Object.keys(SCENARIOS).filter((n) => opts.only.length === 0 || opts.only.some((o) => n.includes(o)))
  const rows = []
  for (const name of names) {
    const child = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--scenario', name, '--runs', String(RUNS), '--kib', String(KIB)], { encoding: 'utf8', timeout: 300_000 })
    if (child.status !== 0) {
      process.stderr.write(`pending-bytes: ${name} failed:\n${child.stderr}\n`)
      process.exit(1)
    }
    rows.push(JSON.parse(child.stdout.trim().split('\n').at(-1)))
  }
  if (opts.json) {
    process.stdout.write(JSON.stringify(rows, null, 2) + '\n')
    return
  }
  const cols = [['scenario', (r) => r.scenario], ['body', (r) => `${r.bodyBytes} B`], ['held per run', (r) => `${r.heldPerRun} B`], ['counted per run', (r) => `${r.countedPerRun} B`], ['counted / held', (r) => (r.countedPerRun / r.heldPerRun).toFixed(2)]]
  const cells = rows.map((r) => cols.map(([, f]) => f(r)))
  const widths = cols.map(([h], i) => Math.max(h.length, ...cells.map((c) => c[i].length)))
  const line = (vals) => vals.map((v, i) => v.padEnd(widths[i])).join(' | ')
  process.stdout.write([line(cols.map(([h]) => h)), widths.map((w) => '-'.repeat(w)).join('-|-'), ...cells.map(line)].join('\n') + '\n')
  process.stdout.write(`${RUNS} pending runs per scenario (plus 8 to fill the turns' slots), bodies of about ${KIB} KiB, model never answering; held: heap + Buffers after a full GC\n`)
}

async function measure(name) {
  if (typeof global.gc !== 'function') throw new Error('run with --expose-gc')
  const scenario = SCENARIOS[name]
  if (!scenario) throw new Error(`no scenario "${name}"`)
  const { startService } = await import(join(root, 'build', 'runtime', 'serve', 'service.js'))
  // the model: reads each request and never answers
  const model = createServer((req) => { req.resume() })
  await new Promise((resolve) => model.listen(0, '127.0.0.1', resolve))
  const dir = mkdtempSync(join(tmpdir(), 'hookgate-pending-'))
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
  process.env.HOOKGATE_PENDING_TOKEN = 'pending-bytes-token-pending-bytes-token'
  writeFileSync(join(dir, 'hooks.yaml'), `
server: { concurrency: 4, maxPendingRuns: 1000000, maxPendingBytes: 1099511627776, maxBodyBytes: ${KIB * 1024 + 4096} }
hooks:
  enabled: true
  token: "\${HOOKGATE_PENDING_TOKEN}"
  mappings:
    - { id: field, match: { path: field }, action: agent, deliver: false, wakeMode: next-heartbeat, messageTemplate: "{{payload.text}}" }
    - { id: whole, match: { path: whole }, action: agent, deliver: false, wakeMode: next-heartbeat, messageTemplate: "{{payload}}" }
    - { id: small, match: { path: small }, action: agent, deliver: false, wakeMode: next-heartbeat, messageTemplate: "id {{payload.id}}" }
    - { id: flow, match: { path: flow }, action: workflow, workflow: ask }
providers:
  - { id: silent, type: openai, baseUrl: "http://127.0.0.1:${model.address().port}/v1", maxRetries: 0, timeoutSeconds: 3600 }
agents:
  - { id: main, model: silent/m, heartbeat: { every: "off" } }
workflows:
  - id: ask
    steps:
      - { id: ask, action: agent, messageTemplate: "{{payload.id}}", timeoutSeconds: 3600 }
`)
  execFileSync(process.execPath, [join(root, 'bin', 'hookgate.js'), 'compile', join(dir, 'hooks.yaml'), '--out', join(dir, 'dist')], { stdio: 'ignore' })
  const service = await startService({ bundle: join(dir, 'dist'), port: 0, host: '127.0.0.1', stateDir: join(dir, 'state'), watch: false, graceMs: 100, write: () => {} })
  const body = JSON.stringify(scenario.body(KIB))
  const send = async () => {
    const r = await fetch(`http://127.0.0.1:${service.port}${scenario.path}`, { method: 'POST', headers: { authorization: `Bearer ${process.env.HOOKGATE_PENDING_TOKEN}`, 'content-type': 'application/json' }, body })
    if (r.status !== 202) throw new Error(`${r.status} ${await r.text()}`)
  }
  const held = () => { global.gc(); global.gc(); const m = process.memoryUsage(); return m.heapUsed + m.external }
  // the first ones take the turns' slots (and warm the code up): measured from here on
  for (let i = 0; i < 8; i++) await send()
  await new Promise((resolve) => setTimeout(resolve, 300))
  const before = held()
  const countedBefore = service.engine.backlogBytes
  for (let i = 0; i < RUNS; i++) await send()
  await new Promise((resolve) => setTimeout(resolve, 300))
  const after = held()
  const counted = service.engine.backlogBytes - countedBefore
  process.stdout.write(JSON.stringify({ scenario: name, bodyBytes: Buffer.byteLength(body), heldPerRun: Math.round((after - before) / RUNS), countedPerRun: Math.round(counted / RUNS) }) + '\n')
  process.exit(0)
}
