// What the postgres store's tests share: a pool as tests size it, and a fresh database on the test
// server with the store's schema, for a suite that uses one database throughout.
import type { Test } from 'uvu'
import { openPool } from '../../../../runtime/store/postgres/client.js'
import type { Db } from '../../../../runtime/store/postgres/db.js'
import { migrate } from '../../../../runtime/store/postgres/migrate.js'
import type { TestPostgres } from '../../../helpers/pg.js'
import type { NewRun } from '../../../../runtime/store/store.js'

/** A small pool that gives up on a server that is not there within 2 s. */
export function testPool(url: string): Promise<Db> {
  return openPool(url, { max: 4, connectTimeoutMs: 2000 })
}

/**
 * Before `suite` runs: database `name` created and migrated, its pool in `db()`; after it: the pool
 * closed and the server destroyed.
 */
export function migratedDatabase(suite: Test, pg: TestPostgres, name: string): () => Db {
  let db: Db | undefined
  suite.before(async () => {
    db = await testPool(await pg.createDatabase(name))
    await migrate(db)
  })
  suite.after(async () => {
    await db?.close().catch(() => {})
    await pg.destroy()
  })
  return () => db!
}

/** An agent run of mapping `orders` as the run-log suites create them; `extra` overrides any field. */
export function newRun(id: string, extra: Partial<NewRun> = {}): NewRun {
  return { id, definitionKind: 'hook', definitionId: 'orders', correlationId: `c-${id}`, action: 'agent', agentId: 'main', request: { message: `run ${id}` }, ...extra }
}
