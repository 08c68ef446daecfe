// The run store's side of notify policies: the subscription the notifier hears changes on, and the
// notifications recorded on a row (durable, folded back, bounded, never racing a status change).
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import { NOTIFICATIONS_MAX, RunStore, type NewRun, type RunNotification, type RunRow } from '../../../runtime/store/file/runs.js'
import { tempDir } from '../../helpers/paths.js'

const scratch = tempDir('hookgate-run-notes-')
const freshDir = () => mkdtempSync(join(scratch, 'case-'))
const newRun = (id: string): NewRun => ({ id, definitionKind: 'trigger', definitionId: 'trigger:main:x', correlationId: `c-${id}`, action: 'agent' })
const note = (state: RunNotification['state'], extra: Partial<RunNotification> = {}): RunNotification => ({ at: '2026-01-01T00:00:00.000Z', state, channel: 'ops', ok: true, attempts: 1, ...extra })

const subscribe = suite('RunStore.subscribe')

subscribe('tells every created run and status change once it is on disk, in order', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir)
  const heard: string[] = []
  store.subscribe((row) => {
    heard.push(`${row.id}:${row.status}`)
    assert.ok(RunStore.readRows(dir).some((r) => r.id === row.id && r.status === row.status), 'the change is on disk before it is told')
  })
  await store.create(newRun('a'))
  await store.create(newRun('w'))
  await store.transition('a', 'running')
  await store.transition('a', 'succeeded', { result: 'ok' })
  await store.settle(['w'], 'succeeded')
  assert.equal(heard, ['a:queued', 'w:queued', 'a:running', 'a:succeeded', 'w:succeeded'])
  await store.close()
})

subscribe('a listener that throws changes nothing, and one that unsubscribed hears nothing more', async () => {
  const store = RunStore.open(freshDir())
  const heard: string[] = []
  store.subscribe(() => { throw new Error('listener bug') })
  const stop = store.subscribe((row) => heard.push(row.status))
  const row = await store.create(newRun('a'))
  assert.is(row.status, 'queued')
  stop()
  await store.transition('a', 'running')
  assert.equal(heard, ['queued'])
  await store.close()
})

const record = suite('RunStore.recordNotification')

record('is durable and folds back onto the row after a restart', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir)
  await store.create(newRun('a'))
  await store.recordNotification('a', note('queued'))
  await store.transition('a', 'running')
  await store.recordNotification('a', note('running', { ok: false, attempts: 3, error: 'webhook channel "ops" answered 503\nsecond line' }))
  assert.equal(store.get('a')!.notifications!.map((n) => n.state), ['queued', 'running'])
  await store.close()
  const again = RunStore.open(dir)
  const row = again.get('a')!
  assert.equal(row.notifications, [note('queued'), note('running', { ok: false, attempts: 3, error: 'webhook channel "ops" answered 503' })])
  assert.equal(RunStore.readRows(dir)[0]!.notifications, row.notifications)
  assert.is(again.recovery.unreadable, 0)
  await again.close()
})

record('a row keeps only the newest notifications', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir)
  await store.create(newRun('a'))
  for (let i = 0; i < NOTIFICATIONS_MAX + 5; i++) await store.recordNotification('a', note('queued', { attempts: i }))
  const kept = store.get('a')!.notifications!
  assert.is(kept.length, NOTIFICATIONS_MAX)
  assert.is(kept[0]!.attempts, 5)
  await store.close()
  assert.is(RunStore.readRows(dir)[0]!.notifications!.length, NOTIFICATIONS_MAX)
})

record('a notification written while a status change is in flight is kept beside it (neither write loses the other)', async () => {
  const store = RunStore.open(freshDir())
  await store.create(newRun('a'))
  const noted = store.recordNotification('a', note('queued'))
  const moved = store.transition('a', 'running')
  await Promise.all([moved, noted])
  let row: RunRow = store.get('a')!
  assert.is(row.status, 'running')
  assert.is(row.notifications?.length, 1, 'the status change started before the notification was applied')
  const finished = store.transition('a', 'succeeded')
  const notedAgain = store.recordNotification('a', note('running'))
  await Promise.all([finished, notedAgain])
  row = store.get('a')!
  assert.is(row.status, 'succeeded')
  assert.is(row.notifications?.length, 2)
  await store.close()
})

subscribe.run()
record.run()
