import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { appendFileSync, closeSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { INLINE_MAX_BYTES, Journal, JournalError, MAX_LINE_BYTES } from '../../../runtime/store/file/journal.js'
import { tempDir } from '../../helpers/paths.js'
import { rejectionOf, sleep } from '../../helpers/async.js'
import { mountSmallDisk } from '../../helpers/full-disk.js'
import { lockableDir } from '../../helpers/immutable-dir.js'
import { until } from '../http/harness.js'

const scratch = tempDir('hookgate-journal-')
/** A new empty directory under this file's scratch directory (removed on exit). */
function freshDir(): string {
  return mkdtempSync(join(scratch, 'case-'))
}

interface Rec { n: number; text?: string }

function journalPath(name = 'j.jsonl'): string {
  return join(freshDir(), name)
}

// ---------------------------------------------------------------------------------------------

const open = suite('Journal.open')

open('creates missing parent directories with mode 0700 and the file with mode 0600', async () => {
  const root = freshDir()
  const path = join(root, 'a', 'b', 'runs.jsonl')
  const j = Journal.open<Rec>(path)
  await j.close()
  assert.ok(existsSync(path))
  assert.is(statSync(path).mode & 0o777, 0o600)
  assert.is(statSync(join(root, 'a')).mode & 0o777, 0o700)
  assert.is(statSync(join(root, 'a', 'b')).mode & 0o777, 0o700)
})

open('truncates a torn last line back to the last newline so the next append starts a fresh line', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path)
  await j.append({ n: 1 }, { n: 2 })
  await j.close()
  const intact = statSync(path).size
  appendFileSync(path, '{"n":3,"text":"cut sho')
  const reopened = Journal.open<Rec>(path)
  assert.is(reopened.repairedBytes, '{"n":3,"text":"cut sho'.length)
  assert.is(statSync(path).size, intact)
  await reopened.append({ n: 4 })
  await reopened.close()
  const read = Journal.read<Rec>(path)
  assert.equal(read.records, [{ n: 1 }, { n: 2 }, { n: 4 }])
  assert.is(read.torn, 0)
  assert.is(read.corrupt, 0)
})

open('empties a file that holds only a partial first line', async () => {
  const path = journalPath()
  writeFileSync(path, '{"n":1')
  const j = Journal.open<Rec>(path)
  assert.is(j.repairedBytes, 6)
  await j.append({ n: 2 })
  await j.close()
  assert.is(readFileSync(path, 'utf8'), '{"n":2}\n')
})

open('leaves a file that ends with a newline untouched', async () => {
  const path = journalPath()
  writeFileSync(path, '{"n":1}\n')
  const j = Journal.open<Rec>(path)
  assert.is(j.repairedBytes, 0)
  await j.close()
  assert.is(readFileSync(path, 'utf8'), '{"n":1}\n')
})

open.run()

// ---------------------------------------------------------------------------------------------

const append = suite('Journal.append')

append('writes records that read back in the order they were appended', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path)
  await j.append({ n: 1 })
  await j.append({ n: 2, text: 'line\nbreak and "quotes"' }, { n: 3 })
  await j.append({ n: 4 })
  await j.close()
  assert.equal(Journal.read<Rec>(path).records, [{ n: 1 }, { n: 2, text: 'line\nbreak and "quotes"' }, { n: 3 }, { n: 4 }])
  assert.is(readFileSync(path, 'utf8').split('\n').length, 5, 'one line per record, no pretty-printing')
})

append('writes an append made as soon as the previous one resolves (regression: lost wake-up of the flush loop)', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path, { fsync: false })
  for (let n = 0; n < 20; n++) await j.append({ n })
  assert.is(Journal.read<Rec>(path).records.length, 20)
  assert.is(j.stats.flushes, 20)
  await j.close()
})

append('makes 200 concurrent appends durable with far fewer fsyncs than appends (group commit)', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path)
  await Promise.all(Array.from({ length: 200 }, (_, n) => j.append({ n })))
  // read while the journal is still open: resolved means on disk, not merely buffered
  const read = Journal.read<Rec>(path)
  assert.equal(read.records.map((r) => r.n), Array.from({ length: 200 }, (_, n) => n))
  assert.is(j.stats.appends, 200)
  assert.ok(j.stats.fsyncs >= 1, 'at least one fsync')
  assert.ok(j.stats.fsyncs < j.stats.appends / 4, `expected fewer than 50 fsyncs, got ${j.stats.fsyncs}`)
  assert.is(j.stats.fsyncs, j.stats.flushes)
  await j.close()
})

append('queues appends that arrive during a flush and writes them all in the next one', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path)
  const first = j.append({ n: 0 })
  await null // the first flush starts on a microtask and is now on disk in the thread pool
  await null
  const rest = Array.from({ length: 50 }, (_, i) => j.append({ n: i + 1 }))
  await Promise.all([first, ...rest])
  assert.is(j.stats.flushes, 2)
  assert.is(j.stats.fsyncs, 2)
  assert.is(Journal.read<Rec>(path).records.length, 51)
  await j.close()
})

append('does no fsync at all in fsync:false mode', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path, { fsync: false })
  await Promise.all(Array.from({ length: 20 }, (_, n) => j.append({ n })))
  await j.append({ n: 20 })
  assert.is(j.stats.fsyncs, 0)
  assert.ok(j.stats.flushes >= 2)
  assert.is(Journal.read<Rec>(path).records.length, 21)
  await j.close()
})

append('a record longer than a line is written as a blob beside the journal and read back whole', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path)
  const big = { n: 2, text: 'x'.repeat(3 * 1024 * 1024) + '\u00e9' }
  await j.append({ n: 1 }, big)
  await j.append({ n: 3 })
  await j.close()
  assert.ok(statSync(path).size < 1024, 'the journal itself holds only a stub')
  assert.is(j.stats.blobs, 1)
  assert.equal(Journal.read<Rec>(path).records, [{ n: 1 }, big, { n: 3 }])
  assert.ok(Journal.diskBytes(path) > 3 * 1024 * 1024)
})

append('a stub whose blob is missing reads as a corrupt line, not as a record', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path)
  await j.append({ n: 1, text: 'y'.repeat(600 * 1024) }, { n: 2 })
  await j.close()
  for (const name of readdirSync(Journal.blobDir(path))) rmSync(join(Journal.blobDir(path), name))
  const read = Journal.read<Rec>(path)
  assert.equal(read.records, [{ n: 2 }])
  assert.is(read.corrupt, 1)
})

append('attach writes a blob no later than the record appended after it', async () => {
  const path = journalPath()
  const j = Journal.open<{ ref: string }>(path)
  const bytes = Buffer.from('{"large":true}')
  const name = j.attach(bytes)
  await j.append({ ref: name })
  await j.close()
  assert.equal(Journal.readBlob(path, name), bytes)
  assert.equal(Journal.read<{ ref: string }>(path).records, [{ ref: name }])
})

append('appendLine writes a record given as pieces of text and bytes, in order among appended records, in the same group commit', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path)
  const before = j.stats.fsyncs
  await Promise.all([
    j.append({ n: 1 }),
    j.appendLine(['{"n":2,', Buffer.from('"text":"caf\u00e9 from bytes"'), '}']),
    j.append({ n: 3 }),
    j.appendLine([Buffer.from('{"n":4}')]),
  ])
  assert.is(j.stats.fsyncs - before, 1, 'one write and one fdatasync for the four')
  await j.close()
  assert.equal(Journal.read<Rec>(path).records, [{ n: 1 }, { n: 2, text: 'caf\u00e9 from bytes' }, { n: 3 }, { n: 4 }])
})

append('appendLine puts a line longer than INLINE_MAX_BYTES into a blob, as append does', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path)
  const text = 'b'.repeat(INLINE_MAX_BYTES)
  await j.appendLine(['{"n":1,"text":"', Buffer.from(text), '"}'])
  await j.appendLine(['{"n":2}'])
  await j.close()
  assert.ok(statSync(path).size < 1024, 'the journal itself holds only a stub')
  assert.equal(Journal.read<Rec>(path).records, [{ n: 1, text }, { n: 2 }])
})

append('refuses a record that cannot be written as JSON', async () => {
  const j = Journal.open<object>(journalPath())
  const circular: Record<string, unknown> = {}
  circular.self = circular
  const err = await rejectionOf(j.append(circular))
  assert.is((err as JournalError).code, 'record_not_serialisable')
  await j.close()
})

append('a full disk: appends wait instead of failing, health says why, and they land once space is back', async () => {
  const disk = mountSmallDisk(2048)
  if (!disk) { console.log('  (skipped: mounting a tmpfs needs root)'); return }
  try {
    const path = join(disk.dir, 'j.jsonl')
    const j = Journal.open<Rec>(path)
    await j.append({ n: 1 })
    disk.fill()
    let settled = false
    const waiting = Promise.all([j.append({ n: 2, text: 'z'.repeat(8192) }), j.append({ n: 3 })]).then(() => { settled = true })
    await until('the journal to report trouble', () => (j.health.ok ? undefined : true))
    const health = j.health as { ok: false; reason: string }
    assert.match(health.reason, /ENOSPC/)
    await sleep(300)
    assert.is(settled, false, 'nothing is acknowledged while the disk is full')
    disk.release()
    await waiting
    assert.ok(j.health.ok)
    assert.ok(j.stats.failures >= 1)
    await j.append({ n: 4 })
    await j.close()
    // Whole records only: no piece of a failed attempt is left in the file.
    const read = Journal.read<Rec>(path)
    assert.equal(read.records.map((r) => r.n), [1, 2, 3, 4])
    assert.is(read.corrupt + read.torn, 0)
  } finally {
    disk.unmount()
  }
})

append('a permission error (a blob that cannot be created: EPERM) waits like a full disk and lands once mended, with what was queued behind it', async () => {
  const dir = freshDir()
  const locked = lockableDir(dir)
  if (!locked) { console.log('  (skipped: no chattr +i on this file system)'); return }
  const path = join(dir, 'j.jsonl')
  const j = Journal.open<Rec>(path)
  try {
    await j.append({ n: 1 })
    locked.lock()
    let settled = false
    const waiting = Promise.all([j.append({ n: 2, text: 'p'.repeat(INLINE_MAX_BYTES) }), j.append({ n: 3 })]).then(() => { settled = true })
    await until('the journal to report trouble', () => (j.health.ok ? undefined : true))
    assert.match((j.health as { reason: string }).reason, /EPERM/)
    const later = j.append({ n: 4 })
    await sleep(200)
    assert.is(settled, false, 'nothing is acknowledged while it cannot be written')
    locked.unlock()
    await waiting
    await later
    assert.ok(j.health.ok)
  } finally {
    locked.unlock()
    await j.close()
  }
  assert.equal(Journal.read<Rec>(path).records.map((r) => r.n), [1, 2, 3, 4])
})

append('closing while the disk is full rejects what is queued instead of hanging', async () => {
  const disk = mountSmallDisk(1024)
  if (!disk) { console.log('  (skipped: mounting a tmpfs needs root)'); return }
  try {
    const j = Journal.open<Rec>(join(disk.dir, 'j.jsonl'))
    disk.fill()
    const pending = rejectionOf(j.append({ n: 1, text: 'q'.repeat(16384) }), JournalError)
    await until('the journal to report trouble', () => (j.health.ok ? undefined : true))
    await j.close()
    assert.is((await pending).code, 'journal_failed')
  } finally {
    disk.unmount()
  }
})

append('rejects the append when the file descriptor is closed under the journal', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path)
  await j.append({ n: 1 })
  closeSync((j as unknown as { fd: number }).fd)
  const err = await rejectionOf(j.append({ n: 2 }))
  assert.is((err as JournalError).code, 'journal_failed')
  assert.match(err.message, /EBADF/)
  await j.close()
  assert.equal(Journal.read<Rec>(path).records, [{ n: 1 }])
})

append('rejects appends after close', async () => {
  const j = Journal.open<Rec>(journalPath())
  await j.close()
  const err = await rejectionOf(j.append({ n: 1 }))
  assert.is((err as JournalError).code, 'journal_closed')
})

append.run()

// ---------------------------------------------------------------------------------------------

const close = suite('Journal.close')

close('waits for appends still queued before closing the file', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path)
  const pending = [j.append({ n: 1 }), j.append({ n: 2 })]
  await j.close()
  await Promise.all(pending)
  assert.equal(Journal.read<Rec>(path).records, [{ n: 1 }, { n: 2 }])
  await j.close() // a second close is harmless
})

close.run()

// ---------------------------------------------------------------------------------------------

const read = suite('Journal.read')

read('reads a missing file as empty', () => {
  assert.equal(Journal.read(journalPath('nothing-here.jsonl')), { records: [], torn: 0, corrupt: 0 })
})

read('ignores a last line without its newline and counts it as torn', () => {
  const path = journalPath()
  writeFileSync(path, '{"n":1}\n{"n":2}\n{"n":3}')
  assert.equal(Journal.read<Rec>(path), { records: [{ n: 1 }, { n: 2 }], torn: 1, corrupt: 0 })
})

read('counts a complete last line that is not JSON as torn', () => {
  const path = journalPath()
  writeFileSync(path, '{"n":1}\n{"n":2,"te\n')
  assert.equal(Journal.read<Rec>(path), { records: [{ n: 1 }], torn: 1, corrupt: 0 })
})

read('skips an invalid line in the middle and counts it as corrupt', () => {
  const path = journalPath()
  writeFileSync(path, '{"n":1}\nnot json at all\n{"n":2}\n[1,2]x\n"a string"\n{"n":3}\n')
  assert.equal(Journal.read<Rec>(path), { records: [{ n: 1 }, { n: 2 }, { n: 3 }], torn: 0, corrupt: 3 })
})

read('counts both a corrupt middle line and a torn tail', () => {
  const path = journalPath()
  writeFileSync(path, '{"n":1}\n{oops\n{"n":2')
  assert.equal(Journal.read<Rec>(path), { records: [{ n: 1 }], torn: 1, corrupt: 1 })
})

read('reads records that straddle its internal read chunks', async () => {
  const path = journalPath()
  const j = Journal.open<Rec>(path, { fsync: false })
  const text = 'y'.repeat(70_000) // 70 kB lines: many cross a 1 MiB chunk boundary
  await j.append(...Array.from({ length: 60 }, (_, n) => ({ n, text })))
  await j.close()
  const out = Journal.read<Rec>(path)
  assert.is(out.records.length, 60)
  assert.ok(out.records.every((r, i) => r.n === i && r.text === text))
  assert.equal([out.torn, out.corrupt], [0, 0])
})

read('skips a line over 1 MiB as corrupt without holding it in memory', () => {
  const path = journalPath()
  writeFileSync(path, '{"n":1}\n' + '{"n":"' + 'z'.repeat(3 * MAX_LINE_BYTES) + '"}\n{"n":2}\n')
  assert.equal(Journal.read<Rec>(path), { records: [{ n: 1 }, { n: 2 }], torn: 0, corrupt: 1 })
})

read('keeps a complete unparsable last line (a torn line only lacks its newline) until a later append makes it corrupt', async () => {
  const path = journalPath()
  writeFileSync(path, '{"n":1}\ngarbage\n')
  const j = Journal.open<Rec>(path)
  assert.is(j.repairedBytes, 0)
  await j.append({ n: 2 })
  await j.close()
  assert.equal(Journal.read<Rec>(path), { records: [{ n: 1 }, { n: 2 }], torn: 0, corrupt: 1 })
})

read.run()
