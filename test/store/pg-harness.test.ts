// The throwaway PostgreSQL server the postgres store's tests will run against (test/helpers/pg.ts),
// checked with psql alone so that it is trusted before any client library is: it answers, its
// databases are separate, a crash (immediate shutdown) loses nothing committed and the server comes
// back on the same data, and destroy leaves nothing behind. Skipped where there are no PostgreSQL
// server binaries; CI installs them (.ci/run).
import { execFile } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { rejectionOf } from '../helpers/async.js'
import { startPostgres, type TestPostgres } from '../helpers/pg.js'

/** `psql <url> -tAc <sql>`, as a developer would type it: the output, trimmed; rejects on failure. */
function psql(pg: TestPostgres, url: string, sql: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(pg.psql, [url, '-X', '-v', 'ON_ERROR_STOP=1', '-tAc', sql], (err, stdout, stderr) => {
      if (err) reject(new Error(String(stderr).trim() || err.message))
      else resolve(String(stdout).trim())
    })
  })
}

const pg = await startPostgres()
const harness = suite('the test PostgreSQL server')

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  harness.after(async () => { await pg.destroy() })

  harness('answers over its unix socket as user and database hookgate', async () => {
    assert.is(await psql(pg, pg.url, 'SELECT 1'), '1')
    assert.is(await psql(pg, pg.url, 'SELECT current_user || \' \' || current_database()'), 'hookgate hookgate')
    assert.ok(existsSync(`${pg.socketDir}/.s.PGSQL.${pg.port}`), 'the socket is in socketDir')
    assert.is(await psql(pg, pg.url, 'SHOW fsync'), 'on', 'the running server syncs (only initdb skips it)')
  })

  harness('createDatabase gives a database of its own', async () => {
    const other = await pg.createDatabase('harness_other')
    assert.is(await psql(pg, other, 'SELECT current_database()'), 'harness_other')
    await psql(pg, other, 'CREATE TABLE only_here (x int)')
    assert.is(await psql(pg, other, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_here'"), '1')
    assert.is(await psql(pg, pg.url, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_here'"), '0')
    await rejectionOf(pg.createDatabase('Robert"); DROP'))
  })

  harness('a crash (immediate stop) refuses queries, and a restart has every committed row', async () => {
    await psql(pg, pg.url, 'CREATE TABLE kept (x int)')
    await psql(pg, pg.url, 'INSERT INTO kept VALUES (42)')
    await pg.stop('immediate')
    const err = await rejectionOf(psql(pg, pg.url, 'SELECT 1'))
    assert.match(err.message, /socket/)
    await pg.start()
    assert.is(await psql(pg, pg.url, 'SELECT x FROM kept'), '42')
    // It really was a crash: the start replayed the WAL.
    assert.match(readFileSync(pg.logFile, 'utf8'), 'automatic recovery in progress')
  })

  harness('a fast stop and a start keep the data too, and stop twice is harmless', async () => {
    await pg.stop('fast')
    await pg.stop('fast')
    await pg.start()
    assert.is(await psql(pg, pg.url, 'SELECT x FROM kept'), '42')
  })

  harness('destroy stops the server and removes its directory', async () => {
    const root = dirname(pg.dataDir)
    assert.ok(existsSync(root))
    await pg.destroy()
    assert.not.ok(existsSync(root), `${root} is gone`)
    await rejectionOf(psql(pg, pg.url, 'SELECT 1'))
    await pg.destroy() // a second destroy (and the suite's after hook) does nothing
  })
}

harness.run()
