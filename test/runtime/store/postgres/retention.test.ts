// What the PostgreSQL store keeps, on a real PostgreSQL: a prune deletes the finished runs past the
// newest keepRuns (never an unfinished one) with their transcript records, and the
// Idempotency-Keys past their window; the rest stays.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startPostgres } from '../../../helpers/pg.js'
import { PgStore } from '../../../../runtime/store/postgres/index.js'
import type { NewRun } from '../../../../runtime/store/store.js'

const pg = await startPostgres()
const retention = suite('the PostgreSQL store\'s retention')

const newRun = (id: string, extra: Partial<NewRun> = {}): NewRun => ({ id, definitionKind: 'hook', definitionId: 'agent', correlationId: `c-${id}`, action: 'agent', agentId: 'main', request: { message: id }, ...extra })

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  retention.after(async () => { await pg.destroy() })

  retention('keeps the newest keepRuns finished runs and every unfinished one, their transcripts, and the keys in their window', async () => {
    const url = await pg.createDatabase('retention')
    const store = await PgStore.open(url, { keepRuns: 5, keepKeysForMs: 60_000 })
    try {
      await store.runs.create(newRun('open-oldest'))
      for (let i = 0; i < 12; i++) {
        await store.runs.create(newRun(`done-${String(i).padStart(2, '0')}`, { status: 'succeeded', idempotency: { key: `k${i}`, fingerprint: 'f' }, response: { status: 202, body: { runId: `done-${i}` } } }))
      }
      const log = store.openLog<{ type: string; runId: string }>('isolated').log
      await log.append({ type: 'isolated', runId: 'done-00' }, { type: 'isolated', runId: 'done-11' }, { type: 'isolated', runId: 'open-oldest' })
      // three keys from long ago
      await store.db.query("UPDATE hookgate_idempotency SET created_at = now() - interval '2 minutes' WHERE key IN ('k0', 'k1', 'k2')")

      const pruned = await store.prune()
      assert.equal(pruned, { runs: 7, keys: 3, sessionRecords: 0 })
      const ids = (await store.db.query<{ id: string }>('SELECT id FROM hookgate_runs ORDER BY created_at')).rows.map((r) => r.id)
      assert.equal(ids, ['open-oldest', 'done-07', 'done-08', 'done-09', 'done-10', 'done-11'], 'the newest five finished, and the unfinished one however old')
      const transcripts = (await store.db.query<{ id: string }>("SELECT record->>'runId' AS id FROM hookgate_logs WHERE log = 'isolated' ORDER BY seq")).rows.map((r) => r.id)
      assert.equal(transcripts, ['done-11', 'open-oldest'])
      const keys = (await store.db.query<{ key: string }>('SELECT key FROM hookgate_idempotency ORDER BY key')).rows.map((r) => r.key)
      assert.equal(keys, ['k10', 'k11', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8', 'k9'])
      assert.equal(await store.prune(), { runs: 0, keys: 0, sessionRecords: 0 }, 'a second prune finds nothing')
    } finally {
      await store.close()
    }
  })

  retention('a fan-out\'s request is stored once and outlives the run holding it: a prune hands it to a run of it that stays, a \\u0000 in the rows and the request included', async () => {
    const url = await pg.createDatabase('shared_request')
    // PostgreSQL's json operators de-escape the whole value and fail on \u0000: the prune and the
    // reader must find a fan-out's request by columns of their own, never by looking into a row
    const shared = { path: '/hooks/batch', query: {}, headers: { 'x-source': 'shop' }, payload: { text: 's'.repeat(32 * 1024) + '\u0000\ud800' } }
    const first = await PgStore.open(url, { keepRuns: 3 })
    try {
      const rows = await first.runs.createMany(['h0', 'h1', 'h2', 'h3'].map((id) => newRun(id, { status: 'succeeded', received: shared, name: `item\u0000${id}` })))
      assert.ok(rows.every((row) => row.received === undefined), 'the rows given back (which a pending run holds) keep no request')
      const stored = await first.db.query<{ id: string }>('SELECT id FROM hookgate_runs WHERE received IS NOT NULL')
      assert.equal(stored.rows.map((r) => r.id), ['h0'], 'one row holds the request')
      assert.is((await first.prune()).runs, 1)
    } finally {
      await first.close()
    }
    const readAll = async (keepRuns: number): Promise<Array<[string, unknown]>> => {
      const store = await PgStore.open(url, { keepRuns })
      const history = store.history('test')
      try {
        await store.prune()
        const rows = (await history.read()).rows
        return await Promise.all(rows.map(async (row) => [row.id, (await history.received(row))?.payload] as [string, unknown]))
      } finally {
        await store.close()
      }
    }
    // h0 (which held it) went: h1 holds it now; then h1 and h2 go, and h3 holds it
    assert.equal(await readAll(3), [['h3', shared.payload], ['h2', shared.payload], ['h1', shared.payload]])
    assert.equal(await readAll(1), [['h3', shared.payload]])
  })

  retention('keeps of a main session its newest turns and what follows them, the events no turn read, and the last route', async () => {
    const url = await pg.createDatabase('session_retention')
    const store = await PgStore.open(url, { sessionKeepTurns: 2 })
    try {
      const log = store.openLog<{ type: string; id?: string; events?: string[] }>('main/main').log
      await log.append(
        { type: 'route', id: 'r1' }, { type: 'event', id: 'e1' }, { type: 'turn', id: 't1', events: ['e1', 'event:w1'] },
        { type: 'route', id: 'r2' }, { type: 'event', id: 'e2' }, { type: 'event', id: 'e3' },
        { type: 'turn', id: 't2', events: ['event:w2'] }, { type: 'event', id: 'e4' }, { type: 'turn', id: 't3', events: ['e3', 'e4'] },
        { type: 'event', id: 'e5' })
      const other = store.openLog<{ type: string; id?: string }>('isolated').log
      await other.append({ type: 'isolated', id: 'kept' })
      const pruned = await store.prune()
      assert.is(pruned.sessionRecords, 4)
      const left = (await store.db.query<{ id: string }>("SELECT record->>'id' AS id FROM hookgate_logs WHERE log = 'main/main' ORDER BY seq")).rows.map((r) => r.id)
      assert.equal(left, ['r2', 'e2', 't2', 'e4', 't3', 'e5'], 'the last route, the unread event, and from the second newest turn on')
      assert.is((await store.db.query("SELECT 1 FROM hookgate_logs WHERE log = 'isolated'")).rowCount, 1, 'other logs are not a session')
    } finally {
      await store.close()
    }
  })

  retention.run()
}
