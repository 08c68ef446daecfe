// The main session and its heartbeat: queued events, coalesced `now` wakes, collapsed duplicates,
// the bounded queue, and turns on one session key running one at a time.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI } from '../../fakes/openai.js'
import { sessionLogName } from '../../../runtime/store/store.js'
import { readLog } from '../../helpers/history.js'
import { divergesOnPostgres, WAKES_BEFORE_SESSION } from '../../helpers/stores.js'
import { compileProject, post, runReaches, serveProject, setTestToken, sleep, until, type Harness } from '../http/harness.js'

const token = setTestToken()
const model = await startFakeOpenAI()

const config = (agent: string, extra = '') => `
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  allowRequestSessionKey: true
${extra}
providers:
  - { id: fake, type: openai, baseUrl: ${model.url}, maxRetries: 0 }
agents:
  - ${agent}
`
const turnsOf = async (h: Harness) => (await readLog<{ type: string; events: string[] }>(h.stateDir, sessionLogName('main'))).filter((r) => r.type === 'turn')
const wake = (h: Harness, text: string, mode: string) => post(h.origin, '/hooks/wake', token, { text, mode }).then((r) => { assert.is(r.status, 200); return r.json.runId as string })
const heartbeatRequests = () => model.requests.filter((r) => String(r.body?.messages?.[0]?.content ?? '').startsWith('Heartbeat'))

const hb = suite('the main session heartbeat')

hb('a next-heartbeat wake stays queued until the periodic heartbeat reads it', async () => {
  const h = await serveProject(await compileProject(config('{ id: main, model: fake/m, heartbeat: { every: 3s } }')))
  try {
    // The first wake finds the timer at some point of its period; the one after it is sent as a
    // heartbeat has just read the first, so a whole period lies ahead of it, whatever the store's
    // read latency or the machine's load (the check does not depend on a short sleep).
    const first = await wake(h, 'first event', 'next-heartbeat')
    await runReaches(h.stateDir, first, 'succeeded', 15_000)
    model.requests.length = 0
    const runId = await wake(h, 'disk almost full', 'next-heartbeat')
    const early = await runReaches(h.stateDir, runId, 'queued', 2000)
    assert.is(early.status, 'queued')
    assert.is(heartbeatRequests().length, 0, 'no turn ran for the wake itself')
    await runReaches(h.stateDir, runId, 'succeeded', 15_000)
    assert.match(String(heartbeatRequests().at(-1)?.body.messages[1].content), 'disk almost full')
  } finally {
    await h.close()
  }
})

hb('now wakes arriving together coalesce into fewer turns, and every wake run succeeds', async () => {
  model.setDefault({ delayMs: 150 })
  const h = await serveProject(await compileProject(config('{ id: main, model: fake/m, heartbeat: { every: "off" } }')))
  try {
    const ids = await Promise.all(Array.from({ length: 10 }, (_, i) => wake(h, `event ${i}`, 'now')))
    for (const id of ids) await runReaches(h.stateDir, id, 'succeeded', 5000)
    const turns = await turnsOf(h)
    assert.ok(turns.length < 10, `${turns.length} turns for 10 wakes`)
    assert.is(turns.flatMap((t) => t.events).length, 10, 'each event was read exactly once')
  } finally {
    model.setDefault('ok')
    await h.close()
  }
})

divergesOnPostgres(hb, WAKES_BEFORE_SESSION)('identical consecutive events are read once', async () => {
  const h = await serveProject(await compileProject(config('{ id: main, model: fake/m, heartbeat: { every: "off" } }')))
  try {
    model.requests.length = 0
    await wake(h, 'the same alert', 'next-heartbeat')
    await wake(h, 'the same alert', 'next-heartbeat')
    const last = await wake(h, 'the same alert', 'now')
    await runReaches(h.stateDir, last, 'succeeded')
    const prompt = String(heartbeatRequests().at(-1)?.body.messages[1].content)
    assert.is(prompt.split('the same alert').length - 1, 1, prompt)
    assert.is((await turnsOf(h)).at(-1)!.events.length, 3)
  } finally {
    await h.close()
  }
})

divergesOnPostgres(hb, WAKES_BEFORE_SESSION)('the queue is bounded: the oldest events are dropped first and their runs say so', async () => {
  const h = await serveProject(await compileProject(config('{ id: main, model: fake/m, heartbeat: { every: "off", maxQueuedEvents: 3 } }')))
  try {
    const ids: string[] = []
    for (let i = 0; i < 5; i++) ids.push(await wake(h, `queued ${i}`, 'next-heartbeat'))
    const first = await runReaches(h.stateDir, ids[0]!, 'failed')
    await runReaches(h.stateDir, ids[1]!, 'failed')
    assert.match(first.error ?? '', 'queue was full')
    await runReaches(h.stateDir, ids[4]!, 'queued')
  } finally {
    await h.close()
  }
})

divergesOnPostgres(hb, WAKES_BEFORE_SESSION)('a wake that displaces the oldest queued event is answered after its own commit, not after the record settling the displaced run', async () => {
  const h = await serveProject(await compileProject(config('{ id: main, model: fake/m, heartbeat: { every: "off", maxQueuedEvents: 1 } }')))
  const runs = h.service.engine.runs
  const settle = runs.settle.bind(runs)
  let release!: () => void
  const held = new Promise<void>((r) => { release = r })
  const settled: string[][] = []
  // the displaced run's record is held back: a wake that waited for it would never be answered
  runs.settle = async (ids, ...rest) => { settled.push([...ids]); await held; return settle(ids, ...rest) }
  try {
    const first = await wake(h, 'first', 'next-heartbeat')
    const second = await Promise.race([wake(h, 'second', 'next-heartbeat'), new Promise<string>((_, no) => setTimeout(() => no(new Error('the wake waited for the displaced run\'s record')), 3000))])
    assert.ok(second)
    assert.equal(settled, [[first]])
    release()
    const dropped = await runReaches(h.stateDir, first, 'failed')
    assert.match(dropped.error ?? '', 'queue was full')
  } finally {
    release()
    runs.settle = settle
    await h.close()
  }
})

hb.run()

const sessions = suite('isolated turns and their session keys')

sessions('turns on the same session key run one at a time; different keys run in parallel', async () => {
  model.setDefault({ delayMs: 300 })
  const h = await serveProject(await compileProject(config('{ id: main, model: fake/m, heartbeat: { every: "off" } }', '  allowedSessionKeyPrefixes: ["hook:"]')))
  try {
    model.requests.length = 0
    const send = (message: string, sessionKey: string) => post(h.origin, '/hooks/agent', token, { message, sessionKey, deliver: false, wakeMode: 'next-heartbeat' }).then((r) => r.json.runId as string)
    const same = await Promise.all([send('same-1', 'hook:same'), send('same-2', 'hook:same')])
    for (const id of same) await runReaches(h.stateDir, id, 'succeeded', 5000)
    const at = (text: string) => model.requests.find((r) => JSON.stringify(r.body).includes(text))!.at
    assert.ok(Math.abs(at('same-2') - at('same-1')) >= 250, 'the second turn on the key started before the first answered')

    // A long turn: the second key's turn must start while the first is still waiting for its answer.
    model.setDefault({ delayMs: 1500 })
    const apart = await Promise.all([send('apart-1', 'hook:a'), send('apart-2', 'hook:b')])
    for (const id of apart) await runReaches(h.stateDir, id, 'succeeded', 6000)
    assert.ok(Math.abs(at('apart-2') - at('apart-1')) < 1500, 'turns on different keys did not overlap')
  } finally {
    model.setDefault('ok')
    await h.close()
  }
})

sessions.after(() => model.close())
sessions.run()
