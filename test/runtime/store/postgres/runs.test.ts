// The PostgreSQL run log against a real PostgreSQL, two runtimes ("hosts") on one database: a write
// resolves once committed; writes of one moment share a commit; a task slot's id and an
// Idempotency-Key each start one run across hosts; a runtime that lost a run to another changes
// nothing; and while the database is down new runs are refused and status changes wait.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { rejectionOf, sleep } from '../../../helpers/async.js'
import { startPostgres } from '../../../helpers/pg.js'
import { newRun, testPool } from './fixture.js'
import type { Db, Queryable } from '../../../../runtime/store/postgres/db.js'
import { migrate } from '../../../../runtime/store/postgres/migrate.js'
import { PgRunLog } from '../../../../runtime/store/postgres/runs.js'
import { RunStoreError, type RunRow } from '../../../../runtime/store/store.js'

const pg = await startPostgres()
const runs = suite('the PostgreSQL run log')


/** A pool that counts its transactions (each is one commit). */
function counting(db: Db): Db & { commits: number } {
  const counted = {
    commits: 0,
    query: db.query.bind(db),
    transaction<T>(fn: (q: Queryable) => Promise<T>, options?: { rollback?: boolean }): Promise<T> {
      counted.commits++
      return db.transaction(fn, options)
    },
    script(text: string) {
      counted.commits++
      return db.script(text)
    },
    close: () => db.close(),
  }
  return counted
}

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  const pools: Db[] = []
  const open = async (name: string) => {
    const url = await pg.createDatabase(name)
    const db = counting(await testPool(url))
    pools.push(db)
    await migrate(db)
    const second = counting(await testPool(url))
    pools.push(second)
    return { db, a: new PgRunLog(db, { hostId: 'host-a' }), b: new PgRunLog(second, { hostId: 'host-b' }) }
  }
  const dbRow = async (db: Db, id: string) => (await db.query<{ status: string; owner: string; fence: string; row: RunRow; request: unknown }>('SELECT status, owner, fence::text, row, request FROM hookgate_runs WHERE id = $1', [id])).rows[0]
  runs.after(async () => {
    for (const db of pools) await db.close().catch(() => {})
    await pg.destroy()
  })

  runs('a new run is committed before create resolves, owned by its runtime; its row and request are in the table', async () => {
    const { db, a } = await open('create')
    const row = await a.create(newRun('r1'))
    assert.is(row.status, 'queued')
    const stored = await dbRow(db, 'r1')
    assert.equal({ status: stored!.status, owner: stored!.owner, fence: stored!.fence }, { status: 'queued', owner: 'host-a', fence: '1' })
    assert.equal(stored!.request, { message: 'run r1' })
    assert.is(stored!.row.request, undefined, 'the listing column does not carry the request')
    assert.is(a.get('r1')?.id, 'r1')
    assert.equal(a.unfinished().map((r) => r.id), ['r1'])
  })

  runs('writes of one moment share one commit (group commit)', async () => {
    const { db, a } = await open('group')
    db.commits = 0
    await Promise.all(Array.from({ length: 50 }, (_, i) => a.create(newRun(`g${i}`))))
    assert.ok(db.commits <= 3, `50 creates in ${db.commits} commits`)
    db.commits = 0
    await a.settle(Array.from({ length: 50 }, (_, i) => `g${i}`), 'succeeded')
    assert.ok(db.commits <= 3, `50 settles in ${db.commits} commits`)
    const n = await db.query<{ n: string }>("SELECT count(*)::text AS n FROM hookgate_runs WHERE status = 'succeeded'")
    assert.is(n.rows[0]!.n, '50')
  })

  runs('a run id (a task slot) is taken once across runtimes: the second is duplicate_run', async () => {
    const { a, b } = await open('slot')
    const [first, second] = await Promise.allSettled([a.create(newRun('slot-1')), b.create(newRun('slot-1'))])
    const outcomes = [first, second].map((o) => (o.status === 'fulfilled' ? 'run' : (o.reason as RunStoreError).code)).sort()
    assert.equal(outcomes, ['duplicate_run', 'run'])
  })

  runs('an Idempotency-Key starts one run across runtimes, concurrent or not; past its window it may be taken again', async () => {
    const { db, a, b } = await open('keys')
    const keyed = (id: string) => newRun(id, { idempotency: { key: 'order-42', fingerprint: 'f1' }, response: { status: 202, body: { ok: true, runId: id } } })
    const results = await Promise.allSettled([a.create(keyed('k-a')), b.create(keyed('k-b'))])
    const codes = results.map((o) => (o.status === 'fulfilled' ? 'run' : (o.reason as RunStoreError).code)).sort()
    assert.equal(codes, ['duplicate_key', 'run'])
    const holder = (await db.query<{ run_id: string }>("SELECT run_id FROM hookgate_idempotency WHERE key = 'order-42'")).rows[0]!.run_id
    assert.ok(['k-a', 'k-b'].includes(holder))
    const loser = holder === 'k-a' ? 'k-b' : 'k-a'
    assert.is(await dbRow(db, loser), undefined, 'the run that lost the key was not written')
    // a runtime whose window has passed for that key may take it
    const later = new PgRunLog(db, { hostId: 'host-c', keepKeysForMs: -1000 })
    await later.create(keyed('k-c'))
    assert.is((await db.query<{ run_id: string }>("SELECT run_id FROM hookgate_idempotency WHERE key = 'order-42'")).rows[0]!.run_id, 'k-c')
  })

  runs('a fan-out whose Idempotency-Key another runtime holds writes none of its runs (they would be left queued, run by nobody)', async () => {
    const { db, a, b } = await open('fanout_keys')
    // a fan-out request's rows: the first keeps the key and the answer, the others name nothing
    const fanOut = (prefix: string) => ['1', '2', '3'].map((n) => newRun(`${prefix}-${n}`, n === '1' ? { idempotency: { key: 'batch-7', fingerprint: 'f1' }, response: { status: 202, body: { ok: true, runIds: [] } } } : {}))
    const results = await Promise.allSettled([a.createMany(fanOut('fa')), b.createMany(fanOut('fb'))])
    const codes = results.map((o) => (o.status === 'fulfilled' ? 'runs' : (o.reason as RunStoreError).code)).sort()
    assert.equal(codes, ['duplicate_key', 'runs'])
    const ids = (await db.query<{ id: string }>('SELECT id FROM hookgate_runs ORDER BY id')).rows.map((r) => r.id)
    assert.ok(ids.join() === 'fa-1,fa-2,fa-3' || ids.join() === 'fb-1,fb-2,fb-3', `one request's runs, all of them: ${ids.join()}`)
  })

  runs('status changes and notes are committed under the runtime\'s fence; whenFinished and subscribers hear of the final one', async () => {
    const { db, a } = await open('status')
    await a.create(newRun('s1'))
    const heard: string[] = []
    a.subscribe((row) => heard.push(`${row.id}:${row.status}`))
    const finished = a.whenFinished('s1', 5000)
    await a.transition('s1', 'running')
    await a.recordNotification('s1', { at: new Date().toISOString(), state: 'running', channel: 'ops', ok: true, attempts: 1 })
    await a.transition('s1', 'succeeded', { result: 'done' })
    assert.is((await finished)?.status, 'succeeded')
    assert.equal(heard, ['s1:running', 's1:succeeded'])
    const stored = await dbRow(db, 's1')
    assert.is(stored!.status, 'succeeded')
    assert.is(stored!.row.result, 'done')
    assert.is(stored!.row.notifications?.length, 1)
    assert.equal(stored!.request, { message: 'run s1' }, 'the request stays for a replay')
    assert.is(a.get('s1')?.request, undefined, 'memory lets go of a finished run\'s request')
    const err = await rejectionOf(a.transition('s1', 'running'), RunStoreError)
    assert.is(err.code, 'illegal_transition')
  })

  runs('a runtime that lost a run to another changes nothing: fenced_out', async () => {
    const { db, a } = await open('fence')
    await a.create(newRun('f1'))
    // what a takeover does: another runtime owns it now, under a higher fence
    await db.query("UPDATE hookgate_runs SET owner = 'host-b', fence = fence + 1 WHERE id = 'f1'")
    const err = await rejectionOf(a.transition('f1', 'running'), RunStoreError)
    assert.is(err.code, 'fenced_out')
    assert.is((await dbRow(db, 'f1'))!.status, 'queued')
  })

  runs('while the database is down: new runs are refused at once (store_unavailable), status changes wait and land after the restart', async () => {
    const { db, a } = await open('outage')
    await a.create(newRun('o1'))
    await pg.stop('immediate')
    try {
      const started = Date.now()
      const refused = await rejectionOf(a.create(newRun('o2')), RunStoreError)
      assert.is(refused.code, 'store_unavailable')
      assert.ok(Date.now() - started < 6000, 'refused without waiting for the database')
      assert.is(a.health.ok, false)
      const again = await rejectionOf(a.create(newRun('o3')), RunStoreError)
      assert.is(again.code, 'store_unavailable', 'refused while unhealthy, without trying')
      var pending = a.transition('o1', 'running')
      await sleep(300)
    } finally {
      await pg.start()
    }
    const moved = await pending!
    assert.is(moved.status, 'running')
    assert.is(a.health.ok, true)
    assert.is((await dbRow(db, 'o1'))!.status, 'running')
    assert.is(await dbRow(db, 'o2'), undefined, 'a refused run was never written')
    await a.create(newRun('o4'))
  })

  runs.run()
}
