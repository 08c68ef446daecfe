// Agents' main sessions shared by two runtimes on a real PostgreSQL: one of them owns the session;
// an event queued on the other reaches the owner (with its wish for a turn now), and so does a wake
// accepted there; the owner's turn commits; when its lease runs out the other takes the session over
// with the log as it stands and the wakes no committed turn read, and the first one's late turn is
// refused by the fence. A workflow's wake step is its workflow's row, not a wake: the session's
// owner never claims it, so the workflow goes on whether or not its runtime holds the session.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { rejectionOf } from '../../../helpers/async.js'
import { startPostgres } from '../../../helpers/pg.js'
import { until } from '../../http/harness.js'
import { PgStore } from '../../../../runtime/store/postgres/index.js'
import { RunStoreError, sessionLogName, type RunRow, type SessionHandler } from '../../../../runtime/store/store.js'
import { openHistory } from '../../../../runtime/store/open.js'
import { WorkflowRunner, type WorkflowRequest } from '../../../../runtime/workflows/runner.js'
import type { BundleWorkflow } from '../../../../runtime/bundle/format.js'

const pg = await startPostgres()
const sessions = suite('main sessions shared by several runtimes')

interface Heard { gained: Array<{ records: object[]; wakes: RunRow[] }>; pulled: Array<{ records: object[]; wakes: RunRow[]; now: boolean }>; lost: number; routes: Array<{ channel: string; to: string | null }> }

function listener(): SessionHandler<object> & { heard: Heard } {
  const heard: Heard = { gained: [], pulled: [], lost: 0, routes: [] }
  return {
    heard,
    gained: (_agent, records, wakes) => { heard.gained.push({ records, wakes }) },
    pulled: (_agent, records, wakes, now) => { heard.pulled.push({ records, wakes, now }) },
    lost: () => { heard.lost++ },
    routed: (_agent, route) => { heard.routes.push(route) },
  }
}

/** note (a wake step) → last (an agent step that needs it): the shape that stalled (notify-workflow.test.ts). */
const WAKE_THEN_AGENT: BundleWorkflow = {
  id: 'wake-then-agent',
  steps: [
    { id: 'note', action: 'wake', agentId: null, needs: [], timeoutSeconds: null, render: { text: () => 'noted' } },
    { id: 'last', action: 'agent', agentId: null, needs: ['note'], timeoutSeconds: null, render: { message: () => 'done' } },
  ],
}

const notThisWorkflows = async (): Promise<never> => { throw new Error('not a step of this workflow') }

/**
 * Runs WAKE_THEN_AGENT on `store`'s run log as the engine does (workflow-runs.ts: a step's row moved
 * by the runner; a wake step's event queued in the shared session for its owner, asking for a turn
 * now), calling `afterWakeRow` once the wake step's row is durable and still queued, before the
 * runner moves it on. Resolves with how the run ended: 'finished', or what it was refused with.
 */
async function runWakeThenAgent(store: PgStore, id: string, afterWakeRow: () => Promise<void>): Promise<string> {
  const runner = new WorkflowRunner({
    stepsOf: (parentRunId) => store.runs.children(parentRunId),
    createStep: async (run) => {
      const row = await store.runs.create(run)
      if (run.action === 'wake') await afterWakeRow()
      return row
    },
    moveStep: async (stepId, status, extra) => {
      if (status === 'running' && store.runs.get(stepId)?.status === 'running') await store.runs.transition(stepId, 'queued')
      return store.runs.transition(stepId, status, extra)
    },
    outputOf: (row) => store.runs.output(row),
  }, {
    wake: (agentId, eventId, text, origin) => store.sessions.queue(agentId, { type: 'event', id: eventId, runId: '', text, external: origin.external, source: origin.source, at: new Date().toISOString() } as { id: string }, true),
    agent: async (_agentId, message) => ({ text: `echo: ${message}` }),
    http: notThisWorkflows, transform: notThisWorkflows, deliver: notThisWorkflows,
    sleep: async () => true,
  })
  runner.start(new Map([[WAKE_THEN_AGENT.id, WAKE_THEN_AGENT]]))
  const request: WorkflowRequest = { agentId: 'main', workflow: WAKE_THEN_AGENT.id, name: null, context: { payload: {}, headers: {}, query: {}, path: 'p', now: '' }, source: 'trigger t', external: false }
  const row = await store.runs.create({ id, definitionKind: 'trigger', definitionId: 't', correlationId: `c-${id}`, action: 'workflow', agentId: 'main', request })
  let outcome: string | undefined
  runner.run(row, request).then(() => { outcome = 'finished' }, (err: Error) => { outcome = err.message })
  return until(`workflow ${id} to end`, () => outcome, 10_000)
}

/** The workflow ran on: it succeeded, and so did both steps, the one after the wake step included. */
function assertWentOn(store: PgStore, id: string, outcome: string): void {
  assert.is(outcome, 'finished')
  assert.is(store.runs.get(id)?.status, 'succeeded')
  assert.equal(store.runs.children(id).map((r) => [r.stepId, r.status]), [['note', 'succeeded'], ['last', 'succeeded']])
}

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  sessions.after(async () => { await pg.destroy() })

  sessions('one runtime owns the session; what the other queues reaches it; a paused owner loses it and its late turn is refused', async () => {
    const url = await pg.createDatabase('sessions')
    // a's lease is long (it would renew late); b's short lease keeps b competing every 200 ms
    const a = await PgStore.open(url, { hostTtlMs: 30_000 })
    const b = await PgStore.open(url, { hostTtlMs: 600 })
    try {
      const ha = listener()
      a.sessions.serve(['main'], ha)
      await until('a to own the session', () => (a.sessions.owns('main') ? true : undefined))
      const hb = listener()
      b.sessions.serve(['main'], hb)
      await new Promise((r) => setTimeout(r, 500))
      assert.not.ok(b.sessions.owns('main'), 'one owner')
      assert.is(hb.heard.gained.length, 0)

      // an event and a wake accepted on b reach a
      await b.sessions.queue('main', { type: 'event', id: 'summary:r1', text: 'run r1 finished' } as { id: string }, true)
      const wake = await b.runs.create({ id: 'w1', definitionKind: 'hook', definitionId: 'wake', correlationId: 'c', action: 'wake', agentId: 'main', request: { text: 'deploy', external: true, source: 'hook', now: true } })
      b.runs.release(wake.id)
      await until('a to pull both', () => (ha.heard.pulled.flatMap((p) => [...p.records.map((r) => (r as { id: string }).id), ...p.wakes.map((w) => w.id)]).length === 2 ? true : undefined), 3000)
      assert.ok(ha.heard.pulled.every((p) => p.now), 'both asked for a turn now')
      assert.is(a.runs.get('w1')?.status, 'queued', 'a holds the wake now')
      // a's turn reads both and commits
      await a.sessions.commitTurn('main', { type: 'turn', id: 'turn:1', events: ['summary:r1', 'event:w1'], reply: 'ok' })
      await a.runs.settle(['w1'], 'succeeded')

      // another wake arrives, then a is "paused": its lease runs out and b takes the session
      const w2 = await b.runs.create({ id: 'w2', definitionKind: 'hook', definitionId: 'wake', correlationId: 'c', action: 'wake', agentId: 'main', request: { text: 'again', external: true, source: 'hook' } })
      b.runs.release(w2.id)
      await until('a to pull w2', () => (a.runs.get('w2') ? true : undefined), 3000)
      await a.db.query("UPDATE hookgate_session_leases SET expires_at = now() - interval '1 second' WHERE agent_id = 'main'")
      await until('b to take the session over', () => (hb.heard.gained.length === 1 ? true : undefined), 3000)
      const gained = hb.heard.gained[0]!
      assert.ok(gained.records.some((r) => (r as { id?: string }).id === 'turn:1'), 'b reads the log with a\'s committed turn')
      assert.ok(gained.records.some((r) => (r as { id?: string }).id === 'summary:r1'), 'and the event it read')
      assert.equal(gained.wakes.map((w) => w.id), ['w2'], 'and claims the wake no committed turn read')
      assert.is(b.runs.get('w2')?.status, 'queued')

      // a's turn over w2, late: refused by the fence; a forgets the session
      const late = await rejectionOf(a.sessions.commitTurn('main', { type: 'turn', id: 'turn:late', events: ['event:w2'], reply: 'late' }))
      assert.ok(late instanceof RunStoreError && late.code === 'fenced_out', String(late))
      assert.is(ha.heard.lost, 1)
      assert.not.ok(a.sessions.owns('main'))
      // and its status change of the wake b took is refused too
      const settled = await rejectionOf(a.runs.transition('w2', 'succeeded'))
      assert.ok(settled instanceof RunStoreError && settled.code === 'fenced_out', String(settled))
      const turns = await a.db.query<{ n: string }>("SELECT count(*)::text AS n FROM hookgate_logs WHERE log = 'main/main' AND record->>'type' = 'turn'")
      assert.is(turns.rows[0]!.n, '1', 'the late turn left no record')
      await b.sessions.commitTurn('main', { type: 'turn', id: 'turn:2', events: ['event:w2'], reply: 'ok' })
    } finally {
      await a.close()
      await b.close()
    }
  })

  sessions('a runtime that stops cleanly hands its sessions over at once', async () => {
    const url = await pg.createDatabase('handover')
    const a = await PgStore.open(url, { hostTtlMs: 30_000 })
    const b = await PgStore.open(url, { hostTtlMs: 30_000 })
    try {
      a.sessions.serve(['main'], listener())
      await until('a to own the session', () => (a.sessions.owns('main') ? true : undefined))
      const hb = listener()
      b.sessions.serve(['main'], hb)
      await a.close()
      const started = Date.now()
      await until('b to own the session', () => (b.sessions.owns('main') ? true : undefined), 3000)
      assert.ok(Date.now() - started < 2000, 'well before a 30 s lease would have run out')
    } finally {
      await b.close()
    }
  })

  // Seen under load (two CPU-bound processes beside three runtimes): one wake of 2,000 stayed queued,
  // owned by the session's owner, which had released it (its own view of its lease ran out a
  // moment early, so it left the wake for "the owner" to claim, and the owner claims only others').
  sessions('a wake its session\'s owner released (counting itself not the owner for a moment) is still pulled by it', async () => {
    const url = await pg.createDatabase('released_own')
    const a = await PgStore.open(url, { hostTtlMs: 3000 })
    try {
      const ha = listener()
      a.sessions.serve(['main'], ha)
      await until('a to own the session', () => (a.sessions.owns('main') ? true : undefined), 3000)
      // what the engine does with a wake it accepts while it does not count itself the owner
      const wake = await a.runs.create({ id: 'w-own', definitionKind: 'hook', definitionId: 'wake', correlationId: 'c', action: 'wake', agentId: 'main', request: { text: 'mine', external: true, source: 'hook', now: true } })
      a.runs.release(wake.id)
      assert.is(a.runs.get('w-own'), undefined, 'released')
      await until('a to pull its own released wake', () => (ha.heard.pulled.some((p) => p.wakes.some((w) => w.id === 'w-own')) ? true : undefined), 5000)
      assert.is(a.runs.get('w-own')?.status, 'queued', 'a holds it again, under the claim\'s fence')
      await a.runs.settle(['w-own'], 'succeeded')
      assert.is(await pg.sql("SELECT status FROM hookgate_runs WHERE id = 'w-own'", url), 'succeeded')
    } finally {
      await a.close()
    }
  })

  sessions('a delivery route set on one runtime reaches the others (channel: last)', async () => {
    const url = await pg.createDatabase('routes')
    const a = await PgStore.open(url, { hostTtlMs: 3000 })
    const b = await PgStore.open(url, { hostTtlMs: 3000 })
    try {
      const ha = listener()
      a.sessions.serve(['main'], ha)
      b.sessions.serve(['main'], listener())
      await b.sessions.setRoute('main', { channel: 'ops', to: '#deploys' })
      await until('a to hear of the route', () => (ha.heard.routes.length > 0 ? true : undefined), 3000)
      assert.equal(ha.heard.routes, [{ channel: 'ops', to: '#deploys' }])
      await b.sessions.setRoute('main', { channel: 'ops', to: '#incidents' })
      await until('a to hear of the new route', () => (ha.heard.routes.length > 1 ? true : undefined), 3000)
      assert.equal(ha.heard.routes[1], { channel: 'ops', to: '#incidents' })
    } finally {
      await a.close()
      await b.close()
    }
  })

  sessions('an event queued for a session is in the history\'s view of its log once queue resolves, before its owner moves it there, and once after', async () => {
    const url = await pg.createDatabase('sessions_history')
    const a = await PgStore.open(url, { hostTtlMs: 600 })
    const history = openHistory('unused-state-dir', url)
    try {
      // no runtime serves the session yet: the event waits in the inbox
      await a.sessions.queue('main', { type: 'event', id: 'summary:r9', text: 'run r9 finished' } as { id: string }, false)
      const ids = async (): Promise<string[]> => (await history.logRecords<{ id?: string }>(sessionLogName('main'))).map((r) => r.id ?? '?')
      assert.equal(await ids(), ['summary:r9'])
      const ha = listener()
      a.sessions.serve(['main'], ha)
      await until('a to gain the session with the event', () => (ha.heard.gained.some((g) => g.records.length === 1) ? true : undefined), 5000)
      assert.equal(await ids(), ['summary:r9'], 'moved into the log, read once')
    } finally {
      await history.close()
      await a.close()
    }
  })

  // Seen under load (notify-workflow.test.ts on PostgreSQL): the runtime gained its agent's session
  // while a workflow's wake step row was queued, claimed it as a wake (the session's to settle), and
  // so fenced the runner out of its own step: the workflow, answered 202, stayed running for ever.
  sessions('a wake step whose row is queued when its runtime gains the session is the workflow\'s: the session is not handed it as a wake, and the next step runs', async () => {
    const url = await pg.createDatabase('wake_step_gain')
    const a = await PgStore.open(url, { hostTtlMs: 3000 })
    try {
      const ha = listener()
      const outcome = await runWakeThenAgent(a, 'wf-gain', async () => {
        a.sessions.serve(['main'], ha)
        await until('a to gain the session', () => (ha.heard.gained.length > 0 ? true : undefined), 5000)
      })
      assertWentOn(a, 'wf-gain', outcome)
      const heard = [...ha.heard.gained, ...ha.heard.pulled]
      assert.ok(heard.every((h) => h.wakes.length === 0), 'no step row handed to the session as a wake')
      await until('the step\'s event to reach the session', () => (ha.heard.pulled.some((p) => p.records.some((r) => (r as { id?: string }).id === 'step:wf-gain:note')) ? true : undefined), 5000)
    } finally {
      await a.close()
    }
  })

  sessions('a wake step run on a runtime that does not hold the session is not claimed by the runtime that does, and the next step runs', async () => {
    const url = await pg.createDatabase('wake_step_elsewhere')
    const a = await PgStore.open(url, { hostTtlMs: 3000 })
    const b = await PgStore.open(url, { hostTtlMs: 3000 })
    try {
      const hb = listener()
      b.sessions.serve(['main'], hb)
      await until('b to own the session', () => (b.sessions.owns('main') ? true : undefined), 5000)
      // b's pull that brings this event claims, in the same transaction, the queued wakes there were
      const outcome = await runWakeThenAgent(a, 'wf-elsewhere', async () => {
        await a.sessions.queue('main', { type: 'event', id: 'summary:marker', text: 'marker' } as { id: string }, true)
        await until('b to pull the event queued after the step\'s row', () => (hb.heard.pulled.some((p) => p.records.some((r) => (r as { id?: string }).id === 'summary:marker')) ? true : undefined), 5000)
      })
      assertWentOn(a, 'wf-elsewhere', outcome)
      assert.ok([...hb.heard.gained, ...hb.heard.pulled].every((h) => h.wakes.length === 0), 'no step row claimed by b as a wake')
      assert.is(b.runs.get(a.runs.children('wf-elsewhere')[0]!.id), undefined, 'b holds no row of a\'s workflow')
      await until('the step\'s event to reach b', () => (hb.heard.pulled.some((p) => p.records.some((r) => (r as { id?: string }).id === 'step:wf-elsewhere:note')) ? true : undefined), 5000)
    } finally {
      await a.close()
      await b.close()
    }
  })

  sessions.run()
}
