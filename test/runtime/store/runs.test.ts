import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { appendFileSync, existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { REQUEST_INLINE_MAX_CHARS, RUNS_FILE, RunStore, RunStoreError, boundJsonSize, rawJsonPayload, type NewRun, type RunRow } from '../../../runtime/store/file/runs.js'
import { tempDir } from '../../helpers/paths.js'
import { rejectionOf } from '../../helpers/async.js'

const scratch = tempDir('hookgate-runs-')
/** A new empty directory under this file's scratch directory (removed on exit). */
function freshDir(): string {
  return mkdtempSync(join(scratch, 'case-'))
}

/** A clock that moves one second per reading, so every timestamp is distinct and predictable. */
function steppingClock(start = Date.parse('2025-01-01T00:00:00.000Z')): () => Date {
  let t = start
  return () => new Date((t += 1000))
}

function newRun(id: string, extra: Partial<NewRun> = {}): NewRun {
  return { id, definitionKind: 'hook', definitionId: 'github', correlationId: `corr-${id}`, action: 'agent', ...extra }
}

function openStore(dir = freshDir()): RunStore {
  return RunStore.open(dir, { now: steppingClock() })
}

// ---------------------------------------------------------------------------------------------

const create = suite('RunStore.create')

create('stores a queued row with creation timestamps and resolves only once it is on disk', async () => {
  const store = openStore()
  const row = await store.create(newRun('r1', { name: 'GitHub push', request: { message: 'hi' } }))
  assert.is(row.status, 'queued')
  assert.is(row.createdAt, '2025-01-01T00:00:01.000Z')
  assert.is(row.updatedAt, row.createdAt)
  assert.is(row.startedAt, undefined)
  assert.equal(row.request, { message: 'hi' })
  assert.equal(RunStore.readRows(store.stateDir), [row], 'on disk while the store is still open')
  assert.equal(store.get('r1'), row)
  await store.close()
})

create('accepts a starting status and stamps startedAt and finishedAt to match', async () => {
  const store = openStore()
  const done = await store.create(newRun('w1', { action: 'wake', status: 'succeeded' }))
  assert.is(done.startedAt, done.createdAt)
  assert.is(done.finishedAt, done.createdAt)
  const running = await store.create(newRun('a1', { status: 'running' }))
  assert.is(running.startedAt, running.createdAt)
  assert.is(running.finishedAt, undefined)
  await store.close()
})

create('refuses a second run with the same id, even while the first is still being written', async () => {
  const store = openStore()
  const first = store.create(newRun('dup'))
  const err = await rejectionOf<RunStoreError>(store.create(newRun('dup')))
  assert.is(err.code, 'duplicate_run')
  await first
  assert.is((await rejectionOf<RunStoreError>(store.create(newRun('dup')))).code, 'duplicate_run')
  assert.is(store.list().length, 1)
  await store.close()
})

create('refuses rows with an unknown kind, action or status, or without an id', async () => {
  const store = openStore()
  assert.is((await rejectionOf<RunStoreError>(store.create(newRun('x', { definitionKind: 'cron' as never })))).code, 'invalid_run')
  assert.is((await rejectionOf<RunStoreError>(store.create(newRun('x', { action: 'email' as never })))).code, 'invalid_run')
  assert.is((await rejectionOf<RunStoreError>(store.create(newRun('x', { status: 'done' as never })))).code, 'invalid_run')
  assert.is((await rejectionOf<RunStoreError>(store.create(newRun('')))).code, 'invalid_run')
  assert.equal(store.list(), [])
  await store.close()
})

create('keeps only the first line of an error so a stack never reaches the history', async () => {
  const store = openStore()
  const err = new Error('model call failed: 503 from provider')
  const row = await store.create(newRun('e1', { status: 'failed', error: String(err.stack) }))
  assert.is(row.error, 'Error: model call failed: 503 from provider')
  await store.close()
})

create.run()

// ---------------------------------------------------------------------------------------------

const transition = suite('RunStore.transition')

transition('moves a run queued → running → succeeded with startedAt, finishedAt and the result', async () => {
  const store = openStore()
  const created = await store.create(newRun('t1'))
  const running = await store.transition('t1', 'running', { attempts: 1 })
  assert.is(running.status, 'running')
  assert.is(running.startedAt, running.updatedAt)
  assert.is(running.attempts, 1)
  const done = await store.transition('t1', 'succeeded', { result: 'r'.repeat(800) })
  assert.is(done.status, 'succeeded')
  assert.is(done.createdAt, created.createdAt)
  assert.is(done.startedAt, running.startedAt)
  assert.is(done.finishedAt, done.updatedAt)
  assert.is(done.result!.length, 500, 'the result is a summary of at most 500 characters')
  assert.ok(done.result!.endsWith('…'))
  assert.equal(store.get('t1'), done)
  assert.equal(RunStore.readRows(store.stateDir)[0], done, 'the fold of the file agrees with memory')
  await store.close()
})

transition('allows every legal move from queued and from running', async () => {
  const store = openStore()
  const legal: Array<[string[], string]> = [
    [['running'], 'queued→running'], [['skipped'], 'queued→skipped'], [['failed'], 'queued→failed'], [['succeeded'], 'queued→succeeded'],
    [['running', 'succeeded'], 'running→succeeded'], [['running', 'failed'], 'running→failed'],
    [['running', 'timed_out'], 'running→timed_out'], [['running', 'queued', 'running'], 'running→queued (re-queue)'],
  ]
  for (const [i, [steps, label]] of legal.entries()) {
    await store.create(newRun(`legal-${i}`))
    for (const s of steps) await store.transition(`legal-${i}`, s as never)
    assert.is(store.get(`legal-${i}`)!.status, steps.at(-1), label)
  }
  await store.close()
})

transition('refuses illegal moves and leaves the row and the file as they were', async () => {
  const store = openStore()
  await store.create(newRun('q'))
  const before = readFileSync(join(store.stateDir, RUNS_FILE), 'utf8')
  for (const to of ['timed_out', 'queued'] as const) {
    const err = await rejectionOf<RunStoreError>(store.transition('q', to))
    assert.is(err.code, 'illegal_transition')
    assert.match(err.message, `cannot go from queued to ${to}`)
  }
  await store.transition('q', 'running')
  assert.is((await rejectionOf<RunStoreError>(store.transition('q', 'skipped'))).code, 'illegal_transition')
  assert.is((await rejectionOf<RunStoreError>(store.transition('q', 'running'))).code, 'illegal_transition')
  assert.is(store.get('q')!.status, 'running')
  assert.is(readFileSync(join(store.stateDir, RUNS_FILE), 'utf8').split('\n').length, before.split('\n').length + 1)
  await store.close()
})

transition('never changes a final state, with an error that says so', async () => {
  const store = openStore()
  for (const final of ['succeeded', 'failed', 'timed_out', 'skipped'] as const) {
    await store.create(newRun(final, { status: final === 'timed_out' ? 'running' : 'queued' }))
    await store.transition(final, final)
    for (const to of ['queued', 'running', 'succeeded', 'failed'] as const) {
      const err = await rejectionOf<RunStoreError>(store.transition(final, to))
      assert.is(err.code, 'illegal_transition')
      assert.match(err.message, `already finished as ${final}`)
    }
    assert.is(store.get(final)!.status, final)
  }
  await store.close()
})

transition('lets only one of two concurrent final moves win', async () => {
  const store = openStore()
  await store.create(newRun('race', { status: 'running' }))
  const [a, b] = await Promise.allSettled([store.transition('race', 'succeeded'), store.transition('race', 'failed', { error: 'late' })])
  assert.is(a.status, 'fulfilled')
  assert.is(b.status, 'rejected')
  assert.is(store.get('race')!.status, 'succeeded')
  await store.close()
  assert.is(RunStore.readRows(store.stateDir)[0]!.status, 'succeeded')
})

transition('applies a move made before the create resolved, after the create', async () => {
  const store = openStore()
  const created = store.create(newRun('eager'))
  const running = store.transition('eager', 'running')
  await created
  assert.is((await running).status, 'running')
  await store.close()
})

transition('rejects a move for a run it does not know', async () => {
  const store = openStore()
  const err = await rejectionOf<RunStoreError>(store.transition('nope', 'running'))
  assert.is(err.code, 'unknown_run')
  assert.match(err.message, 'no run with id nope')
  await store.close()
})

transition.run()

// ---------------------------------------------------------------------------------------------

const list = suite('RunStore.list')

list('returns rows newest first and honours the limit', async () => {
  const store = openStore()
  for (const id of ['a', 'b', 'c', 'd']) await store.create(newRun(id))
  await store.transition('a', 'running') // updating an old run does not make it newer
  assert.equal(store.list().map((r) => r.id), ['d', 'c', 'b', 'a'])
  assert.equal(store.list({ limit: 2 }).map((r) => r.id), ['d', 'c'])
  assert.equal(store.list({ limit: 0 }), [])
  await store.close()
})

list.run()

// ---------------------------------------------------------------------------------------------

const unfinished = suite('RunStore.unfinished')

unfinished('lists the queued and running runs, oldest first, and finds them again after a reopen', async () => {
  const dir = freshDir()
  const store = openStore(dir)
  await store.create(newRun('u1'))
  await store.create(newRun('u2'))
  await store.create(newRun('u3'))
  await store.create(newRun('u4'))
  await store.transition('u2', 'running')
  await store.transition('u3', 'skipped')
  await store.transition('u4', 'running')
  await store.transition('u4', 'failed', { error: 'boom' })
  assert.equal(store.unfinished().map((r) => [r.id, r.status]), [['u1', 'queued'], ['u2', 'running']])
  const before = store.list()
  await store.close()
  const reopened = RunStore.open(dir)
  assert.equal(reopened.unfinished().map((r) => r.id), ['u1', 'u2'])
  assert.equal(reopened.list(), before, 'every field survives the round trip through the file')
  await reopened.close()
})

unfinished.run()

// ---------------------------------------------------------------------------------------------

const open = suite('RunStore.open')

open('ignores a torn last record and keeps appending after it', async () => {
  const dir = freshDir()
  const store = openStore(dir)
  await store.create(newRun('kept'))
  await store.close()
  appendFileSync(join(dir, RUNS_FILE), '{"type":"run","row":{"id":"half')
  const reopened = RunStore.open(dir)
  assert.equal(reopened.list().map((r) => r.id), ['kept'])
  assert.equal(reopened.recovery, { repairedBytes: '{"type":"run","row":{"id":"half'.length, unreadable: 0 })
  await reopened.create(newRun('next'))
  await reopened.close()
  const history = RunStore.readHistory(dir)
  assert.equal(history.rows.map((r) => r.id), ['next', 'kept'])
  assert.equal([history.torn, history.corrupt], [0, 0])
})

open('skips records it does not understand and counts them', () => {
  const dir = freshDir()
  const good = { id: 'g', definitionKind: 'hook', definitionId: 'x', correlationId: 'c', action: 'wake', status: 'queued', createdAt: 't', updatedAt: 't' }
  appendFileSync(join(dir, RUNS_FILE), [
    JSON.stringify({ type: 'run', row: good }),
    JSON.stringify({ type: 'status', id: 'ghost', status: 'running', at: 't' }),
    JSON.stringify({ type: 'run', row: { ...good, id: 'bad', action: 'teleport' } }),
    JSON.stringify({ type: 'mystery' }),
    JSON.stringify({ type: 'status', id: 'g', status: 'running', at: 't2' }),
    '',
  ].join('\n'))
  const history = RunStore.readHistory(dir)
  assert.equal(history.rows.map((r) => [r.id, r.status]), [['g', 'running']])
  assert.is(history.corrupt, 3)
})

open.run()

// ---------------------------------------------------------------------------------------------

const readRows = suite('RunStore.readRows')

readRows('reads the history while another RunStore holds the file open and keeps writing', async () => {
  const dir = freshDir()
  const server = openStore(dir)
  await server.create(newRun('s1'))
  await server.create(newRun('s2'))
  await server.transition('s1', 'running')
  assert.equal(RunStore.readRows(dir), server.list())
  await server.transition('s1', 'succeeded', { result: 'ok' })
  const rows: RunRow[] = RunStore.readRows(dir)
  assert.equal(rows.map((r) => [r.id, r.status]), [['s2', 'queued'], ['s1', 'succeeded']])
  assert.equal(rows, server.list())
  await server.close()
})

readRows('reads a state directory without a history as empty and creates nothing', () => {
  const dir = join(freshDir(), 'not-created')
  assert.equal(RunStore.readRows(dir), [])
  assert.not.ok(existsSync(dir))
})

readRows.run()

// ---------------------------------------------------------------------------------------------

const settle = suite('RunStore.settle')

settle('finishes many runs with one record, leaves unknown and finished ones alone, and folds back the same', async () => {
  const dir = freshDir()
  const store = openStore(dir)
  for (const id of ['w1', 'w2', 'w3', 'done']) await store.create(newRun(id, { action: 'wake', request: { text: id } }))
  await store.transition('w2', 'running')
  await store.transition('done', 'failed', { error: 'earlier' })
  await store.settle(['w1', 'w2', 'w3', 'done', 'ghost'], 'succeeded')
  assert.equal(store.list().map((r) => [r.id, r.status]), [['done', 'failed'], ['w3', 'succeeded'], ['w2', 'succeeded'], ['w1', 'succeeded']])
  for (const id of ['w1', 'w2', 'w3']) {
    const row = store.get(id)!
    assert.is(row.finishedAt, row.updatedAt)
    assert.is(row.request, undefined, 'a finished run keeps no request in memory')
  }
  const lines = readFileSync(join(dir, RUNS_FILE), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  const settled = lines.filter((l) => l.type === 'settled')
  assert.is(settled.length, 1, 'one record for the three runs')
  assert.equal(settled[0].ids, ['w1', 'w2', 'w3'])
  const folded = RunStore.readRows(dir)
  assert.equal(folded.map((r) => [r.id, r.status, r.finishedAt]), store.list().map((r) => [r.id, r.status, r.finishedAt]))
  await store.close()
})

settle('keeps an error, and moves a run with a write in flight after that write', async () => {
  const store = openStore()
  const creating = store.create(newRun('late', { action: 'wake' }))
  await store.create(newRun('now', { action: 'wake' }))
  const settling = store.settle(['late', 'now'], 'failed', { error: 'dropped: the queue was full\nsecond line' })
  await creating
  await settling
  assert.equal([store.get('late')!.status, store.get('late')!.error], ['failed', 'dropped: the queue was full'])
  assert.equal([store.get('now')!.status, store.get('now')!.error], ['failed', 'dropped: the queue was full'])
  await store.close()
})

settle('takes only a final status', async () => {
  const store = openStore()
  await store.create(newRun('x'))
  const err = await rejectionOf<RunStoreError>(store.settle(['x'], 'running'))
  assert.is(err.code, 'invalid_run')
  assert.is(store.get('x')!.status, 'queued')
  await store.close()
})

settle.run()

// ---------------------------------------------------------------------------------------------

const trim = suite('RunStore.trim')

trim('forgets the oldest finished runs past retainFinished, keeps every unfinished one, and the file keeps all', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir, { now: steppingClock(), retainFinished: 5 })
  await store.create(newRun('open-1'))
  for (let i = 0; i < 300; i++) await store.create(newRun(`f${i}`, { status: 'succeeded' }))
  await store.create(newRun('open-2'))
  // trims 256 past the bound, so memory holds at most retainFinished + 256 finished rows
  assert.ok(store.list().length <= 5 + 256 + 2, `${store.list().length} rows in memory`)
  store.trim()
  assert.equal(store.list().map((r) => r.id), ['open-2', 'f299', 'f298', 'f297', 'f296', 'f295', 'open-1'])
  assert.equal(store.unfinished().map((r) => r.id), ['open-1', 'open-2'])
  await store.settle(['open-1'], 'succeeded')
  store.trim()
  assert.equal(store.list().map((r) => r.id), ['open-2', 'f299', 'f298', 'f297', 'f296', 'f295'])
  await store.close()
  assert.is(RunStore.readRows(dir).length, 302)
})

trim.run()

// ---------------------------------------------------------------------------------------------

const compact = suite('RunStore compaction at open')

/** A history of `finished` finished runs (two records each), then `open` unfinished ones. */
async function longHistory(dir: string, finished: number, open: number): Promise<void> {
  const store = RunStore.open(dir, { now: steppingClock(), fsync: false })
  for (let i = 0; i < finished; i++) {
    await store.create(newRun(`done-${i}`, { request: { message: `m${i}` } }))
    await store.transition(`done-${i}`, 'succeeded', { result: `r${i}` })
  }
  for (let i = 0; i < open; i++) await store.create(newRun(`open-${i}`, { request: { message: `resume me ${i}` } }))
  await store.close()
}

compact('a file past the size bound keeps the unfinished runs and the newest finished ones, folded the same', async () => {
  const dir = freshDir()
  await longHistory(dir, 40, 3)
  const before = RunStore.readRows(dir)
  const size = statSync(join(dir, RUNS_FILE)).size
  const store = RunStore.open(dir, { compactAboveBytes: size - 1, keepHistory: 10, fsync: false })
  assert.ok(store.compaction, 'compacted')
  assert.equal([store.compaction!.keptRuns, store.compaction!.droppedRuns, store.compaction!.records], [13, 30, 83])
  assert.ok(store.compaction!.bytesAfter < size / 2, `${store.compaction!.bytesAfter} of ${size} bytes`)
  const keptIds = [...before].reverse().filter((r) => r.id.startsWith('open-') || Number(r.id.slice(5)) >= 30).map((r) => r.id)
  assert.equal(store.list().map((r) => r.id).reverse(), keptIds)
  // the kept rows are exactly what the old file folded to, request included for the unfinished
  const byId = new Map(before.map((r) => [r.id, r]))
  for (const row of RunStore.readRows(dir)) assert.equal(row, byId.get(row.id))
  assert.equal(store.unfinished().map((r) => [r.id, (r.request as { message: string }).message]), [['open-0', 'resume me 0'], ['open-1', 'resume me 1'], ['open-2', 'resume me 2']])
  // one run record per kept row, and appending goes on in the new file
  const lines = readFileSync(join(dir, RUNS_FILE), 'utf8').trim().split('\n')
  assert.is(lines.length, 13)
  await store.transition('open-0', 'running')
  await store.close()
  assert.is(RunStore.readRows(dir).find((r) => r.id === 'open-0')!.status, 'running')
  assert.not.ok(existsSync(join(dir, `${RUNS_FILE}.rewriting`)))
})

compact('a file under the bound is left as it is', async () => {
  const dir = freshDir()
  await longHistory(dir, 5, 1)
  const text = readFileSync(join(dir, RUNS_FILE), 'utf8')
  const store = RunStore.open(dir, { keepHistory: 1, fsync: false })
  assert.is(store.compaction, null)
  await store.close()
  assert.is(readFileSync(join(dir, RUNS_FILE), 'utf8'), text)
})

compact('keeps an old finished run whose Idempotency-Key may still be retried', async () => {
  const dir = freshDir()
  const clock = steppingClock(Date.now() - 3600_000)
  const store = RunStore.open(dir, { now: clock, fsync: false })
  await store.create(newRun('keyed', { status: 'succeeded', idempotency: { key: 'k-1', fingerprint: 'f' }, response: { status: 202, body: { ok: true, runId: 'keyed' } } }))
  for (let i = 0; i < 20; i++) await store.create(newRun(`later-${i}`, { status: 'succeeded' }))
  await store.close()
  const reopened = RunStore.open(dir, { compactAboveBytes: 1, keepHistory: 5, keepKeysForMs: 86_400_000, fsync: false })
  assert.equal(reopened.list().map((r) => r.id), ['later-19', 'later-18', 'later-17', 'later-16', 'later-15', 'keyed'])
  assert.equal(reopened.get('keyed')!.response, { status: 202, body: { ok: true, runId: 'keyed' } })
  await reopened.close()
  const expired = RunStore.open(dir, { compactAboveBytes: 1, keepHistory: 5, keepKeysForMs: 1000, fsync: false })
  assert.equal(expired.list().map((r) => r.id), ['later-19', 'later-18', 'later-17', 'later-16', 'later-15'])
  await expired.close()
})

compact.run()

// ---------------------------------------------------------------------------------------------

const received = suite('RunStore received requests (for hookgate runs replay)')

const receivedOf = (payload: unknown) => ({ path: '/hooks/orders', query: {}, headers: { 'x-source': 'shop', authorization: '[redacted]' }, payload })

/** a payload text that takes a received request past the inline limit */
const OVER_INLINE = REQUEST_INLINE_MAX_CHARS + 4096

received('a received request is on disk, not in memory, and one over the inline limit lives in a blob that readReceived reads back', async () => {
  const dir = freshDir()
  const store = openStore(dir)
  const big = receivedOf({ text: 'x'.repeat(OVER_INLINE) })
  await store.create(newRun('small', { status: 'failed', received: receivedOf({ id: 1 }) }))
  await store.create(newRun('large', { status: 'failed', received: big, replayOf: 'small' }))
  assert.is(store.get('small')!.received, undefined, 'memory does not keep what only a replay reads')
  assert.is(store.get('large')!.replayOf, 'small')
  await store.close()
  const line = readFileSync(join(dir, RUNS_FILE), 'utf8').split('\n').find((l) => l.includes('"large"'))!
  assert.ok(line.length < 2048, 'the large payload is not in the line')
  const rows = RunStore.readRows(dir)
  const large = rows.find((r) => r.id === 'large')!
  assert.ok(large.receivedBlob, 'the line names its blob')
  assert.equal(RunStore.readReceived(dir, large), big)
  assert.equal(RunStore.readReceived(dir, rows.find((r) => r.id === 'small')!), receivedOf({ id: 1 }))
})

received('a compaction counts received requests kept in their lines against keepRequestBytes too, newest first', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir, { now: steppingClock(), fsync: false })
  // 40 KiB each: inline, under the blob threshold
  for (let i = 0; i < 4; i++) await store.create(newRun(`inline-${i}`, { status: 'failed', received: receivedOf({ text: `${i}`.repeat(40 * 1024) }) }))
  await store.close()
  const budget = RunStore.open(dir, { compactAboveBytes: 1, keepRequestBytes: 100 * 1024, fsync: false })
  await budget.close()
  const rows = RunStore.readRows(dir)
  assert.equal(rows.map((r) => r.receivedBlob === undefined), [true, true, true, true], 'all were inline')
  // newest first within 100 KiB: the two newest keep theirs, the older two lose them
  assert.equal(rows.map((r) => [r.id, RunStore.readReceived(dir, r) !== undefined]), [['inline-3', true], ['inline-2', true], ['inline-1', false], ['inline-0', false]])
})

received('the row a create resolves with (and a subscriber hears of) is the row as memory keeps it: a pending run holding it does not hold its request', async () => {
  // Regression: the engine ran each accepted run with the row create() gave back, which carried the
  // received request (the parsed payload, and the body's bytes beside it): every pending run of a
  // 255 KiB request held three times its body, one of them the payload it never reads.
  const store = openStore()
  const heard: RunRow[] = []
  store.subscribe((row) => heard.push(row))
  const one = await store.create(newRun('one', { received: receivedOf({ text: 'o'.repeat(1024) }) }))
  const many = await store.createMany([newRun('m0', { received: receivedOf({ n: 0 }) }), newRun('m1', { received: receivedOf({ n: 1 }) })])
  for (const row of [one, ...many, ...heard]) assert.is(row.received, undefined, `${row.id} carries its received request`)
  assert.is(heard.length, 3)
  await store.close()
})

received('a known size bound spares a small request the measuring, and a large one still goes to a blob whatever its bound says it may be', async () => {
  const dir = freshDir()
  const store = openStore(dir)
  const small = receivedOf({ id: 2 })
  boundJsonSize(small, 1024)
  const big = receivedOf({ text: 'y'.repeat(OVER_INLINE) })
  boundJsonSize(big, 7 * OVER_INLINE)
  await store.create(newRun('small', { status: 'failed', received: small }))
  await store.create(newRun('large', { status: 'failed', received: big }))
  await store.close()
  const rows = RunStore.readRows(dir)
  assert.is(rows.find((r) => r.id === 'small')!.receivedBlob, undefined, 'inline')
  assert.equal(RunStore.readReceived(dir, rows.find((r) => r.id === 'small')!), small)
  assert.ok(rows.find((r) => r.id === 'large')!.receivedBlob, 'in a blob')
})

received('a compaction keeps the received-request blobs of kept runs and drops them past keepRequestBytes', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir, { now: steppingClock(), fsync: false })
  for (let i = 0; i < 3; i++) await store.create(newRun(`big-${i}`, { status: 'failed', received: receivedOf({ text: `${i}`.repeat(100 * 1024) }) }))
  await store.close()
  // Regression guard: the sweep removed every blob not named by a requestBlob, received ones included.
  const kept = RunStore.open(dir, { compactAboveBytes: 1, fsync: false })
  await kept.close()
  for (const row of RunStore.readRows(dir)) assert.ok(RunStore.readReceived(dir, row), `${row.id}'s request survives a compaction`)
  const budget = RunStore.open(dir, { compactAboveBytes: 1, keepRequestBytes: 150 * 1024, fsync: false })
  await budget.close()
  assert.equal(RunStore.readRows(dir).map((r) => RunStore.readReceived(dir, r) !== undefined), [true, false, false], 'the newest within the budget')
})

received('a received request that carries its body\'s bytes is written with those bytes, inline or in a blob, and reads back as its payload', async () => {
  const dir = freshDir()
  const store = openStore(dir)
  // the JSON text as a sender wrote it (spacing, key order, escapes), on one line as jsonBodyText gives it
  const text = '{ "order" : { "id": 7, "note": "caf\\u00e9 \\"quoted\\"", "tags": ["a", "b"] },   "n": 1.50 }'
  const inline = receivedOf(JSON.parse(text))
  rawJsonPayload(inline, Buffer.from(text))
  const bigText = JSON.stringify({ text: 'z'.repeat(OVER_INLINE) })
  const large = receivedOf(JSON.parse(bigText))
  rawJsonPayload(large, Buffer.from(bigText))
  await store.create(newRun('inline', { status: 'failed', received: inline, replayOf: 'x' }))
  await store.create(newRun('large', { status: 'failed', received: large }))
  await store.create(newRun('after', { status: 'failed' }))
  await store.close()
  const lines = readFileSync(join(dir, RUNS_FILE), 'utf8').split('\n').filter(Boolean)
  assert.is(lines.length, 3, 'one line per record')
  for (const line of lines) JSON.parse(line)
  assert.ok(lines[0]!.includes(text), 'the bytes as received, not serialised again')
  const rows = RunStore.readRows(dir)
  const row = rows.find((r) => r.id === 'inline')!
  assert.is(row.replayOf, 'x', 'the row\'s other fields are kept')
  assert.is(row.receivedBlob, undefined)
  assert.equal(RunStore.readReceived(dir, row), inline)
  const blobbed = rows.find((r) => r.id === 'large')!
  assert.ok(blobbed.receivedBlob, 'past the inline limit: a blob')
  assert.equal(RunStore.readReceived(dir, blobbed), large)
  // and a reopened store (the journal read back, a compaction) keeps them
  const again = RunStore.open(dir, { compactAboveBytes: 1, fsync: false })
  await again.close()
  assert.equal(RunStore.readRows(dir).map((r) => [r.id, RunStore.readReceived(dir, r)]), [['after', undefined], ['large', large], ['inline', inline]])
})

/** The runs of one fan-out request (one received request object shared by all), all `status`. */
const fanOut = (ids: string[], shared: ReturnType<typeof receivedOf>, status: NewRun['status'] = 'failed'): NewRun[] => ids.map((id) => newRun(id, { status, received: shared }))
const readBack = (dir: string): Array<[string, unknown]> => {
  const rows = RunStore.readRows(dir)
  const byId = new Map(rows.map((r) => [r.id, r]))
  return rows.map((r) => [r.id, RunStore.readReceived(dir, r, (id) => byId.get(id))])
}

received('a fan-out\'s runs share one stored request: the first row keeps it, the others name that row, and each reads it back', async () => {
  const dir = freshDir()
  const store = openStore(dir)
  const shared = receivedOf({ text: 'f'.repeat(64 * 1024) })
  await store.createMany(fanOut(['f0', 'f1', 'f2'], shared))
  await store.close()
  assert.is(readFileSync(join(dir, RUNS_FILE), 'utf8').split('f'.repeat(64 * 1024)).length, 2, 'one copy on disk')
  const rows = RunStore.readRows(dir)
  assert.equal(rows.map((r) => [r.id, r.received !== undefined, r.receivedIn]), [['f2', false, 'f0'], ['f1', false, 'f0'], ['f0', true, undefined]])
  assert.equal(readBack(dir), [['f2', shared], ['f1', shared], ['f0', shared]])
})

received('a compaction that drops the run holding a fan-out\'s request hands it to the oldest run of it kept, inline or in a blob', async () => {
  for (const size of [32 * 1024, OVER_INLINE]) {
    const dir = freshDir()
    const store = RunStore.open(dir, { now: steppingClock(), fsync: false })
    const shared = receivedOf({ text: 'h'.repeat(size) })
    await store.createMany(fanOut(['h0', 'h1', 'h2', 'h3'], shared))
    await store.close()
    // the newest three finished runs are kept: the first, which held the request, goes
    const compacted = RunStore.open(dir, { compactAboveBytes: 1, keepHistory: 3, fsync: false })
    await compacted.close()
    const rows = RunStore.readRows(dir)
    assert.equal(rows.map((r) => [r.id, r.received !== undefined || r.receivedBlob !== undefined, r.receivedIn]), [['h3', false, 'h1'], ['h2', false, 'h1'], ['h1', true, undefined]], `a ${size}-character request`)
    assert.equal(readBack(dir), [['h3', shared], ['h2', shared], ['h1', shared]])
    // once more: nothing is lost a second time round
    const again = RunStore.open(dir, { compactAboveBytes: 1, keepHistory: 3, fsync: false })
    await again.close()
    assert.equal(readBack(dir), [['h3', shared], ['h2', shared], ['h1', shared]])
  }
})

received('a fan-out\'s request counts once against keepRequestBytes; dropped, none of its runs names it any more', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir, { now: steppingClock(), fsync: false })
  await store.createMany(fanOut(['a0', 'a1', 'a2'], receivedOf({ text: 'a'.repeat(40 * 1024) })))
  await store.createMany(fanOut(['b0', 'b1', 'b2'], receivedOf({ text: 'b'.repeat(40 * 1024) })))
  await store.close()
  // room for one request of 40 KiB, not for three copies of it
  const budget = RunStore.open(dir, { compactAboveBytes: 1, keepRequestBytes: 60 * 1024, fsync: false })
  await budget.close()
  assert.equal(readBack(dir).map(([id, r]) => [id, r !== undefined]), [['b2', true], ['b1', true], ['b0', true], ['a2', false], ['a1', false], ['a0', false]])
  assert.equal(RunStore.readRows(dir).filter((r) => r.id.startsWith('a')).map((r) => r.receivedIn), [undefined, undefined, undefined])
})

received('an unfinished run keeps its fan-out\'s request whatever the budget, even when the run holding it finished, and a reopened store reads it for a resume', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir, { now: steppingClock(), fsync: false })
  const shared = receivedOf({ text: 'u'.repeat(40 * 1024) })
  await store.createMany(fanOut(['u0', 'u1'], shared, 'queued'))
  await store.transition('u0', 'failed', { error: 'done' })
  await store.close()
  const reopened = RunStore.open(dir, { compactAboveBytes: 1, keepRequestBytes: 1, fsync: false })
  assert.equal(reopened.unfinished().map((r) => r.id), ['u1'])
  assert.is(reopened.get('u1')!.received, undefined, 'memory rows keep no request')
  assert.equal(await reopened.received(reopened.get('u1')!), shared)
  await reopened.close()
  assert.equal(readBack(dir), [['u1', shared], ['u0', shared]])
})

received.run()

const stepOutput = suite('RunStore.transition with a step output')

stepOutput('keeps a small output on the row and a large one in a blob that survives a restart and a compaction', async () => {
  const dir = freshDir()
  const store = openStore(dir)
  await store.create(newRun('wf', { action: 'workflow' }))
  await store.create(newRun('small', { action: 'http', parentRunId: 'wf', stepId: 'fetch' }))
  await store.create(newRun('large', { action: 'transform', parentRunId: 'wf', stepId: 'shape' }))
  const big = { text: 'x'.repeat(40_000) }
  await store.transition('small', 'running')
  await store.transition('small', 'succeeded', { output: { status: 200, body: { id: 1 } } })
  await store.transition('large', 'running')
  const row = await store.transition('large', 'succeeded', { output: big })
  assert.is(row.output, undefined)
  assert.ok(row.outputBlob && row.outputBlob.bytes > 40_000)
  assert.equal(store.output(row), big)
  assert.equal(store.children('wf').map((r) => r.stepId), ['fetch', 'shape'])
  await store.close()
  assert.not.match(readFileSync(join(dir, RUNS_FILE), 'utf8'), 'x'.repeat(1000), 'the large output is not in the history lines')

  const again = RunStore.open(dir, { compactAboveBytes: 1, keepHistory: 10 })
  assert.ok(again.compaction, 'the history was compacted at open')
  assert.equal(again.get('small')!.output, { status: 200, body: { id: 1 } })
  assert.equal(again.output(again.get('large')!), big)
  const listed = RunStore.readRows(dir).find((r) => r.id === 'large')!
  assert.is(listed.parentRunId, 'wf')
  assert.is(listed.stepId, 'shape')
  await again.close()
})

stepOutput('refuses an output that would not come back the same from JSON', async () => {
  const store = openStore()
  await store.create(newRun('s', { action: 'http' }))
  await store.transition('s', 'running')
  const err = await rejectionOf(store.transition('s', 'succeeded', { output: { when: new Date() } }), RunStoreError)
  assert.is(err.code, 'invalid_run')
  await store.close()
})

stepOutput.run()

const createMany = suite('RunStore.createMany')

createMany('writes every row with one journal append and one fdatasync, and a restart folds them all back', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir, { now: steppingClock() })
  const before = { ...store.journalStats }
  const rows = await store.createMany([newRun('m1'), newRun('m2'), newRun('m3')])
  assert.equal(rows.map((r) => r.id), ['m1', 'm2', 'm3'])
  assert.equal({ appends: store.journalStats.appends - before.appends, fsyncs: store.journalStats.fsyncs - before.fsyncs }, { appends: 1, fsyncs: 1 })
  await store.close()
  assert.equal(RunStore.readRows(dir).map((r) => r.id).sort(), ['m1', 'm2', 'm3'])
})

createMany('refuses the whole batch, writing nothing, when one id repeats', async () => {
  const store = openStore()
  const err = await rejectionOf(store.createMany([newRun('d1'), newRun('d1')]))
  assert.ok(err instanceof RunStoreError && err.code === 'duplicate_run')
  assert.is(store.get('d1'), undefined)
  await store.close()
})

const whenFinished = suite('RunStore.whenFinished')

whenFinished('resolves with the final row once its status is durable, and with null when the wait ends first', async () => {
  const store = openStore()
  await store.create(newRun('w1'))
  assert.is(await store.whenFinished('w1', 20), null, 'an unfinished run times out the wait')
  const waiting = store.whenFinished('w1', 5000)
  await store.transition('w1', 'running')
  await store.transition('w1', 'succeeded', { result: 'done' })
  const row = await waiting
  assert.is(row?.status, 'succeeded')
  assert.is(row?.result, 'done')
  assert.is((await store.whenFinished('w1', 0))?.status, 'succeeded', 'a finished run answers at once')
  await store.close()
})

createMany.run()
whenFinished.run()
