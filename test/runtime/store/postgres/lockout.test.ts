// The auth lock-out shared through PostgreSQL, two runtimes ("hosts") on one database, each an
// AuthLimiter with its LockoutSharing: one host's failures lock the client out on the other after a
// flush; a correct token on one clears the count on both; the window runs on the database's clock;
// the slack is at most one flush of failures per host, and a few failures when a host flushes as
// soon as its share is spent; a flood of addresses is merged a bounded batch at a time; and while
// the database is away each host counts alone, says so once, and sends its counts once it is back.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { sleep } from '../../../helpers/async.js'
import { until } from '../../http/harness.js'
import { startPostgres } from '../../../helpers/pg.js'
import { testPool } from './fixture.js'
import { AuthLimiter, type LimiterSettings } from '../../../../runtime/http/auth.js'
import type { Db } from '../../../../runtime/store/postgres/db.js'
import { LockoutSharing, type LockoutSharingOptions } from '../../../../runtime/store/postgres/lockout.js'
import { migrate } from '../../../../runtime/store/postgres/migrate.js'

const pg = await startPostgres()
const lockout = suite('the lock-out shared through PostgreSQL')

const SETTINGS: LimiterSettings = { limit: 5, windowMs: 60_000, lockoutMs: 60_000, maxTrackedClients: 1000 }
const CLIENT = '203.0.113.7'

interface Host { limiter: AuthLimiter; sharing: LockoutSharing; db: Db }

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  const open: Array<Host> = []
  /** Two hosts on a fresh database, registered as live runtimes; flushes only when a test says (unless `options` says otherwise). */
  const hosts = async (name: string, settings: Partial<LimiterSettings> = {}, options: LockoutSharingOptions = {}): Promise<[Host, Host, Db]> => {
    const url = await pg.createDatabase(name)
    const admin = await testPool(url)
    await migrate(admin)
    await admin.query("INSERT INTO hookgate_hosts (id, started_at, expires_at) VALUES ('a', now(), now() + interval '1 hour'), ('b', now(), now() + interval '1 hour')")
    const host = async (): Promise<Host> => {
      const db = await testPool(url)
      const limiter = new AuthLimiter({ ...SETTINGS, ...settings })
      const sharing = new LockoutSharing(db, limiter, { flushMs: 3_600_000, flushWhenSpent: false, ...options })
      await sharing.flush()
      const h = { limiter, sharing, db }
      open.push(h)
      return h
    }
    return [await host(), await host(), admin]
  }
  /** `n` failures on `h`: how many were answered 401 (fail returned 0) */
  const fail = (h: Host, n: number, client = CLIENT): number => {
    let unauthorized = 0
    for (let i = 0; i < n; i++) if (h.limiter.fail(client, Date.now()) === 0) unauthorized++
    return unauthorized
  }
  const row = async (db: Db, client = CLIENT) => (await db.query<{ failures: number; locked: boolean }>('SELECT failures, locked_until > now() AS locked FROM hookgate_auth_failures WHERE client = $1', [client])).rows[0]

  lockout.after(async () => {
    for (const h of open) {
      await h.sharing.close().catch(() => {})
      await h.db.close().catch(() => {})
    }
    await pg.destroy()
  })

  lockout('failures on one host lock the client out on the other after a flush', async () => {
    const [a, b, db] = await hosts('lock')
    assert.is(fail(a, 6), 5, 'a alone: 5 failures are 401, the 6th locks')
    assert.is(b.limiter.retryAfter(CLIENT, Date.now()), 0, 'b has not heard yet')
    const lockedAt = Date.now()
    await a.sharing.flush()
    assert.equal(await row(db), { failures: 6, locked: true })
    await b.sharing.flush()
    // the rest of the lock-out: 60 s less however long the two merges took (a busy machine's seconds)
    const wait = b.limiter.retryAfter(CLIENT, Date.now())
    const spent = Math.ceil((Date.now() - lockedAt) / 1000)
    assert.ok(wait >= 60 - spent && wait <= 60, `b refuses for the rest of the lock-out, got ${wait} s (${spent} s after a locked it)`)
    assert.is(fail(b, 1), 0, 'a failure on b is 429 too')
    await db.close()
  })

  lockout('a correct token on one host clears the count on both', async () => {
    const [a, b, db] = await hosts('clear')
    fail(a, 6)
    await a.sharing.flush()
    await b.sharing.flush()
    assert.ok(b.limiter.retryAfter(CLIENT, Date.now()) > 0)
    b.limiter.succeed(CLIENT)
    await b.sharing.flush()
    assert.equal(await row(db), { failures: 0, locked: null }, 'the merged count is cleared')
    await a.sharing.flush()
    assert.is(a.limiter.retryAfter(CLIENT, Date.now()), 0, 'a let the lock-out go')
    // and both count from zero again, together
    assert.is(fail(a, 3), 3)
    await a.sharing.flush()
    assert.is(fail(b, 1), 1)
    await b.sharing.flush()
    assert.is(fail(b, 2), 1, 'b goes on from a\'s 3 and its own 1: its 3rd failure is the 6th')
    await db.close()
  })

  lockout('the window ends on the database\'s clock: failures of an ended window are not added to the next', async () => {
    // long enough for the few round trips of the second window on a busy machine
    const windowMs = 3000
    const [a, b, db] = await hosts('window', { windowMs })
    assert.is(fail(a, 4), 4)
    await a.sharing.flush()
    // until the database's clock says a's window is over (b's own clock is not asked)
    await until('a\'s window to end on the database\'s clock', async () => ((await db.query<{ over: boolean }>(
      'SELECT window_start <= now() - $1 * interval \'1 millisecond\' AS over FROM hookgate_auth_failures WHERE client = $2', [windowMs, CLIENT])).rows[0]?.over ? true : undefined), 3 * windowMs, 100)
    assert.is(fail(b, 4), 4)
    await b.sharing.flush()
    assert.equal(await row(db), { failures: 4, locked: null }, 'a new window, with b\'s 4 only')
    assert.is(fail(b, 1), 1, 'the 5th of this window is still 401')
    // within one window the same counts do lock
    await b.sharing.flush()
    await a.sharing.flush()
    const running = (await db.query<{ running: boolean }>('SELECT window_start > now() - $1 * interval \'1 millisecond\' AS running FROM hookgate_auth_failures WHERE client = $2', [windowMs, CLIENT])).rows[0]?.running
    assert.ok(running, 'the second window still runs (else the machine took longer than a window for three round trips)')
    assert.is(fail(a, 1), 0, 'a sees b\'s 5: its failure is the 6th')
    await db.close()
  })

  // The host that locks first has seen every failure but those the other got since its last flush.
  lockout('the slack is at most one flush of failures per host: a spray over both, flushed every 7 failures each, gets at most limit + 7 401s', async () => {
    const limit = 20, perFlush = 7
    const [a, b, db] = await hosts('slack', { limit })
    let unauthorized = 0
    let locked = false
    for (let round = 0; round < 10 && !locked; round++) {
      for (const h of [a, b]) {
        for (let i = 0; i < perFlush && !locked; i++) {
          if (h.limiter.fail(CLIENT, Date.now()) === 0) unauthorized++
          else locked = true
        }
      }
      await a.sharing.flush()
      await b.sharing.flush()
    }
    assert.ok(locked, 'locked out in the end')
    assert.ok(unauthorized > limit, `some slack (${unauthorized} 401s)`)
    assert.ok(unauthorized <= limit + perFlush, `${unauthorized} 401s before the first 429, more than ${limit} + ${perFlush}`)
    assert.ok(a.limiter.retryAfter(CLIENT, Date.now()) > 0 && b.limiter.retryAfter(CLIENT, Date.now()) > 0, 'both refuse')
    await db.close()
  })

  // A 429 with Retry-After 1 while a host's merge is under way is a hold, not the lock-out.
  lockout('a host that spent its share merges at once and holds the client meanwhile: a spray over both gets at most limit + 1 401s in all', async () => {
    const limit = 20
    const [a, b, db] = await hosts('spent', { limit }, { flushWhenSpent: true, flushMs: 250 })
    let unauthorized = 0, held = 0
    const lockedOut = (h: Host) => h.limiter.retryAfter(CLIENT, Date.now()) > 1
    // bounded by time, not by a count of requests: on a busy machine a merge takes longer
    const deadline = Date.now() + 30_000
    for (let i = 0; Date.now() < deadline && !(lockedOut(a) && lockedOut(b)); i++) {
      const h = i % 2 === 0 ? a : b
      const wait = h.limiter.retryAfter(CLIENT, Date.now()) || h.limiter.fail(CLIENT, Date.now())
      if (wait === 0) unauthorized++
      else if (wait === 1) held++
      // a request's time: the merge it may have asked for is under way meanwhile
      await sleep(1)
    }
    console.log(`spent: ${unauthorized} 401s, ${held} held`)
    assert.ok(lockedOut(a) && lockedOut(b), 'both locked out')
    assert.ok(unauthorized <= limit + 1, `${unauthorized} 401s in all`)
    await db.close()
  })

  lockout('a flood of addresses is merged a bounded batch per statement, the rest in the next ones', async () => {
    const [a, , db] = await hosts('flood', {}, { maxClients: 10 })
    for (let i = 0; i < 25; i++) fail(a, 1, `198.51.100.${i}`)
    const count = async () => Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM hookgate_auth_failures')).rows[0]!.n)
    await a.sharing.flush()
    assert.is(await count(), 10)
    await a.sharing.flush()
    assert.is(await count(), 20)
    await a.sharing.flush()
    assert.is(await count(), 25)
    await db.close()
  })

  // last: it stops the server
  lockout('while the database is away each host counts alone, holds nobody and says so once; its counts are sent once it is back', async () => {
    const warnings: string[] = []
    // no timer: every merge is one the test or a spent share asks for, so a slow stop of the
    // server cannot have a timer's merge find it away before the first failure does
    const [a, b, db] = await hosts('outage', {}, { warn: (m) => warnings.push(m), flushWhenSpent: true })
    await db.close()
    await pg.stop('fast')
    try {
      assert.is(fail(a, 1), 1)
      assert.is(a.limiter.retryAfter(CLIENT, Date.now()), 1, 'held while its merge is under way')
      await a.sharing.flush()
      assert.is(a.limiter.retryAfter(CLIENT, Date.now()), 0, 'the merge failed: no hold while the database is away')
      assert.is(fail(a, 5), 4, 'a counts alone: failures 2-5 are 401, the 6th locks')
      // more merges fail (the lock-out asked for one at once): still one line
      await a.sharing.flush()
      await a.sharing.flush()
      assert.is(warnings.length, 1, warnings.join('\n'))
      assert.match(warnings[0]!, 'auth lock-out counts are not shared while the database cannot be reached')
    } finally {
      await pg.start()
    }
    await a.sharing.flush()
    assert.is(warnings.length, 1, 'nothing more once it is back')
    await b.sharing.flush()
    assert.ok(b.limiter.retryAfter(CLIENT, Date.now()) > 1, 'b refuses once a\'s kept counts arrive')
  })

  lockout.run()
}
