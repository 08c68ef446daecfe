// Applies the schema's missing migrations in one transaction under a transaction-scoped advisory
// lock: runtimes that start together wait for one another, and the second finds nothing to do.
import { MIGRATION_LOCK_KEY, SCHEMA_VERSION, pendingMigrations, type Migration } from './schema.js'
import type { Queryable, Db } from './db.js'

export interface MigrationPlan {
  /** the version the database is at (0: no hookgate tables yet) */
  from: number
  to: number
  /** what was applied, or with dryRun what would be */
  migrations: Migration[]
}

/** The database's schema version: 0 when it has no hookgate tables yet. */
export async function schemaVersion(q: Queryable): Promise<number> {
  const table = await q.query<{ t: string | null }>("SELECT to_regclass('hookgate_schema')::text AS t")
  if (!table.rows[0]?.t) return 0
  const v = await q.query<{ v: number | null }>('SELECT max(version) AS v FROM hookgate_schema')
  return Number(v.rows[0]?.v ?? 0)
}

/**
 * Brings the schema up to SCHEMA_VERSION, or with `dryRun` only says what that would run (the
 * transaction is rolled back). A database newer than this runtime is refused: an older runtime must
 * not write rows a newer schema reads differently.
 */
export async function migrate(db: Db, options: { dryRun?: boolean } = {}): Promise<MigrationPlan> {
  return db.transaction(async (q) => {
    await q.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY.toString()])
    const from = await schemaVersion(q)
    if (from > SCHEMA_VERSION) {
      throw new Error(`the database's hookgate schema is at version ${from}, newer than this runtime knows (${SCHEMA_VERSION}): upgrade hookgate`)
    }
    const migrations = pendingMigrations(from)
    if (!options.dryRun) {
      for (const m of migrations) {
        await q.query(m.sql)
        await q.query('INSERT INTO hookgate_schema (version) VALUES ($1)', [m.version])
      }
    }
    return { from, to: options.dryRun ? from : SCHEMA_VERSION, migrations }
  }, { rollback: options.dryRun === true })
}
