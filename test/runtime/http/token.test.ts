// The hook token check: a digest compare until the token has matched once, then a fixed-window
// compare of the kept token. Whatever path a check takes, only the exact token passes.
//
// store: none — the token check on its own: the PostgreSQL pass leaves it out.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { TokenCheck, presentedToken, tokenDigest, MAX_TOKEN_CHARS } from '../../../runtime/http/auth.js'

const token = suite('TokenCheck')

/** Near misses of `t`: every one must be refused, before and after the token was learned. */
function nearMisses(t: string): string[] {
  return [
    '', t.slice(0, -1), t + 'x', 'x' + t, t.slice(1), t.toUpperCase() === t ? t.toLowerCase() : t.toUpperCase(),
    t.slice(0, -1) + (t.endsWith('a') ? 'b' : 'a'), t + 'é', t + '\u0000', t.padEnd(t.length + 300, 'z'),
  ].filter((m) => m !== t)
}

for (const [label, t] of [
  ['an ASCII token', 'hg_4f9c2d7e1a8b6c3d5e0f9a2b7c4d1e8f'],
  ['a token with multi-byte characters', 'clé-secrète-ünïcödé-🔑-0123456789'],
  ['a token of exactly 256 bytes', 'k'.repeat(256)],
  ['a token of 255 bytes (one below the window)', 'k'.repeat(255)],
  ['a token longer than the window (stays on digests)', 'L'.repeat(700)],
] as const) {
  token(`${label}: passes only itself, before and after the first match`, () => {
    const check = new TokenCheck(tokenDigest(t))
    for (const m of nearMisses(t)) assert.is(check.matches(m), false, `before: ${JSON.stringify(m.slice(0, 40))}`)
    assert.is(check.matches(t), true, 'the first match (digest)')
    for (let i = 0; i < 3; i++) assert.is(check.matches(t), true, 'a later match')
    for (const m of nearMisses(t)) assert.is(check.matches(m), false, `after: ${JSON.stringify(m.slice(0, 40))}`)
    assert.is(check.matches(t), true, 'still matches after the misses')
  })
}

token('a token cut short by the window: known + one 2-byte character is refused', () => {
  // 255 bytes kept; 255 + "é" is 257 bytes: the window compare alone could not tell them apart
  const t = 'k'.repeat(255)
  const check = new TokenCheck(tokenDigest(t))
  assert.ok(check.matches(t))
  assert.is(check.matches(t + 'é'), false)
  assert.is(check.matches(t + 'éé'), false)
})

token('refuses a missing token and anything over the length limit unread', () => {
  const check = new TokenCheck(tokenDigest('abc'))
  assert.is(check.matches(undefined), false)
  assert.is(check.matches('a'.repeat(MAX_TOKEN_CHARS + 1)), false)
  assert.ok(check.matches('abc'))
  assert.is(check.matches(undefined), false)
})

token('told the token up front (env, file, generated), it is fast from the first check and passes only itself', () => {
  const t = 'hg_up_front_0123456789abcdef'
  const check = new TokenCheck(tokenDigest(t), t)
  for (const m of nearMisses(t)) assert.is(check.matches(m), false, JSON.stringify(m.slice(0, 40)))
  assert.ok(check.matches(t))
})

token('a value that is not the digest\'s token is never learned', () => {
  const check = new TokenCheck(tokenDigest('right-token-123'), 'wrong-token-123')
  assert.is(check.matches('wrong-token-123'), false)
  assert.ok(check.matches('right-token-123'))
})

token('never passes a digest-only check with the digest itself', () => {
  const digest = tokenDigest('right')
  const check = new TokenCheck(digest)
  assert.is(check.matches(digest.toString('hex')), false)
  assert.is(check.matches(digest.toString('latin1')), false)
})

const presented = suite('presentedToken')

presented('takes Bearer (any case, tabs or spaces) before x-hookgate-token', () => {
  assert.is(presentedToken({ authorization: 'Bearer abc', 'x-hookgate-token': 'other' }), 'abc')
  assert.is(presentedToken({ authorization: 'bearer\tabc  ' }), 'abc')
  assert.is(presentedToken({ authorization: 'Bearer a b' }), undefined)
  assert.is(presentedToken({ 'x-hookgate-token': '' }), undefined)
  assert.is(presentedToken({ 'x-hookgate-token': 'other' }), 'other')
})

// Regression: an empty `Authorization: Bearer ` fell through to a valid x-hookgate-token and passed
presented('an Authorization header is the presented credential even when empty, blank or of another scheme', () => {
  for (const authorization of ['Bearer ', 'Bearer', 'Bearer \t ', '', '   ', 'Basic dXNlcjpwdw==', 'Token abc', 'other']) {
    assert.is(presentedToken({ authorization, 'x-hookgate-token': 'valid' }), undefined, JSON.stringify(authorization))
  }
})

token.run()
presented.run()
