// Scenario 1 of the scale-out design (design/scale-out.md §7), issue 17: runtimes killed under load.
// Three `hookgate serve` runtimes on one PostgreSQL take agent calls (a model that answers in
// 100 ms, so runs are mid-flight at any moment) from a load balancer that retries a failed request
// on the next host with the same Idempotency-Key. Ten times, a host is SIGKILLed and a new one
// started. Then: every acknowledged run is in the database and succeeds; no key has two runs, and
// every caller of one key was told of the same run; each dead host's unfinished runs were claimed
// by another within hostTtl + sweep.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI, type FakeApi } from '../fakes/openai.js'
import { sleep } from '../helpers/async.js'
import { scenarioYaml, startHosts, Sender, type Host, type Hosts } from '../helpers/hosts.js'
import { startPostgres } from '../helpers/pg.js'
import { setTestToken } from '../runtime/http/harness.js'
import { testPool } from '../runtime/store/postgres/fixture.js'
import type { Db } from '../../runtime/store/postgres/db.js'

const TOKEN = setTestToken()
const KILLS = Number(process.env.HOOKGATE_TEST_KILLS ?? 10)
const HOST_TTL_MS = 2000
const SWEEP_MS = 500
/** scheduling on a loaded 2-core machine: a sweep tick late, a renewal late */
const SLACK_MS = 1500
const pg = await startPostgres()
const kills = suite('runtimes killed under load')

const config = (fake: FakeApi) => scenarioYaml({
  hostTtlSeconds: HOST_TTL_MS / 1000, sweepSeconds: SWEEP_MS / 1000, server: 'concurrency: 32', fakeUrl: fake.url,
  agents: '  - { id: main, default: true, model: fake/gpt-test, heartbeat: { every: "off" } }',
})

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  let hosts: Hosts | undefined
  let sender: Sender | undefined
  let fake: FakeApi | undefined
  let db: Db | undefined
  kills.after(async () => {
    hosts?.killAll()
    await db?.close()
    await sender?.close()
    await fake?.close()
    await pg.destroy()
  })

  kills(`${KILLS} runtimes SIGKILLed under load: every acknowledged run succeeds, once, and a dead runtime's runs are taken over within hostTtl + sweep`, async () => {
    const url = await pg.createDatabase('kills')
    db = await testPool(url)
    const q = db
    fake = await startFakeOpenAI()
    fake.setDefault({ delayMs: 100 })
    hosts = await startHosts({ storeUrl: url, count: 3, yaml: config(fake), env: { HOOKGATE_STORE_URL: url, FAKE_OPENAI_KEY: 'sk-test' } })
    const h = hosts
    sender = new Sender(() => h.live(), { token: TOKEN, connections: 16 })
    const s = sender

    // Load: eight callers, each a fresh key per call and a short pause (about 250 calls/s, what
    // three runtimes' turns keep up with on 2 cores, so the runs drain once the load stops).
    let stop = false
    let n = 0
    const load = Promise.all(Array.from({ length: 8 }, async () => {
      while (!stop) {
        const i = n++
        await s.post('/hooks/agent', { message: `job ${i}`, deliver: false })
        await sleep(25)
      }
    }))

    // The kills: one every 1.5 s, a new runtime started in its place; for each, a watch on how long
    // its unfinished runs stay its own.
    const claims: Array<Promise<{ host: string; unfinishedAtKill: number; claimedAfterMs: number }>> = []
    await sleep(1500)
    for (let k = 0; k < KILLS; k++) {
      const live = h.live()
      const victim = live[k % live.length]!
      const killedAt = Date.now()
      await h.kill(victim)
      claims.push(watchClaim(q, victim, killedAt))
      await h.add()
      await sleep(1500)
    }
    stop = true
    await load

    const acks = s.acks
    assert.ok(acks.length > 500, `load enough to have runs in flight at every kill: ${acks.length} acks`)
    // every caller of one key was told of one run
    const byKey = new Map<string, Set<string>>()
    for (const a of acks) byKey.set(a.key, (byKey.get(a.key) ?? new Set()).add(a.runId))
    const split = [...byKey].filter(([, ids]) => ids.size > 1)
    assert.equal(split, [], 'a key answered with two runs')

    // every acknowledged run is in the database and succeeds (what a dead host left, another finishes)
    const runIds = [...new Set(acks.map((a) => a.runId))]
    const count = async (where: string) => Number((await q.query<{ n: string }>(`SELECT count(*)::text AS n FROM hookgate_runs WHERE id = ANY($1::text[]) ${where}`, [runIds])).rows[0]!.n)
    const started = Date.now()
    for (;;) {
      const open = await count("AND status IN ('queued', 'running')")
      if (open === 0) break
      if (Date.now() - started > 30_000) assert.unreachable(`${open} acknowledged runs still unfinished 30 s after the load\n${h.stderr().slice(-4000)}`)
      await sleep(250)
    }
    const present = await count('')
    assert.is(present, runIds.length, 'every acknowledged run is in the database')
    const failed = await q.query<{ line: string }>("SELECT id || ' ' || status || ' ' || coalesce(row->>'error', '') AS line FROM hookgate_runs WHERE id = ANY($1::text[]) AND status <> 'succeeded'", [runIds])
    assert.equal(failed.rows.map((r) => r.line), [], 'every acknowledged run succeeded')
    // no key has two runs, and no run was started for a key twice
    assert.is(await pg.sql("SELECT count(*) FROM (SELECT row->'idempotency'->>'key' FROM hookgate_runs WHERE action = 'agent' GROUP BY 1 HAVING count(*) > 1) d", url), '0')
    assert.is(Number(await pg.sql("SELECT count(*) FROM hookgate_runs WHERE action = 'agent'", url)), byKey.size, 'one run per key the callers were told of, and no other')

    // takeover within the bound, for every dead runtime that had runs to take over
    const measured = await Promise.all(claims)
    const withRuns = measured.filter((m) => m.unfinishedAtKill > 0)
    assert.ok(withRuns.length >= KILLS / 2, `most kills left runs in flight: ${JSON.stringify(measured)}`)
    const late = measured.filter((m) => m.claimedAfterMs > HOST_TTL_MS + SWEEP_MS + SLACK_MS)
    assert.equal(late, [], `taken over within ${HOST_TTL_MS} + ${SWEEP_MS} ms (+${SLACK_MS} ms slack): ${JSON.stringify(measured)}`)
    console.log(`  ${acks.length} acks, ${runIds.length} runs, ${KILLS} kills; takeover after ${withRuns.map((m) => m.claimedAfterMs).join(', ')} ms (bound ${HOST_TTL_MS + SWEEP_MS})`)

    const exits = await h.stopAll()
    assert.ok(Object.values(exits).every((e) => e === 0), JSON.stringify(exits))
  })

  kills.run()
}

/**
 * Polls until no unfinished run is owned by the killed host (its id is `<hostname>-<pid>-…`), and
 * says how long that took from the kill, and how many it had.
 */
async function watchClaim(db: Db, host: Host, killedAt: number): Promise<{ host: string; unfinishedAtKill: number; claimedAfterMs: number }> {
  const count = async () => Number((await db.query<{ n: string }>("SELECT count(*)::text AS n FROM hookgate_runs WHERE status IN ('queued', 'running') AND owner LIKE $1", [`%-${host.serve.child.pid}-%`])).rows[0]!.n)
  const unfinishedAtKill = await count()
  for (;;) {
    if (await count() === 0) return { host: host.name, unfinishedAtKill, claimedAfterMs: Date.now() - killedAt }
    if (Date.now() - killedAt > 30_000) return { host: host.name, unfinishedAtKill, claimedAfterMs: Infinity }
    await sleep(100)
  }
}
