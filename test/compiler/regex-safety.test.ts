// The compile-time check of match.when patterns (compiler/regex-safety.ts): what RE2 can run is
// accepted, whatever irregexp would have done with it; what RE2 cannot (or JavaScript-only syntax)
// is refused with a code and a hint for the rewrite.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { checkPattern } from '../../compiler/regex-safety.js'

const accepted = suite('checkPattern accepts RE2 patterns, those that backtracked catastrophically on irregexp included')

for (const source of ['deploy.*to.*prod', '(a+)+$', '(x+x+)+y', '^(a|ab)*c', '(?:a{2})*', '^refs/(heads|tags)/[A-Za-z0-9._/-]+$', '\\pL+', '(?i)wip', '[[:alpha:]]+', '(?<name>x)']) {
  accepted(`${source} is accepted, with its RE2 program size`, () => {
    const r = checkPattern(source, '')
    assert.ok(r.ok, JSON.stringify(r))
    if (r.ok) assert.ok(r.programSize > 0)
  })
}

const refused = suite('checkPattern refuses what RE2 does not have, saying what to write instead')

const UNSUPPORTED: Array<[string, RegExp, RegExp]> = [
  ['(x)\\1', /uses a backreference/, /spell out the repeated text/],
  ['(?<n>x)\\k<n>', /uses a backreference/, /spell out/],
  ['^(?=.*a)', /uses a lookahead/, /not: \{ PATH/],
  ['(?!wip)', /uses a lookahead/, /not: \{ PATH/],
  ['(?<=v)\\d', /uses a lookbehind/, /all: \[/],
  ['(?<!v)\\d', /uses a lookbehind/, /all: \[/],
  ['caf\\u00e9', /is not RE2 syntax: invalid escape sequence/, /"caf\\\\x\{00e9\}"/],
  ['a{1001}', /invalid repeat count/, /up to 1000/],
  ['\\q', /is not RE2 syntax/, /re2\/wiki\/Syntax/],
]
for (const [source, message, hint] of UNSUPPORTED) {
  refused(`${source} is CONDITION_REGEX_UNSUPPORTED`, () => {
    const r = checkPattern(source, '')
    assert.ok(!r.ok && r.code === 'CONDITION_REGEX_UNSUPPORTED', JSON.stringify(r))
    if (!r.ok) {
      assert.match(r.message, message)
      assert.match(r.hint ?? '', hint)
    }
  })
}

refused('a pattern that neither RE2 nor JavaScript takes is CONDITION_REGEX_INVALID, in RE2\'s words', () => {
  const r = checkPattern('(a+', '')
  assert.equal(r, { ok: false, code: 'CONDITION_REGEX_INVALID', message: 'invalid regular expression "(a+": missing closing ): `(a+`', hint: 'matches is RE2 syntax (github.com/google/re2/wiki/Syntax)' })
})

accepted.run()
refused.run()
