// The postgres store's schema and client against a real PostgreSQL (test/helpers/pg.ts): the
// migrations apply once, also when three runtimes start together; a dry run changes nothing (and
// --json says both as JSON); a
// database newer than the runtime is refused; and the client survives the server being stopped
// with -m immediate under load (every query in flight rejects with an error the store can catch
// and call "unavailable", none hangs, and the pool is back by itself after the restart).
import { execFile } from 'node:child_process'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { rejectionOf, sleep } from '../../../helpers/async.js'
import { hookgateBin } from '../../../helpers/paths.js'
import { startPostgres } from '../../../helpers/pg.js'
import { testPool } from './fixture.js'
import { isUnavailable, type Db } from '../../../../runtime/store/postgres/db.js'
import { shownStoreUrl } from '../../../../runtime/store/open.js'
import { migrate, schemaVersion } from '../../../../runtime/store/postgres/migrate.js'
import { MIGRATIONS, SCHEMA_VERSION } from '../../../../runtime/store/postgres/schema.js'

const pg = await startPostgres()
const schema = suite('the postgres store schema')
const crash = suite('the postgres client when the database crashes')
const cli = suite('hookgate store migrate')

/** The real CLI: its exit code and output. */
function hookgate(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const clean = { ...process.env }
    delete clean.HOOKGATE_STORE_URL
    execFile(process.execPath, [hookgateBin, ...args], { env: { ...clean, ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout: String(stdout), stderr: String(stderr) })
    })
  })
}

const tables = (db: Db) => db.query<{ t: string }>("SELECT tablename AS t FROM pg_tables WHERE tablename LIKE 'hookgate_%' ORDER BY 1").then((r) => r.rows.map((x) => x.t))

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  const pools: Db[] = []
  const pool = async (url: string): Promise<Db> => {
    const db = await testPool(url)
    pools.push(db)
    return db
  }
  const after = async () => {
    for (const db of pools.splice(0)) await db.close().catch(() => {})
  }
  schema.after(after)
  cli.after(after)
  crash.after(async () => {
    await after()
    await pg.destroy()
  })

  schema('a dry run on an empty database lists every migration and creates nothing', async () => {
    const db = await pool(await pg.createDatabase('dry'))
    const plan = await migrate(db, { dryRun: true })
    assert.equal({ from: plan.from, to: plan.to, versions: plan.migrations.map((m) => m.version) }, { from: 0, to: 0, versions: MIGRATIONS.map((m) => m.version) })
    assert.equal(await tables(db), [])
  })

  schema('three runtimes migrating at once apply each migration once; the next start has nothing to do', async () => {
    const url = await pg.createDatabase('together')
    const dbs = await Promise.all([pool(url), pool(url), pool(url)])
    const plans = await Promise.all(dbs.map((db) => migrate(db)))
    // one of them applied everything under the lock; the others found the schema current
    assert.equal(plans.map((p) => p.migrations.length).sort(), [0, 0, MIGRATIONS.length])
    assert.ok(plans.every((p) => p.to === SCHEMA_VERSION))
    assert.is(await schemaVersion(dbs[0]!), SCHEMA_VERSION)
    assert.ok((await tables(dbs[0]!)).includes('hookgate_runs'))
    const again = await migrate(dbs[1]!)
    assert.equal(again.migrations, [])
    const applied = await dbs[0]!.query<{ n: string }>('SELECT count(*)::text AS n FROM hookgate_schema')
    assert.is(applied.rows[0]!.n, String(MIGRATIONS.length))
  })

  schema('a database whose schema is newer than this runtime is refused, and left as it is', async () => {
    const db = await pool(await pg.createDatabase('newer'))
    await migrate(db)
    await db.query('INSERT INTO hookgate_schema (version) VALUES ($1)', [SCHEMA_VERSION + 1])
    const err = await rejectionOf(migrate(db))
    assert.match(err.message, `version ${SCHEMA_VERSION + 1}, newer than this runtime knows`)
    assert.is(await schemaVersion(db), SCHEMA_VERSION + 1)
  })

  schema('a database written before the json columns (version 3) keeps its runs and records through migration 4, their new columns filled', async () => {
    const db = await pool(await pg.createDatabase('before_json'))
    await db.transaction(async (q) => {
      for (const m of MIGRATIONS.filter((x) => x.version <= 3)) {
        await q.query(m.sql)
        await q.query('INSERT INTO hookgate_schema (version) VALUES ($1)', [m.version])
      }
    })
    // rows as version 3 wrote them (jsonb)
    await db.query(`INSERT INTO hookgate_runs (id, status, action, definition_kind, definition_id, correlation_id, created_at, updated_at, owner, row, request)
      VALUES ('t-1', 'succeeded', 'agent', 'task', 'nightly', 'c', now(), now(), 'h', '{"id":"t-1","scheduledFor":"2026-11-20T00:00:00.000Z"}', '{"message":"m"}')`)
    await db.query(`INSERT INTO hookgate_logs (log, record) VALUES
      ('isolated', '{"type":"isolated","runId":"t-1","reply":"r"}'),
      ('main/main', '{"type":"event","id":"event:w-1","runId":"w-1","text":"x"}'),
      ('main/main', '{"type":"turn","id":"turn:event:w-1","events":["event:w-1","summary:t-1"],"reply":"ok"}')`)
    const plan = await migrate(db)
    assert.equal(plan.migrations.map((m) => m.version), MIGRATIONS.filter((x) => x.version > 3).map((x) => x.version))
    const run = (await db.query<{ scheduled_for: string; row: { scheduledFor: string }; request: unknown }>("SELECT scheduled_for, row, request FROM hookgate_runs WHERE id = 't-1'")).rows[0]!
    assert.equal(run, { scheduled_for: '2026-11-20T00:00:00.000Z', row: { id: 't-1', scheduledFor: '2026-11-20T00:00:00.000Z' }, request: { message: 'm' } })
    const records = await db.query<{ kind: string; ref: string; refs: string[] | null }>('SELECT kind, ref, refs FROM hookgate_logs ORDER BY seq')
    assert.equal(records.rows, [
      { kind: 'isolated', ref: 't-1', refs: null },
      { kind: 'event', ref: 'event:w-1', refs: null },
      { kind: 'turn', ref: 'turn:event:w-1', refs: ['event:w-1', 'summary:t-1'] },
    ])
  })

  crash('queries in flight when the server stops with -m immediate reject (unavailable), none hangs, and the pool recovers after the restart', async () => {
    const url = await pg.createDatabase('crash')
    const db = await pool(url)
    await db.query('CREATE TABLE t (id serial PRIMARY KEY, n integer NOT NULL)')
    let committed = 0
    const failures: unknown[] = []
    let stop = false
    const loop = async (n: number) => {
      while (!stop) {
        try {
          await db.transaction(async (q) => { await q.query('INSERT INTO t (n) VALUES ($1)', [n]) })
          committed++
        } catch (err) {
          failures.push(err)
          await sleep(20)
        }
      }
    }
    const loops = Array.from({ length: 8 }, (_, n) => loop(n))
    await sleep(300)
    const before = committed
    await pg.stop('immediate')
    await sleep(300)
    const duringOutage = failures.length
    await pg.start()
    const restartedAt = committed
    const deadline = Date.now() + 10_000
    while (committed < restartedAt + 50 && Date.now() < deadline) await sleep(50)
    stop = true
    await Promise.all(loops)
    assert.ok(before > 0, 'committed before the crash')
    assert.ok(duringOutage > 0, 'queries failed while it was down')
    assert.ok(failures.every(isUnavailable), `every failure reads as unavailable: ${failures.filter((e) => !isUnavailable(e)).map((e) => (e as Error).message).slice(0, 3).join('; ')}`)
    assert.ok(committed >= restartedAt + 50, 'commits again after the restart, without a new pool')
    // nothing committed was lost
    const rows = await db.query<{ n: string }>('SELECT count(*)::text AS n FROM t')
    assert.ok(Number(rows.rows[0]!.n) >= committed, `${rows.rows[0]!.n} rows for ${committed} commits`)
  })

  crash('a statement the database refuses is not "unavailable"', async () => {
    const db = await pool(pg.url)
    const err = await rejectionOf(db.query('SELECT * FROM no_such_table'))
    assert.not.ok(isUnavailable(err))
    assert.equal((await db.query<{ one: number }>('SELECT 1 AS one')).rows, [{ one: 1 }], 'and the pool goes on')
  })

  cli('--dry-run shows the plan and changes nothing; then it applies it; then there is nothing to do', async () => {
    const url = await pg.createDatabase('cli')
    const dry = await hookgate(['store', 'migrate', '--store', url, '--dry-run'])
    assert.is(dry.code, 0, dry.stderr)
    assert.match(dry.stdout, `at version 0; would apply ${MIGRATIONS.length} migrations (nothing was changed)`)
    assert.match(dry.stdout, '  1: runs, idempotency keys')
    assert.match(dry.stdout, '  2: several runtimes')
    const db = await pool(url)
    assert.equal(await tables(db), [])
    // the URL from the environment, as a deploy would give it
    const applied = await hookgate(['store', 'migrate'], { HOOKGATE_STORE_URL: url })
    assert.is(applied.code, 0, applied.stderr)
    assert.match(applied.stdout, `applied ${MIGRATIONS.length} migrations, the schema is at version ${SCHEMA_VERSION}`)
    assert.ok((await tables(db)).includes('hookgate_runs'))
    const again = await hookgate(['store', 'migrate', '--store', url])
    assert.is(again.code, 0)
    assert.match(again.stdout, `the schema is at version ${SCHEMA_VERSION}, current; nothing to do`)
  })

  cli('--json prints the plan and then the outcome as one JSON document each, the password hidden, for a deploy script to read', async () => {
    const url = await pg.createDatabase('clijson')
    const dry = await hookgate(['store', 'migrate', '--store', url, '--dry-run', '--json'])
    assert.is(dry.code, 0, dry.stderr)
    const plan = JSON.parse(dry.stdout) as { store: string; dryRun: boolean; from: number; to: number; migrations: Array<{ version: number; title: string }> }
    assert.equal({ ...plan, migrations: plan.migrations.map((m) => m.version) }, { store: shownStoreUrl(url), dryRun: true, from: 0, to: 0, migrations: MIGRATIONS.map((m) => m.version) })
    assert.ok(plan.migrations.every((m) => typeof m.title === 'string' && m.title !== ''), 'each migration says what it does')
    assert.equal(await tables(await pool(url)), [], 'a dry run changes nothing')
    const applied = await hookgate(['store', 'migrate', '--store', url, '--json'])
    assert.is(applied.code, 0, applied.stderr)
    const done = JSON.parse(applied.stdout) as { dryRun: boolean; from: number; to: number; migrations: unknown[] }
    assert.equal({ dryRun: done.dryRun, from: done.from, to: done.to, applied: done.migrations.length }, { dryRun: false, from: 0, to: SCHEMA_VERSION, applied: MIGRATIONS.length })
    const again = JSON.parse((await hookgate(['store', 'migrate', '--store', url, '--json'])).stdout) as { from: number; to: number; migrations: unknown[] }
    assert.equal(again, { ...again, from: SCHEMA_VERSION, to: SCHEMA_VERSION, migrations: [] })
  })

  cli('a store it cannot reach is exit 1, and the password is never printed', async () => {
    const url = `postgres://hookgate:s3cret-pass@/nowhere?host=${pg.socketDir}-missing&port=5432`
    const r = await hookgate(['store', 'migrate', '--store', url])
    assert.is(r.code, 1)
    assert.match(r.stderr, 'hookgate store migrate: postgres://hookgate:***@')
    assert.not.match(r.stdout + r.stderr, 's3cret-pass')
  })

  cli('a shown URL hides a password in the authority or in a password= parameter, and keeps the rest', () => {
    assert.is(shownStoreUrl('postgres://app:p%40ss@db.internal:5432/hooks?sslmode=require'), 'postgres://app:***@db.internal:5432/hooks?sslmode=require')
    assert.is(shownStoreUrl('postgresql://app@/hooks?host=/run/postgresql&password=hunter2&port=5433'), 'postgresql://app@/hooks?host=/run/postgresql&password=***&port=5433')
    assert.is(shownStoreUrl('postgres://app@db/hooks'), 'postgres://app@db/hooks')
  })

  cli('usage errors are exit 2: no store named, or not a postgres:// URL', async () => {
    const none = await hookgate(['store', 'migrate'])
    assert.is(none.code, 2)
    assert.match(none.stderr, 'name the store with --store postgres://… or $HOOKGATE_STORE_URL')
    const file = await hookgate(['store', 'migrate', '--store', '.hookgate'])
    assert.is(file.code, 2)
    assert.match(file.stderr, 'the file store needs no migration')
  })

  schema.run()
  cli.run()
  crash.run()
}
