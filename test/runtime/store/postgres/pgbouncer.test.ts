// The PostgreSQL store behind PgBouncer in transaction mode (a real one, in front of a real
// PostgreSQL), where a connection belongs to a client only for one transaction: the schema is
// migrated through it, two `hookgate serve` runtimes on it accept a wake and an agent call, run
// them (the session's lease, the group commit's multi-statement batches, a turn's fenced commit),
// take one Idempotency-Key once between them, and `hookgate runs` reads the history back through it.
import { execFile } from 'node:child_process'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgateBin } from '../../../helpers/paths.js'
import { startPostgres } from '../../../helpers/pg.js'
import { startPgbouncer, type TestPgbouncer } from '../../../helpers/pgbouncer.js'
import { assertOk, compileProject, post, setTestToken, spawnServer, until, type ServeProcess } from '../../http/harness.js'

const TOKEN = setTestToken()
const pg = await startPostgres()
const bouncer: TestPgbouncer | null = pg ? await startPgbouncer(pg) : null
const behind = suite('the PostgreSQL store behind PgBouncer in transaction mode')

function hookgate(args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [hookgateBin, ...args], (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out: String(stdout) + String(stderr) }))
  })
}

if (!pg || !bouncer) {
  console.log(`skipped: ${pg ? 'no pgbouncer binary' : 'no PostgreSQL server binaries'}`)
  await bouncer?.stop()
  await pg?.destroy()
} else {
  const servers: ServeProcess[] = []
  behind.after(async () => {
    for (const s of servers) s.kill()
    await bouncer.stop()
    await pg.destroy()
  })

  behind('migrates, serves and reads the history through the bouncer, with two runtimes on it', async () => {
    await pg.createDatabase('bounced')
    const url = bouncer.url('bounced')
    const migrated = await hookgate(['store', 'migrate', '--store', url])
    assert.is(migrated.code, 0, migrated.out)
    assert.match(migrated.out, 'the schema is at version')

    const project = await compileProject(`
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
agents:
  - { id: main, default: true, model: builtin/echo, heartbeat: { every: "off" } }
`)
    for (const name of ['a', 'b']) {
      servers.push(await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--state', `${project.stateDir}-${name}`, '--store', url], { cwd: project.dir }))
    }
    const [a, b] = servers as [ServeProcess, ServeProcess]
    const wake = assertOk(await post(b.origin, '/hooks/wake', TOKEN, { text: 'through the bouncer', mode: 'now' }), 200, ['ok', 'action', 'runId', 'mode'])
    const first = await post(a.origin, '/hooks/agent', TOKEN, { message: 'summarise', deliver: false }, { 'idempotency-key': 'bounced-1' })
    assert.is(first.status, 202, first.text)
    const again = await post(b.origin, '/hooks/agent', TOKEN, { message: 'summarise', deliver: false }, { 'idempotency-key': 'bounced-1' })
    assert.is(again.status, 202, again.text)
    assert.is(again.json.runId, first.json.runId, 'one run for the key, whichever runtime answers')
    assert.is(again.headers['idempotent-replayed'], 'true')

    await until('both runs to succeed', async () => {
      const listed = await hookgate(['runs', '--store', url, '--json'])
      const rows = JSON.parse(listed.out) as Array<{ id: string; status: string }>
      const done = rows.filter((r) => (r.id === wake.runId || r.id === first.json.runId) && r.status === 'succeeded')
      return done.length === 2 ? true : undefined
    }, 10_000, 200)
    // the wake was read by a turn of the session's one owner, committed under its lease
    const turns = await pg.sql("SELECT count(*) FROM hookgate_logs WHERE log = 'main/main' AND record->>'type' = 'turn'", pg.url.replace('/hookgate?', '/bounced?'))
    assert.ok(Number(turns) >= 1, turns)
    for (const s of servers) {
      s.child.kill('SIGTERM')
      assert.is(await s.exited, 0, s.stderr())
    }
  })

  behind.run()
}
