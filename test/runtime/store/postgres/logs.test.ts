// Record logs on a real PostgreSQL: appends read back in their order, also when many share a commit
// and when two logs interleave; and while the database is down an
// append waits, then lands after the restart.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { sleep } from '../../../helpers/async.js'
import { startPostgres } from '../../../helpers/pg.js'
import { migratedDatabase } from './fixture.js'
import { PgRecordLog } from '../../../../runtime/store/postgres/logs.js'

interface Rec { n: number; text?: string }

const pg = await startPostgres()
const logs = suite('record logs on PostgreSQL')

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  const database = migratedDatabase(logs, pg, 'logs')

  logs('appends read back in order, whether they share a commit or not, and two logs keep to their own', async () => {
    const a = new PgRecordLog<Rec>(database(), 'main/main')
    const b = new PgRecordLog<Rec>(database(), 'isolated')
    const writes: Promise<void>[] = []
    for (let n = 0; n < 200; n++) writes.push(n % 3 === 0 ? b.append({ n }) : a.append({ n }, { n: n + 0.5 }))
    await Promise.all(writes)
    await a.append({ n: 1000, text: 'caf\u00e9 "quoted"\n' })
    const got = await PgRecordLog.read<Rec>(database(), 'main/main')
    const expected: Rec[] = []
    for (let n = 0; n < 200; n++) if (n % 3 !== 0) expected.push({ n }, { n: n + 0.5 })
    expected.push({ n: 1000, text: 'caf\u00e9 "quoted"\n' })
    assert.equal(got, expected)
    assert.equal((await PgRecordLog.read<Rec>(database(), 'isolated')).map((r) => r.n), Array.from({ length: 67 }, (_, i) => i * 3))
    await a.close()
    await b.close()
  })

  logs('an append while the database is down waits, and lands after the restart', async () => {
    const log = new PgRecordLog<Rec>(database(), 'outage')
    await log.append({ n: 1 })
    await pg.stop('immediate')
    let pending: Promise<void>
    try {
      pending = log.append({ n: 2 })
      await sleep(300)
      assert.is(log.health.ok, false)
    } finally {
      await pg.start()
    }
    await pending!
    assert.is(log.health.ok, true)
    assert.equal(await PgRecordLog.read<Rec>(database(), 'outage'), [{ n: 1 }, { n: 2 }])
    await log.close()
  })

  logs.run()
}
