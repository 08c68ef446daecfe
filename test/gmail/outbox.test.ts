// The Gmail helper's batch planning and posted-id memory, and its OIDC check's key cache (against
// the fake Google's JWKS).
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { MAX_BATCH_MESSAGES, POSTED_KEPT, batchOf, planBatches, presetBodyLimit, remember, splitBatch, type Cursor } from '../../gmail/outbox.js'
import type { MailItem } from '../../gmail/mailbox.js'
import { OidcVerifier } from '../../gmail/oidc.js'
import { startFakeGoogle } from '../fakes/google.js'

const item = (id: string, body = ''): MailItem => ({ id, threadId: id, historyId: '1', from: 'a@example.org', to: 'me@example.com', subject: `s ${id}`, date: '', snippet: '', labelIds: ['INBOX'], body })

const plan = suite('planBatches')

plan('keeps every batch under the preset\'s limit and at most 100 messages, in order', () => {
  const limit = presetBodyLimit(20_000)
  const many = Array.from({ length: 250 }, (_, i) => item(`m${i}`, 'x'.repeat(3000)))
  const batches = planBatches(many, limit)
  assert.ok(batches.every((b) => Buffer.byteLength(b.body) < limit && b.ids.length <= MAX_BATCH_MESSAGES))
  assert.equal(batches.flatMap((b) => b.ids), many.map((m) => m.id))
  assert.ok(batches.length >= 3)
})

plan('a message whose body grows when JSON escapes it is cut until it fits alone', () => {
  const limit = presetBodyLimit(1_500_000)
  // each control character is six bytes in JSON
  const batches = planBatches([item('big', '\u0001'.repeat(1_500_000))], limit)
  assert.is(batches.length, 1)
  assert.ok(Buffer.byteLength(batches[0]!.body) < limit)
  assert.is(JSON.parse(batches[0]!.body).messages[0].truncated, true)
})

plan('the same messages give the same key and body; a split gives two new keys', () => {
  const a = batchOf([item('1'), item('2'), item('3')])
  assert.equal(batchOf([item('1'), item('2'), item('3')]), a)
  assert.match(a.key, /^gmail-[0-9a-f]{64}$/)
  const [left, right] = splitBatch(a)
  assert.equal([left.ids, right.ids], [['1', '2'], ['3']])
  assert.ok(left.key !== a.key && right.key !== a.key)
})

plan.run()

const rem = suite('remember')

rem('keeps the newest posted ids only, without repeats', () => {
  const cursor: Cursor = { version: 1, posted: [] }
  remember(cursor, Array.from({ length: POSTED_KEPT + 10 }, (_, i) => `m${i}`))
  remember(cursor, [`m${POSTED_KEPT + 9}`])
  assert.is(cursor.posted.length, POSTED_KEPT)
  assert.is(cursor.posted[0], 'm10')
})

rem.run()

const oidc = suite('OidcVerifier')

oidc('fetches Google\'s keys once for their max-age and once more for an unknown key id', async () => {
  const fake = await startFakeGoogle()
  try {
    const expected = { audience: 'https://mail.example.com/gmail-pubsub', email: 'push@p.iam.gserviceaccount.com' }
    const v = new OidcVerifier(fake.certsUrl, expected)
    const certs = () => fake.requests.filter((r) => r.path === '/oauth2/v3/certs').length
    for (let i = 0; i < 3; i++) assert.equal(await v.check(`Bearer ${fake.oidcToken(expected)}`), { ok: true, email: expected.email })
    assert.is(certs(), 1)
    const unknown = await v.check(`Bearer ${fake.oidcToken({ ...expected, unknownKid: true })}`)
    assert.is(unknown.ok, false)
    assert.is(certs(), 2)
    // a flood of forged key ids does not become a flood of fetches
    await v.check(`Bearer ${fake.oidcToken({ ...expected, unknownKid: true })}`)
    assert.is(certs(), 2)
  } finally {
    await fake.close()
  }
})

oidc.run()
