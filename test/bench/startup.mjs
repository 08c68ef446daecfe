// Start-up and memory of `hookgate serve` (issue 16), run by hand (not part of `npm test`):
//
//   node test/bench/startup.mjs [--runs 11] [--only default,1000,bare]
//
// For the repo's default hooks.yaml (its transform included) and a bundle of 1,000 mappings, each
// compiled once with the real CLI: spawn `node bin/hookgate.js serve` with a fresh --state dir,
// ask GET /healthz every 2 ms, and take the time from just before the spawn to the first answer;
// then leave the server idle 2 s and read VmRSS from /proc/<pid>/status. The same for a bare
// node:http server (the floor). Prints median, min and max of each, and the median difference to
// the bare server's start in the same round.
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { fail, freePort, installExitHandlers, median, procStatus, root, run, sleep, startServer, stopServer } from './lib.mjs'

const args = process.argv.slice(2)
const opt = (name, fallback) => { const i = args.indexOf(`--${name}`); return i >= 0 ? args[i + 1] : fallback }
const RUNS = Number(opt('runs', '11'))
const ONLY = opt('only', 'bare,default,1000').split(',')
const IDLE_MS = 2000
const POLL_MS = 2

const tmp = mkdtempSync(join(os.tmpdir(), 'hookgate-startup-'))
installExitHandlers('startup', () => rmSync(tmp, { recursive: true, force: true }))
const token = 'startup-bench-token-0123456789abcdef'

function manyMappings(count) {
  const out = ['hooks:', '  enabled: true', '  token: ${HOOKGATE_TOKEN}', '  path: /hooks', '  mappings:']
  for (let i = 0; i < count; i++) {
    out.push(`    - id: m${i}`, `      match: { path: ${i % 2 ? `team${i % 17}/svc-${i}` : `svc-${i}`} }`)
    if (i % 3 === 1) out.push('      action: agent', `      messageTemplate: "{{payload.action}} on {{payload.repository.name}}"`)
    else out.push('      action: wake', `      textTemplate: "{{payload.status}} {{payload.alerts[0].labels.alertname}}"`)
  }
  out.push('agents:', '  - id: main', '    default: true', '    model: builtin/echo')
  return out.join('\n') + '\n'
}

async function compile(name, setup) {
  const dir = join(tmp, name)
  mkdirSync(dir, { recursive: true })
  setup(dir)
  const c = await run([join(root, 'bin', 'hookgate.js'), 'compile', join(dir, 'hooks.yaml'), '--out', join(dir, 'dist')], { HOOKGATE_TOKEN: token })
  if (c.code !== 0) fail(`compile ${name}: ${c.out}`)
  return join(dir, 'dist')
}

/** One start: the time to the first answer, then the RSS after IDLE_MS idle. */
async function once(start) {
  const s = await start()
  await sleep(IDLE_MS)
  const rss = procStatus(s.pid) / 1048576
  await stopServer(s)
  return { ms: s.readyMs, rss }
}

const bareFile = join(tmp, 'bare.mjs')
writeFileSync(bareFile, `import { createServer } from 'node:http'
const s = createServer((q, r) => r.end('{"ok":true}')).listen(Number(process.env.PORT), '127.0.0.1')\n`)

const targets = []
for (const which of ONLY) {
  if (which === 'bare') {
    targets.push({ label: 'bare node:http', start: async () => {
      const port = await freePort()
      return startServer({ label: 'bare', args: [bareFile], env: { PORT: String(port) }, stdout: 'ignore', readyPort: port, readyPath: '/', pollMs: POLL_MS })
    } })
    continue
  }
  const dist = which === 'default'
    ? await compile('default', (dir) => { cpSync(join(root, 'hooks.yaml'), join(dir, 'hooks.yaml')); cpSync(join(root, 'transforms'), join(dir, 'transforms'), { recursive: true }) })
    : await compile(`m${which}`, (dir) => writeFileSync(join(dir, 'hooks.yaml'), manyMappings(Number(which))))
  targets.push({ label: which === 'default' ? 'default hooks.yaml' : `${which} mappings`, start: async () => {
    const port = await freePort()
    const state = mkdtempSync(join(tmp, 'state-'))
    const argv = [join(root, 'bin', 'hookgate.js'), 'serve', '--bundle', dist, '--host', '127.0.0.1', '--port', String(port), '--state', state, '--grace-seconds', '1']
    return startServer({ label: which, args: argv, env: { HOOKGATE_TOKEN: token }, stdout: 'ignore', readyPort: port, readyPath: '/healthz', pollMs: POLL_MS })
  } })
}

// Round by round, one start of each target per round, so a drift of the (shared) machine falls
// on all alike; "over bare" is the median of each round's difference to the bare server.
const samples = targets.map(() => [])
for (let i = 0; i < RUNS; i++) for (const [k, t] of targets.entries()) samples[k].push(await once(t.start))
const bareAt = ONLY.indexOf('bare')
const f = (xs, d) => `median ${median(xs).toFixed(d)} (min ${Math.min(...xs).toFixed(d)}, max ${Math.max(...xs).toFixed(d)})`
for (const [k, t] of targets.entries()) {
  const ms = samples[k].map((x) => x.ms)
  const over = bareAt >= 0 && k !== bareAt ? `  over bare ${median(ms.map((x, i) => x - samples[bareAt][i].ms)).toFixed(0)} ms` : ''
  process.stdout.write(`${t.label.padEnd(20)} start ms ${f(ms, 0)}${over}  idle RSS MiB ${f(samples[k].map((x) => x.rss), 1)}\n`)
}
rmSync(tmp, { recursive: true, force: true })
