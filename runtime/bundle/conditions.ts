// The fixed set of helpers that compiled `match.when` predicates (compiler/conditions.ts) call at
// request time, and the explanation `hookgate try` gives when one does not hold. A predicate is
// `(c, h, t) => boolean` over the same RenderContext templates read; `t`, when given, hears each
// comparison. Lookups are own-property only (`__proto__`, `constructor`, `prototype` never resolve).
//
// Hot path: each helper compares and returns; no allocation beyond what a comparison needs.
import type { BundleRoute, CompiledPattern, ConditionHelpers, ConditionLeaf, ConditionNode, ConditionTrace, RenderContext } from './format.js'
import { findHeader, isJwtValue, isSecretHeader, templateHelpers } from './template-helpers.js'

export type { ConditionHelpers, ConditionTrace }

/** JSON-like equality: same primitives, arrays item by item, objects by their own keys. */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) {
    const bs = b as unknown[]
    return a.length === bs.length && a.every((x, i) => same(x, bs[i]))
  }
  const ak = Object.keys(a)
  const bk = Object.keys(b)
  return ak.length === bk.length && ak.every((k) => Object.hasOwn(b, k) && same(templateHelpers.get(a, [k]), templateHelpers.get(b, [k])))
}

function header(headers: Record<string, string>, lowerName: string): string | undefined {
  const value = findHeader(headers, lowerName)
  if (value === undefined || value === null) return undefined
  return Array.isArray(value) ? value.map(String).join(', ') : String(value)
}

function eq(t: ConditionTrace | undefined, leaf: number, value: unknown, expected: unknown): boolean {
  const held = same(value, expected)
  t?.(leaf, value, held)
  return held
}

function oneOf(t: ConditionTrace | undefined, leaf: number, value: unknown, expected: readonly unknown[]): boolean {
  const held = expected.some((x) => same(value, x))
  t?.(leaf, value, held)
  return held
}

/** A key holding null exists; only a missing one (or one a lookup may not follow) does not. */
function has(t: ConditionTrace | undefined, leaf: number, value: unknown, expected: boolean): boolean {
  const held = (value !== undefined) === expected
  t?.(leaf, value, held)
  return held
}

/**
 * What the patterns one request runs may cost, in RE2 program instructions × characters of text
 * read: 32 instructions over a 256 KiB text. RE2 never backtracks, but a match still costs up to
 * its program size per character (when a pattern defeats RE2's DFA cache, as `a[ab]{28}$` does on
 * random a/b text). Measured (test/bench/regex.bench.mjs, RESULTS.md): the costliest patterns
 * within this budget take about 25 ms of CPU, so a request's conditions answer well under 100 ms
 * and /healthz keeps answering. A request whose patterns would read more than this gets 413
 * `condition_text_too_long` before the match that would go over runs: it costs the sender its own
 * request, and nobody else a stalled event loop. Ordinary patterns over ordinary fields (a branch
 * name, a title, a label) spend a few thousandths of it.
 */
export const MATCH_WORK_BUDGET = 32 * 262144

/** What the current request's patterns may still cost; reset by beginConditionWork. Matching is synchronous, so one counter serves every request. */
let workLeft = MATCH_WORK_BUDGET

/** Starts a request's evaluation of conditions with the whole budget. */
export function beginConditionWork(): void {
  workLeft = MATCH_WORK_BUDGET
}

/** A request's patterns would cost more than MATCH_WORK_BUDGET: the sender's text is too long for them. */
export class ConditionTooCostly extends Error {
  constructor(readonly chars: number, readonly size: number) {
    super(`a match.when pattern of ${size} instructions would read ${chars} characters, more than this request's conditions may read (${MATCH_WORK_BUDGET} instruction·characters in all); send a shorter value`)
  }
}

/**
 * Strings, numbers and booleans are tested as text; anything else never matches. `re` is RE2
 * (runtime/bundle/regex.ts): linear in the text, so a sender's text cannot make it backtrack, and the
 * request's work budget bounds what its patterns together may read.
 */
function test(t: ConditionTrace | undefined, leaf: number, value: unknown, re: CompiledPattern): boolean {
  let held = false
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
    const text = String(value)
    const cost = text.length * re.size
    if (cost > workLeft) throw new ConditionTooCostly(text.length, re.size)
    workLeft -= cost
    held = re.test(text)
  }
  t?.(leaf, value, held)
  return held
}

export const conditionHelpers: Readonly<ConditionHelpers> = Object.freeze({ get: templateHelpers.get, header, eq, oneOf, has, test })

export type CompiledWhen = NonNullable<BundleRoute['when']>

/** One comparison that made a `when` fail: `held` true means it held where it must not (under not). */
export interface ConditionFailure extends ConditionLeaf {
  /** the value compared; absent when the path resolved to nothing (secret headers show as [redacted]) */
  actual?: unknown
  held: boolean
}

export interface ConditionExplanation {
  holds: boolean
  failed: ConditionFailure[]
}

/** Evaluates a `when` and, when it does not hold, names the comparisons that made it fail. */
export function explainCondition(when: CompiledWhen, context: RenderContext): ConditionExplanation {
  beginConditionWork()
  const seen = new Map<number, { value: unknown; held: boolean }>()
  const holds = when.test(context, conditionHelpers, (leaf, value, held) => { seen.set(leaf, { value, held }) })
  if (holds) return { holds, failed: [] }

  const valueOf = (node: ConditionNode): boolean | undefined => {
    if ('leaf' in node) return seen.get(node.leaf)?.held
    if ('not' in node) {
      const v = valueOf(node.not)
      return v === undefined ? undefined : !v
    }
    const decisive = 'all' in node ? false : true
    for (const child of 'all' in node ? node.all : node.any) {
      const v = valueOf(child)
      if (v === undefined) return undefined
      if (v === decisive) return decisive
    }
    return !decisive
  }
  /** The leaves that kept `node` from being `want`. */
  const blame = (node: ConditionNode, want: boolean): number[] => {
    if ('leaf' in node) return [node.leaf]
    if ('not' in node) return blame(node.not, !want)
    const children = 'all' in node ? node.all : node.any
    // all wanted true (or any wanted false): the first child that broke it; otherwise every child
    const first = ('all' in node) === want
    if (first) {
      const culprit = children.find((c) => valueOf(c) === !want)
      return culprit ? blame(culprit, want) : []
    }
    return children.flatMap((c) => blame(c, want))
  }
  const failed = blame(when.tree, true).map((i): ConditionFailure => {
    const leaf = when.leaves[i]!
    const outcome = seen.get(i)
    const secret = leaf.path.startsWith('headers.') && (isSecretHeader(leaf.path.slice('headers.'.length)) || (typeof outcome?.value === 'string' && isJwtValue(outcome.value)))
    const actual = outcome?.value === undefined ? {} : { actual: secret ? '[redacted]' : outcome.value }
    return { ...leaf, ...actual, held: outcome?.held ?? false }
  })
  return { holds, failed }
}

/** For each route on a name that the payload's source fits but whose `when` fails: why it failed. */
export function explainFiltered(routes: readonly BundleRoute[], context: RenderContext): Array<{ mapping: string; failed: ConditionFailure[] }> {
  const payload = context.payload
  const source = payload !== null && typeof payload === 'object' && Object.hasOwn(payload, 'source') ? (payload as Record<string, unknown>).source : undefined
  const out: Array<{ mapping: string; failed: ConditionFailure[] }> = []
  for (const r of routes) {
    if ((r.source !== null && r.source !== source) || r.when === null) continue
    const e = explainCondition(r.when, context)
    if (!e.holds) out.push({ mapping: r.id, failed: e.failed })
  }
  return out
}
