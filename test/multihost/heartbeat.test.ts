// Scenario 3 of the scale-out design (design/scale-out.md §7), issue 17: one heartbeat turn per
// agent at a time across runtimes. Three `hookgate serve` runtimes on one PostgreSQL, two agents;
// 2,000 wakes with mode "now" spread over the runtimes. The fake model logs when each turn's call
// came: no two turns of one agent overlap; every wake is read by exactly one committed turn and
// settled once. Then the owner of one agent's session is SIGSTOPped in the middle of a turn, past
// its lease: another runtime takes the session over and runs the turn; the paused one, resumed,
// finishes its model call but its turn is refused by the fence and leaves no record.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI, type FakeApi } from '../fakes/openai.js'
import { sleep } from '../helpers/async.js'
import { scenarioYaml, startHosts, Sender, type Hosts } from '../helpers/hosts.js'
import { startPostgres } from '../helpers/pg.js'
import { post, setTestToken, until } from '../runtime/http/harness.js'
import { testPool } from '../runtime/store/postgres/fixture.js'
import type { Db } from '../../runtime/store/postgres/db.js'

const TOKEN = setTestToken()
const WAKES = 2000
const TURN_MS = 40
const HOST_TTL_MS = 2000
const pg = await startPostgres()
const heartbeat = suite('one heartbeat turn per agent across runtimes')

const config = (fake: FakeApi) => scenarioYaml({
  hostTtlSeconds: HOST_TTL_MS / 1000, sweepSeconds: 0.5, fakeUrl: fake.url,
  agents: '  - { id: a1, default: true, model: fake/gpt-test, heartbeat: { every: "off" } }\n  - { id: a2, model: fake/gpt-test, heartbeat: { every: "off" } }',
})

/** The heartbeat calls the fake model received for `agent`, in order of arrival. */
function turnsOf(fake: FakeApi, agent: string): Array<{ at: number; text: string }> {
  return fake.requests
    .filter((r) => r.body?.messages?.[0]?.content === `Heartbeat for agent ${agent}: the system events queued since the last turn follow.`)
    .map((r) => ({ at: r.at, text: String(r.body.messages[1]?.content ?? '') }))
}

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  let hosts: Hosts | undefined
  let sender: Sender | undefined
  let fake: FakeApi | undefined
  let db: Db | undefined
  let url = ''
  heartbeat.before(async () => {
    url = await pg.createDatabase('heartbeat')
    db = await testPool(url)
    fake = await startFakeOpenAI()
    fake.setDefault({ delayMs: TURN_MS })
    hosts = await startHosts({ storeUrl: url, count: 3, yaml: config(fake), env: { HOOKGATE_STORE_URL: url, FAKE_OPENAI_KEY: 'sk-test' } })
    sender = new Sender(() => hosts!.live(), { token: TOKEN, connections: 16 })
  })
  heartbeat.after(async () => {
    hosts?.killAll()
    await sender?.close()
    await db?.close()
    await fake?.close()
    await pg.destroy()
  })

  heartbeat(`${WAKES} wakes over three runtimes: no two turns of one agent overlap, and each wake is read by exactly one committed turn`, async () => {
    const s = sender!
    let n = 0
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (n < WAKES) {
        const i = n++
        await s.post('/hooks/wake', { text: `wake ${i}`, mode: 'now', agentId: i % 2 === 0 ? 'a1' : 'a2' })
      }
    }))
    const acks = s.acks
    assert.is(new Set(acks.map((a) => a.runId)).size, WAKES)
    assert.equal(new Set(acks.map((a) => a.host)).size, 3, 'every runtime took wakes')
    const ids = acks.map((a) => a.runId)
    const count = async (status: string) => (await db!.query<{ n: string }>('SELECT count(*)::text AS n FROM hookgate_runs WHERE id = ANY($1::text[]) AND status = ANY($2::text[])', [ids, status.split(',')])).rows[0]!.n
    await until('every wake to be settled', async () => (await count('queued,running') === '0' ? true : undefined), 60_000, 250).catch(async (err: Error) => {
      // who holds what is left, and who owns the sessions: what a stuck wake needs to be understood
      const left = await db!.query('SELECT owner, agent_id, status, count(*)::int AS n FROM hookgate_runs WHERE id = ANY($1::text[]) AND status IN (\'queued\', \'running\') GROUP BY 1, 2, 3', [ids])
      const leases = await db!.query('SELECT agent_id, owner, fence, expires_at > now() AS live FROM hookgate_session_leases')
      throw new Error(`${err.message}: left ${JSON.stringify(left.rows)}, leases ${JSON.stringify(leases.rows)}\n${hosts!.stderr().slice(-3000)}`)
    })
    assert.is(await count('succeeded'), String(WAKES), 'every wake succeeded')

    for (const agent of ['a1', 'a2']) {
      // the model's log: each turn's call came at least a turn's length after the one before
      const turns = turnsOf(fake!, agent)
      assert.ok(turns.length >= 1)
      for (let i = 1; i < turns.length; i++) {
        assert.ok(turns[i]!.at - turns[i - 1]!.at >= TURN_MS - 2, `agent ${agent}: turn ${i} began ${turns[i]!.at - turns[i - 1]!.at} ms after the one before, which takes ${TURN_MS} ms`)
      }
      // the session's log: every wake of this agent in exactly one committed turn
      const committed = await db!.query<{ events: string[] }>(`SELECT record->'events' AS events FROM hookgate_logs WHERE log = $1 AND record->>'type' = 'turn'`, [`${agent}/main`])
      const read = new Map<string, number>()
      for (const t of committed.rows) for (const e of t.events) read.set(e, (read.get(e) ?? 0) + 1)
      const wakesOfAgent = await db!.query<{ id: string }>('SELECT id FROM hookgate_runs WHERE id = ANY($1::text[]) AND agent_id = $2', [acks.map((a) => a.runId), agent])
      assert.is(wakesOfAgent.rows.length, WAKES / 2)
      const notOnce = wakesOfAgent.rows.filter((r) => read.get(`event:${r.id}`) !== 1).map((r) => `${r.id}: ${read.get(`event:${r.id}`) ?? 0}`)
      assert.equal(notOnce, [], `agent ${agent}: wakes not read by exactly one committed turn`)
      // every model call was a committed turn, but for a turn under way when its runtime lost the
      // session (a lease not renewed in time on a busy machine): the fence refuses it and the new
      // owner reads its events again (above), so at most one per change of owner (the fence counts them)
      const changes = Number((await db!.query<{ fence: string }>('SELECT fence::text AS fence FROM hookgate_session_leases WHERE agent_id = $1', [agent])).rows[0]?.fence ?? 1) - 1
      assert.ok(committed.rows.length <= turns.length && turns.length - committed.rows.length <= changes,
        `agent ${agent}: ${turns.length} model calls, ${committed.rows.length} committed turns, ${changes} changes of owner`)
    }
  })

  heartbeat('an owner paused past its lease in the middle of a turn: another runtime runs the turn, and the late one is refused by the fence', async () => {
    const h = hosts!
    const ownerId = await pg.sql("SELECT owner FROM hookgate_session_leases WHERE agent_id = 'a1'", url)
    const owner = h.live().find((x) => ownerId.includes(`-${x.serve.child.pid}-`))
    assert.ok(owner, `the owner ${ownerId} is one of the live hosts`)
    const before = turnsOf(fake!, 'a1').length
    // the owner's next model call takes 3 s: long enough to pause the runtime in the middle of it
    fake!.queue({ delayMs: 3000 })
    const wake = await post(owner.origin, '/hooks/wake', TOKEN, { text: 'the paused turn', mode: 'now', agentId: 'a1' })
    assert.is(wake.status, 200)
    const runId = (wake.json as { runId: string }).runId
    await until('the owner\'s turn to call the model', () => (turnsOf(fake!, 'a1').length > before ? true : undefined), 5000, 20)
    h.pause(owner)
    const pausedAt = Date.now()
    try {
      // another runtime takes the session over once the lease runs out, and runs the turn itself
      await until('the wake to be settled by another runtime', async () => (await pg.sql(`SELECT status FROM hookgate_runs WHERE id = '${runId}'`, url) === 'succeeded' ? true : undefined), 10_000, 100)
      const tookOver = Date.now() - pausedAt
      assert.ok(tookOver >= HOST_TTL_MS - 1000, `not before the lease ran out (${tookOver} ms)`)
      const newOwner = await pg.sql("SELECT owner FROM hookgate_session_leases WHERE agent_id = 'a1'", url)
      assert.not.equal(newOwner, ownerId)
    } finally {
      h.resume(owner)
    }
    // resumed, the old owner finishes its model call; its turn must not be recorded
    await until('the paused turn\'s model call to end', () => (Date.now() - pausedAt > 3500 ? true : undefined), 6000, 100)
    await sleep(1500)
    const calls = turnsOf(fake!, 'a1').filter((t) => t.text.includes('the paused turn'))
    assert.is(calls.length, 2, 'the paused owner and the new one each called the model')
    const committed = await pg.sql(`SELECT count(*) FROM hookgate_logs WHERE log = 'a1/main' AND record->>'type' = 'turn' AND record::jsonb->'events' ? 'event:${runId}'`, url)
    assert.is(committed, '1', 'exactly one turn that read the wake was committed')
    assert.is(await pg.sql(`SELECT status FROM hookgate_runs WHERE id = '${runId}'`, url), 'succeeded')
    // and the resumed runtime still serves
    assert.is((await post(owner.origin, '/hooks/wake', TOKEN, { text: 'still here', agentId: 'a2' })).status, 200)
    const exits = await h.stopAll()
    assert.ok(Object.values(exits).every((e) => e === 0), JSON.stringify(exits) + h.stderr().slice(-3000))
  })

  heartbeat.run()
}
