// match.when patterns on RE2 (issue 23), run by hand (not part of `npm test`):
//
//   npm ci && node scripts/build.mjs && node test/bench/regex.bench.mjs [--reps 5] [--seconds 5] [--senders 4] [--irregexp]
//
// `--engine` measures (1) only; `--instructions N` what another budget would let through.
//
// 1. The engine: for each family of costly patterns, the largest one the compiler's work budget
//    accepts on a hook name with the default 256 KiB body limit, matched (RE2, as the runtime does)
//    against a text as long as that body allows, built to defeat RE2's DFA cache where it can
//    (random a/b text after `a[ab]{k}$`: the DFA needs a state per text position). Each rep uses a
//    fresh text, as a sender would; CPU and wall time of one test(), worst and median of the reps.
// 2. The server: the costliest pattern of (1) in a compiled hooks.yaml, served by the real CLI;
//    one connection, then `--senders`, post such bodies back to back for `--seconds`, while /healthz
//    is asked every 25 ms on its own connection. Latency of both, p50 / p99 / max, and the server's
//    main-thread CPU per POST (what blocks its event loop, and what a busy machine does not inflate);
//    and the same with a control pattern that costs nothing, to tell the matching from the rest of
//    a 256 KiB request.
// 3. With --irregexp: what V8's RegExp (the old engine) takes for `deploy.*to.*prod` on a few small
//    sizes, for comparison (it is cubic: seconds at 10 KB, hours at 256 KiB).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import { fail, fmtMs, freePort, installExitHandlers, machine, mainThreadCpuSeconds, median, once, readCli, root, run, startServer, stopServer, table } from './lib.mjs'

const usage = 'usage: node test/bench/regex.bench.mjs [--reps N] [--seconds S] [--senders N] [--irregexp] [--instructions N] [--engine] [--json]'
const { values, number } = readCli('regex.bench', usage, {
  reps: { type: 'string', default: '5' },
  seconds: { type: 'string', default: '5' },
  senders: { type: 'string', default: '4' },
  irregexp: { type: 'boolean', default: false },
  instructions: { type: 'string' },
  engine: { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
})
const REPS = number('reps', 1, 100)
const SECONDS = number('seconds', 1, 600)
const SENDERS = number('senders', 1, 64)
const BODY_LIMIT = 262144
/** `{"title":"…"}`: the text fills the body up to the default limit */
const TEXT = BODY_LIMIT - JSON.stringify({ title: '' }).length

const { RE2JS } = await import('re2js')
const { MATCH_WORK_BUDGET } = await import(pathToFileURL(join(root, 'build/runtime/bundle/conditions.js')).href)
const { checkPattern } = await import(pathToFileURL(join(root, 'build/compiler/regex-safety.js')).href)
const { patternCompilerOf } = await import(pathToFileURL(join(root, 'build/runtime/bundle/regex.js')).href)
const compilePattern = patternCompilerOf(RE2JS)
/** the machine's 1-minute load average when the run started: on a shared 2-core machine, read the wall times with it */
const loadAtStart = os.loadavg()[0]
/** what one request's patterns may cost over a 256 KiB text: the work budget (runtime/bundle/conditions.ts), or --instructions to try another */
const allowed = values.instructions === undefined ? Math.floor(MATCH_WORK_BUDGET / BODY_LIMIT) : number('instructions', 3, 10_000)

/** Deterministic text of `n` characters drawn from `alphabet`. */
function textOf(alphabet, n, seed) {
  const chars = [...alphabet]
  let x = seed * 2654435761 >>> 0
  let s = ''
  while (s.length < n) {
    x = (x * 1103515245 + 12345) >>> 0
    s += chars[(x >>> 16) % chars.length]
  }
  return s.slice(0, n)
}

/** Families of costly patterns: `make(k)` the pattern, `text(seed)` the input that costs it most. */
const FAMILIES = [
  { family: 'n-th from the end (DFA blow-up)', make: (k) => `a[ab]{${k}}$`, text: (s) => textOf('ab', TEXT - 1, s) + '!' },
  { family: 'the same, case-folded', make: (k) => `(?i)a[ab]{${k}}$`, text: (s) => textOf('aAbB', TEXT - 1, s) + '!' },
  { family: 'the same, any character', make: (k) => `(?s)a.{${k}}$`, text: (s) => textOf('ab', TEXT - 1, s) + '!' },
  { family: 'the same, after x*', make: (k) => `x*a[ab]{${k}}$`, text: (s) => textOf('ab', TEXT - 1, s) + '!' },
  { family: 'the same, non-Latin letters', make: (k) => `(?i)α[αβ]{${k}}$`, text: (s) => textOf('αβ', TEXT - 1, s) + '!' },
  { family: 'the same, after a word boundary', make: (k) => `\\ba[ab ]{${k}}$`, text: (s) => textOf('a b', TEXT - 1, s) + '!' },
  { family: 'repeated .*a', make: (k) => `(?:.*a){${k}}$`, text: (s) => 'a'.repeat(TEXT - 1 - (s % 2)) + '!'.repeat(1 + (s % 2)) },
  { family: 'words to the end', make: (k) => `\\b(?:\\w+\\b\\W*){${k}}$`, text: (s) => textOf('abc de', TEXT - 1, s) + '!' },
  { family: 'issue 23: deploy.*to.*prod', make: () => 'deploy.*to.*prod', text: (s) => 'deploy to '.repeat(TEXT / 10).slice(s % 3) },
  { family: 'nested quantifiers: (a+)+$', make: () => '(a+)+$', text: (s) => 'a'.repeat(TEXT - 1 - (s % 2)) + '!' },
  { family: 'overlapping: (x+x+)+y', make: () => '(x+x+)+y', text: (s) => 'x'.repeat(TEXT - (s % 2)) },
]

/** The largest k whose pattern the work budget lets read a whole 256 KiB text. */
function largestAccepted({ make }) {
  let best
  for (let k = 1; k <= 1000; k++) {
    const checked = checkPattern(make(k), '')
    if (!checked.ok || checked.programSize > allowed) break
    best = { pattern: make(k), programSize: checked.programSize }
    if (make(k) === make(k + 1)) break
  }
  return best
}

function cpuMs(f) {
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  const result = f()
  const wall = performance.now() - t0
  const c = process.cpuUsage(c0)
  return { result, wall, cpu: (c.user + c.system) / 1000 }
}

// ---- 1. the engine -------------------------------------------------------------------------
const engineRows = []
for (const fam of FAMILIES) {
  const chosen = largestAccepted(fam)
  if (!chosen) {
    // a budget this small refuses even the smallest of the family (--instructions)
    engineRows.push({ family: fam.family, pattern: fam.make(1), refused: true })
    continue
  }
  const re = compilePattern(chosen.pattern, '')
  const runs = []
  for (let rep = 0; rep < REPS; rep++) {
    const text = fam.text(rep + 1)
    runs.push(cpuMs(() => re.test(text)))
  }
  engineRows.push({ family: fam.family, pattern: chosen.pattern, programSize: chosen.programSize, textChars: fam.text(1).length, matched: runs[0].result,
    worstCpuMs: Math.max(...runs.map((r) => r.cpu)), medianCpuMs: median(runs.map((r) => r.cpu)), worstWallMs: Math.max(...runs.map((r) => r.wall)), medianWallMs: median(runs.map((r) => r.wall)) })
}
engineRows.sort((a, b) => (b.worstCpuMs ?? -1) - (a.worstCpuMs ?? -1))
const worst = engineRows[0]
const worstFamily = FAMILIES.find((f) => f.family === worst.family)

// ---- 2. the server (not with --engine) --------------------------------------------------------
/** a pattern that costs nothing on these texts (anchored, fails at the first character): what the body itself costs */
const CONTROL = '^z'
const serverRows = []
if (!values.engine) {
  const tmp = mkdtempSync(join(os.tmpdir(), 'hookgate-regex-bench-'))
  installExitHandlers('regex.bench', () => rmSync(tmp, { recursive: true, force: true }))
  const token = 'regex-bench-token-0123456789abcdef'
  const mappings = [['worst', worst.pattern], ['control', CONTROL]].map(([id, pattern]) => [
    `    - id: ${id}`,
    `      match:`,
    `        path: ${id}`,
    `        when: { payload.title: { matches: ${JSON.stringify(pattern)} } }`,
    `      action: wake`,
  ].join('\n'))
  writeFileSync(join(tmp, 'hooks.yaml'), ['hooks:', '  enabled: true', '  token: ${HOOKGATE_TOKEN}', '  mappings:', ...mappings, 'agents:', '  - id: main', '    model: builtin/echo', ''].join('\n'))
  const env = { HOOKGATE_TOKEN: token }
  const compiled = await run([join(root, 'bin/hookgate.js'), 'compile', join(tmp, 'hooks.yaml'), '--out', join(tmp, 'dist')], env)
  if (compiled.code !== 0) fail(`compile failed:\n${compiled.out}`)
  const port = await freePort()
  const server = await startServer({ label: 'hookgate', args: [join(root, 'bin/hookgate.js'), 'serve', '--bundle', join(tmp, 'dist'), '--port', String(port), '--state', join(tmp, 'state')], env, stdout: 'ignore', readyPort: port, readyPath: '/healthz' })
  const bodies = Array.from({ length: 8 }, (_, i) => JSON.stringify({ title: worstFamily.text(100 + i) }))
  if (Buffer.byteLength(bodies[0]) > BODY_LIMIT) fail(`the body is ${Buffer.byteLength(bodies[0])} bytes, over the limit`)

  const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))] }

  /** `senders` connections post the bodies to /hooks/<hook> back to back for SECONDS; /healthz every 25 ms meanwhile. */
  async function hammer(hook, senders) {
    const postMs = []
    const healthMs = []
    const statuses = new Map()
    const stopAt = performance.now() + SECONDS * 1000
    let sent = 0
    const sender = async () => {
      while (performance.now() < stopAt) {
        const body = bodies[sent++ % bodies.length]
        const t0 = performance.now()
        const r = await once(port, { method: 'POST', path: `/hooks/${hook}`, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }, body, timeoutMs: 60_000 })
        postMs.push(performance.now() - t0)
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
      }
    }
    const prober = async () => {
      while (performance.now() < stopAt) {
        const t0 = performance.now()
        const r = await once(port, { path: '/healthz', timeoutMs: 60_000 })
        if (r.status !== 200) fail(`/healthz answered ${r.status}: ${r.text}`)
        healthMs.push(performance.now() - t0)
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
    }
    const cpu0 = mainThreadCpuSeconds(server.pid)
    await Promise.all([...Array.from({ length: senders }, sender), prober()])
    // the server's main thread: the event loop every request (healthz too) waits for
    const cpuPerPostMs = ((mainThreadCpuSeconds(server.pid) - cpu0) * 1000) / postMs.length
    return {
      cpuPerPostMs,
      hook, pattern: hook === 'worst' ? worst.pattern : CONTROL, senders, seconds: SECONDS, posts: postMs.length, statuses: Object.fromEntries(statuses),
      postP50: pct(postMs, 0.5), postP99: pct(postMs, 0.99), postMax: Math.max(...postMs),
      healthz: healthMs.length, healthP50: pct(healthMs, 0.5), healthP99: pct(healthMs, 0.99), healthMax: Math.max(...healthMs),
    }
  }
  for (const senders of [...new Set([1, SENDERS])]) {
    for (const hook of ['worst', 'control']) serverRows.push(await hammer(hook, senders))
  }
  await stopServer(server)
  rmSync(tmp, { recursive: true, force: true })
}

// ---- 3. irregexp, for comparison ----------------------------------------------------------
const irregexpRows = []
if (values.irregexp) {
  for (const chars of [1000, 2000, 4000]) {
    const text = 'deploy to '.repeat(chars / 10)
    const { wall } = cpuMs(() => /deploy.*to.*prod/.test(text))
    irregexpRows.push({ chars, ms: wall, re2Ms: cpuMs(() => compilePattern('deploy.*to.*prod', '').test(text)).wall })
  }
}

const results = { machine: machine(), date: new Date().toISOString().slice(0, 10), load: { start: loadAtStart, end: os.loadavg()[0] }, budget: MATCH_WORK_BUDGET, allowedAt256KiB: allowed, engine: engineRows, server: serverRows, irregexp: irregexpRows }
if (values.json) {
  process.stdout.write(JSON.stringify(results, null, 2) + '\n')
} else {
  const m = results.machine
  process.stdout.write(`${m.cores} × ${m.cpu}, node ${m.node}; ${allowed} instructions at a 256 KiB body (the request's work budget: ${MATCH_WORK_BUDGET} instruction·characters = ${Math.floor(MATCH_WORK_BUDGET / BODY_LIMIT)}); load average ${results.load.start.toFixed(1)} at the start, ${results.load.end.toFixed(1)} at the end\n\n`)
  process.stdout.write('1. RE2 (re2js) on a 256 KiB body\'s text, the largest pattern of each family the budget accepts, ' + REPS + ' fresh texts each\n')
  process.stdout.write(table(['family', 'pattern', 'size', 'CPU worst ms', 'CPU median', 'wall worst', 'wall median'],
    engineRows.map((r) => (r.refused ? [r.family, `${r.pattern}: refused`, '–', '–', '–', '–', '–'] : [r.family, r.pattern, String(r.programSize), fmtMs(r.worstCpuMs), fmtMs(r.medianCpuMs), fmtMs(r.worstWallMs), fmtMs(r.medianWallMs)])), [1]) + '\n\n')
  if (serverRows.length) process.stdout.write(`2. hookgate serve: senders post 256 KiB bodies back to back for ${SECONDS} s, /healthz asked every 25 ms meanwhile; the control pattern ${CONTROL} shows what the same bodies cost without matching work\n`)
  if (serverRows.length) process.stdout.write(table(['pattern', 'senders', 'POSTs (status)', 'main-thread CPU per POST ms', 'POST p50 ms', 'p99', 'max', 'healthz', 'healthz p50 ms', 'p99', 'max'],
    serverRows.map((r) => [r.pattern, String(r.senders), `${r.posts} (${Object.entries(r.statuses).map(([k, v]) => `${v}× ${k}`).join(', ')})`, fmtMs(r.cpuPerPostMs), fmtMs(r.postP50), fmtMs(r.postP99), fmtMs(r.postMax), String(r.healthz), fmtMs(r.healthP50), fmtMs(r.healthP99), fmtMs(r.healthMax)]), [2]) + '\n')
  if (irregexpRows.length) {
    process.stdout.write('\n3. deploy.*to.*prod on "deploy to " repeated: V8 RegExp (irregexp) against RE2\n')
    process.stdout.write(table(['characters', 'irregexp ms', 'RE2 ms'], irregexpRows.map((r) => [String(r.chars), fmtMs(r.ms), fmtMs(r.re2Ms)])) + '\n')
  }
}
