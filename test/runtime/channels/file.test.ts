// The file channel: one JSON line per reply, appended and fsynced, the file created 0600 with its
// folders, relative paths taken from the config directory.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { bundleChannel, deliveryError, delivery, makeChannel, testClock } from './helpers.js'

const test = suite('FileChannel.deliver')

let dir: string
test.before.each(() => { dir = mkdtempSync(join(tmpdir(), 'hookgate-file-channel-')) })
test.after.each(() => { chmodSync(dir, 0o700); rmSync(dir, { recursive: true, force: true }) })

const lines = (path: string) => readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))

test('creates the file and its folders, relative to the config directory, with mode 0600', async () => {
  const ch = makeChannel(bundleChannel({ id: 'log', type: 'file', path: 'state/replies/out.jsonl' }), testClock(), dir)
  const result = await ch.deliver(delivery({ name: 'GitHub', to: 'x' }))
  assert.equal(result, { ok: true, attempts: 1, detail: 'file' })
  const file = join(dir, 'state/replies/out.jsonl')
  assert.is(statSync(file).mode & 0o777, 0o600)
  assert.is(statSync(join(dir, 'state/replies')).mode & 0o777, 0o700)
  assert.equal(lines(file), [{ at: '2024-01-02T03:04:05.000Z', runId: 'run-1', agentId: 'main', name: 'GitHub', to: 'x', text: 'The build is green.', correlationId: 'corr-1' }])
})

test('appends one line per delivery and keeps what was there', async () => {
  const file = join(dir, 'out.jsonl')
  writeFileSync(file, '{"earlier":true}\n')
  const clock = testClock()
  const ch = makeChannel(bundleChannel({ id: 'log', type: 'file', path: file }), clock, '/nonexistent-config-dir')
  await ch.deliver(delivery({ runId: 'a' }))
  clock.ms += 1000
  await ch.deliver(delivery({ runId: 'b', text: 'two\nlines' }))
  const got = lines(file)
  assert.is(got.length, 3)
  assert.equal(got[0], { earlier: true })
  assert.equal([got[1].runId, got[2].runId], ['a', 'b'])
  assert.is(got[2].text, 'two\nlines')
  assert.is(got[2].at, '2024-01-02T03:04:06.000Z')
})

test('keeps lines whole when deliveries run at once', async () => {
  const ch = makeChannel(bundleChannel({ id: 'log', type: 'file', path: 'many.jsonl' }), testClock(), dir)
  const big = 'x'.repeat(100_000)
  await Promise.all(Array.from({ length: 20 }, (_, i) => ch.deliver(delivery({ runId: `r${i}`, text: big }))))
  const got = lines(join(dir, 'many.jsonl'))
  assert.equal(got.map((l) => l.runId).sort(), Array.from({ length: 20 }, (_, i) => `r${i}`).sort())
  assert.ok(got.every((l) => l.text === big))
})

test('fails after one attempt, not retryable, when a file stands where a folder should be', async () => {
  writeFileSync(join(dir, 'afile'), '')
  for (const [path, code] of [['afile/out.jsonl', 'EEXIST'], ['afile/sub/out.jsonl', 'ENOTDIR']]) {
    const ch = makeChannel(bundleChannel({ id: 'log', type: 'file', path }), testClock(), dir)
    const err = await deliveryError(ch.deliver(delivery()))
    assert.is(err.message, `file channel "log" could not append to ${path} (${code}) after 1 attempt`)
    assert.equal([err.attempts, err.retryable], [1, false])
  }
})

test('fails, not retryable, when the folder cannot be written (unless running as root)', async () => {
  if (process.getuid?.() === 0) return // root writes anywhere
  const locked = join(dir, 'locked')
  mkdirSync(locked)
  chmodSync(locked, 0o500)
  try {
    const ch = makeChannel(bundleChannel({ id: 'log', type: 'file', path: 'locked/out.jsonl' }), testClock(), dir)
    const err = await deliveryError(ch.deliver(delivery()))
    assert.is(err.message, 'file channel "log" could not append to locked/out.jsonl (EACCES) after 1 attempt')
    assert.equal([err.attempts, err.retryable], [1, false])
  } finally {
    chmodSync(locked, 0o700)
  }
})

test('fails when the path is a directory, and the next delivery still runs', async () => {
  mkdirSync(join(dir, 'adir'))
  const bad = makeChannel(bundleChannel({ id: 'log', type: 'file', path: 'adir' }), testClock(), dir)
  const err = await deliveryError(bad.deliver(delivery()))
  assert.match(err.message, /^file channel "log" could not append to adir \(EISDIR\) after 1 attempt$/)
  const again = await deliveryError(bad.deliver(delivery()))
  assert.is(again.attempts, 1)
})

test.run()
