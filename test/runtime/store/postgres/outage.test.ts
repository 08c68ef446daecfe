// The PostgreSQL run log around an outage, on a real PostgreSQL: a runtime that wrote nothing while
// the database was down notices by itself that it is back (it does not refuse new runs for ever);
// and a new run whose COMMIT landed although its answer was lost (the caller was told 503) is not
// left to a live runtime that will never run it: it is given up at the next commit, and another
// runtime's sweep takes it over, as the run behind a retry's replayed answer must be run.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { rejectionOf } from '../../../helpers/async.js'
import { until } from '../../http/harness.js'
import { startPostgres } from '../../../helpers/pg.js'
import { testPool } from './fixture.js'
import type { Db } from '../../../../runtime/store/postgres/db.js'
import { migrate } from '../../../../runtime/store/postgres/migrate.js'
import { PgRunLog } from '../../../../runtime/store/postgres/runs.js'
import { claimOrphans } from '../../../../runtime/store/postgres/takeover.js'
import { RunStoreError, type NewRun } from '../../../../runtime/store/store.js'

const pg = await startPostgres()
const outage = suite('the PostgreSQL run log around an outage')

const newRun = (id: string, key?: string): NewRun => ({
  id, definitionKind: 'hook', definitionId: 'agent', correlationId: `c-${id}`, action: 'agent', agentId: 'main', request: { message: id },
  ...(key ? { idempotency: { key, fingerprint: 'f' }, response: { status: 202, body: { ok: true, runId: id } } } : {}),
})

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  const pools: Db[] = []
  outage.after(async () => {
    for (const db of pools) await db.close().catch(() => {})
    await pg.destroy()
  })

  outage('a runtime with nothing to write finds the database back by itself and accepts again', async () => {
    const db = await testPool(await pg.createDatabase('idle'))
    pools.push(db)
    await migrate(db)
    const runs = new PgRunLog(db, { hostId: 'host-a' })
    await pg.stop('immediate')
    const refused = await rejectionOf(runs.create(newRun('during')))
    assert.ok(refused instanceof RunStoreError && refused.code === 'store_unavailable', String(refused))
    assert.is(runs.health.ok, false)
    await pg.start()
    // nothing is queued: only the store's own probe can find out (every 2 s at most)
    await until('the store to leave its outage state', () => (runs.health.ok ? true : undefined), 30_000)
    assert.is((await runs.create(newRun('after'))).status, 'queued')
  })

  outage('a new run committed although its answer was lost is given up at the next commit, and another runtime takes it over', async () => {
    const url = await pg.createDatabase('in_doubt')
    const db = await testPool(url)
    pools.push(db)
    await migrate(db)
    await db.query("INSERT INTO hookgate_hosts (id, started_at, expires_at) VALUES ('host-a', now(), now() + interval '1 hour'), ('host-b', now(), now() + interval '1 hour')")
    // host A's connection: its first transaction commits, then the connection drops before the answer
    let lose = true
    const lossy: Db = {
      query: (text, params) => db.query(text, params),
      transaction: (fn, options) => db.transaction(fn, options),
      async script(text) {
        const value = await db.script(text)
        if (lose) { lose = false; throw new Error('Connection terminated unexpectedly') }
        return value
      },
      close: async () => {},
    }
    const a = new PgRunLog(lossy, { hostId: 'host-a' })
    const b = new PgRunLog(db, { hostId: 'host-b' })
    const told = await rejectionOf(a.create(newRun('run-a', 'order-1')))
    assert.ok(told instanceof RunStoreError && told.code === 'store_unavailable', 'the caller was told it failed')
    // (host A may have given it up already: its next commit, a probe, comes within 50 ms)
    assert.ok(['host-a', ''].includes(await pg.sql("SELECT coalesce((SELECT owner FROM hookgate_runs WHERE id = 'run-a'), 'missing')", url)), 'but it is committed')
    // the caller's retry on host B is answered with run-a (a replay): someone must run run-a
    const retry = await rejectionOf(b.create(newRun('run-b', 'order-1')))
    assert.ok(retry instanceof RunStoreError && retry.code === 'duplicate_key' && retry.holder?.response.body.runId === 'run-a', String(retry))
    // host A's next commit (here its probe: it has nothing to write) gives the run up
    const owner = async () => (await db.query<{ owner: string }>("SELECT owner FROM hookgate_runs WHERE id = 'run-a'")).rows[0]!.owner
    await until('host A to give the run up', async () => ((await owner()) === '' ? true : undefined), 30_000)
    const taken = await db.transaction((q) => claimOrphans(q, 'host-b', 10))
    assert.equal(taken.claimed.map((c) => c.row.id), ['run-a'], 'and a sweep takes it over although host A is alive')
  })

  outage.run()
}
