// The notifier with in-memory fakes for the run store and the channel: which runs it tells about
// (keyed off the row's definition, tasks included), the order it keeps per run, and what stop() does
// with a notification still being sent.
//
// store: none — the notifier over in-memory fakes: the PostgreSQL pass leaves it out.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { BundleConfig, BundleRoute } from '../../../runtime/bundle/format.js'
import type { Deliverer } from '../../../runtime/agents/engine.js'
import { Notifier, type NotifierStore } from '../../../runtime/notify/notifier.js'
import type { RunNotification, RunRow, RunStatus } from '../../../runtime/store/file/runs.js'
import { until } from '../http/harness.js'

class FakeStore implements NotifierStore {
  listener: ((row: RunRow) => void) | null = null
  readonly notes: Array<{ id: string; note: RunNotification }> = []
  subscribe(listener: (row: RunRow) => void): () => void {
    this.listener = listener
    return () => { this.listener = null }
  }
  recordNotification(id: string, note: RunNotification): Promise<void> {
    this.notes.push({ id, note })
    return Promise.resolve()
  }
  change(row: RunRow): void {
    this.listener?.(row)
  }
}

type Sent = Parameters<Deliverer['deliver']>[0]

/** A channel whose deliveries finish when the test says so (or at once when `auto`). */
class FakeChannel implements Deliverer {
  readonly sent: Sent[] = []
  private readonly waiting: Array<{ resolve: () => void; reject: (e: Error) => void }> = []
  constructor(private readonly auto = true) {}
  deliver(d: Sent, signal?: AbortSignal): Promise<{ attempts: number; detail: string }> {
    this.sent.push(d)
    if (this.auto) return Promise.resolve({ attempts: 1, detail: 'fake' })
    return new Promise((resolve, reject) => {
      const cancel = () => reject(Object.assign(new Error('fake channel was cancelled after 1 attempt'), { attempts: 1 }))
      if (signal?.aborted) return cancel()
      signal?.addEventListener('abort', cancel, { once: true })
      this.waiting.push({ resolve: () => resolve({ attempts: 1, detail: 'fake' }), reject })
    })
  }
  finishOne(): void {
    this.waiting.shift()?.resolve()
  }
}

const config = {
  defaultAgentId: 'main',
  agents: [{ id: 'main', delivery: { channel: 'ops', to: null } }],
  tasks: [
    { id: 'task:main:1', agentId: 'main', name: 'nightly', notify: 'state' },
    { id: 'task:main:2', agentId: 'main', name: 'quiet', notify: 'silent' },
  ],
} as unknown as BundleConfig

const routes = [
  { id: 'trigger:main:deploys', agentId: 'main', channel: 'ops', notify: 'done' },
  { id: 'github', agentId: null, channel: 'ops', notify: null },
] as unknown as BundleRoute[]

let clock = 0
function row(id: string, definitionKind: RunRow['definitionKind'], definitionId: string, status: RunStatus): RunRow {
  const at = new Date(Date.UTC(2026, 0, 1) + (clock += 1000)).toISOString()
  return { id, definitionKind, definitionId, correlationId: `c-${id}`, action: 'agent', status, createdAt: at, updatedAt: at, agentId: 'main' }
}

function setup(channel: FakeChannel, lastRoute: { channel: string; to: string | null } | null = null) {
  const store = new FakeStore()
  const notifier = new Notifier({ runs: store, lastRoute: () => lastRoute, now: () => '2026-01-01T00:00:00.000Z' })
  notifier.configure(config, routes, new Map([['ops', channel]]))
  notifier.start()
  return { store, notifier }
}

const targets = suite('Notifier.targetFor')

targets('a task run is told about through its task in the config, once tasks fire', async () => {
  const ops = new FakeChannel()
  const { store, notifier } = setup(ops, { channel: 'ops', to: '#ops' })
  for (const s of ['queued', 'running', 'succeeded'] as const) store.change(row('t1', 'task', 'task:main:1', s))
  store.change(row('t2', 'task', 'task:main:2', 'succeeded'))
  await notifier.stop()
  assert.equal(ops.sent.map((d) => [d.runId, d.event?.status, d.to, d.name]), [['t1', 'queued', '#ops', 'nightly'], ['t1', 'running', '#ops', 'nightly'], ['t1', 'succeeded', '#ops', 'nightly']])
})

targets('a plain mapping (no notify) and an unknown definition are never told about', async () => {
  const ops = new FakeChannel()
  const { store, notifier } = setup(ops)
  store.change(row('h1', 'hook', 'github', 'succeeded'))
  store.change(row('h2', 'hook', 'agent', 'succeeded'))
  store.change(row('h3', 'task', 'task:gone:9', 'succeeded'))
  await notifier.stop()
  assert.is(ops.sent.length, 0)
  assert.is(store.notes.length, 0)
})

targets('done skips the changes before the end', async () => {
  const ops = new FakeChannel()
  const { store, notifier } = setup(ops)
  for (const s of ['queued', 'running', 'timed_out'] as const) store.change(row('d1', 'trigger', 'trigger:main:deploys', s))
  await notifier.stop()
  assert.equal(ops.sent.map((d) => d.event?.status), ['timed_out'])
})

targets('an agent run notifies the channel and rendered to its request carries', async () => {
  const ops = new FakeChannel()
  const { store, notifier } = setup(ops)
  store.change({ ...row('a1', 'trigger', 'trigger:main:deploys', 'succeeded'), request: { channel: 'ops', to: 'C123' } })
  await notifier.stop()
  assert.is(ops.sent[0]?.to, 'C123')
})

targets('a channel that is not configured is recorded as not delivered, with no attempt', async () => {
  const ops = new FakeChannel()
  const { store, notifier } = setup(ops)
  store.change({ ...row('m1', 'trigger', 'trigger:main:deploys', 'failed'), request: { channel: 'gone', to: null } })
  await notifier.stop()
  assert.equal(store.notes.map((n) => [n.note.ok, n.note.attempts, n.note.channel, n.note.error]), [[false, 0, 'gone', 'channel "gone" is not configured']])
})

const order = suite('Notifier queues')

order('a slow notification holds back the same run\'s next one, not the run and not other runs', async () => {
  const ops = new FakeChannel(false)
  const { store, notifier } = setup(ops, { channel: 'ops', to: null })
  store.change(row('s1', 'task', 'task:main:1', 'queued'))
  store.change(row('s1', 'task', 'task:main:1', 'running'))
  store.change(row('s2', 'task', 'task:main:1', 'queued'))
  await until('two deliveries to start', () => (ops.sent.length === 2 ? true : undefined))
  assert.equal(ops.sent.map((d) => `${d.runId}:${d.event?.status}`), ['s1:queued', 's2:queued'], 's1 running waits for s1 queued; s2 does not')
  ops.finishOne()
  await until('s1 running to be sent', () => (ops.sent.length === 3 ? true : undefined))
  assert.is(`${ops.sent[2]!.runId}:${ops.sent[2]!.event?.status}`, 's1:running')
  ops.finishOne()
  ops.finishOne()
  await notifier.stop()
  assert.equal(store.notes.map((n) => `${n.id}:${n.note.state}:${n.note.ok}`), ['s1:queued:true', 's2:queued:true', 's1:running:true'])
})

order('stop cancels what is still being sent after the grace and records it as not delivered', async () => {
  const ops = new FakeChannel(false)
  const { store, notifier } = setup(ops, { channel: 'ops', to: null })
  store.change(row('x1', 'task', 'task:main:1', 'running'))
  await notifier.stop(10)
  assert.is(notifier.pending, 0)
  assert.equal(store.notes.map((n) => [n.note.ok, n.note.error]), [[false, 'fake channel was cancelled after 1 attempt']])
  store.change(row('x1', 'task', 'task:main:1', 'succeeded'))
  assert.is(ops.sent.length, 1, 'a stopped notifier hears no more changes')
})

order('each state change has its own message id', async () => {
  const ops = new FakeChannel()
  const { store, notifier } = setup(ops, { channel: 'ops', to: null })
  store.change(row('q1', 'task', 'task:main:1', 'queued'))
  store.change(row('q1', 'task', 'task:main:1', 'running'))
  store.change(row('q1', 'task', 'task:main:1', 'queued'))
  await notifier.stop()
  assert.is(new Set(ops.sent.map((d) => d.event?.messageId)).size, 3)
})

targets.run()
order.run()
