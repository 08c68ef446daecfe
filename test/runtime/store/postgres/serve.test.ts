// The real `hookgate serve --store postgres://…` on a real PostgreSQL, one runtime: it migrates
// and registers itself, answers a wake and an agent call only once their rows are committed, runs
// them to the end there, and shows them to `hookgate runs`-style readers of that database; it
// refuses a URL that is not postgres:// (exit 2), and one it cannot reach without printing its
// password (exit 1).
import { execFile } from 'node:child_process'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgateBin } from '../../../helpers/paths.js'
import { startPostgres } from '../../../helpers/pg.js'
import { assertOk, compileProject, post, send, setTestToken, spawnServer, until } from '../../http/harness.js'
import { openHistory } from '../../../../runtime/store/open.js'

const TOKEN = setTestToken()
const ADMIN_TOKEN = 'admin-' + 'a'.repeat(40)
const pg = await startPostgres()
const serve = suite('hookgate serve --store postgres://')

const CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
agents:
  - { id: main, default: true, model: builtin/echo, heartbeat: { every: "off" } }
`

function hookgate(args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [hookgateBin, ...args], (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out: String(stdout) + String(stderr) }))
  })
}

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  serve.after(async () => { await pg.destroy() })

  serve('accepts a wake and an agent call into PostgreSQL, runs them there, and leaves no lease behind when it stops', async () => {
    const url = await pg.createDatabase('serve_one')
    const project = await compileProject(CONFIG)
    const server = await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--state', project.stateDir, '--store', url], { cwd: project.dir })
    try {
      const wake = assertOk(await post(server.origin, '/hooks/wake', TOKEN, { text: 'deploy finished', mode: 'now' }), 200, ['ok', 'action', 'runId', 'mode'])
      const agent = assertOk(await post(server.origin, '/hooks/agent', TOKEN, { message: 'summarise the deploy', deliver: false }), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
      const history = openHistory(project.stateDir, url)
      try {
        const rows = await until('both runs to succeed in the database', async () => {
          const read = (await history.read()).rows
          const done = read.filter((r) => (r.id === wake.runId || r.id === agent.runId) && r.status === 'succeeded')
          return done.length === 2 ? read : undefined
        }, 8000)
        assert.ok(rows.find((r) => r.id === agent.runId)?.result?.startsWith('echo: '))
        assert.equal(await history.request(rows.find((r) => r.id === agent.runId)!).then((req) => (req as { message?: string }).message), 'summarise the deploy')
        // the session's turn and the transcript went to the record logs
        assert.ok((await history.logRecords<{ type: string }>('isolated')).some((r) => r.type === 'isolated'))
        assert.ok((await history.logRecords<{ type: string }>('main/main')).some((r) => r.type === 'turn'))
        assert.ok(await pg.sql('SELECT count(*) FROM hookgate_hosts', url) === '1', 'the runtime registered itself')
      } finally {
        await history.close()
      }
      // the CLIs read the same database with --store (and exit: their connection is closed)
      const listed = await hookgate(['runs', '--store', url, '--json'])
      assert.is(listed.code, 0, listed.out)
      assert.ok(listed.out.includes(agent.runId), listed.out)
      const shown = await hookgate(['runs', 'show', agent.runId, '--store', url, '--json'])
      assert.is(shown.code, 0, shown.out)
      assert.match(shown.out, '"status": "succeeded"')
      const refusal = await post(server.origin, '/hooks/wake', 'wrong-token-wrong-token-wrong', { text: 'x' })
      assert.is(refusal.status, 401)
      await until('the refusal to be written', async () => ((await hookgate(['rejects', '--store', url, '--json'])).out.includes('"unauthorized"') ? true : undefined), 5000)
      // hookgate tasks and the operator page read it too
      const tasks = await hookgate(['tasks', '--bundle', project.outDir, '--store', url])
      assert.is(tasks.code, 0, tasks.out)
      const page = await spawnServer([hookgateBin, 'admin', '--port', '0', '--config', 'hooks.yaml', '--out', project.outDir, '--state', project.stateDir, '--store', url], { cwd: project.dir, env: { ...process.env, HOOKGATE_ADMIN_TOKEN: ADMIN_TOKEN }, ready: { text: 'hookgate admin on ', url: /hookgate admin on (\S+?)\/? / } })
      try {
        const runs = await fetch(`${page.origin}/api/runs?limit=50`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then((r) => r.json()) as { rows: Array<{ id: string; status: string }> }
        assert.ok(runs.rows.some((r) => r.id === agent.runId && r.status === 'succeeded'), JSON.stringify(runs))
      } finally {
        page.child.kill('SIGTERM')
        assert.is(await page.exited, 0, page.stderr())
      }
      // nothing about the runs went to the state directory's files
      assert.not.ok((await import('node:fs')).existsSync(`${project.stateDir}/runs.jsonl`), 'runs.jsonl was written')
    } finally {
      server.child.kill('SIGTERM')
      assert.is(await server.exited, 0, server.stderr())
    }
    assert.is(await pg.sql('SELECT count(*) FROM hookgate_hosts', url), '0', 'a clean stop removes its lease')
  })

  serve('two runtimes on one database: 20 concurrent requests with one Idempotency-Key start one run, every answer names it; another body is a 409', async () => {
    const url = await pg.createDatabase('serve_keys')
    const project = await compileProject(CONFIG)
    const a = await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--state', `${project.stateDir}-a`, '--store', url], { cwd: project.dir })
    const b = await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--state', `${project.stateDir}-b`, '--store', url], { cwd: project.dir })
    try {
      const body = { message: 'charge order 42', deliver: false }
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => post((i % 2 ? a : b).origin, '/hooks/agent', TOKEN, body, { 'idempotency-key': 'order-42' })))
      for (const r of answers) assert.is(r.status, 202, r.text)
      const runIds = new Set(answers.map((r) => r.json.runId))
      assert.is(runIds.size, 1, `one run for one key, got ${[...runIds].join(', ')}`)
      assert.ok(answers.some((r) => r.headers['idempotent-replayed'] === 'true'), 'the repeats are replays')
      assert.is(await pg.sql("SELECT count(*) FROM hookgate_runs WHERE definition_id = 'agent'", url), '1')
      for (const host of [a, b]) {
        const other = await post(host.origin, '/hooks/agent', TOKEN, { message: 'charge order 43', deliver: false }, { 'idempotency-key': 'order-42' })
        assert.is(other.status, 409, other.text)
        assert.is(other.json.code, 'idempotency_key_reused')
      }
    } finally {
      for (const s of [a, b]) s.child.kill('SIGTERM')
      assert.equal([await a.exited, await b.exited], [0, 0], a.stderr() + b.stderr())
    }
  })

  serve('a fan-out request is stored once in the database too: its runs\' rows hold about one copy, and each run reads the request back', async () => {
    const url = await pg.createDatabase('serve_fan_out')
    const project = await compileProject(`
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - { id: wide, match: { path: wide }, action: agent, deliver: false, wakeMode: next-heartbeat, forEach: "{{payload.items}}", messageTemplate: "{{payload.tag}} #{{item.n}}" }
    - { id: flows, match: { path: flows }, action: workflow, workflow: each, forEach: "{{payload.items}}" }
agents:
  - { id: main, default: true, model: builtin/echo, heartbeat: { every: "off" } }
workflows:
  - id: each
    steps:
      - { id: ask, action: agent, messageTemplate: "{{payload.tag}}" }
`)
    const server = await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--state', project.stateDir, '--store', url], { cwd: project.dir })
    const history = openHistory(project.stateDir, url)
    try {
      for (const path of ['/hooks/wide', '/hooks/flows']) {
        const body = { tag: path, items: Array.from({ length: 200 }, (_, n) => ({ n })), pad: 'p'.repeat(240 * 1024) }
        const bytes = Buffer.byteLength(JSON.stringify(body))
        const r = await post(server.origin, path, TOKEN, body)
        assert.is(r.status, 202, r.text)
        const ids: string[] = r.json.runIds
        const stored = Number(await pg.sql(`SELECT sum(octet_length(row::text) + coalesce(octet_length(request::text), 0) + coalesce(octet_length(received::text), 0)) FROM hookgate_runs WHERE id IN (${ids.map((id) => `'${id}'`).join(', ')})`, url))
        assert.ok(stored >= bytes && stored < bytes + 200 * 1024, `${path}: its 200 rows hold ${stored} bytes for a ${bytes}-byte request`)
        const rows = (await history.read()).rows.filter((row) => ids.includes(row.id))
        assert.is(rows.length, 200)
        for (const row of rows) assert.equal((await history.received(row))?.payload, body, `${path}: run ${row.id} reads the request back`)
      }
    } finally {
      await history.close()
      server.child.kill('SIGTERM')
      assert.is(await server.exited, 0, server.stderr())
    }
  })

  serve('hookgate_runs_total counts a PostgreSQL runtime\'s runs as it counts a file store\'s: each status an agent run enters, once committed', async () => {
    const url = await pg.createDatabase('serve_metrics')
    const project = await compileProject(CONFIG)
    const server = await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--state', project.stateDir, '--store', url], { cwd: project.dir })
    const counts = async (): Promise<Record<string, number>> => {
      const reply = await send(server.origin, '/metrics', { method: 'GET', token: TOKEN })
      assert.is(reply.status, 200, reply.text)
      const out: Record<string, number> = {}
      for (const m of reply.text.matchAll(/^hookgate_runs_total\{action="(\w+)",status="(\w+)"\} (\d+)$/gm)) out[`${m[1]} ${m[2]}`] = Number(m[3])
      return out
    }
    try {
      const before = await counts()
      const agent = assertOk(await post(server.origin, '/hooks/agent', TOKEN, { message: 'count me', deliver: false }), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
      assertOk(await post(server.origin, '/hooks/wake', TOKEN, { text: 'count me too', mode: 'next-heartbeat' }), 200, ['ok', 'action', 'runId', 'mode'])
      const after = await until(`run ${agent.runId} to be counted as succeeded`, async () => {
        const now = await counts()
        return now['agent succeeded']! > before['agent succeeded']! ? now : undefined
      }, 8000)
      for (const key of ['agent queued', 'agent running', 'agent succeeded', 'wake queued']) assert.is(after[key]! - before[key]!, 1, key)
      assert.is(after['agent failed'], before['agent failed'])
    } finally {
      server.child.kill('SIGTERM')
      assert.is(await server.exited, 0, server.stderr())
    }
  })

  serve('refuses a --store that is not postgres:// (2), and one it cannot reach without printing its password (1)', async () => {
    const project = await compileProject(CONFIG)
    const bad = await hookgate(['serve', '--bundle', project.outDir, '--port', '0', '--state', project.stateDir, '--store', '/var/lib/hookgate'])
    assert.is(bad.code, 2)
    assert.match(bad.out, '--store takes a postgres://')
    const badRuns = await hookgate(['runs', '--store', '/var/lib/hookgate'])
    assert.is(badRuns.code, 2)
    const down = await hookgate(['serve', '--bundle', project.outDir, '--port', '0', '--state', project.stateDir, '--store', `postgres://hookgate:pa55word@/nowhere?host=${pg.socketDir}-gone&port=5432`])
    assert.is(down.code, 1)
    assert.match(down.out, 'cannot open the store postgres://hookgate:***@')
    assert.not.match(down.out, 'pa55word')
  })

  serve.run()
}
