// Issue 23: isolated agent turns with the same explicit sessionKey overlapped when they ran on two
// runtimes (each ordered only its own). Two `hookgate serve` runtimes on one PostgreSQL take agent
// calls under one session key, spread over both; the fake model logs when each call came and
// takes TURN_MS to answer: no call under that key begins before the one before it was answered,
// both runtimes ran some of them, and turns under other keys still run side by side.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI, type FakeApi } from '../fakes/openai.js'
import { scenarioYaml, startHosts, type Hosts } from '../helpers/hosts.js'
import { startPostgres } from '../helpers/pg.js'
import { post, setTestToken, until } from '../runtime/http/harness.js'

const TOKEN = setTestToken()
const TURN_MS = 250
const CALLS = 12
const pg = await startPostgres()
const keys = suite('one isolated turn per session key across runtimes')

const config = (fake: FakeApi) => scenarioYaml({
  hostTtlSeconds: 2, sweepSeconds: 0.5, server: 'concurrency: 8', fakeUrl: fake.url,
  agents: '  - { id: main, default: true, model: fake/gpt-test, heartbeat: { every: "off" } }',
}).replace('hooks:\n  enabled: true\n', 'hooks:\n  enabled: true\n  allowRequestSessionKey: true\n')

/** When each isolated turn's model call whose prompt holds `marker` came, in order (not the main session's turns, which read summaries). */
function callsWith(fake: FakeApi, marker: string): number[] {
  return fake.requests.filter((r) => r.body?.messages?.length === 1 && String(r.body.messages[0].content ?? '').includes(marker)).map((r) => r.at).sort((a, b) => a - b)
}

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  let hosts: Hosts | undefined
  let fake: FakeApi | undefined
  keys.after(async () => {
    hosts?.killAll()
    await fake?.close()
    await pg.destroy()
  })

  keys(`${CALLS} agent calls under one session key, sent to two runtimes at once, run one at a time; other keys run beside them`, async () => {
    const url = await pg.createDatabase('session_keys')
    fake = await startFakeOpenAI()
    fake.setDefault({ delayMs: TURN_MS })
    hosts = await startHosts({ storeUrl: url, count: 2, yaml: config(fake), env: { HOOKGATE_STORE_URL: url, FAKE_OPENAI_KEY: 'sk-test' } })
    const [a, b] = hosts.all as [typeof hosts.all[0], typeof hosts.all[0]]
    const shared = await Promise.all(Array.from({ length: CALLS }, (_, i) =>
      post((i % 2 === 0 ? a : b).origin, '/hooks/agent', TOKEN, { message: `shared-key call ${i}`, sessionKey: 'hook:shared', deliver: false })))
    // two keys of their own, one on each runtime: not held back by the shared one
    const own = await Promise.all([a, b].map((h, i) => post(h.origin, '/hooks/agent', TOKEN, { message: `own-key call ${i}`, sessionKey: `hook:own-${i}`, deliver: false })))
    for (const r of [...shared, ...own]) assert.is(r.status, 202, r.text)
    const ids = [...shared, ...own].map((r) => r.json.runId as string)
    const unfinished = () => pg.sql(`SELECT count(*) FROM hookgate_runs WHERE id IN (${ids.map((id) => `'${id}'`).join(',')}) AND status <> 'succeeded'`, url)
    await until('every call to succeed', async () => ((await unfinished()) === '0' ? true : undefined), 60_000, 200)

    const calls = callsWith(fake, 'shared-key call')
    assert.is(calls.length, CALLS)
    for (let i = 1; i < calls.length; i++) {
      assert.ok(calls[i]! - calls[i - 1]! >= TURN_MS - 2, `call ${i} under the shared key began ${calls[i]! - calls[i - 1]!} ms after the one before, which takes ${TURN_MS} ms`)
    }
    const owners = await pg.sql(`SELECT count(DISTINCT owner) FROM hookgate_runs WHERE id IN (${shared.map((r) => `'${r.json.runId}'`).join(',')})`, url)
    assert.is(owners, '2', 'both runtimes ran turns under the shared key')
    // the two own keys' calls each overlap a shared-key call (they did not queue behind that key)
    const sharedSpan = [calls[0]!, calls.at(-1)! + TURN_MS]
    for (const marker of ['own-key call 0', 'own-key call 1']) {
      const [at] = callsWith(fake, marker)
      assert.ok(at !== undefined && at < sharedSpan[1]! - TURN_MS, `${marker} ran while the shared key was busy (${at! - sharedSpan[0]!} ms in)`)
    }
    await until('every lease to be let go', async () => ((await pg.sql('SELECT count(*) FROM hookgate_key_leases', url)) === '0' ? true : undefined), 10_000, 100)
    const exits = await hosts.stopAll()
    assert.ok(Object.values(exits).every((e) => e === 0), JSON.stringify(exits) + hosts.stderr().slice(-3000))
  })

  keys.run()
}
