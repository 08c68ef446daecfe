// Regression: a heartbeat took the events out of the queue and then failed to write its turn
// record, so the wakes it had read were never settled and stayed queued forever. Now a turn that
// cannot be recorded fails its runs, with the reason.
//
// store: file only — MainSession alone over the file store's session journal; on PostgreSQL a session
// needs the ownership the engine gives it (test/runtime/store/postgres/sessions.test.ts).
import { FileStore } from '../../../runtime/store/file/index.js'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { MainSession } from '../../../runtime/agents/session.js'
import { scratchDir } from '../../helpers/paths.js'

const turn = suite('a heartbeat turn whose record cannot be written')

turn('fails the wakes it read, saying the turn could not be recorded', async () => {
  const settled: Array<{ ids: string[]; error?: string }> = []
  const session = MainSession.open('main', FileStore.open(scratchDir(), { fsync: false }), {
    runHeartbeat: async () => 'ok',
    settleWakes: async (ids, error) => { settled.push({ ids, ...(error ? { error } : {}) }) },
  })
  session.enqueue({ type: 'event', id: 'event:r1', runId: 'r1', text: 'one', external: true, source: 'hook', at: '2026-01-01T00:00:00.000Z' })
  session.enqueue({ type: 'event', id: 'event:r2', runId: 'r2', text: 'two', external: true, source: 'hook', at: '2026-01-01T00:00:00.000Z' })
  await session.journal.close() // every later append rejects
  await session.heartbeat()
  assert.equal(settled.map((s) => s.ids), [['r1', 'r2']])
  assert.match(settled[0]!.error ?? '', 'could not be recorded')
  assert.is(session.pending.length, 0)
})

turn('settles the wakes as succeeded when the record is written', async () => {
  const settled: Array<{ ids: string[]; error?: string }> = []
  const session = MainSession.open('main', FileStore.open(scratchDir(), { fsync: false }), {
    runHeartbeat: async () => 'x'.repeat(3 * 1024 * 1024),
    settleWakes: async (ids, error) => { settled.push({ ids, ...(error ? { error } : {}) }) },
  })
  session.enqueue({ type: 'event', id: 'event:r1', runId: 'r1', text: 'one', external: true, source: 'hook', at: '2026-01-01T00:00:00.000Z' })
  await session.heartbeat()
  assert.equal(settled, [{ ids: ['r1'] }])
  await session.close()
})

turn.run()
