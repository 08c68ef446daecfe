// Issue 23: one payload must not poison a PostgreSQL batch. A JSON body holding \u0000 or a lone
// surrogate (\ud800) is valid JSON and the file store keeps it; jsonb refused it, and with it the
// whole group commit it shared with other senders' requests (500s for them, acknowledged runs left
// queued or running). Real `hookgate serve` processes, one on a throwaway PostgreSQL and one on the
// file store, take the same concurrent requests:
// - the poisoned ones are stored and read back exactly, and every request gets the answer the file
//   store gives it; every acknowledged run finishes;
// - a write the database refuses (here: a CHECK constraint the test adds, standing for any refusal)
//   fails alone, never the other writes of its batch;
// - an acknowledged run whose status change the database refuses still ends: failed, saying why.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgateBin } from '../../../helpers/paths.js'
import { startPostgres } from '../../../helpers/pg.js'
import { Agent, request } from 'undici'
import { compileProject, setTestToken, spawnServer, until, type Project, type ServeProcess } from '../../http/harness.js'
import { openHistory } from '../../../../runtime/store/open.js'
import type { HistoryReader, RunRow } from '../../../../runtime/store/store.js'

const TOKEN = setTestToken()
const pg = await startPostgres()
const poisoned = suite('a poisoned payload on PostgreSQL')

// a waited run answers with its outcome however slow the machine is (not the 202 of a wait that ended first)
const CONFIG = `
server:
  maxWaitSeconds: 300
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - { id: m-agent, match: { path: m-agent }, action: agent, messageTemplate: "{{payload.text}}", deliver: false }
    - { id: m-wait, match: { path: m-wait }, action: agent, messageTemplate: "{{payload.text}}", deliver: false, waitForCompletion: true, waitTimeoutSeconds: 300 }
    - { id: m-wake, match: { path: m-wake }, action: wake, textTemplate: "{{payload.text}}" }
agents:
  - { id: main, default: true, model: builtin/echo, heartbeat: { every: "off" } }
`

/** Text JSON allows and jsonb refuses: a NUL, lone surrogates of either half. */
const POISONS = ['nul \u0000 inside', 'high \ud800 alone', 'low \udc00 alone', '\u0000']

interface Case { name: string; path: string; body: Record<string, unknown>; headers?: Record<string, string>; poison: string | null }

/** `n` requests over every path a payload reaches the store by; every `every`-th one poisoned. */
function cases(n: number, every: number): Case[] {
  const out: Case[] = []
  for (let i = 0; i < n; i++) {
    const poison = i % every === 0 ? POISONS[(i / every) % POISONS.length]! : null
    const text = poison === null ? `clean request ${i}` : `request ${i}: ${poison}`
    const kind = i % 5
    const name = `${kind}-${i}`
    // the key of a field and a query value can hold it too (the received request keeps both)
    const extra: Record<string, unknown> = poison === null ? {} : { [`key ${poison}`]: [poison, { deep: poison }] }
    if (kind === 0) out.push({ name, path: '/hooks/agent', body: { message: text, deliver: false, ...extra }, poison })
    else if (kind === 1) out.push({ name, path: '/hooks/wake', body: { text, mode: 'now' }, poison })
    // a URL carries a NUL (%00), not a lone surrogate (its bytes are no UTF-8)
    else if (kind === 2) out.push({ name, path: `/hooks/m-agent?q=${poison === null ? 'clean' : 'nul%00q'}`, body: { text, ...extra }, poison })
    else if (kind === 3) out.push({ name, path: '/hooks/m-wake', body: { text, ...extra }, poison })
    // an Idempotency-Key: the keyed insert, and the stored answer beside it
    else out.push({ name, path: '/hooks/m-wait', body: { text, ...extra }, headers: { 'idempotency-key': `key-${i}` }, poison })
  }
  return out
}

interface Reply { status: number; text: string; json: any }

/**
 * Every case sent to `origin`, `concurrency` at a time on keep-alive connections, each answer by
 * case name. An answer may take long on a busy machine (a waited run): only a minute without one fails.
 */
async function sendAll(origin: string, all: readonly Case[], concurrency: number): Promise<Map<string, Reply>> {
  const agent = new Agent({ connections: concurrency, headersTimeout: 60_000, bodyTimeout: 60_000 })
  const replies = new Map<string, Reply>()
  let next = 0
  try {
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < all.length) {
        const c = all[next++]!
        // JSON.stringify writes a NUL and a lone surrogate as escapes: the body is the JSON a sender sends
        const res = await request(origin + c.path, {
          method: 'POST', dispatcher: agent, body: JSON.stringify(c.body),
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...c.headers },
        })
        const text = await res.body.text()
        let json: any
        try { json = JSON.parse(text) } catch { json = undefined }
        replies.set(c.name, { status: res.statusCode, text, json })
      }
    }))
  } finally {
    await agent.close()
  }
  return replies
}

/** One POST with the test token, answered within a minute however busy the machine. */
async function postOne(origin: string, path: string, body: object): Promise<Reply> {
  const replies = await sendAll(origin, [{ name: 'one', path, body: body as Record<string, unknown>, poison: null }], 1)
  return replies.get('one')!
}

/** What two stores' answers must agree on: the status, the error code, and a waited run's outcome. */
function shape(r: Reply): string {
  return JSON.stringify({ status: r.status, code: r.json?.code, ok: r.json?.ok, run: r.json?.status })
}

/** The runs named in `replies` (2xx answers) as `history` has them, once every one is final; fails after `withinMs`. */
async function finished(history: HistoryReader, replies: Map<string, Reply>, withinMs: number): Promise<Map<string, RunRow>> {
  const ids = new Set<string>()
  for (const r of replies.values()) if (r.status >= 200 && r.status < 300 && typeof r.json?.runId === 'string') ids.add(r.json.runId)
  let open: string[] = []
  try {
    return await until('every acknowledged run to finish', async () => {
      const rows = new Map((await history.read()).rows.filter((row) => ids.has(row.id)).map((row) => [row.id, row]))
      open = [...ids].filter((id) => !rows.has(id) || rows.get(id)!.status === 'queued' || rows.get(id)!.status === 'running')
      return open.length === 0 ? rows : undefined
    }, withinMs, 200)
  } catch (err) {
    throw new Error(`${(err as Error).message}: ${open.length} of ${ids.size} still unfinished, e.g. ${open.slice(0, 3).join(', ')}`)
  }
}

function startServe(project: Project, stateDir: string, store?: string): Promise<ServeProcess> {
  return spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--host', '127.0.0.1', '--state', stateDir, ...(store ? ['--store', store] : [])], { cwd: project.dir, lifetimeMs: 180_000 })
}

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  poisoned.after(async () => { await pg.destroy() })

  poisoned('a NUL or a lone surrogate in payloads beside clean ones: every request gets the file store\'s answer, the payload reads back exactly, and every acknowledged run finishes', async () => {
    const url = await pg.createDatabase('poison')
    const project = await compileProject(CONFIG)
    const onPg = await startServe(project, `${project.stateDir}-pg`, url)
    const onFile = await startServe(project, `${project.stateDir}-file`)
    const pgHistory = openHistory(`${project.stateDir}-pg`, url)
    const fileHistory = openHistory(`${project.stateDir}-file`)
    try {
      const all = cases(600, 8)
      const [pgReplies, fileReplies] = await Promise.all([sendAll(onPg.origin, all, 48), sendAll(onFile.origin, all, 48)])
      const differ = all.filter((c) => shape(pgReplies.get(c.name)!) !== shape(fileReplies.get(c.name)!))
        .map((c) => `${c.name} ${c.path}${c.poison === null ? '' : ' (poisoned)'}: postgres ${pgReplies.get(c.name)!.text.slice(0, 200)} / file ${fileReplies.get(c.name)!.text.slice(0, 200)}`)
      assert.equal(differ, [], `${differ.length} requests answered differently:\n${differ.slice(0, 10).join('\n')}`)
      const failed = all.filter((c) => fileReplies.get(c.name)!.status >= 300).map((c) => `${c.name}: ${fileReplies.get(c.name)!.text}`)
      assert.equal(failed, [], 'the file store accepts every one of them')

      const pgRows = await finished(pgHistory, pgReplies, 60_000)
      await finished(fileHistory, fileReplies, 60_000)
      const notSucceeded = [...pgRows.values()].filter((r) => r.status !== 'succeeded').map((r) => `${r.id} ${r.status} ${r.error}`)
      assert.equal(notSucceeded, [], 'every run succeeded on PostgreSQL')

      // what was stored comes back exactly as it was sent, from both stores
      for (const c of all.filter((x) => x.poison !== null)) {
        const runId = pgReplies.get(c.name)!.json.runId as string
        const row = pgRows.get(runId)!
        if (c.path === '/hooks/agent') {
          assert.is((await pgHistory.request(row) as { message: string }).message, c.body.message, `${c.name}: the request's message`)
        } else if (c.path !== '/hooks/wake') {
          const received = await pgHistory.received(row)
          assert.equal(received?.payload, c.body, `${c.name}: the received payload`)
          if (c.path.includes('?')) assert.is(received?.query.q, 'nul\u0000q', `${c.name}: the received query`)
          const fileRow = (await fileHistory.read()).rows.find((r) => r.id === fileReplies.get(c.name)!.json.runId)!
          assert.equal((await fileHistory.received(fileRow))?.payload, c.body, `${c.name}: the file store keeps the same payload`)
        }
        if (c.path === '/hooks/m-wait') {
          // the reply (a model's answer holding the poison) went through a status change, a
          // transcript record and a summary event, and came back in the waited answer
          const reply = pgReplies.get(c.name)!.json.reply as string
          assert.ok(reply.includes(c.body.text as string), `${c.name}: the waited answer carries the reply: ${JSON.stringify(reply)}`)
          assert.ok(row.result?.includes(`request ${c.name.split('-')[1]}: `), `${c.name}: the run's result`)
          const transcript = (await pgHistory.logRecords<{ type: string; runId: string; reply: string }>('isolated')).find((r) => r.type === 'isolated' && r.runId === runId)
          assert.is(transcript?.reply, reply, `${c.name}: the transcript record`)
        }
      }
      // the wakes' events reached the main session's turns, poison and all
      const turns = (await pgHistory.logRecords<{ type: string; events: string[] }>('main/main')).filter((r) => r.type === 'turn')
      const read = new Set(turns.flatMap((t) => t.events))
      for (const c of all.filter((x) => x.path === '/hooks/wake' && x.poison !== null)) {
        assert.ok(read.has(`event:${pgReplies.get(c.name)!.json.runId}`), `${c.name}: its wake was read by a committed turn`)
      }
      assert.not.match(onPg.stderr(), 'background run failed', 'no run failed in the background')
    } finally {
      await pgHistory.close()
      await fileHistory.close()
      onPg.kill()
      onFile.kill()
    }
  })

  /** A runtime on its own database whose run rows refuse `marker`: the database's own refusal, as any could come. */
  async function refusingRuntime(name: string, marker: string): Promise<{ url: string; server: ServeProcess; history: HistoryReader }> {
    const url = await pg!.createDatabase(name)
    const project = await compileProject(CONFIG)
    const server = await startServe(project, project.stateDir, url)
    // the schema is there once serve listens; the constraint looks at the row column only (not the request)
    await pg!.sql(`ALTER TABLE hookgate_runs ADD CONSTRAINT refuses_marker CHECK (strpos(row::text, '${marker}') = 0)`, url)
    return { url, server, history: openHistory(project.stateDir, url) }
  }

  poisoned('a write the database refuses fails alone: the clean requests of its batch are all accepted and finish', async () => {
    const { url, server, history } = await refusingRuntime('refused_insert', 'refuse-this-row')
    try {
      // the name is kept in the run's row: those inserts are refused; a message is in the request column
      const all: Case[] = Array.from({ length: 400 }, (_, i) => i % 20 === 7
        ? { name: `bad-${i}`, path: '/hooks/agent', body: { message: `m ${i}`, name: 'refuse-this-row', deliver: false }, poison: 'refuse-this-row' }
        : { name: `ok-${i}`, path: i % 2 ? '/hooks/agent' : '/hooks/wake', body: i % 2 ? { message: `m ${i}`, deliver: false } : { text: `w ${i}` }, poison: null })
      const replies = await sendAll(server.origin, all, 64)
      const refused = all.filter((c) => c.poison !== null).map((c) => replies.get(c.name)!.status)
      assert.ok(refused.every((s) => s === 500), `the refused writes fail: ${refused.join(' ')}`)
      const clean = all.filter((c) => c.poison === null).filter((c) => replies.get(c.name)!.status >= 300).map((c) => `${c.name}: ${replies.get(c.name)!.status} ${replies.get(c.name)!.text}`)
      assert.equal(clean, [], `${clean.length} clean requests failed beside the refused ones`)
      const rows = await finished(history, replies, 60_000)
      assert.is([...rows.values()].filter((r) => r.status === 'succeeded').length, all.length - 20, 'every clean run succeeded')
      assert.is(await pg!.sql("SELECT count(*) FROM hookgate_runs WHERE status IN ('queued', 'running')", url), '0', 'nothing left unfinished')
    } finally {
      await history.close()
      server.kill()
    }
  })

  poisoned('an acknowledged run whose final status (or another write of its turn) the database refuses still ends: failed, saying why, and a waiting request hears it', async () => {
    const { url, server, history } = await refusingRuntime('refused_status', 'refuse-this-reply')
    try {
      // the echo model's reply repeats the message: the run's row refuses it once it becomes the
      // run's result, at its final status change, after the 202 was sent (or, waited, the 200)
      const acked = await postOne(server.origin, '/hooks/agent', { message: 'please refuse-this-reply', deliver: false })
      assert.is(acked.status, 202, acked.text)
      const waited = await postOne(server.origin, '/hooks/m-wait', { text: 'also refuse-this-reply' })
      assert.is(waited.status, 200, waited.text)
      assert.is(waited.json.status, 'failed', waited.text)
      assert.match(waited.json.error, /could not record the run's change to succeeded: the database refused the write/)
      // a write of the turn other than its status: the summary for the main session, refused
      await pg!.sql("ALTER TABLE hookgate_session_inbox ADD CONSTRAINT refuses_marker CHECK (strpos(record::text, 'refuse-this-summary') = 0)", url)
      const summary = await postOne(server.origin, '/hooks/agent', { message: 'please refuse-this-summary', deliver: false })
      assert.is(summary.status, 202, summary.text)
      const clean = await postOne(server.origin, '/hooks/agent', { message: 'a clean one', deliver: false })
      const rows = await finished(history, new Map([['acked', acked], ['waited', waited], ['summary', summary], ['clean', clean]]), 20_000)
      const row = rows.get(acked.json.runId)!
      assert.is(row.status, 'failed')
      assert.match(row.error ?? '', /could not record the run's change to succeeded/)
      assert.is(rows.get(summary.json.runId)!.status, 'failed')
      assert.match(rows.get(summary.json.runId)!.error ?? '', /^interrupted: the database refused the write/)
      assert.is(rows.get(clean.json.runId)!.status, 'succeeded')
      assert.is(await pg!.sql("SELECT count(*) FROM hookgate_runs WHERE status IN ('queued', 'running')", url), '0', 'nothing left unfinished')
    } finally {
      await history.close()
      server.kill()
    }
  })

  poisoned.run()
}
