// The store conformance suite: what every store backend promises the engine, the request path and
// the history's readers, as one list of cases registered once per backend (River's
// riverdrivertest): file.test.ts and postgres.test.ts each call storeConformance() with a backend.
// A case opens a fresh store, writes through the run log the engine sees (RunLog), and checks what
// memory says and what the history reader (the CLIs', the page's) reads back, after a clean close
// and after a crash (a runtime SIGKILLed mid-write).
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { rejectionOf } from '../../../helpers/async.js'
import { openHistory, type StoreOptions } from '../../../../runtime/store/open.js'
import { NOTIFICATIONS_MAX, RESULT_MAX_CHARS } from '../../../../runtime/store/rows.js'
import { RunStoreError, type HistoryReader, type NewRun, type ReceivedRequest, type RunRow, type RunStatus, type Store } from '../../../../runtime/store/store.js'

/** Where a store lives: a state directory, and for a database store its URL. */
export interface Place { stateDir: string; url?: string }

/** One backend, as the suite drives it. */
export interface StoreBackend {
  readonly name: string
  /** a fresh, empty place */
  fresh(): Promise<Place>
  /** opens the store at `place`, as a runtime starting there does */
  open(place: Place, options?: StoreOptions): Promise<Store>
  /** what a runtime that may crash is opened with (a database store: a short lease, so that another takes its runs over soon) */
  readonly crashOptions: StoreOptions
  /**
   * The runs a runtime that opened `store` after another crashed goes on with (the file store: the
   * unfinished runs it folded back; PostgreSQL: the dead runtime's runs it took over), once it
   * holds at least `count` of them or `withinMs` passed.
   */
  resumed(store: Store, count: number, withinMs: number): Promise<RunRow[]>
  /** after the suite: the server, if any, goes */
  done(): Promise<void>
}

interface Ctx { stores: Store[]; readers: HistoryReader[] }

function newRun(id: string, extra: Partial<NewRun> = {}): NewRun {
  return { id, definitionKind: 'hook', definitionId: 'orders', correlationId: `c-${id}`, action: 'agent', agentId: 'main', request: { message: `run ${id}` }, ...extra }
}

/** A received request as the HTTP side hands it to the store. */
function received(payload: unknown, path = '/hooks/orders'): ReceivedRequest {
  return { path, query: { q: '1' }, headers: { 'content-type': 'application/json', authorization: '[redacted]' }, payload }
}

/** A value nested `depth` levels deep. */
function nested(depth: number, leaf: unknown = 'bottom'): unknown {
  let v: unknown = leaf
  for (let i = 0; i < depth; i++) v = { d: v }
  return v
}

/** The row as the history reader compares it with memory's: without what only the store keeps beside it. */
function listed(row: RunRow | undefined): Partial<RunRow> | undefined {
  if (!row) return undefined
  const { request: _request, received: _received, receivedBlob: _rb, requestBlob: _qb, outputBlob: _ob, output: _output, ...rest } = row
  return rest
}

export function storeConformance(backend: StoreBackend): void {
  const test = suite<Ctx>(`store conformance: ${backend.name}`, { stores: [], readers: [] })

  const open = async (ctx: Ctx, options: StoreOptions = {}): Promise<{ store: Store; place: Place; history: HistoryReader }> => {
    const place = await backend.fresh()
    const store = await backend.open(place, { fsync: true, ...options })
    ctx.stores.push(store)
    const history = openHistory(place.stateDir, place.url)
    ctx.readers.push(history)
    return { store, place, history }
  }
  const rowIn = async (history: HistoryReader, id: string): Promise<RunRow | undefined> => (await history.read()).rows.find((r) => r.id === id)

  test.after.each(async (ctx) => {
    for (const store of ctx.stores.splice(0)) await store.close().catch(() => {})
    for (const reader of ctx.readers.splice(0)) await reader.close().catch(() => {})
  })
  test.after(async () => { await backend.done() })

  // ---- new runs ---------------------------------------------------------------------------------

  test('a new run is durable before create resolves: the history reads it, and its request, as memory holds it', async (ctx) => {
    const { store, history } = await open(ctx)
    const row = await store.runs.create(newRun('c1', { name: 'orders push', sessionKey: 'hook:orders:1' }))
    assert.is(row.status, 'queued')
    assert.is(row.updatedAt, row.createdAt)
    assert.is(row.startedAt, undefined)
    assert.equal(store.runs.get('c1'), row)
    const stored = await rowIn(history, 'c1')
    assert.equal(listed(stored), listed(row))
    assert.equal(await history.request(stored!), { message: 'run c1' })
    const done = await store.runs.create(newRun('c2', { status: 'succeeded', result: 'at once' }))
    assert.equal([done.startedAt, done.finishedAt], [done.createdAt, done.createdAt], 'a run created finished started and ended then')
  })

  test('a run id is taken once: a second create is duplicate_run, and a batch repeating an id writes none of it', async (ctx) => {
    const { store, history } = await open(ctx)
    await store.runs.create(newRun('d1'))
    const again = await rejectionOf(store.runs.create(newRun('d1', { definitionId: 'other' })), RunStoreError)
    assert.is(again.code, 'duplicate_run')
    const batch = await rejectionOf(store.runs.createMany([newRun('d2'), newRun('d3'), newRun('d2')]), RunStoreError)
    assert.is(batch.code, 'duplicate_run')
    const taken = await rejectionOf(store.runs.createMany([newRun('d4'), newRun('d1')]), RunStoreError)
    assert.is(taken.code, 'duplicate_run')
    assert.equal((await history.read()).rows.map((r) => [r.id, r.definitionId]), [['d1', 'orders']])
    assert.equal(store.runs.list().map((r) => r.id), ['d1'])
  })

  test('a run that is not plain data is refused (invalid_run) before anything is written, and the run beside it is not', async (ctx) => {
    const { store, history } = await open(ctx)
    const refusals = await Promise.all([
      rejectionOf(store.runs.create(newRun('bad-date', { request: { at: new Date() } })), RunStoreError),
      rejectionOf(store.runs.create(newRun('bad-deep', { request: nested(40) })), RunStoreError),
      rejectionOf(store.runs.create(newRun('bad-nan', { request: { n: Number.NaN } })), RunStoreError),
      rejectionOf(store.runs.create({ ...newRun('bad-kind'), definitionKind: 'nope' as never }), RunStoreError),
      rejectionOf(store.runs.create(newRun('')), RunStoreError),
    ])
    const fine = await store.runs.create(newRun('fine'))
    for (const err of refusals) assert.is(err.code, 'invalid_run', err.message)
    assert.equal((await history.read()).rows.map((r) => r.id), [fine.id])
  })

  test('createMany writes a fan-out\'s runs together, in order, at one time', async (ctx) => {
    const { store, history } = await open(ctx)
    const rows = await store.runs.createMany([newRun('m1'), newRun('m2'), newRun('m3', { status: 'skipped' })])
    assert.equal(rows.map((r) => r.id), ['m1', 'm2', 'm3'])
    assert.is(new Set(rows.map((r) => r.createdAt)).size, 1)
    assert.equal((await history.read()).rows.map((r) => [r.id, r.status]).sort(), [['m1', 'queued'], ['m2', 'queued'], ['m3', 'skipped']])
  })

  // ---- changes ----------------------------------------------------------------------------------

  test('a status change is durable before it resolves, moves only along the legal transitions, and keeps its texts in shape', async (ctx) => {
    const { store, history } = await open(ctx)
    await store.runs.create(newRun('t1'))
    const running = await store.runs.transition('t1', 'running', { attempts: 1 })
    assert.is(running.startedAt, running.updatedAt)
    const done = await store.runs.transition('t1', 'failed', { error: '  the model said no\n    at stack (x.js:1)\n', result: 'r'.repeat(RESULT_MAX_CHARS + 50), attempts: 2 })
    assert.is(done.error, 'the model said no')
    assert.is(Array.from(done.result!).length, RESULT_MAX_CHARS)
    assert.ok(done.result!.endsWith('…'))
    assert.is(done.finishedAt, done.updatedAt)
    assert.equal(listed(await rowIn(history, 't1')), listed(done))
    assert.is((await rejectionOf(store.runs.transition('t1', 'running'), RunStoreError)).code, 'illegal_transition')
    assert.is((await rejectionOf(store.runs.transition('nope', 'running'), RunStoreError)).code, 'unknown_run')
    assert.is((await rejectionOf(store.runs.transition('t1', 'paused' as RunStatus), RunStoreError)).code, 'invalid_run')
    await store.runs.create(newRun('t2'))
    assert.is((await rejectionOf(store.runs.transition('t2', 'running', { attempts: 1.5 }), RunStoreError)).code, 'invalid_run')
    assert.is((await rowIn(history, 't2'))?.status, 'queued', 'a refused change writes nothing')
    // a run interrupted by a crash goes back to the queue
    await store.runs.transition('t2', 'running')
    assert.is((await store.runs.transition('t2', 'queued')).status, 'queued')
  })

  test('writes of one run are made in the order they were asked for, whatever the moment each is durable', async (ctx) => {
    const { store, history } = await open(ctx)
    const created = store.runs.create(newRun('o1'))
    const moves = [store.runs.transition('o1', 'running'), store.runs.transition('o1', 'succeeded', { result: 'ok' })]
    await Promise.all([created, ...moves])
    assert.is(store.runs.get('o1')?.status, 'succeeded')
    assert.is((await rowIn(history, 'o1'))?.result, 'ok')
  })

  test('settle finishes many runs alike, leaving unknown and finished ones alone, and moves a run with a write in flight after it', async (ctx) => {
    const { store, history } = await open(ctx)
    await store.runs.createMany(['s1', 's2', 's3', 's4'].map((id) => newRun(id, { action: 'wake' })))
    await store.runs.transition('s4', 'failed', { error: 'dropped' })
    const late = store.runs.create(newRun('s5', { action: 'wake' }))
    await store.runs.settle(['s1', 's2', 's3', 's4', 's5', 'nope'], 'succeeded', { error: 'read by turn 7\nmore' })
    await late
    const rows = new Map((await history.read()).rows.map((r) => [r.id, r]))
    for (const id of ['s1', 's2', 's3', 's5']) {
      assert.is(rows.get(id)?.status, 'succeeded', id)
      assert.is(store.runs.get(id)?.status, 'succeeded', id)
    }
    assert.is(rows.get('s1')?.error, 'read by turn 7')
    assert.is(rows.get('s4')?.status, 'failed')
    assert.is(rows.get('s4')?.error, 'dropped')
    assert.is((await rejectionOf(store.runs.settle(['s1'], 'running'), RunStoreError)).code, 'invalid_run')
  })

  test('a notification is durable with its run: the newest NOTIFICATIONS_MAX kept, each error one line', async (ctx) => {
    const { store, history } = await open(ctx)
    await store.runs.create(newRun('n1'))
    for (let i = 0; i < NOTIFICATIONS_MAX + 2; i++) {
      await store.runs.recordNotification('n1', { at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), state: 'queued', channel: `ch${i}`, ok: i % 2 === 0, attempts: 1, ...(i % 2 ? { error: `refused ${i}\n  at x` } : {}) })
    }
    const notes = store.runs.get('n1')!.notifications!
    assert.is(notes.length, NOTIFICATIONS_MAX)
    assert.equal([notes[0]!.channel, notes.at(-1)!.channel], ['ch2', `ch${NOTIFICATIONS_MAX + 1}`])
    assert.is(notes[1]!.error, 'refused 3')
    assert.equal((await rowIn(history, 'n1'))?.notifications, notes)
    // a status change after them keeps them
    await store.runs.transition('n1', 'skipped')
    assert.equal((await rowIn(history, 'n1'))?.notifications, notes)
  })

  // ---- who hears of a change ---------------------------------------------------------------------

  test('subscribers hear every status once it is durable, in order; one that throws hurts no write; unsubscribing stops it', async (ctx) => {
    const { store, history } = await open(ctx)
    const heard: string[] = []
    const stop = store.runs.subscribe((row) => heard.push(`${row.id} ${row.status}`))
    store.runs.subscribe(() => { throw new Error('a listener\'s own fault') })
    await store.runs.create(newRun('h1'))
    await store.runs.transition('h1', 'running')
    await store.runs.createMany([newRun('h2'), newRun('h3')])
    await store.runs.settle(['h2', 'h3'], 'skipped')
    await store.runs.transition('h1', 'succeeded')
    stop()
    await store.runs.create(newRun('h4'))
    assert.equal(heard, ['h1 queued', 'h1 running', 'h2 queued', 'h3 queued', 'h2 skipped', 'h3 skipped', 'h1 succeeded'])
    assert.is((await history.read()).rows.length, 4)
  })

  test('whenFinished answers with the final row once durable, null after its timeout, and null for every wait when the store closes', async (ctx) => {
    const { store } = await open(ctx)
    await store.runs.create(newRun('w1'))
    await store.runs.create(newRun('w2'))
    assert.is(await store.runs.whenFinished('w1', 20), null)
    const waiting = store.runs.whenFinished('w1', 30_000)
    await store.runs.transition('w1', 'running')
    await store.runs.transition('w1', 'succeeded', { result: 'done' })
    assert.is((await waiting)?.result, 'done')
    assert.is((await store.runs.whenFinished('w1', 0))?.status, 'succeeded', 'a finished run answers at once')
    const forever = store.runs.whenFinished('w2', 60_000)
    await store.close()
    assert.is(await forever, null)
    assert.is((await rejectionOf(store.runs.create(newRun('w3')), RunStoreError)).code, 'store_closed')
  })

  // ---- reading ----------------------------------------------------------------------------------

  test('list is newest first (with a limit), children are a workflow\'s steps oldest first, unfinished is what a start resumes, oldest first', async (ctx) => {
    const { store } = await open(ctx)
    await store.runs.create(newRun('wf', { action: 'workflow' }))
    await store.runs.create(newRun('a1', { status: 'succeeded' }))
    await store.runs.create(newRun('wf-s1', { action: 'http', parentRunId: 'wf', stepId: 's1', status: 'succeeded' }))
    await store.runs.create(newRun('wf-s2', { action: 'transform', parentRunId: 'wf', stepId: 's2' }))
    await store.runs.create(newRun('a2'))
    assert.equal(store.runs.list().map((r) => r.id), ['a2', 'wf-s2', 'wf-s1', 'a1', 'wf'])
    assert.equal(store.runs.list({ limit: 2 }).map((r) => r.id), ['a2', 'wf-s2'])
    assert.is((await rejectionOf(Promise.resolve().then(() => store.runs.list({ limit: -1 })), RunStoreError)).code, 'invalid_run')
    assert.equal(store.runs.children('wf').map((r) => r.stepId), ['s1', 's2'])
    assert.equal(store.runs.unfinished().map((r) => r.id), ['wf', 'wf-s2', 'a2'])
  })

  test('memory keeps every unfinished run and the newest finished ones (retainFinished); the history keeps them all', async (ctx) => {
    const { store, history } = await open(ctx, { retainFinished: 3 })
    await store.runs.create(newRun('u0'))
    for (let i = 1; i <= 6; i++) await store.runs.create(newRun(`f${i}`, { status: 'succeeded' }))
    await store.runs.create(newRun('u1'))
    store.runs.trim()
    assert.equal(store.runs.list().map((r) => r.id), ['u1', 'f6', 'f5', 'f4', 'u0'])
    assert.is((await history.read()).rows.length, 8)
    const waited = await store.runs.whenFinished('f1', 0)
    assert.is(waited, null, 'a forgotten run is not in memory')
  })

  test('a step\'s output is read back whole, small or large (past 16 KiB), by the run log and by the history', async (ctx) => {
    const { store, history } = await open(ctx)
    const small = { status: 200, body: { ok: true } }
    const large = { items: Array.from({ length: 2000 }, (_, i) => ({ i, text: `item ${i} ${'x'.repeat(20)}` })) }
    await store.runs.create(newRun('wf', { action: 'workflow' }))
    for (const [id, output] of [['p-small', small], ['p-large', large]] as const) {
      await store.runs.create(newRun(id, { action: 'http', parentRunId: 'wf', stepId: id }))
      await store.runs.transition(id, 'running')
      const row = await store.runs.transition(id, 'succeeded', { output })
      assert.equal(store.runs.output(row), output, id)
      assert.equal(store.runs.output(store.runs.get(id)!), output, id)
      assert.equal(await history.output((await rowIn(history, id))!), output, id)
    }
    const refused = await rejectionOf(store.runs.transition('wf', 'succeeded', { output: { at: new Date() } }), RunStoreError)
    assert.is(refused.code, 'invalid_run')
  })

  test('a received request is read back by the run log and the history, and never held in memory; a fan-out\'s shared one is stored once and read back by each run', async (ctx) => {
    const { store, history } = await open(ctx)
    const one = received({ order: 1, note: 'single' })
    await store.runs.create(newRun('r1', { received: one }))
    assert.is(store.runs.get('r1')?.received, undefined, 'memory does not hold it')
    assert.equal(await store.runs.received(store.runs.get('r1')!), one)
    assert.equal(await history.received((await rowIn(history, 'r1'))!), one)
    const shared = received({ items: Array.from({ length: 50 }, (_, i) => ({ i })), pad: 'p'.repeat(4096) }, '/hooks/fan')
    const rows = await store.runs.createMany(Array.from({ length: 5 }, (_, i) => newRun(`fan-${i}`, { received: shared })))
    const stored = (await history.read()).rows.filter((r) => r.id.startsWith('fan-'))
    assert.is(stored.length, 5)
    assert.is(stored.filter((r) => r.receivedIn === undefined).length, 1, 'one row holds the request, the others name it')
    for (const row of rows) assert.equal(await store.runs.received(row), shared, row.id)
    for (const row of stored) assert.equal(await history.received(row), shared, row.id)
    // once finished too, and once the store is opened again
    await store.runs.settle(rows.map((r) => r.id), 'succeeded')
    assert.equal(await store.runs.received(store.runs.get('fan-3')!), shared)
  })

  test('a run started with an Idempotency-Key keeps the key and the answer given, read back after the store is closed and opened again', async (ctx) => {
    const { store, place } = await open(ctx)
    const response = { status: 202, body: { ok: true, runId: 'k1' } }
    await store.runs.create(newRun('k1', { idempotency: { key: 'order-42', fingerprint: 'f'.repeat(64) }, response }))
    await store.close()
    const again = await backend.open(place, { fsync: true })
    ctx.stores.push(again)
    const history = openHistory(place.stateDir, place.url)
    ctx.readers.push(history)
    const row = await rowIn(history, 'k1')
    assert.equal(row?.idempotency, { key: 'order-42', fingerprint: 'f'.repeat(64) })
    assert.equal(row?.response, response)
  })

  // ---- crash and resume --------------------------------------------------------------------------

  test('a runtime killed mid-write loses nothing it acknowledged, and the runs it left unfinished are resumed by the next one', async (ctx) => {
    const place = await backend.fresh()
    const child = spawn(process.execPath, [fileURLToPath(new URL('./crash-child.js', import.meta.url)), place.url ?? place.stateDir, place.stateDir, JSON.stringify({ fsync: true, ...backend.crashOptions })], { stdio: ['ignore', 'pipe', 'pipe'] })
    const acked = new Map<string, string>()
    let stderr = ''
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { stderr += d })
    let partial = ''
    const enough = new Promise<void>((resolve, reject) => {
      child.stdout!.setEncoding('utf8').on('data', (d: string) => {
        const lines = (partial + d).split('\n')
        partial = lines.pop()!
        for (const line of lines) {
          const [status, id] = line.split(' ')
          acked.set(id!, status!)
        }
        if (acked.size >= 150) resolve()
      })
      child.on('exit', (code) => reject(new Error(`the writer exited (${code}) before it was killed: ${stderr}`)))
      setTimeout(() => reject(new Error(`the writer acknowledged ${acked.size} runs in 60 s: ${stderr}`)), 60_000).unref()
    })
    try {
      await enough
    } finally {
      child.kill('SIGKILL')
    }
    await new Promise((resolve) => child.once('close', resolve))
    const order: Record<string, number> = { queued: 0, running: 1, succeeded: 2 }
    const store = await backend.open(place, { fsync: true, ...backend.crashOptions })
    ctx.stores.push(store)
    const history = openHistory(place.stateDir, place.url)
    ctx.readers.push(history)
    const rows = new Map((await history.read()).rows.map((r) => [r.id, r]))
    for (const [id, status] of acked) {
      const row = rows.get(id)
      assert.ok(row, `acknowledged run ${id} (${status}) is gone`)
      assert.ok(order[row.status]! >= order[status]!, `run ${id} was acknowledged ${status}, and is ${row.status}`)
    }
    const left = [...rows.values()].filter((r) => r.status === 'queued' || r.status === 'running').map((r) => r.id).sort()
    assert.ok(left.length > 0, 'the kill left runs unfinished')
    const resumed = await backend.resumed(store, left.length, 30_000)
    assert.equal(resumed.map((r) => r.id).sort(), left)
    for (const row of resumed) assert.equal(row.request, { message: `run ${row.id.slice('crash-'.length)}` }, `run ${row.id} is resumed with its request`)
    // and the store goes on taking writes
    await store.runs.transition(left[0]!, 'failed', { error: 'interrupted' })
    assert.is((await rowIn(history, left[0]!))?.status, 'failed')
  })

  // ---- adversarial payloads -----------------------------------------------------------------------

  test('a NUL or a lone surrogate in a payload is stored and read back exactly, and fails none of the other writes of its batch', async (ctx) => {
    const { store, history } = await open(ctx)
    const poisons = ['nul \u0000 inside', 'high \ud800 alone', 'low \udc00 alone', '\u0000', 'pair \ud83d\ude00 fine']
    const writes = poisons.flatMap((p, i) => [
      store.runs.create(newRun(`poison-${i}`, { request: { message: p, [`key ${p}`]: [p, { deep: p }] }, received: received({ text: p, [`k ${p}`]: p }) })),
      store.runs.create(newRun(`clean-${i}`)),
    ])
    const rows = await Promise.all(writes)
    assert.is(rows.length, poisons.length * 2)
    for (let i = 0; i < poisons.length; i++) {
      const p = poisons[i]!
      const stored = await rowIn(history, `poison-${i}`)
      assert.equal(await history.request(stored!), { message: p, [`key ${p}`]: [p, { deep: p }] }, JSON.stringify(p))
      assert.equal(await history.received(stored!), received({ text: p, [`k ${p}`]: p }), JSON.stringify(p))
      const changed = await Promise.all([
        store.runs.transition(`poison-${i}`, 'running'),
        store.runs.transition(`clean-${i}`, 'running'),
      ])
      assert.is(changed.length, 2)
      await store.runs.transition(`poison-${i}`, 'failed', { error: `the model said ${p}`, result: p })
      await store.runs.recordNotification(`poison-${i}`, { at: new Date().toISOString(), state: 'failed', channel: 'ops', ok: false, attempts: 1, error: `refused ${p}` })
      const after = await rowIn(history, `poison-${i}`)
      assert.equal([after?.error, after?.result, after?.notifications?.[0]?.error], [`the model said ${p.trim()}`, p, `refused ${p.trim()}`], JSON.stringify(p))
    }
  })

  test('a deeply nested received request (1,000 levels) is stored and read back; a request nested past 32 levels is refused alone', async (ctx) => {
    const { store, history } = await open(ctx)
    const deep = received(nested(1000))
    const [kept, refused, beside] = await Promise.allSettled([
      store.runs.create(newRun('deep', { received: deep })),
      store.runs.create(newRun('too-deep', { request: nested(33) })),
      store.runs.create(newRun('beside', { request: nested(32) })),
    ])
    assert.is(kept.status, 'fulfilled')
    assert.is(refused.status === 'rejected' && (refused.reason as RunStoreError).code, 'invalid_run')
    assert.is(beside.status, 'fulfilled')
    assert.equal(await history.received((await rowIn(history, 'deep'))!), deep)
    assert.equal(await history.request((await rowIn(history, 'beside'))!), nested(32))
    assert.is(await rowIn(history, 'too-deep'), undefined)
  })

  test('a large request (1 MiB) and a large received body (2 MiB) are durable and read back whole, by a resume and by the history', async (ctx) => {
    const { store, place, history } = await open(ctx)
    const request = { message: 'm'.repeat(1024 * 1024) }
    const body = received({ blob: 'b'.repeat(2 * 1024 * 1024), unicode: 'é€😀'.repeat(1000) })
    await store.runs.create(newRun('big', { request, received: body }))
    assert.equal(await history.request((await rowIn(history, 'big'))!), request)
    assert.equal(await history.received((await rowIn(history, 'big'))!), body)
    assert.equal(await store.runs.received(store.runs.get('big')!), body)
    await store.close()
    const again = await backend.open(place, { fsync: true, ...backend.crashOptions })
    ctx.stores.push(again)
    const resumed = (await backend.resumed(again, 1, 30_000)).find((r) => r.id === 'big')
    assert.equal(resumed?.request, request, 'a resume reads the request back')
    assert.equal(await again.runs.received(resumed!), body)
  })

  test.run()
}
