// The rejected-request log: refusals are aggregated per (client, path, status, code) and minute so
// a flood costs a handful of writes, buckets and files stay within their bounds, secrets never
// reach the file, the reader tolerates a torn line, and `hookgate rejects` filters by --since and
// --limit.
import { appendFileSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { MAX_HEADER_VALUE_CHARS, MAX_HEADERS, MAX_PATH_CHARS, redactHeaders, RejectLog, REJECTS_FILE, REJECTS_OLDER_FILE, type RejectRecord } from '../../../runtime/store/file/rejects.js'
import { parseDuration } from '../../../runtime/observe/clock.js'
import { run as rejectsVerb } from '../../../cli/verbs/rejects.js'
import type { CommandIO } from '../../../cli/flags.js'
import { scratchDir } from '../../helpers/paths.js'
import { lockableDir } from '../../helpers/immutable-dir.js'

const rejectsCommand = (argv: string[], context: { stateDir: string; now?: () => number }, io: CommandIO) => rejectsVerb(argv, io, context)

/** A clock the test moves by hand; starts at 10:00:05 so a minute closes at 10:01:00. */
function clock(start = Date.parse('2025-03-01T10:00:05.000Z')): { now: () => number; advance(ms: number): void } {
  let t = start
  return { now: () => t, advance: (ms) => { t += ms } }
}

/** flushMs far in the future: only an explicit flush() or close() writes, so counts are deterministic. */
function openLog(dir: string, c = clock(), extra: Parameters<typeof RejectLog.open>[1] = {}): RejectLog {
  return RejectLog.open(dir, { now: c.now, flushMs: 3_600_000, ...extra })
}

function lines(dir: string, file = REJECTS_FILE): number {
  try { return readFileSync(join(dir, file), 'utf8').split('\n').filter((l) => l !== '').length } catch { return 0 }
}

const unauthorized = (log: RejectLog, client = '203.0.113.7', path = '/hooks/github') =>
  log.note(client, path, 401, 'unauthorized', 'POST', { authorization: 'Bearer wrong', 'user-agent': 'curl/8' }, undefined)

// ---------------------------------------------------------------------------------------------

const aggregate = suite('RejectLog.note aggregates identical refusals per minute')

aggregate('100,000 identical refusals in one minute are two writes: the first at once, the count when the log closes', async () => {
  const dir = scratchDir('rejects-')
  const log = openLog(dir)
  unauthorized(log)
  await log.flush()
  assert.is(lines(dir), 1, 'the first refusal of a minute is written at the next flush')
  for (let i = 1; i < 100_000; i++) unauthorized(log)
  await log.flush()
  assert.is(lines(dir), 1, 'repeats within the minute write nothing on a flush')
  await log.close()
  assert.is(lines(dir), 2)
  assert.is(log.stats.written, 2)
  const { records } = RejectLog.read(dir)
  assert.is(records.length, 1, 'the reader keeps the last record per bucket')
  assert.is(records[0]!.count, 100_000)
  assert.is(records[0]!.status, 401)
  assert.is(records[0]!.code, 'unauthorized')
})

aggregate('a minute that closes writes its count, and the next minute starts a new record', async () => {
  const dir = scratchDir('rejects-')
  const c = clock()
  const log = openLog(dir, c)
  for (let i = 0; i < 5; i++) unauthorized(log)
  c.advance(60_000)
  for (let i = 0; i < 3; i++) unauthorized(log)
  await log.flush()
  const { records } = RejectLog.read(dir)
  assert.equal(records.map((r) => r.count), [3, 5], 'newest first: the new minute and the closed one with all 5')
  assert.is(records[1]!.firstAt, '2025-03-01T10:00:05.000Z')
  assert.is(records[1]!.lastAt, '2025-03-01T10:00:05.000Z')
  assert.is(records[0]!.firstAt, '2025-03-01T10:01:05.000Z')
  unauthorized(log)
  await log.close()
  assert.equal(RejectLog.read(dir).records.map((r) => r.count), [4, 5])
})

aggregate('a flush after the minute closed writes the count even with no new refusal', async () => {
  const dir = scratchDir('rejects-')
  const c = clock()
  const log = openLog(dir, c)
  for (let i = 0; i < 7; i++) unauthorized(log)
  await log.flush()
  c.advance(60_000)
  await log.flush()
  assert.is(RejectLog.read(dir).records[0]!.count, 7)
  assert.is(log.heldBuckets, 0, 'a closed minute leaves memory')
  await log.close()
})

aggregate('a different client, path, status or code is a record of its own', async () => {
  const dir = scratchDir('rejects-')
  const log = openLog(dir)
  unauthorized(log)
  unauthorized(log, '198.51.100.1')
  unauthorized(log, '203.0.113.7', '/hooks/stripe')
  log.note('203.0.113.7', '/hooks/github', 429, 'too_many_auth_failures', 'POST', {}, undefined)
  log.note('203.0.113.7', '/hooks/github', 401, 'signature_invalid', 'POST', {}, undefined)
  await log.close()
  assert.is(RejectLog.read(dir).records.length, 5)
})

aggregate('a request path is cut to MAX_PATH_CHARS, so long random paths share a bounded key', async () => {
  const dir = scratchDir('rejects-')
  const log = openLog(dir)
  unauthorized(log, '203.0.113.7', '/hooks/' + 'x'.repeat(5000))
  unauthorized(log, '203.0.113.7', '/hooks/' + 'x'.repeat(6000))
  await log.close()
  const { records } = RejectLog.read(dir)
  assert.is(records.length, 1)
  assert.is(records[0]!.path.length, MAX_PATH_CHARS)
  assert.is(records[0]!.count, 2)
})

aggregate.run()

// ---------------------------------------------------------------------------------------------

const bounds = suite('RejectLog bounds')

bounds('buckets in memory never pass maxBuckets: the oldest is written early and dropped', async () => {
  const dir = scratchDir('rejects-')
  const log = openLog(dir, clock(), { maxBuckets: 3 })
  for (let i = 0; i < 3; i++) unauthorized(log, '203.0.113.1')
  for (let i = 0; i < 1000; i++) {
    unauthorized(log, `10.0.${i >> 8}.${i & 255}`)
    assert.ok(log.heldBuckets <= 3, `held ${log.heldBuckets}`)
  }
  await log.flush()
  const first = RejectLog.read(dir).records.find((r) => r.client === '203.0.113.1')!
  assert.is(first.count, 3, 'the evicted bucket was written with its whole count')
  await log.close()
  assert.is(RejectLog.read(dir).records.length, 1001)
})

bounds('the log rotates past segmentBytes: at most two segments, the oldest records dropped, the newest kept', async () => {
  const dir = scratchDir('rejects-')
  const segmentBytes = 8 * 1024
  const log = openLog(dir, clock(), { segmentBytes })
  for (let i = 0; i < 400; i++) {
    unauthorized(log, '203.0.113.7', `/hooks/n${i}`)
    if (i % 10 === 9) {
      await log.flush()
      // one flush may carry the file past the bound before it rotates
      assert.ok(statSync(join(dir, REJECTS_FILE)).size <= segmentBytes, `current segment ${statSync(join(dir, REJECTS_FILE)).size} bytes`)
    }
  }
  await log.close()
  assert.ok(log.stats.rotations > 1, `rotations ${log.stats.rotations}`)
  assert.ok(statSync(join(dir, REJECTS_OLDER_FILE)).size <= segmentBytes + 10 * 1024)
  const { records } = RejectLog.read(dir)
  assert.ok(records.length < 400, 'the oldest were dropped')
  assert.is(records[0]!.path, '/hooks/n399', 'the newest is kept')
  assert.not.ok(records.some((r) => r.path === '/hooks/n0'))
})

bounds('a rotation the state directory refuses (EPERM) loses nothing: the segment grows on and rotates once it may', async () => {
  const dir = scratchDir('rejects-')
  const locked = lockableDir(dir)
  if (!locked) { console.log('  (skipped: no chattr +i on this file system)'); return }
  const warnings: string[] = []
  const log = openLog(dir, clock(), { segmentBytes: 2048, warn: (m) => warnings.push(m) })
  try {
    locked.lock()
    for (let i = 0; i < 40; i++) unauthorized(log, '203.0.113.7', `/hooks/n${i}`)
    await log.flush()
    assert.is(log.stats.rotations, 0)
    assert.is(log.stats.dropped, 0, 'records written are not counted as lost')
    assert.equal(warnings, [])
    locked.unlock()
    unauthorized(log, '203.0.113.7', '/hooks/after')
    await log.flush()
    assert.is(log.stats.rotations, 1)
  } finally {
    locked.unlock()
    await log.close()
  }
  assert.is(RejectLog.read(dir).records.length, 41)
})

bounds('an oversized segment left from before is rotated at open', async () => {
  const dir = scratchDir('rejects-')
  writeFileSync(join(dir, REJECTS_FILE), 'x'.repeat(5000) + '\n')
  const log = openLog(dir, clock(), { segmentBytes: 1000 })
  await log.close()
  assert.is(statSync(join(dir, REJECTS_FILE)).size, 0)
  assert.is(statSync(join(dir, REJECTS_OLDER_FILE)).size, 5001)
})

bounds('a write that fails is counted and reported once, never thrown to the caller', async () => {
  const dir = scratchDir('rejects-')
  const warnings: string[] = []
  const log = openLog(dir, clock(), { warn: (m) => warnings.push(m) })
  // the disk refuses every write from here on
  ;(log as unknown as { journal: { append(): Promise<void> } }).journal.append = () => Promise.reject(Object.assign(new Error('i/o error'), { code: 'EIO' }))
  for (let i = 0; i < 3; i++) {
    unauthorized(log, '203.0.113.7', `/hooks/n${i}`)
    await log.flush()
  }
  assert.is(log.stats.writeErrors, 3)
  assert.is(log.stats.dropped, 3)
  assert.is(warnings.length, 1)
  assert.match(warnings[0]!, 'i/o error')
  await log.close()
})

bounds.run()

// ---------------------------------------------------------------------------------------------

const redaction = suite('redactHeaders')

redaction('a wrong hook token, a cookie and signature headers are redacted by name', () => {
  const { kept } = redactHeaders({
    authorization: 'Bearer not-the-token-but-still-secret',
    'x-hookgate-token': 'also-secret',
    cookie: 'session=cookie-secret',
    'x-hub-signature-256': 'sha256=abc',
    'stripe-signature': 't=1,v1=abc',
    'user-agent': 'GitHub-Hookshot/1',
    'idempotency-key': 'retry-1',
  })
  assert.equal({ ...kept }, {
    authorization: '[redacted]',
    'x-hookgate-token': '[redacted]',
    cookie: '[redacted]',
    'x-hub-signature-256': '[redacted]',
    'stripe-signature': '[redacted]',
    'user-agent': 'GitHub-Hookshot/1',
    'idempotency-key': 'retry-1',
  })
})

redaction('a credential under an innocent name is redacted by its value', () => {
  const { kept } = redactHeaders({ 'x-upstream': 'Bearer abc.def', 'x-forwarded-proto': 'https', via: 'Basic dXNlcjpwYXNz' })
  assert.is(kept['x-upstream'], '[redacted]')
  assert.is(kept.via, '[redacted]')
  assert.is(kept['x-forwarded-proto'], 'https')
})

redaction('header count and value length are cut to bounds', () => {
  const headers: Record<string, string> = {}
  for (let i = 0; i < MAX_HEADERS + 8; i++) headers[`x-h${i}`] = 'v'.repeat(1000)
  const { kept, omitted } = redactHeaders(headers)
  assert.is(Object.keys(kept).length, MAX_HEADERS)
  assert.is(omitted, 8)
  assert.is(kept['x-h0']!.length, MAX_HEADER_VALUE_CHARS + 1)
})

redaction('a refusal with a wrong token in Authorization and a cookie leaves neither in the file', async () => {
  const dir = scratchDir('rejects-')
  const log = openLog(dir)
  log.note('203.0.113.7', '/hooks/github', 401, 'unauthorized', 'POST', { authorization: 'Bearer tok_0123456789abcdef', cookie: 'sid=cookie_0123456789' }, undefined)
  await log.close()
  const text = readFileSync(join(dir, REJECTS_FILE), 'utf8')
  assert.not.match(text, 'tok_0123456789abcdef')
  assert.not.match(text, 'cookie_0123456789')
  assert.match(text, '"authorization":"[redacted]"')
})

redaction.run()

// ---------------------------------------------------------------------------------------------

const read = suite('RejectLog.read')

read('a torn last line (a write cut short) is skipped; a missing log reads as empty', async () => {
  const dir = scratchDir('rejects-')
  assert.equal(RejectLog.read(join(dir, 'missing')).records, [])
  const log = openLog(dir)
  unauthorized(log)
  await log.close()
  appendFileSync(join(dir, REJECTS_FILE), '{"id":"half-writ')
  const out = RejectLog.read(dir)
  assert.is(out.records.length, 1)
  assert.is(out.torn, 1)
})

read.run()

// ---------------------------------------------------------------------------------------------

const duration = suite('parseDuration')

duration('reads seconds, minutes, hours and days', () => {
  assert.is(parseDuration('90s'), 90_000)
  assert.is(parseDuration('15m'), 900_000)
  assert.is(parseDuration('2h'), 7_200_000)
  assert.is(parseDuration('7d'), 604_800_000)
})

duration('refuses zero, a bare number, fractions, signs, other units and spaces', () => {
  for (const bad of ['0s', '90', '1.5h', '-1m', '+1m', '1w', '1 h', '', 'h', '1H']) assert.is(parseDuration(bad), undefined, bad)
})

duration.run()

// ---------------------------------------------------------------------------------------------

const command = suite('rejectsCommand')

interface Captured { code: number; stdout: string; stderr: string }

async function rejects(argv: string[], now = Date.parse('2025-03-03T12:00:00.000Z')): Promise<Captured> {
  let stdout = ''
  let stderr = ''
  const code = await rejectsCommand(argv, { stateDir: '/nonexistent-default-state', now: () => now }, { stdout: (t) => { stdout += t }, stderr: (t) => { stderr += t } })
  return { code, stdout, stderr }
}

/** Records seen 2 days, 3 hours and 10 minutes before 2025-03-03T12:00Z. */
async function seeded(): Promise<string> {
  const dir = scratchDir('rejects-')
  const c = clock(Date.parse('2025-03-01T12:00:00.000Z'))
  const log = openLog(dir, c)
  log.note('198.51.100.1', '/hooks/old', 404, 'no_mapping', 'POST', {}, undefined)
  c.advance(2 * 86_400_000 - 3 * 3_600_000)
  log.note('198.51.100.2', '/hooks/hours', 401, 'unauthorized', 'POST', {}, undefined)
  c.advance(3 * 3_600_000 - 10 * 60_000)
  log.note('198.51.100.3', '/hooks/recent', 415, 'unsupported_media_type', 'POST', {}, undefined)
  await log.close()
  return dir
}

command('--since keeps the records seen within the duration; --limit the newest N', async () => {
  const dir = await seeded()
  const paths = async (args: string[]) => (JSON.parse((await rejects(['--state', dir, '--json', ...args])).stdout) as RejectRecord[]).map((r) => r.path)
  assert.equal(await paths([]), ['/hooks/recent', '/hooks/hours', '/hooks/old'])
  assert.equal(await paths(['--since', '15m']), ['/hooks/recent'])
  assert.equal(await paths(['--since', '4h']), ['/hooks/recent', '/hooks/hours'])
  assert.equal(await paths(['--since', '3d']), ['/hooks/recent', '/hooks/hours', '/hooks/old'])
  assert.equal(await paths(['--limit', '2']), ['/hooks/recent', '/hooks/hours'])
  assert.equal(await paths(['--since', '4h', '--limit', '1']), ['/hooks/recent'])
})

command('the text form is a table, newest first, with a summary on stderr', async () => {
  const dir = await seeded()
  const out = await rejects(['--state', dir])
  assert.is(out.code, 0)
  const rows = out.stdout.trimEnd().split('\n')
  assert.match(rows[0]!, /^LAST SEEN\s+COUNT\s+STATUS\s+CODE\s+CLIENT\s+METHOD\s+PATH$/)
  assert.match(rows[1]!, /415\s+unsupported_media_type\s+198\.51\.100\.3\s+POST\s+\/hooks\/recent$/)
  assert.is(rows.length, 4)
  assert.match(out.stderr, '3 refused requests in 3 records')
})

command('a bad --since or --limit is a usage error (exit 2)', async () => {
  for (const args of [['--since', '5'], ['--since', '1w'], ['--limit', '0'], ['--limit', 'x']]) {
    const out = await rejects(args)
    assert.is(out.code, 2, args.join(' '))
    assert.match(out.stderr, 'usage: hookgate rejects')
    assert.is(out.stdout, '')
  }
})

command('a state directory without a log prints an empty answer', async () => {
  const json = await rejects(['--state', join(scratchDir('rejects-'), 'none'), '--json'])
  assert.is(json.code, 0)
  assert.is(json.stdout, '[]\n')
  const text = await rejects(['--state', scratchDir('rejects-')])
  assert.is(text.code, 0)
  assert.is(text.stdout, '')
  assert.match(text.stderr, 'no refused requests recorded')
})

command.run()
