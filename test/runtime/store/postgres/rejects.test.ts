// The rejected-request log on a real PostgreSQL: a flood from one client in one minute is a
// record with a count, not a write per refusal; distinct refusals stay apart, newest first; the
// log keeps to its bound; and a database that is down loses records, never a request.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startPostgres } from '../../../helpers/pg.js'
import { migratedDatabase } from './fixture.js'
import { PgRejects, REJECTS_LOG } from '../../../../runtime/store/postgres/rejects.js'

const pg = await startPostgres()
const rejects = suite('the rejected-request log on PostgreSQL')

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  const database = migratedDatabase(rejects, pg, 'rejects')
  const rows = async () => Number((await database().query<{ n: string }>('SELECT count(*)::text AS n FROM hookgate_logs WHERE log = $1', [REJECTS_LOG])).rows[0]!.n)

  rejects('10,000 refusals of one client in one minute are one record with its count; another code is another record', async () => {
    const log = new PgRejects(database(), { now: () => Date.parse('2026-11-24T10:00:30Z') })
    for (let i = 0; i < 10_000; i++) log.note('203.0.113.7', '/hooks/wake', 401, 'unauthorized', 'POST', { authorization: 'Bearer leaked', 'x-source': 'ci' }, undefined)
    log.note('203.0.113.7', '/hooks/wake', 429, 'too_many_auth_failures', 'POST', {}, undefined)
    await log.close()
    assert.ok(await rows() <= 4, `${await rows()} records written for 10,001 refusals`)
    const read = await PgRejects.read(database())
    assert.equal(read.records.map((r) => [r.status, r.code, r.count]).sort(), [[401, 'unauthorized', 10_000], [429, 'too_many_auth_failures', 1]])
    const first = read.records.find((r) => r.status === 401)!
    assert.is(first.headers.authorization, '[redacted]')
    assert.is(first.headers['x-source'], 'ci')
  })

  rejects('the log keeps to its bound', async () => {
    const log = new PgRejects(database(), { keepRecords: 60, flushMs: 1 })
    for (let i = 0; i < 400; i++) {
      log.note(`198.51.100.${i % 250}`, `/hooks/p${i}`, 404, 'no_mapping', 'POST', {}, undefined)
      if (i % 8 === 0) await log.flush()
    }
    await log.close()
    assert.ok(await rows() <= 60 + 60, `${await rows()} rows kept with a bound of 60 (trimmed every 50 writes)`)
  })

  rejects('while the database is down, refusals are dropped and counted, never thrown; the log writes again once it is back', async () => {
    const warnings: string[] = []
    const log = new PgRejects(database(), { flushMs: 1, warn: (m) => warnings.push(m) })
    await pg.stop('immediate')
    try {
      log.note('192.0.2.1', '/hooks/x', 404, 'no_mapping', 'POST', {}, undefined)
      await log.flush()
      assert.is(log.stats.writeErrors, 1)
      assert.is(warnings.length, 1)
      assert.match(warnings[0]!, 'cannot write the rejected-request log')
    } finally {
      await pg.start()
    }
    log.note('192.0.2.2', '/hooks/y', 404, 'no_mapping', 'POST', {}, undefined)
    await log.close()
    assert.ok((await PgRejects.read(database())).records.some((r) => r.client === '192.0.2.2'))
  })

  rejects.run()
}
