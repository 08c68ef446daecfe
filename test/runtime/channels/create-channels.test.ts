// createChannels: one channel per bundle entry, every credential resolved at start, and each
// problem reported then — naming the channel and the reference, never a value.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { createChannels } from '../../../runtime/channels/index.js'
import { SecretError } from '../../../runtime/bundle/secrets.js'
import { startFakeReceiver } from '../../fakes/channels.js'
import { assertNoSecret, bundleChannel, delivery, dispatcher, env, thrown, value, WHSEC } from './helpers.js'

const test = suite('createChannels')

const SLACK_URL = 'https://hooks.slack.com/services/T000/B000/slackSecretPart'
const BOT_TOKEN = '123456:AAHbotTokenSecret'

test.before.each(() => {
  process.env.HG_TEST_SLACK_URL = SLACK_URL
  process.env.HG_TEST_BOT_TOKEN = BOT_TOKEN
  process.env.HG_TEST_WHSEC = WHSEC
  delete process.env.HG_TEST_MISSING
})

test('builds one channel per entry, keyed by id, with its type', () => {
  const channels = createChannels([
    bundleChannel({ id: 'hook', type: 'webhook', url: value('https://example.test/in'), secret: env('HG_TEST_WHSEC') }),
    bundleChannel({ id: 'ops', type: 'slack', url: env('HG_TEST_SLACK_URL') }),
    bundleChannel({ id: 'chat', type: 'discord', url: value('https://discord.com/api/webhooks/1/abcdefghij') }),
    bundleChannel({ id: 'tg', type: 'telegram', botToken: env('HG_TEST_BOT_TOKEN'), chatId: '1' }),
    bundleChannel({ id: 'log', type: 'file', path: 'replies.jsonl' }),
  ], '/tmp')
  assert.equal([...channels].map(([id, c]) => [id, c.id, c.type]), [
    ['hook', 'hook', 'webhook'], ['ops', 'ops', 'slack'], ['chat', 'chat', 'discord'], ['tg', 'tg', 'telegram'], ['log', 'log', 'file'],
  ])
  assert.is(createChannels([], '/tmp').size, 0)
})

test('names a missing environment secret and the channel, as a SecretError', () => {
  const err = thrown(() => createChannels([bundleChannel({ id: 'ops', type: 'slack', url: env('HG_TEST_MISSING') })], '/tmp'))
  assert.instance(err, SecretError)
  assert.is(err.message, 'channel "ops": secret ${HG_TEST_MISSING} is not set in the environment')
})

test('rejects a webhook secret that is not whsec_ and base64, without quoting it', () => {
  for (const [secret, why] of [
    ['hunter2-but-longer-than-24-bytes!!', 'it does not start with whsec_'],
    ['whsec_this is not base64!', 'what follows whsec_ is not base64'],
    ['whsec_c2hvcnQ=', 'it encodes 5 bytes; a signing secret needs at least 24 random bytes'],
  ] as const) {
    process.env.HG_TEST_BAD_WHSEC = secret
    const err = thrown(() => createChannels([bundleChannel({ id: 'hook', type: 'webhook', url: value('https://example.test/in'), secret: env('HG_TEST_BAD_WHSEC') })], '/tmp'))
    assert.instance(err, SecretError)
    assert.is(err.message, `channel "hook": the signing secret (\${HG_TEST_BAD_WHSEC}) is not a Standard Webhooks secret: ${why} (expected whsec_ followed by base64)`)
    assertNoSecret(err.message, [secret, secret.replace('whsec_', '')])
  }
  delete process.env.HG_TEST_BAD_WHSEC
})

test('reads a secret file relative to the config directory', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hookgate-channels-'))
  const receiver = await startFakeReceiver(WHSEC)
  try {
    writeFileSync(join(dir, 'whsec.txt'), WHSEC + '\n')
    const ch = createChannels([bundleChannel({ id: 'hook', type: 'webhook', url: value(receiver.url), secret: { kind: 'file', path: 'whsec.txt' } })], dir, { dispatcher }).get('hook')!
    await ch.deliver(delivery())
    assert.equal(receiver.verifications.map((v) => v.ok), [true])
    const missing = thrown(() => createChannels([bundleChannel({ id: 'hook', type: 'webhook', url: value(receiver.url), secret: { kind: 'file', path: 'nope.txt' } })], dir))
    assert.is(missing.message, 'channel "hook": secret file nope.txt cannot be read (ENOENT)')
  } finally {
    await receiver.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('lists every problem at once', () => {
  const err = thrown(() => createChannels([
    bundleChannel({ id: 'a', type: 'slack', url: env('HG_TEST_MISSING') }),
    bundleChannel({ id: 'b', type: 'telegram', botToken: null }),
    bundleChannel({ id: 'c', type: 'file', path: null }),
  ], '/tmp'))
  assert.instance(err, SecretError)
  assert.is(err.message, [
    'channels cannot start (3 problems):',
    '  channel "a": secret ${HG_TEST_MISSING} is not set in the environment',
    '  channel "b": a telegram channel needs botToken',
    '  channel "c": a file channel needs path',
  ].join('\n'))
})

test('refuses a URL that is not http(s), without quoting it', () => {
  process.env.HG_TEST_BAD_URL = 'ftp://hooks.example/services/secretish'
  const err = thrown(() => createChannels([bundleChannel({ id: 'ops', type: 'slack', url: env('HG_TEST_BAD_URL') })], '/tmp'))
  assert.is(err.message, 'channel "ops": url (${HG_TEST_BAD_URL}) is not an http(s) URL')
  const notUrl = thrown(() => createChannels([bundleChannel({ id: 'ops', type: 'discord', url: value('discord webhook secretish') })], '/tmp'))
  assert.is(notUrl.message, 'channel "ops": url (the value written in hooks.yaml) is not an http(s) URL')
  assertNoSecret(err.message + notUrl.message, ['secretish'])
  delete process.env.HG_TEST_BAD_URL
})

test('refuses a bot token that could change the request path', () => {
  process.env.HG_TEST_ODD_TOKEN = '123:abc/../../other'
  const err = thrown(() => createChannels([bundleChannel({ id: 'tg', type: 'telegram', botToken: env('HG_TEST_ODD_TOKEN'), chatId: '1' })], '/tmp'))
  assert.is(err.message, 'channel "tg": botToken (${HG_TEST_ODD_TOKEN}) has characters a bot token cannot have')
  delete process.env.HG_TEST_ODD_TOKEN
})

test('refuses two channels with one id', () => {
  const c = bundleChannel({ id: 'log', type: 'file', path: 'a.jsonl' })
  assert.is(thrown(() => createChannels([c, c], '/tmp')).message, 'channel "log": is declared twice')
})

test.run()
