// Decides at compile time whether a `match.when` pattern can run on the runtime's engine. The rule
// it keeps: no accepted condition can stall the event loop (issue 23: `deploy.*to.*prod`, accepted
// while V8's backtracking irregexp ran the patterns, blocked every request, /healthz included, for
// seconds on a 10 KB body).
//
// The runtime matches with RE2 (re2js, runtime/bundle/regex.ts), which never backtracks: a match costs at
// most a constant times the text's length times the pattern's program size, and what one request's
// patterns may read is bounded as they run (MATCH_WORK_BUDGET in runtime/bundle/conditions.ts: past it the
// request gets 413 condition_text_too_long). So the compiler refuses only what RE2 cannot do:
//   - the pattern must be RE2 syntax. It is compiled here by the very function the runtime uses;
//     what RE2 refuses but JavaScript takes (backreferences, lookahead, lookbehind, `\u` escapes)
//     is CONDITION_REGEX_UNSUPPORTED with a hint for the rewrite, anything else CONDITION_REGEX_INVALID;
//   - a pattern whose program alone is so large that the budget would let it read less than
//     MIN_TEXT_CHARS of text is CONDITION_REGEX_UNSAFE: it could match nothing a sender sends.
import { RE2JS } from 're2js'
import { patternCompilerOf } from '../runtime/bundle/regex.js'
import { MATCH_WORK_BUDGET } from '../runtime/bundle/conditions.js'

const compilePattern = patternCompilerOf(RE2JS)

/** The least text the work budget must let any one pattern read: a program larger than budget ÷ this is refused. */
const MIN_TEXT_CHARS = 1024
const MAX_PROGRAM_SIZE = Math.floor(MATCH_WORK_BUDGET / MIN_TEXT_CHARS)

const SYNTAX = 'matches is RE2 syntax (github.com/google/re2/wiki/Syntax)'

export type PatternCheck =
  | { ok: true; programSize: number }
  | { ok: false; code: 'CONDITION_REGEX_INVALID' | 'CONDITION_REGEX_UNSUPPORTED' | 'CONDITION_REGEX_UNSAFE'; message: string; hint?: string }

/** Compiles `source` as the runtime will; on refusal says why, and how to write it in RE2 where it can. */
export function checkPattern(source: string, flags: string): PatternCheck {
  let reason: string
  try {
    const size = compilePattern(source, flags).size
    if (size > MAX_PROGRAM_SIZE) return { ok: false, code: 'CONDITION_REGEX_UNSAFE', message: `regular expression ${JSON.stringify(source)} compiles to ${size} RE2 instructions, more than ${MAX_PROGRAM_SIZE}: a request's conditions could let it read fewer than ${MIN_TEXT_CHARS} characters`, hint: 'split it into smaller patterns under all: or any:, or use equals or in where the values are known' }
    return { ok: true, programSize: size }
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
