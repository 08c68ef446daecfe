// Taking runs over on a real PostgreSQL: a runtime whose lease expired loses its unfinished runs to
// the first live runtime that sweeps (a workflow with its steps, never a wake: the session's owner
// takes those), under a new fence that shuts the old owner out; two runtimes sweeping at once
// split the runs between them; and a PgStore sweeping on its own timer hands them to its listener
// within the lease and the sweep.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { rejectionOf } from '../../../helpers/async.js'
import { startPostgres } from '../../../helpers/pg.js'
import { newRun, testPool } from './fixture.js'
import type { Db } from '../../../../runtime/store/postgres/db.js'
import { migrate } from '../../../../runtime/store/postgres/migrate.js'
import { PgRecordLog } from '../../../../runtime/store/postgres/logs.js'
import { PgRunLog } from '../../../../runtime/store/postgres/runs.js'
import { PgStore } from '../../../../runtime/store/postgres/index.js'
import { claimOrphans, claimWakes } from '../../../../runtime/store/postgres/takeover.js'
import { RunStoreError, type RunRow } from '../../../../runtime/store/store.js'

const pg = await startPostgres()
const takeover = suite('taking over a dead runtime\'s runs')


if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  const pools: Db[] = []
  const open = async (name: string) => {
    const url = await pg.createDatabase(name)
    const db = await testPool(url)
    pools.push(db)
    await migrate(db)
    return { url, db }
  }
  /** a runtime's row in hookgate_hosts, alive for `ms` (negative: expired that long ago) */
  const host = (db: Db, id: string, ms: number) => db.query("INSERT INTO hookgate_hosts (id, started_at, expires_at) VALUES ($1, now(), now() + $2 * interval '1 millisecond') ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at", [id, ms])
  takeover.after(async () => {
    for (const db of pools) await db.close().catch(() => {})
    await pg.destroy()
  })

  takeover('a dead runtime\'s unfinished runs are claimed once, a workflow with its steps, under a new fence; wakes and a live runtime\'s runs stay', async () => {
    const { db } = await open('claim')
    const dead = new PgRunLog(db, { hostId: 'dead' })
    const live = new PgRunLog(db, { hostId: 'live' })
    await host(db, 'dead', -1000)
    await host(db, 'live', 60_000)
    await host(db, 'heir', 60_000)
    await host(db, 'other-heir', 60_000)
    await dead.create(newRun('agent-1'))
    await dead.transition('agent-1', 'running')
    await dead.create(newRun('flow', { action: 'workflow' }))
    await dead.create(newRun('step-done', { action: 'http', parentRunId: 'flow', stepId: 'a' }))
    await dead.transition('step-done', 'running')
    await dead.transition('step-done', 'succeeded', { output: { ok: 1 } })
    await dead.create(newRun('step-open', { action: 'http', parentRunId: 'flow', stepId: 'b' }))
    await dead.create(newRun('wake-1', { action: 'wake', request: { text: 'hi', external: true, source: 'hook' } }))
    await dead.create(newRun('finished', { status: 'succeeded' }))
    await live.create(newRun('live-1'))
    const transcripts = new PgRecordLog<object>(db, 'isolated')
    await transcripts.append({ type: 'isolated', runId: 'agent-1', reply: 'asked already' }, { type: 'isolated', runId: 'other', reply: 'x' })
    await transcripts.close()

    const taken = await db.transaction((q) => claimOrphans(q, 'heir', 100))
    assert.equal(taken.claimed.map((c) => c.row.id).sort(), ['agent-1', 'flow', 'step-open'])
    assert.ok(taken.claimed.every((c) => c.fence === 2))
    assert.equal(taken.claimed.find((c) => c.row.id === 'agent-1')!.row.request, { message: 'run agent-1' }, 'the request comes with the row, for the resume')
    assert.equal(taken.related.map((r) => [r.id, r.status, r.output]), [['step-done', 'succeeded', { ok: 1 }]])
    assert.equal(taken.isolated, [{ type: 'isolated', runId: 'agent-1', reply: 'asked already' }])
    const owners = await db.query<{ id: string; owner: string }>('SELECT id, owner FROM hookgate_runs ORDER BY id')
    assert.equal(Object.fromEntries(owners.rows.map((r) => [r.id, r.owner])), { 'agent-1': 'heir', finished: 'dead', flow: 'heir', 'live-1': 'live', 'step-done': 'dead', 'step-open': 'heir', 'wake-1': 'dead' })
    assert.equal((await db.transaction((q) => claimOrphans(q, 'other-heir', 100))).claimed, [], 'claimed once')

    // the old owner is shut out: its status change names the old fence and changes nothing
    const err = await rejectionOf(dead.transition('agent-1', 'succeeded'))
    assert.ok(err instanceof RunStoreError && err.code === 'fenced_out', String(err))
    assert.is(dead.get('agent-1'), undefined, 'and the run is no longer in its memory')
    const heir = new PgRunLog(db, { hostId: 'heir' })
    heir.adopt(taken.claimed, taken.related)
    assert.is((await heir.transition('agent-1', 'succeeded')).status, 'succeeded')

    // the wake is the session owner's to claim, with its own wakes when it has just gained the session
    assert.equal((await claimWakes(db, 'dead', ['main'])).map((c) => c.row.id), [])
    const wakes = await claimWakes(db, 'dead', ['main'], true)
    assert.equal(wakes.map((c) => [c.row.id, c.fence]), [['wake-1', 2]])
    assert.equal(wakes[0]!.row.request, { text: 'hi', external: true, source: 'hook' })
  })

  takeover('two runtimes sweeping at once split the runs: each claimed by exactly one', async () => {
    const { url, db } = await open('split')
    const dead = new PgRunLog(db, { hostId: 'dead' })
    await host(db, 'dead', -1000)
    await host(db, 'heir-0', 60_000)
    await host(db, 'heir-1', 60_000)
    await dead.createMany(Array.from({ length: 60 }, (_, i) => newRun(`r${String(i).padStart(2, '0')}`)))
    const second = await testPool(url)
    pools.push(second)
    const claimed: string[][] = [[], []]
    const sweep = async (q: Db, i: number) => {
      for (;;) {
        const taken = await q.transaction((t) => claimOrphans(t, `heir-${i}`, 7))
        if (taken.claimed.length === 0) return
        claimed[i]!.push(...taken.claimed.map((c) => c.row.id))
      }
    }
    await Promise.all([sweep(db, 0), sweep(second, 1)])
    const all = [...claimed[0]!, ...claimed[1]!].sort()
    const twice = all.filter((id, i) => all.indexOf(id) !== i)
    assert.equal(twice, [], `claimed by both: ${JSON.stringify(claimed)}`)
    assert.is(all.length, 60)
    assert.is(new Set(all).size, 60, 'no run claimed twice')
  })

  takeover('a PgStore sweeps on its own: a dead runtime\'s runs reach its listener within the lease and the sweep', async () => {
    const { url, db } = await open('store')
    const dead = new PgRunLog(db, { hostId: 'dead' })
    await host(db, 'dead', 600)
    await dead.create(newRun('orphan'))
    const heir = await PgStore.open(url, { hostTtlMs: 600, sweepMs: 200 })
    try {
      const started = Date.now()
      const got = await new Promise<{ rows: RunRow[]; at: number }>((resolve) => heir.onTakeover((rows) => resolve({ rows, at: Date.now() })))
      assert.equal(got.rows.map((r) => r.id), ['orphan'])
      assert.ok(got.at - started >= 300, `not before the dead runtime's lease ran out (${got.at - started} ms)`)
      assert.ok(got.at - started <= 600 + 200 + 500, `within the lease and a sweep (${got.at - started} ms)`)
      assert.is(heir.runs.get('orphan')?.status, 'queued')
      assert.is((await heir.runs.transition('orphan', 'running')).status, 'running')
    } finally {
      await heir.close()
    }
    assert.is((await db.query('SELECT 1 FROM hookgate_hosts WHERE id <> $1', ['dead'])).rowCount, 0, 'a clean stop removes its own row')
  })
}

takeover.run()
