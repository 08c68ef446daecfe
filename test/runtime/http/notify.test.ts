// Notify policies through the real server: Trigger definitions with `notify: silent | done |
// state` send exactly the notifications they should to a local Standard Webhooks receiver, a
// channel that fails is retried as a delivery is, and every outcome is recorded on the run's row
// without ever changing how the run ended.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeReceiver, type FakeReceiver, type RecordedRequest } from '../../fakes/channels.js'
import { compileProject, post, rowOf, runReaches, serveProject, setTestToken, until, type Harness } from './harness.js'
import { hookgate } from '../../cli/cli-helpers.js'
import { storeArgs } from '../../helpers/stores.js'

const token = setTestToken()
const receiver = await startFakeReceiver(null)
const flaky = await startFakeReceiver(null)
const dead = await startFakeReceiver(null)
process.env.NOTIFY_URL = receiver.url
process.env.FLAKY_URL = flaky.url
process.env.DEAD_URL = dead.url

const trigger = (name: string, notify: string, extra = '') => `
      - name: ${name}
        path: ${name}
        target: agent
        prompt: "run {{payload.n}}"
        channel: notes
        notify: ${notify}${extra}`

const CONFIG = `
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
channels:
  - id: notes
    type: webhook
    url: \${NOTIFY_URL}
    maxAttempts: 1
  - id: flaky
    type: webhook
    url: \${FLAKY_URL}
    maxAttempts: 5
  - id: dead
    type: webhook
    url: \${DEAD_URL}
    maxAttempts: 3
agents:
  - id: main
    default: true
    model: builtin/echo
    heartbeat: { every: "off" }
    triggers:${trigger('quiet', 'silent')}${trigger('finished', 'done')}${trigger('every-state', 'state')}
      - name: flaky
        path: flaky
        target: agent
        prompt: "flaky {{payload.n}}"
        channel: flaky
        notify: done
      - name: dead
        path: dead
        target: agent
        prompt: "dead {{payload.n}}"
        channel: dead
        notify: done
      - name: poke
        path: poke
        target: wake
        prompt: "poke {{payload.n}}"
        channel: notes
        notify: state
`

const project = await compileProject(CONFIG)
const h: Harness = await serveProject(project)

async function start(path: string, n: number): Promise<string> {
  const r = await post(h.origin, `/hooks/${path}`, token, { n })
  assert.ok(r.status === 202 || r.status === 200, `${path}: ${r.status} ${r.text}`)
  return r.json.runId as string
}

/** What `fake` received about run `runId`, in arrival order. */
function toldAbout(fake: FakeReceiver, runId: string): RecordedRequest[] {
  return fake.requests.filter((r) => r.json?.data?.runId === runId)
}

/** Waits until the run's row on disk has `n` notifications; returns the row. */
async function notified(runId: string, n: number) {
  const has = (await rowOf(h.stateDir, runId))?.notifications?.length ?? 0
  return until(`run ${runId} to record ${n} notification(s) (has ${has})`, async () => {
    const row = (await rowOf(h.stateDir, runId))
    return row && (row.notifications?.length ?? 0) >= n ? row : undefined
  }, 6000)
}

const policies = suite('a trigger notify policy')

policies('silent sends nothing about its runs', async () => {
  const quiet = await start('quiet', 1)
  await runReaches(h.stateDir, quiet, 'succeeded')
  // A later run's notification has arrived: the silent run's, had there been one, came before it.
  const later = await start('finished', 2)
  await notified(later, 1)
  assert.is(toldAbout(receiver, quiet).length, 0)
  assert.is((await rowOf(h.stateDir, quiet))!.notifications, undefined)
})

policies('done sends exactly one notification, with the final status', async () => {
  const runId = await start('finished', 3)
  const row = await notified(runId, 1)
  assert.is(row.status, 'succeeded')
  const told = toldAbout(receiver, runId)
  assert.is(told.length, 1)
  assert.is(told[0]!.json.type, 'run.status')
  assert.is(told[0]!.json.data.status, 'succeeded')
  assert.is(told[0]!.json.data.definitionKind, 'trigger')
  assert.match(told[0]!.json.data.text, 'is succeeded')
  assert.equal(row.notifications!.map((n) => [n.state, n.channel, n.ok, n.attempts]), [['succeeded', 'notes', true, 1]])
})

policies('state sends one notification per state change, in order', async () => {
  const runId = await start('every-state', 4)
  const row = await notified(runId, 3)
  const told = toldAbout(receiver, runId)
  assert.equal(told.map((r) => r.json.data.status), ['queued', 'running', 'succeeded'])
  assert.equal(row.notifications!.map((n) => n.state), ['queued', 'running', 'succeeded'])
  assert.is(new Set(told.map((r) => r.headers['webhook-id'])).size, 3, 'each state has its own message id, so a receiver that drops repeats keeps all three')
})

policies('state on a wake trigger tells queued and the status the heartbeat settles it with', async () => {
  const runId = await start('poke', 5)
  const row = await notified(runId, 2)
  assert.is(row.status, 'succeeded')
  assert.equal(toldAbout(receiver, runId).map((r) => r.json.data.status), ['queued', 'succeeded'])
})

const failures = suite('a notification that cannot be delivered')

failures('a channel that fails twice then succeeds is retried, and the row records the attempts', async () => {
  flaky.queue({ status: 503, retryAfter: 0 }, { status: 503, retryAfter: 0 })
  const runId = await start('flaky', 6)
  const row = await notified(runId, 1)
  assert.is(toldAbout(flaky, runId).length, 3)
  const note = row.notifications![0]!
  assert.equal([note.state, note.channel, note.ok, note.attempts, note.error], ['succeeded', 'flaky', true, 3, undefined])
})

failures('a channel that never succeeds is recorded as failed on the row, and the run still succeeded', async () => {
  dead.queue(...Array.from({ length: 3 }, () => ({ status: 503, retryAfter: 0 })))
  const runId = await start('dead', 7)
  const row = await notified(runId, 1)
  assert.is(row.status, 'succeeded', 'a notification never fails its run')
  assert.is(row.error, undefined)
  const note = row.notifications![0]!
  assert.equal([note.state, note.channel, note.ok, note.attempts], ['succeeded', 'dead', false, 3])
  assert.match(note.error ?? '', 'answered 503')
  assert.not.match(note.error ?? '', dead.url, 'the channel URL (a credential) is not in the record')
})

failures('hookgate runs --json lists the notifications of each row', async () => {
  const runId = await start('finished', 8)
  await notified(runId, 1)
  const out = await hookgate(['runs', '--state', h.stateDir, ...storeArgs(h.stateDir), '--json'], { cwd: h.dir })
  assert.is(out.code, 0, out.stderr)
  const row = (JSON.parse(out.stdout) as Array<{ id: string; notifications?: unknown[] }>).find((r) => r.id === runId)
  assert.is(row?.notifications?.length, 1)
})

failures.after(async () => {
  await h.close()
  await Promise.all([receiver.close(), flaky.close(), dead.close()])
})

policies.run()
failures.run()
