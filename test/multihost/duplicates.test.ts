// Scenario 2 of the scale-out design (docs: design/scale-out.md §7), issue 17: a duplicate storm.
// Three `hookgate serve` runtimes on one PostgreSQL; one Idempotency-Key and one body sent 100
// times at once, round-robin over the three. Exactly one run is started for the key, and every
// caller is told about that run with the same answer; the key with another body is a 409 on
// every host, whether that host started the run or only heard of it through the database.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startHosts, Sender, type Hosts } from '../helpers/hosts.js'
import { startPostgres } from '../helpers/pg.js'
import { setTestToken } from '../runtime/http/harness.js'

const TOKEN = setTestToken()
const DUPLICATES = 100
const KEY = 'order-4711'
const pg = await startPostgres()
const storm = suite('duplicate storm across three runtimes')

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  let url: string
  let hosts: Hosts | undefined
  let sender: Sender
  storm.before(async () => {
    url = await pg.createDatabase('storm')
    hosts = await startHosts({ storeUrl: url, count: 3 })
    sender = new Sender(() => hosts!.live(), { token: TOKEN, connections: DUPLICATES })
  })
  // Whatever failed, no runtime and no postmaster outlives the file.
  storm.after(async () => {
    hosts?.killAll()
    await sender?.close()
    await pg.destroy()
  })

  storm('100 concurrent requests with one Idempotency-Key over three hosts start one run, and every answer is the same', async () => {
    const body = { message: 'charge order 4711', deliver: false }

    const outcomes = await Promise.all(Array.from({ length: DUPLICATES }, () => sender.post('/hooks/agent', body, KEY)))

    const byHost = new Set(sender.attempts.map((a) => a.host))
    assert.is(byHost.size, 3, 'the requests reached all three hosts')
    assert.equal(new Set(outcomes.map((o) => o.status)), new Set([202]), `statuses: ${outcomes.map((o) => o.status).join(' ')}`)
    const runIds = new Set(outcomes.map((o) => o.body.runId))
    assert.is(runIds.size, 1, `one run for one key, got ${[...runIds].join(', ')}`)
    // The same body (runId, correlationId, sessionKey…) to every caller; only the replay header
    // (idempotent-replayed: true) tells the first answer from the others.
    for (const o of outcomes) assert.equal(o.body, outcomes[0]!.body, `host ${o.host} answered differently`)
    const fresh = outcomes.filter((o) => o.headers['idempotent-replayed'] !== 'true')
    assert.ok(fresh.length <= 1, `${fresh.length} answers say they started the run`)
    assert.ok(sender.attempts.every((a) => a.status === 202), `every attempt answered at once: ${JSON.stringify(sender.attempts.filter((a) => a.status !== 202))}`)

    const [runId] = runIds
    assert.is(await pg.sql(`SELECT string_agg(id, ',') FROM hookgate_runs WHERE row->'idempotency'->>'key' = '${KEY}'`, url), runId)
    assert.is(await pg.sql(`SELECT run_id FROM hookgate_idempotency WHERE key = '${KEY}'`, url), runId)
    assert.is(await pg.sql("SELECT count(*) FROM hookgate_runs WHERE definition_id = 'agent'", url), '1')
  })

  storm('the same key with another body is a 409 idempotency_key_reused from every host', async () => {
    const other = JSON.stringify({ message: 'charge order 4712', deliver: false })
    for (const host of hosts!.live()) {
      const reply = await sender.once(host, '/hooks/agent', other, KEY)
      assert.ok(reply, `host ${host.name} did not answer`)
      assert.is(reply.status, 409, `host ${host.name}: ${JSON.stringify(reply.body)}`)
      assert.is(reply.body.code, 'idempotency_key_reused', `host ${host.name}`)
    }
    assert.is(await pg.sql("SELECT count(*) FROM hookgate_runs WHERE definition_id = 'agent'", url), '1', 'the refusals started nothing')
    const exits = await hosts!.stopAll()
    assert.equal(exits, { a: 0, b: 0, c: 0 }, hosts!.stderr())
  })

  storm.run()
}
