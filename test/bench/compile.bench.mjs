// Compile benchmark, run by hand (not part of `npm test`):
//
//   node test/bench/compile.bench.mjs [--mappings 1000] [--transforms 20] [--runs 5] [--json]
//
// Generates a large, realistic hooks.yaml plus TypeScript transforms in a fresh temp dir, rebuilds
// build/ once, then times the real CLI (`bin/hookgate.js compile`, node start-up included) and the
// in-process compileFile() from build/compiler/index.js, and checks the bundle it produced.
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { gzipSync } from 'node:zlib'

const root = fileURLToPath(new URL('../../', import.meta.url))
const USAGE = 'usage: node test/bench/compile.bench.mjs [--mappings N] [--transforms T] [--runs R] [--json]'

class BenchError extends Error {}
const fail = (message) => { throw new BenchError(message) }

// ---------------------------------------------------------------------------------------------
// arguments

function readOptions() {
  let values
  try {
    ;({ values } = parseArgs({
      args: process.argv.slice(2),
      options: {
        mappings: { type: 'string', default: '1000' },
        transforms: { type: 'string', default: '20' },
        runs: { type: 'string', default: '5' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }))
  } catch (err) {
    process.stderr.write(`compile.bench: ${err.message}\n${USAGE}\n`)
    process.exit(2)
  }
  if (values.help) {
    process.stdout.write(USAGE + '\n')
    process.exit(0)
  }
  const int = (name, min) => {
    const n = Number(values[name])
    if (!Number.isInteger(n) || n < min) {
      process.stderr.write(`compile.bench: --${name} takes a whole number from ${min} up, not "${values[name]}"\n${USAGE}\n`)
      process.exit(2)
    }
    return n
  }
  return { mappings: int('mappings', 1), transforms: int('transforms', 0), runs: int('runs', 1), json: values.json }
}

// ---------------------------------------------------------------------------------------------
// the generated config

const VENDORS = ['github', 'stripe', 'pagerduty', 'sentry', 'linear', 'grafana', 'jira']
const PAYLOAD_FIELDS = [
  'payload.repository.owners[0].login',
  'payload.data.object.amount',
  'payload.alerts[0].labels.severity',
  'payload.issue.title',
  'payload.items[2].name',
  'payload.a.b[0]',
  'payload.event["display-name"]',
]
const HEADERS = ['x-event', 'x-request-id', 'user-agent', 'x-github-event']
const QUERIES = ['x', 'env', 'tenant']

const pad = (i) => String(i).padStart(4, '0')
const quote = (s) => JSON.stringify(s) // a JSON string is a valid YAML double-quoted scalar
const pickFrom = (list, i) => list[i % list.length]

/** Index i of the transform mapping i uses, or -1: every 50th mapping, round-robin over the transforms. */
function transformOf(i, transforms) {
  return transforms > 0 && i % 50 === 0 ? (i / 50) % transforms : -1
}

function matchPath(i) {
  const n = i + 1
  switch (i % 4) {
    case 0: return `svc-${n}`
    case 1: return `team${i % 13}/svc${n}`
    case 2: return `vendors/${pickFrom(VENDORS, i)}/${n}`
    default: return `ci/build-${n}`
  }
}

function mappingYaml(i, transforms) {
  const id = `hook-${pad(i + 1)}`
  const vendor = pickFrom(VENDORS, i)
  const t = transformOf(i, transforms)
  const action = t >= 0 || i % 3 !== 1 ? 'agent' : 'wake'
  const field = pickFrom(PAYLOAD_FIELDS, i)
  const field2 = pickFrom(PAYLOAD_FIELDS, i + 3)
  const header = pickFrom(HEADERS, i)
  const query = pickFrom(QUERIES, i)
  const match = i % 5 === 0 ? `{ path: ${matchPath(i)}, source: ${vendor} }` : `{ path: ${matchPath(i)} }`
  const lines = [`    - id: ${id}`, `      match: ${match}`, `      action: ${action}`]
  if (action === 'wake') {
    lines.push(`      wakeMode: ${i % 2 === 0 ? 'now' : 'next-heartbeat'}`)
    lines.push(`      textTemplate: ${quote(`[{{now}}] ${vendor} {{path}}: {{headers.${header}}} {{${field}}} (query ${query}={{query.${query}}})`)}`)
    return lines.join('\n')
  }
  lines.push(`      name: ${quote(`${vendor} {{headers.x-event}} #${i + 1}`)}`)
  if (i % 4 === 0) lines.push('      agentId: main')
  if (i % 6 === 0) lines.push(`      sessionKey: ${quote(`hook:${vendor}:{{${field}}}`)}`)
  if (i % 7 === 0) lines.push('      deliver: false')
  if (i % 9 === 0) lines.push(`      channel: slack`, `      to: ${quote(`#alerts-{{query.${query}}}`)}`)
  if (i % 8 === 0) lines.push(`      thinking: ${pickFrom(['low', 'medium', 'high'], i)}`)
  if (i % 10 === 0) lines.push(`      timeoutSeconds: ${60 + (i % 5) * 30}`)
  lines.push('      messageTemplate: |')
  lines.push(`        ${vendor} sent {{headers.${header}}} to {{path}} at {{now}} (query ${query}={{query.${query}}}).`)
  lines.push(`        Subject: {{${field}}}`)
  lines.push(`        Detail: {{${field2}}}`)
  if (i % 3 === 0) lines.push('        Raw payload follows:', '        {{payload}}')
  if (t >= 0) lines.push(`      transform: { module: t${t}.ts${i % 100 === 0 ? ', timeoutMs: 1500' : ''} }`)
  return lines.join('\n')
}

function hooksYaml(mappings, transforms) {
  const out = [
    '# Generated by test/bench/compile.bench.mjs: a large config for timing `hookgate compile`.',
    `# ${mappings} mappings, ${transforms} TypeScript transforms under transforms/.`,
    'hooks:',
    '  enabled: true',
    '  token: ${HOOKGATE_TOKEN}',
    '  path: /hooks',
    '  transformsDir: transforms',
    '  mappings:',
  ]
  for (let i = 0; i < mappings; i++) out.push(mappingYaml(i, transforms))
  out.push('', 'agents:', '  - id: main', '    default: true', '    model: builtin/echo', '    heartbeat: { every: 30m }', '')
  return out.join('\n')
}

const UTIL_TS = `// Shared helpers for the generated transforms.
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json }

export function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

/** Walks own properties only; undefined as soon as a step is missing. */
export function pick(value: unknown, keys: ReadonlyArray<string | number>): unknown {
  let v: unknown = value
  for (const k of keys) {
    if (Array.isArray(v) && typeof k === 'number') v = v[k]
    else if (isRecord(v) && typeof k === 'string' && Object.hasOwn(v, k)) v = v[k]
    else return undefined
  }
  return v
}

export function truncate(s: string, max: number): string {
  return s.length <= max ? s : s.slice(0, Math.max(0, max - 1)) + '…'
}
`

function transformTs(n, total) {
  const usesUtil = n % 4 === 0
  const vendor = pickFrom(VENDORS, n)
  const ignored = ['ping', 'test', `heartbeat-${n}`].map((e) => `'${e}'`).join(', ')
  const helpers = usesUtil
    ? [`import { pick, truncate } from './lib/util.js'`, '']
    : [
        'function pick(value: unknown, keys: string[]): unknown {',
        '  let v: unknown = value',
        '  for (const k of keys) v = v !== null && typeof v === \'object\' && Object.hasOwn(v, k) ? (v as Record<string, unknown>)[k] : undefined',
        '  return v',
        '}',
        '',
        'const truncate = (s: string, max: number): string => (s.length <= max ? s : s.slice(0, max - 1) + \'…\')',
        '',
      ]
  return [
    `// Generated by test/bench/compile.bench.mjs: transform ${n + 1} of ${total} (${vendor}).`,
    ...helpers,
    'interface Input {',
    '  payload: Record<string, unknown>',
    '  headers: Record<string, string>',
    '  query: Record<string, string>',
    '  path: string',
    '}',
    '',
    'interface Summary {',
    '  kind: string',
    '  subject: string',
    '  score: number',
    '}',
    '',
    `const IGNORED = new Set([${ignored}])`,
    `const THRESHOLD = ${(n % 9) + 1}`,
    '',
    'function summarise(input: Input): Summary {',
    "  const kind = input.headers['x-event'] ?? 'unknown'",
    "  const subject = String(pick(input.payload, ['issue', 'title']) ?? input.path)",
    "  const score = Number(pick(input.payload, ['metrics', 'score']) ?? 0)",
    '  return { kind, subject: truncate(subject, 80), score }',
    '}',
    '',
    "function severity(score: number): 'low' | 'high' {",
    "  return score >= THRESHOLD ? 'high' : 'low'",
    '}',
    '',
    `export default function transform${n}(input: Input) {`,
    "  if (IGNORED.has(input.headers['x-event'] ?? '')) return null",
    "  if (input.query['dry-run'] === '1') return null",
    '  const s = summarise(input)',
    '  if (!Number.isFinite(s.score) || s.score < 0) return null',
    '  return {',
    `    name: \`${vendor} \${s.kind} (\${severity(s.score)})\`,`,
    "    message: [`${s.kind} on ${input.path}`, `subject: ${s.subject}`, `score: ${s.score}`].join('\\n'),",
    '  }',
    '}',
    '',
  ].join('\n')
}

function writeProject(dir, mappings, transforms) {
  const tdir = join(dir, 'transforms')
  mkdirSync(join(tdir, 'lib'), { recursive: true })
  writeFileSync(join(tdir, 'lib', 'util.ts'), UTIL_TS)
  for (let n = 0; n < transforms; n++) writeFileSync(join(tdir, `t${n}.ts`), transformTs(n, transforms))
  const file = join(dir, 'hooks.yaml')
  writeFileSync(file, hooksYaml(mappings, transforms))
  const expectedIds = Array.from({ length: mappings }, (_, i) => `hook-${pad(i + 1)}`)
  const withTransform = expectedIds.filter((_, i) => transformOf(i, transforms) >= 0).length
  const used = new Set(expectedIds.map((_, i) => transformOf(i, transforms)).filter((t) => t >= 0))
  return { file, expectedIds, withTransform, usedTransforms: used.size, utilImporters: [...used].filter((n) => n % 4 === 0).length }
}

// ---------------------------------------------------------------------------------------------
// running and measuring

function run(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => { stderr += d })
    const t0 = performance.now()
    child.on('error', (err) => resolve({ code: null, signal: null, stdout, stderr: stderr + String(err), ms: performance.now() - t0 }))
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, ms: performance.now() - t0 }))
  })
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2
}

const kib = (bytes) => bytes / 1024
const round = (x, digits = 1) => Number(x.toFixed(digits))

/** Fails unless the compiled output lists exactly the generated mappings. */
async function checkOutput(outDir, project, label) {
  const manifestPath = join(outDir, 'manifest.json')
  const bundlePath = join(outDir, 'hookgate.bundle.mjs')
  let manifest
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8'))
  } catch (err) {
    fail(`${label}: cannot read ${manifestPath}: ${err.message}`)
  }
  const ids = (manifest.routes ?? []).map((r) => r.id)
  const n = project.expectedIds.length
  if (ids.length !== n) fail(`${label}: manifest.json lists ${ids.length} routes, expected ${n}`)
  const missing = project.expectedIds.filter((id) => !ids.includes(id))
  if (missing.length) fail(`${label}: manifest.json lacks ${missing.length} mapping(s), e.g. ${missing.slice(0, 5).join(', ')}`)
  const transformed = manifest.routes.filter((r) => r.transform).length
  if (transformed !== project.withTransform) fail(`${label}: manifest.json has ${transformed} routes with a transform, expected ${project.withTransform}`)
  // The bundle carries its own copy of the manifest and the route table: both must agree.
  const mod = await import(pathToFileURL(bundlePath).href + `?t=${Date.now()}`)
  if (mod.manifest?.routes?.length !== n) fail(`${label}: the bundle's manifest lists ${mod.manifest?.routes?.length} routes, expected ${n}`)
  if (mod.routes?.length !== n) fail(`${label}: the bundle exports ${mod.routes?.length} routes, expected ${n}`)
  const fns = mod.routes.filter((r) => typeof r.transform?.fn === 'function').length
  if (fns !== project.withTransform) fail(`${label}: the bundle has ${fns} transform functions, expected ${project.withTransform}`)
  return { manifestPath, bundlePath }
}

async function main() {
  const opts = readOptions()
  const log = (s) => { if (!opts.json) process.stderr.write(s + '\n') }
  const tmp = mkdtempSync(join(os.tmpdir(), 'hookgate-bench-'))
  const cleanup = () => rmSync(tmp, { recursive: true, force: true })
  const onSignal = (sig) => { cleanup(); process.exit(sig === 'SIGINT' ? 130 : 143) }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  try {
    const project = writeProject(tmp, opts.mappings, opts.transforms)
    const configBytes = statSync(project.file).size

    log('building build/ (node scripts/build.mjs) …')
    const b = await run([join(root, 'scripts', 'build.mjs')])
    if (b.code !== 0) fail(`node scripts/build.mjs exited with ${b.code ?? b.signal}:\n${b.stdout}${b.stderr}`)

    // 1. the real CLI, node start-up included
    const outDir = join(tmp, 'dist')
    const cliMs = []
    for (let r = 1; r <= opts.runs; r++) {
      const c = await run([join(root, 'bin', 'hookgate.js'), 'compile', project.file, '--out', outDir])
      if (c.code !== 0) fail(`hookgate compile (run ${r}) exited with ${c.code ?? c.signal}; diagnostics:\n${c.stdout}${c.stderr}`)
      cliMs.push(c.ms)
      log(`  CLI run ${r}/${opts.runs}: ${c.ms.toFixed(1)} ms`)
    }
    const { manifestPath, bundlePath } = await checkOutput(outDir, project, 'CLI compile')

    // 2. in-process compileFile: every phase, write included; no node start-up, no module loading
    const { compileFile } = await import(pathToFileURL(join(root, 'build', 'compiler', 'index.js')).href)
    const inDir = join(tmp, 'dist-inprocess')
    const inMs = []
    for (let r = 1; r <= opts.runs; r++) {
      const t0 = performance.now()
      const outcome = await compileFile(project.file, { outDir: inDir })
      const ms = performance.now() - t0
      if (!outcome.ok) {
        const shown = outcome.diagnostics.map((d) => `${d.file}:${d.line}:${d.column}: ${d.severity} ${d.code}: ${d.message}${d.hint ? `\n  hint: ${d.hint}` : ''}`)
        fail(`compileFile (run ${r}) failed:\n${shown.join('\n') || 'no diagnostics'}`)
      }
      inMs.push(ms)
      log(`  in-process run ${r}/${opts.runs}: ${ms.toFixed(1)} ms`)
    }
    await checkOutput(inDir, project, 'in-process compileFile')
    if (readFileSync(join(inDir, 'hookgate.bundle.mjs'), 'utf8') !== readFileSync(bundlePath, 'utf8')) {
      log('  note: the in-process bundle differs from the CLI bundle')
    }

    const bundle = readFileSync(bundlePath)
    const cpus = os.cpus()
    const result = {
      mappings: opts.mappings,
      transforms: opts.transforms,
      transformsUsed: project.usedTransforms,
      mappingsWithTransform: project.withTransform,
      routes: project.expectedIds.length,
      runs: opts.runs,
      configKiB: round(kib(configBytes)),
      cliMs: { min: round(Math.min(...cliMs)), median: round(median(cliMs)), max: round(Math.max(...cliMs)), samples: cliMs.map((x) => round(x)) },
      inProcessMs: { median: round(median(inMs)), min: round(Math.min(...inMs)), samples: inMs.map((x) => round(x)) },
      bundleKiB: round(kib(bundle.length)),
      bundleGzipKiB: round(kib(gzipSync(bundle).length)),
      manifestKiB: round(kib(statSync(manifestPath).size)),
      node: process.version,
      cpu: cpus[0]?.model?.trim() ?? 'unknown',
      cores: cpus.length,
    }
    if (opts.json) {
      process.stdout.write(JSON.stringify(result) + '\n')
    } else {
      const rows = [
        ['mappings', String(result.mappings)],
        ['transforms', `${result.transforms} (${result.transformsUsed} used by ${result.mappingsWithTransform} mapping${result.mappingsWithTransform === 1 ? '' : 's'}, ${project.utilImporters} import lib/util.ts)`],
        ['config size', `${result.configKiB.toFixed(1)} KiB`],
        [`CLI compile (${result.runs} run${result.runs === 1 ? '' : 's'})`, `min ${result.cliMs.min.toFixed(1)} / median ${result.cliMs.median.toFixed(1)} / max ${result.cliMs.max.toFixed(1)} ms`],
        ['in-process compile', `median ${result.inProcessMs.median.toFixed(1)} ms`],
        ['bundle size', `${result.bundleKiB.toFixed(1)} KiB (gzip ${result.bundleGzipKiB.toFixed(1)} KiB)`],
        ['manifest size', `${result.manifestKiB.toFixed(1)} KiB`],
        ['node', result.node],
        ['CPU', `${result.cpu} × ${result.cores} cores`],
      ]
      const w = Math.max(...rows.map(([k]) => k.length))
      const line = '-'.repeat(w + 2) + '+' + '-'.repeat(Math.max(...rows.map(([, v]) => v.length)) + 2)
      process.stdout.write(['hookgate compile benchmark', line, ...rows.map(([k, v]) => ` ${k.padEnd(w)} | ${v}`), line].join('\n') + '\n')
    }
  } catch (err) {
    process.stderr.write(`compile.bench: FAILED: ${err instanceof BenchError ? err.message : (err && err.stack) || String(err)}\n`)
    process.exitCode = 1
  } finally {
    cleanup()
  }
}

await main()
