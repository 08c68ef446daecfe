// Runs one fuzz property with fast-check: a fixed number of cases (the short run inside `npm test`)
// or for a while (`npm run fuzz`), printing progress, and on a violation the shrunk case, how to
// reproduce it, and the seed and path that replay exactly it. A run goes on after a violation with
// the next seed (until its time is up or its number of cases ran), counting further cases of an
// already reported kind instead of stopping on them again, so that one run finds several faults.
import fc from 'fast-check'
import type { Violation } from './http-target.js'

export interface FuzzProperty<T> {
  name: string
  arbitrary: fc.Arbitrary<T>
  /** runs one case against the target; what broke (empty: the case kept every invariant) */
  check(value: T): Promise<Violation[]>
  /** the case as a reproduction a person can run */
  show(value: T): string
  /** cases run first, every time: the known defects, so that a short run always covers them */
  examples?: T[]
}

export interface RunOptions {
  seed: number
  /** a fixed number of cases (the short run) … */
  numRuns?: number
  /** … or as many as fit in this time */
  minutes?: number
  /** replay one counterexample (with its seed) */
  path?: string
  /** progress lines, every this often (long runs) */
  progressEverySeconds?: number
  /** at most this many shrink steps per failure: each step is a real request or compile */
  maxShrinkSteps?: number
  /** and at most this long shrinking one failure */
  shrinkBudgetMs?: number
  log(line: string): void
}

export interface Finding {
  kinds: string[]
  seed: number
  path: string
  shown: string
  details: string
}

export interface FuzzReport {
  property: string
  cases: number
  /** violations seen, by kind, shrinking excluded */
  violations: Map<string, number>
  findings: Finding[]
  ms: number
}

/** The command that replays a finding. */
export function replayCommand(property: string, seed: number, path: string): string {
  return `npm run fuzz -- --only ${property} --seed ${seed} --path ${path}`
}

export async function runFuzz<T>(p: FuzzProperty<T>, options: RunOptions): Promise<FuzzReport> {
  const started = Date.now()
  const deadline = options.minutes !== undefined ? started + options.minutes * 60_000 : Infinity
  const report: FuzzReport = { property: p.name, cases: 0, violations: new Map(), findings: [], ms: 0 }
  const reported = new Set<string>()
  const maxShrink = options.maxShrinkSteps ?? 400
  const shrinkBudget = options.shrinkBudgetMs ?? 120_000
  let lastProgress = Date.now()
  let seed = options.seed
  /** cases fast-check generated (the examples not counted): a fixed-size run goes on to this many after a finding */
  let generated = 0

  // The examples first, each once, outside fast-check (so seeds and paths replay the same without them).
  if (options.path === undefined) {
    for (const [i, value] of (p.examples ?? []).entries()) {
      report.cases++
      const found = await p.check(value)
      for (const v of found) report.violations.set(v.kind, (report.violations.get(v.kind) ?? 0) + 1)
      const fresh = found.filter((v) => !reported.has(v.kind))
      if (fresh.length === 0) continue
      const finding: Finding = { kinds: [...new Set(fresh.map((v) => v.kind))], seed: -1, path: `example ${i}`, shown: p.show(value), details: describe(fresh) }
      report.findings.push(finding)
      for (const k of finding.kinds) reported.add(k)
      options.log(`\n[${p.name}] VIOLATION by example ${i} (a known defect's case, run first every time):\n${finding.details}\n${finding.shown}\n`)
    }
  }

  for (let round = 0; ; round++) {
    // Counting shrink steps: past the cap, every case passes, which ends shrinking where it is.
    let failedOnce = false
    let shrinkSteps = 0
    let shrinkStarted = 0
    const property = fc.asyncProperty(p.arbitrary, async (value) => {
      if (failedOnce) {
        if (++shrinkSteps > maxShrink || Date.now() - shrinkStarted > shrinkBudget) return true
      } else {
        report.cases++
        generated++
      }
      const found = await p.check(value)
      if (!failedOnce) for (const v of found) report.violations.set(v.kind, (report.violations.get(v.kind) ?? 0) + 1)
      if (!failedOnce && options.progressEverySeconds && Date.now() - lastProgress > options.progressEverySeconds * 1000) {
        lastProgress = Date.now()
        const kinds = [...report.violations.entries()].map(([k, n]) => `${n}× ${k}`).join('; ')
        options.log(`[${p.name}] ${Math.round((Date.now() - started) / 1000)} s: ${report.cases} cases, ${sum(report.violations)} violations${kinds ? ` (${kinds})` : ''}, ${report.findings.length} reported`)
      }
      const fresh = found.filter((v) => !reported.has(v.kind))
      if (fresh.length === 0) return true
      if (!failedOnce) shrinkStarted = Date.now()
      failedOnce = true
      throw new FuzzFailure(fresh)
    })
    const left = deadline - Date.now()
    const details = await fc.check(property, {
      seed,
      ...(options.path !== undefined ? { path: options.path, endOnFailure: true } : {}),
      numRuns: options.numRuns !== undefined ? Math.max(1, options.numRuns - generated) : Number.MAX_SAFE_INTEGER,
      ...(Number.isFinite(left) ? { interruptAfterTimeLimit: Math.max(left, 1) } : {}),
    })
    if (details.failed && details.counterexample) {
      const [value] = details.counterexample
      const error = details.errorInstance
      const kinds = error instanceof FuzzFailure ? error.violations.map((v) => v.kind) : [`the check threw: ${String(error)}`]
      const finding: Finding = {
        kinds: [...new Set(kinds)],
        seed: details.seed,
        path: details.counterexamplePath ?? '',
        shown: p.show(value),
        details: error instanceof FuzzFailure ? describe(error.violations) : String((error as Error)?.stack ?? error),
      }
      report.findings.push(finding)
      for (const k of finding.kinds) reported.add(k)
      options.log(`\n[${p.name}] VIOLATION after ${report.cases} cases (${details.numShrinks} shrinks):\n${finding.details}\n${finding.shown}\n  replay: ${replayCommand(p.name, finding.seed, finding.path)}\n`)
    }
    // After a finding, on with the next seed: until the time is up, or the fixed number of cases ran.
    const more = options.path === undefined && details.failed && (options.numRuns !== undefined ? generated < options.numRuns : Date.now() < deadline)
    if (!more) break
    seed = (seed + 1) >>> 0
  }
  report.ms = Date.now() - started
  return report
}

export class FuzzFailure extends Error {
  constructor(readonly violations: Violation[]) {
    super(violations.map((v) => v.kind).join('; '))
  }
}

function describe(violations: readonly Violation[]): string {
  return violations.map((v) => `  - ${v.kind}\n      ${v.detail.replace(/\n/g, '\n      ')}`).join('\n')
}

function sum(m: Map<string, number>): number {
  let n = 0
  for (const v of m.values()) n += v
  return n
}

/** The report's closing lines. */
export function summarise(r: FuzzReport): string {
  const kinds = [...r.violations.entries()].map(([k, n]) => `    ${n}× ${k}`).join('\n')
  return `[${r.property}] ${r.cases} cases in ${(r.ms / 1000).toFixed(1)} s, ${sum(r.violations)} violations, ${r.findings.length} reported${kinds ? `\n${kinds}` : ''}`
}
