// Scenario 6 of the scale-out design (design/scale-out.md §7), issue 17: the database crashes
// under load. Three `hookgate serve` runtimes on one PostgreSQL take agent calls from a retrying
// load balancer; PostgreSQL is stopped with `-m immediate` mid-load, left down for a while, and
// started again, several times in a row. While it is down a runtime refuses (503
// store_unavailable with Retry-After) or drops the connection, never acknowledges; once it is back
// every runtime accepts again by itself, without a restart; and every run any caller was told
// about is in the database and finishes.
//
// HOOKGATE_MULTIHOST_CRASHES sets how many crashes (default 3, about 20 s in all).
// A COMMIT the crash took the answer of (the caller was told 503, the row is on disk) holds its
// key: the caller's retry is replayed that run, and the runtime gives it up for a sweep to run.
import { randomUUID } from 'node:crypto'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { sleep } from '../helpers/async.js'
import { startHosts, Sender, type Ack, type Attempt, type Hosts } from '../helpers/hosts.js'
import { startPostgres } from '../helpers/pg.js'
import { setTestToken, until } from '../runtime/http/harness.js'

const TOKEN = setTestToken()
const CRASHES = Number(process.env.HOOKGATE_MULTIHOST_CRASHES || 3)
const CONCURRENCY = 30
/** load before each crash, so that runs are mid-flight when the database goes */
const LOAD_MS = 1000
const DOWN_MS = 1500
/** how long a runtime may take to accept again once the database is back */
const RECOVER_WITHIN_MS = 10_000
/**
 * How long the acknowledged runs may go without one of them finishing, once the load stops: a
 * stuck run shows as no progress. The runtimes accept faster than they run, so ~2,000 runs are
 * still queued then (~3 s to drain on a quiet 2-core machine). Measured beside two CPU-bound loops
 * and other suites: a runtime drains only 40–140 runs a second (server.concurrency 4 turns at once,
 * each five commits one after another, so the commit's latency sets the pace), and one runtime
 * may be left 900 of them (2,600 with 6 crashes): a fixed 20 s for the whole drain failed there
 * with a runtime still draining, not stuck. So the wait is bounded by progress, under a cap.
 */
const NO_PROGRESS_WITHIN_MS = 20_000
/** the whole drain's cap: ~3,000 runs at the slowest rate measured, with room */
const SETTLE_WITHIN_MS = 120_000
const pg = await startPostgres()
const crash = suite('PostgreSQL crashes under load on three runtimes')

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  let url: string
  let hosts: Hosts | undefined
  let sender: Sender
  let stopLoad = true
  crash.before(async () => {
    url = await pg.createDatabase('crash')
    hosts = await startHosts({ storeUrl: url, count: 3 })
    sender = new Sender(() => hosts!.live(), { token: TOKEN, connections: CONCURRENCY })
  })
  // Whatever failed, no runtime and no postmaster outlives the file.
  crash.after(async () => {
    stopLoad = true
    hosts?.killAll()
    await sender?.close()
    await pg.destroy()
  })

  crash(`${CRASHES} × stop -m immediate mid-load: only 503 store_unavailable or a dropped connection while down, every runtime accepts again by itself, every ack committed and finished`, async () => {
    stopLoad = false
    const load = sender.sustain('/hooks/agent', CONCURRENCY, (i) => ({ message: `call ${i}`, deliver: false }), () => stopLoad)
    // awaited below; should an assertion fail first, its end (hosts killed) must not crash the teardown
    load.catch(() => {})
    const recoveries: number[] = []
    for (let round = 1; round <= CRASHES; round++) {
      const before = sender.acks.length
      await sleep(LOAD_MS)
      assert.ok(sender.acks.length > before, `round ${round}: no acks under load before the crash`)
      await pg.stop('immediate')
      await sleep(DOWN_MS)
      await pg.start()
      const back = Date.now()
      // Each runtime on its own, past the balancer, which would hide one that stays refusing.
      for (const host of hosts!.live()) {
        await until(`host ${host.name} to accept again after crash ${round} (last: ${JSON.stringify(sender.attempts.filter((a) => a.host === host.name).at(-1))})`, async () => {
          const reply = await sender.once(host, '/hooks/agent', JSON.stringify({ message: `probe ${round}`, deliver: false }), randomUUID())
          return reply && reply.status === 202 ? true : undefined
        }, RECOVER_WITHIN_MS, 100)
      }
      recoveries.push(Date.now() - back)
    }
    stopLoad = true
    await load

    // Every answer that was not an ack was a refusal the caller can act on, or no answer at all.
    const refusals = sender.attempts.filter((a) => a.status !== undefined && (a.status < 200 || a.status >= 300))
    const wrong = refusals.filter((a) => !(a.status === 503 && a.code === 'store_unavailable' && a.retryAfter !== undefined))
    assert.equal(wrong, [], `answers other than 2xx or 503 store_unavailable with Retry-After: ${JSON.stringify(wrong.slice(0, 5))}`)
    assert.ok(refusals.length > 0, 'no 503 was seen: the crashes were not under load')

    // One run per key, as every caller was told.
    const acked = new Map<string, string>()
    for (const ack of sender.acks) {
      const seen = acked.get(ack.key)
      assert.ok(seen === undefined || seen === ack.runId, `key ${ack.key} was acknowledged as two runs: ${seen} and ${ack.runId}`)
      acked.set(ack.key, ack.runId)
    }
    const keys = await pg.sql('SELECT key, run_id FROM hookgate_idempotency', url)
    const holder = new Map(keys.split('\n').filter(Boolean).map((line) => line.split('|') as [string, string]))
    for (const [key, runId] of acked) assert.is(holder.get(key), runId, `the run that holds key ${key}`)
    assert.is(await pg.sql("SELECT count(*) FROM (SELECT row->'idempotency'->>'key' FROM hookgate_runs WHERE row::jsonb ? 'idempotency' GROUP BY 1 HAVING count(*) > 1) AS twice", url), '0', 'a key with two runs')

    // Every ack is a committed run, and it finishes; some run finishes at least every
    // NO_PROGRESS_WITHIN_MS (a stuck one fails that), the whole within SETTLE_WITHIN_MS.
    let lastOpen = Infinity
    let progressAt = Date.now()
    await until(`every acknowledged run to succeed (some finishing at least every ${NO_PROGRESS_WITHIN_MS} ms, all within ${SETTLE_WITHIN_MS} ms)`, async () => {
      const rows = await runRows(url)
      const missing = [...acked.values()].filter((id) => !rows.has(id))
      assert.equal(missing, [], `${missing.length} of ${acked.size} acknowledged runs are not in hookgate_runs, e.g. ${missing.slice(0, 3).join(', ')}`)
      const open = [...acked.values()].filter((id) => rows.get(id)!.status !== 'succeeded')
      if (open.length < lastOpen) { lastOpen = open.length; progressAt = Date.now() }
      if (open.length > 0 && Date.now() - progressAt > NO_PROGRESS_WITHIN_MS) throw new Error(`no acknowledged run finished for ${NO_PROGRESS_WITHIN_MS} ms`)
      return open.length === 0 ? true : undefined
    }, SETTLE_WITHIN_MS, 250).catch(async (err: Error) => {
      const rows = await runRows(url)
      const open = [...acked].filter(([, id]) => rows.get(id)?.status !== 'succeeded')
      const byStatus: Record<string, number> = {}
      for (const [, id] of open) { const st = rows.get(id)?.status ?? 'missing'; byStatus[st] = (byStatus[st] ?? 0) + 1 }
      // what the caller went through for each, and which runtime holds the row
      const told = open.slice(0, 3).map(([key, id]) => `${id} ${rows.get(id)?.status} (owner ${rows.get(id)?.owner}), key ${key}, first and last attempts: ${JSON.stringify(firstAndLast(sender.attempts.filter((a) => a.key === key)))}`)
      throw new Error(`${err.message}: ${open.length} are not (${JSON.stringify(byStatus)}; host pids ${hosts!.all.map((h) => `${h.name}=${h.serve.child.pid}`).join(' ')}), e.g.\n${told.join('\n')}\n${hosts!.stderr().slice(-3000)}`)
    })

    const exits = await hosts!.stopAll()
    assert.equal(exits, { a: 0, b: 0, c: 0 }, hosts!.stderr())
    console.log(summary(sender.attempts, sender.acks, acked.size, refusals.length, recoveries))
  })

  crash.run()
}

/** Every agent run's status and owner, by id. */
async function runRows(url: string): Promise<Map<string, { status: string; owner: string }>> {
  const text = await pg!.sql("SELECT id, status, owner FROM hookgate_runs WHERE definition_id = 'agent'", url)
  return new Map(text.split('\n').filter(Boolean).map((line) => {
    const [id, status, owner] = line.split('|') as [string, string, string]
    return [id, { status, owner }]
  }))
}

function firstAndLast<T>(list: T[]): T[] {
  return list.length <= 4 ? list : [...list.slice(0, 2), ...list.slice(-2)]
}

function summary(attempts: Attempt[], acks: Ack[], keys: number, refusals: number, recoveries: number[]): string {
  const errors = new Map<string, number>()
  for (const a of attempts) if (a.error) errors.set(a.error, (errors.get(a.error) ?? 0) + 1)
  return `measured: ${CRASHES} crashes, ${attempts.length} attempts, ${acks.length} acks (${acks.filter((a) => a.replayed).length} replays) of ${keys} keys, ${refusals} × 503, ${[...errors.values()].reduce((n, c) => n + c, 0)} dropped ${JSON.stringify(Object.fromEntries(errors))}, accepting again ${recoveries.join('/')} ms after each restart`
}
