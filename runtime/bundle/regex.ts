// The engine behind `match.when` `matches`: RE2 semantics through re2js (a maintained pure-JS port
// of RE2). RE2 never backtracks: a match takes time linear in the text (times the pattern's program
// size), so no pattern a sender can meet stalls the event loop the way V8's irregexp did on
// `deploy.*to.*prod` or `(a+)+$` (issue 23). The compiler validates every pattern with the same
// function the runtime compiles it with (patternCompilerOf); what one request's patterns may cost
// is bounded as they run (MATCH_WORK_BUDGET in runtime/bundle/conditions.ts).
//
// re2js is loaded only when a bundle has a `matches` condition, the way undici is loaded only at the
// first call out: its import costs parsing 260 KB, which a runtime without regular expressions never
// needs to pay. The standalone runtime finds it beside itself (dist/hookgate-re2.mjs). Each compiled
// pattern keeps a lazily built DFA cache, at most 8 MB (re2js's default budget; past it the cache is
// reset, or the match falls back to RE2's NFA, still linear).
import type { RE2JS } from 're2js'
import type { CompiledPattern, PatternCompiler } from './format.js'

/** The flags `matches` accepts, as JavaScript spells them; `u` changes nothing (RE2 always reads code points). */
export const PATTERN_FLAGS = /^(?!.*(.).*\1)[imsu]*$/

/** The pattern compiler over a loaded re2js: JS-style flags mapped onto RE2's. Throws re2js's syntax error. */
export function patternCompilerOf(engine: typeof RE2JS): (source: string, flags: string) => CompiledPattern {
  return (source, flags) => {
    let re2Flags = 0
    if (flags.includes('i')) re2Flags |= engine.CASE_INSENSITIVE
    if (flags.includes('m')) re2Flags |= engine.MULTILINE
    if (flags.includes('s')) re2Flags |= engine.DOTALL
    const re = engine.compile(source, re2Flags)
    return { test: (text) => re.test(text), size: re.programSize() }
  }
}

let loading: Promise<PatternCompiler> | undefined

/** re2js, imported once per process and only when a bundle with `matches` is loaded. */
export function loadPatternCompiler(): Promise<PatternCompiler> {
  loading ??= import('re2js').then((m) => patternCompilerOf(m.RE2JS), (err: unknown) => {
    loading = undefined // a later load (after dist/ is repaired) tries again
    throw new Error(`cannot load the regular expression engine (re2js): ${(err as Error).message}`)
  })
  return loading
}
