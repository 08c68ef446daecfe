// Decides at compile time whether a `match.when` pattern can run on the runtime's engine, and
// bounds what the patterns can cost one request. The rule it keeps: no accepted condition can
// stall the event loop (issue 23: `deploy.*to.*prod`, accepted while V8's backtracking irregexp ran
// the patterns, blocked every request, /healthz included, for seconds on a 10 KB body).
//
// The runtime matches with RE2 (re2js, runtime/regex.ts), which never backtracks: a match costs at
// most a constant times the text's length times the pattern's program size. So two checks remain:
//   - the pattern must be RE2 syntax. It is compiled here by the very function the runtime uses;
//     what RE2 refuses but JavaScript takes (backreferences, lookahead, lookbehind, `\u` escapes)
//     is CONDITION_REGEX_UNSUPPORTED with a hint for the rewrite, anything else CONDITION_REGEX_INVALID;
//   - the work budget (CONDITION_REGEX_UNSAFE): one request on a hook name may run every pattern of
//     every mapping on it, each over a text as long as the body (at most the largest body limit on
//     the name) or, for a header or query value, as Node's 16 KiB of headers. The sum of their
//     program sizes times those lengths must stay within MATCH_WORK_BUDGET, measured (test/bench/
//     regex.bench.mjs, RESULTS.md) so that the worst patterns within it answer a body at the limit
//     in well under 100 ms and leave /healthz answering meanwhile.
import { RE2JS } from 're2js'
import { patternCompilerOf } from '../runtime/regex.js'
import type { DiagnosticBag } from './diagnostics.js'
import type { LoadedConfig, PathSegment } from './load.js'

const compilePattern = patternCompilerOf(RE2JS)

/**
 * Program instructions × characters one request's patterns may cost: 32 instructions over a body at
 * the default 256 KiB limit, 128 at 64 KiB, 512 over 16 KiB of headers. Measured on the 2-core
 * development machine (test/bench/regex.bench.mjs): the costliest pattern within it we found,
 * `a[ab]{28}$` on random a/b text (which defeats RE2's DFA cache: a state per position), matches
 * 256 KiB in about 25 ms of CPU once warm and 75 ms at its first call, and a request with it holds
 * the server's event loop about 15 ms; `deploy.*to.*prod` takes 0.2 ms.
 */
export const MATCH_WORK_BUDGET = 32 * 262144
/** Node's default limit on a request's headers: no header or query value is longer. */
const HEADER_BYTES = 16384

const SYNTAX = 'matches is RE2 syntax (github.com/google/re2/wiki/Syntax)'

export type PatternCheck =
  | { ok: true; programSize: number }
  | { ok: false; code: 'CONDITION_REGEX_INVALID' | 'CONDITION_REGEX_UNSUPPORTED'; message: string; hint?: string }

/** Compiles `source` as the runtime will; on refusal says why, and how to write it in RE2 where it can. */
export function checkPattern(source: string, flags: string): PatternCheck {
  let reason: string
  try {
    return { ok: true, programSize: compilePattern(source, flags).programSize() }
  } catch (err) {
    reason = (err as Error).message.replace(/^error parsing regexp: /, '')
  }
  const shown = JSON.stringify(source)
  let javascriptTakesIt = true
  try {
    new RegExp(source, flags)
  } catch {
    javascriptTakesIt = false
  }
  if (!javascriptTakesIt) return { ok: false, code: 'CONDITION_REGEX_INVALID', message: `invalid regular expression ${shown}: ${reason}`, hint: SYNTAX }
  const unsupported = (what: string, hint: string): PatternCheck => ({ ok: false, code: 'CONDITION_REGEX_UNSUPPORTED', message: `regular expression ${shown} uses ${what}, which RE2 does not have`, hint })
  if (/invalid escape sequence: `\\[1-9k]/.test(reason)) {
    return unsupported('a backreference', 'RE2 matches in time linear in the text, which backreferences rule out: spell out the repeated text, or compare two fields with a transform')
  }
  const look = /(?:unsupported Perl syntax|invalid named capture): `\(\?(<?[=!])/.exec(reason)
  if (look) {
    return unsupported(look[1]!.startsWith('<') ? 'a lookbehind' : 'a lookahead', 'for "does not contain" write not: { PATH: { matches: … } }, and for two requirements all: [ … ]')
  }
  // JavaScript-only spellings that RE2 writes otherwise (\u00e9 is \x{00e9}, \cA is \x01)
  const translated = RE2JS.translateRegExp(source)
  if (/invalid escape sequence: `\\[uc]/.test(reason) && translated !== source && checkPattern(translated, flags).ok) {
    return { ok: false, code: 'CONDITION_REGEX_UNSUPPORTED', message: `regular expression ${shown} is not RE2 syntax: ${reason}`, hint: `RE2 writes a code point as \\x{…}: ${JSON.stringify(translated)}` }
  }
  const counted = /invalid repeat count/.test(reason) ? 'RE2 counts repetitions up to 1000' : SYNTAX
  return { ok: false, code: 'CONDITION_REGEX_UNSUPPORTED', message: `regular expression ${shown} is not RE2 syntax: ${reason}`, hint: counted }
}

/** One `matches` of a mapping, as conditions.ts compiled it. */
export interface PatternUse {
  programSize: number
  /** where the pattern is in the config */
  path: PathSegment[]
  /** it reads a header or query value (at most HEADER_BYTES), not the payload */
  textual: boolean
}

/** A mapping as the work budget sees it: its hook name, its body limit and its patterns in order. */
export interface PatternRoute {
  name: string
  maxBodyBytes: number
  patterns: readonly PatternUse[]
}

/** Reports, once per hook name, the pattern at which the name's patterns go over the work budget. */
export function checkPatternBudget(routes: readonly PatternRoute[], loaded: LoadedConfig, bag: DiagnosticBag): void {
  const byName = new Map<string, PatternRoute[]>()
  for (const r of routes) byName.set(r.name, [...(byName.get(r.name) ?? []), r])
  for (const [name, list] of byName) {
    // the body is read up to the largest limit on the name before a mapping is chosen
    const bodyBytes = Math.max(...list.map((r) => r.maxBodyBytes))
    const uses = list.flatMap((r) => r.patterns)
    const textOf = (u: PatternUse) => (u.textual ? HEADER_BYTES : bodyBytes)
    let work = 0
    const over = uses.find((u) => (work += u.programSize * textOf(u)) > MATCH_WORK_BUDGET)
    if (over === undefined) continue
    const sum = (textual: boolean) => uses.filter((u) => u.textual === textual).reduce((n, u) => n + u.programSize, 0)
    const [onBody, onHeaders] = [sum(false), sum(true)]
    const allowed = Math.floor(MATCH_WORK_BUDGET / bodyBytes)
    const spent = onHeaders === 0
      ? `their RE2 programs total ${onBody} instructions over a ${bodyBytes}-byte body (this one ${over.programSize}), where the budget allows ${allowed}`
      : `their RE2 programs total ${onBody} instructions over a ${bodyBytes}-byte body and ${onHeaders} over headers and query (this one ${over.programSize}), where the budget allows ${allowed} over the body, or ${Math.floor(MATCH_WORK_BUDGET / HEADER_BYTES)} over headers and query`
    // the body limit at which these patterns would fit, if lowering it can do it
    const fits = onBody === 0 ? 0 : Math.floor((MATCH_WORK_BUDGET - onHeaders * HEADER_BYTES) / onBody)
    const lower = fits >= 1024 ? `, or set maxBodyBytes to at most ${fits} on the mappings of "${name}"` : ''
    bag.error('CONDITION_REGEX_UNSAFE', `the regular expressions one request on hook "${name}" may run cost too much: ${spent}`, loaded.locate(over.path, 'value'),
      `each instruction may cost a pass over the text: use equals or in where the values are known, fewer or shorter patterns, (?:…) rather than (…)${lower}`)
  }
}
