// The compile-time check that keeps exponentially backtracking regular expressions out of a bundle.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { checkRegexSafety } from '../../compiler/regex-safety.js'

const unsafe = suite('checkRegexSafety refuses patterns that can backtrack exponentially')

for (const source of ['(a+)+$', '(a*)*b', '^(\\w+\\s?)*$', '(?:a{2})*', '(a|a)*c', '^(a|ab)*c', '(|a)+', '(a?)*', '([a-z]|x)+$', '(x)\\1', '(?<n>x)\\k<n>', '((ab)*c)*', '(?:(?=a)a)*']) {
  unsafe(`${source} is refused`, () => {
    const r = checkRegexSafety(source, '')
    assert.is(r.safe, false, source)
  })
}

unsafe('case folding is taken into account: (a|A)* is refused with the i flag only', () => {
  assert.is(checkRegexSafety('^(a|A)*$', 'i').safe, false)
  assert.is(checkRegexSafety('^(a|A)*$', '').safe, true)
})

const safe = suite('checkRegexSafety lets through patterns that read text in one way')

for (const source of ['^v\\d+\\.\\d+$', '\\[bot\\]$', '^refs/(heads|tags)/[A-Za-z0-9._/-]+$', '^(?:ab|cd)*$', '(foo|bar)+', '^[a-z-]*$', '(a+)?b', 'a{2,5}b*', '(?:[a-z]|_\\d)+', '^(?:opened|reopened|synchronize)$']) {
  safe(`${source} is accepted`, () => {
    const r = checkRegexSafety(source, '')
    assert.equal(r, { safe: true }, source)
  })
}

unsafe.run()
safe.run()
