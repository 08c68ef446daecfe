// server.store in hooks.yaml on a real PostgreSQL: `hookgate serve` without --store reads the URL
// from the reference at start (never from the bundle, never printed with its password) and applies
// the store's timings; an unset variable, or one that holds no postgres:// URL, stops the start with
// exit 1 naming the reference; --store on the command line wins; `hookgate tasks --bundle` and
// `hookgate admin --config` read the database it names.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgateBin } from '../../../helpers/paths.js'
import { startPostgres } from '../../../helpers/pg.js'
import { describeRun, runNode, stdoutJson, type CliResult } from '../../../cli/cli-helpers.js'
import { assertOk, compileProject, post, recompile, setTestToken, spawnServer, until, type Project } from '../../http/harness.js'
import { loadBundle } from '../../../../runtime/bundle/load.js'
import { connectStore, storeOptionsOf } from '../../../../runtime/store/open.js'
import type { PgStore } from '../../../../runtime/store/postgres/index.js'
import { taskRunId } from '../../../../runtime/scheduler/fire.js'
import type { TaskListing } from '../../../../cli/verbs/tasks.js'

const TOKEN = setTestToken()
const ADMIN_TOKEN = 'admin-' + 'b'.repeat(40)
// The test server trusts every local client, so a password in the URL is never checked: it is
// there to be looked for in everything hookgate prints and writes.
const PASSWORD = 'pa55-' + 'q'.repeat(16)
const pg = await startPostgres()
const serve = suite('hookgate serve with server.store')

const CONFIG = `
server:
  store:
    url: "\${HOOKGATE_STORE_URL}"
    hostTtlSeconds: 6
    maxConnections: 3
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
agents:
  - id: main
    default: true
    model: builtin/echo
    heartbeat: { every: "off" }
    tasks:
      - { name: nightly, schedule: "0 3 * * *", target: wake, prompt: nightly check }
`

/** `url` with a password in it, as an operator's would have. */
/** The message of the one log line a server wrote on stderr when it could not start (a JSON line with the time). */
function msgOf(stderr: string): string {
  const lines = stderr.trimEnd().split('\n')
  assert.is(lines.length, 1, stderr)
  const line = JSON.parse(lines[0]!) as { t: string; level: string; msg: string }
  assert.is(line.level, 'error', stderr)
  assert.ok(!Number.isNaN(Date.parse(line.t)), stderr)
  return line.msg
}

function withPassword(url: string): string {
  return url.replace('postgres://hookgate@', `postgres://hookgate:${PASSWORD}@`)
}

/** The environment without HOOKGATE_STORE_URL, plus `extra`. */
function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { HOOKGATE_STORE_URL: _, ...rest } = process.env
  return { ...rest, ...extra }
}

function hookgate(args: string[], cwd: string, vars: NodeJS.ProcessEnv): Promise<CliResult> {
  return runNode([hookgateBin, ...args], { cwd, env: vars })
}

/** Compiled with the variable set in the compiler's own environment: it must still not reach the bundle. */
async function compileWithUrlSet(url: string): Promise<Project> {
  process.env.HOOKGATE_STORE_URL = url
  try {
    return await compileProject(CONFIG)
  } finally {
    delete process.env.HOOKGATE_STORE_URL
  }
}

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  serve.after(async () => { await pg.destroy() })

  serve('runs on the database ${HOOKGATE_STORE_URL} names, with server.store\'s host lease, and prints no password', async () => {
    const url = withPassword(await pg.createDatabase('from_config'))
    const project = await compileWithUrlSet(url)
    for (const f of readdirSync(project.outDir)) {
      const text = readFileSync(join(project.outDir, f), 'utf8')
      assert.not.ok(text.includes(PASSWORD) || text.includes(pg.socketDir), `${f} holds the store URL`)
    }
    const server = await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--state', project.stateDir], { cwd: project.dir, env: env({ HOOKGATE_STORE_URL: url }) })
    let printed = ''
    try {
      const listening = await server.line('hookgate listening on ')
      assert.match(listening, ', store postgres://hookgate:***@/from_config?host=')
      const wake = assertOk(await post(server.origin, '/hooks/wake', TOKEN, { text: 'deploy finished', mode: 'now' }), 200, ['ok', 'action', 'runId', 'mode'])
      await until('the wake to succeed in the database', async () => (await pg.sql(`SELECT status FROM hookgate_runs WHERE id = '${wake.runId}'`, url)) === 'succeeded' ? true : undefined, 8000)
      // hostTtlSeconds: 6, not the default 15: the lease never reaches further than 6 s ahead
      const ahead = Number(await pg.sql('SELECT extract(epoch FROM max(expires_at) - now()) FROM hookgate_hosts', url))
      assert.ok(ahead > 0 && ahead <= 6.5, `the lease runs ${ahead} s ahead`)
      assert.not.ok(existsSync(join(project.stateDir, 'runs.jsonl')), 'the run went to the state directory')
      // a reload that changes server.store says it takes a restart (the runtime keeps its store)
      process.env.HOOKGATE_STORE_URL = url
      try {
        await recompile(project, CONFIG.replace('hostTtlSeconds: 6', 'hostTtlSeconds: 7'))
      } finally {
        delete process.env.HOOKGATE_STORE_URL
      }
      await server.line('server.store changes take effect at the next start')
      assertOk(await post(server.origin, '/hooks/wake', TOKEN, { text: 'after the reload' }), 200, ['ok', 'action', 'runId', 'mode'])
    } finally {
      server.child.kill('SIGTERM')
      assert.is(await server.exited, 0, server.stderr())
      printed = server.stdout.join('\n') + server.stderr()
    }
    assert.not.ok(printed.includes(PASSWORD), 'the password was printed')
    assert.is(await pg.sql('SELECT count(*) FROM hookgate_hosts', url), '0', 'a clean stop removes its lease')
  })

  serve('an unset ${HOOKGATE_STORE_URL} stops the start with exit 1, naming the reference; --store then wins over it', async () => {
    const url = withPassword(await pg.createDatabase('flag_wins'))
    const project = await compileWithUrlSet(url)
    const unset = await hookgate(['serve', '--bundle', project.outDir, '--port', '0', '--state', project.stateDir], project.dir, env())
    assert.is(unset.code, 1, describeRun(unset))
    assert.is(msgOf(unset.stderr), 'hookgate serve: cannot start: server.store: secret ${HOOKGATE_STORE_URL} is not set in the environment')
    assert.not.ok(existsSync(join(project.stateDir, 'runs.jsonl')), 'fell back to the file store')
    // the flag names the database and the reference is not read at all (the lock was released too)
    const server = await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--state', project.stateDir, '--store', url], { cwd: project.dir, env: env() })
    try {
      assertOk(await post(server.origin, '/hooks/wake', TOKEN, { text: 'x', mode: 'now' }), 200, ['ok', 'action', 'runId', 'mode'])
      assert.is(await pg.sql('SELECT count(*) FROM hookgate_runs', url), '1')
    } finally {
      server.child.kill('SIGTERM')
      assert.is(await server.exited, 0, server.stderr())
    }
  })

  serve('a ${HOOKGATE_STORE_URL} that holds no postgres:// URL stops the start with exit 1, without printing it', async () => {
    const project = await compileWithUrlSet('unused')
    const r = await hookgate(['serve', '--bundle', project.outDir, '--port', '0', '--state', project.stateDir], project.dir, env({ HOOKGATE_STORE_URL: `mysql://root:${PASSWORD}@db/x` }))
    assert.is(r.code, 1, describeRun(r))
    assert.is(msgOf(r.stderr), 'hookgate serve: cannot start: server.store: ${HOOKGATE_STORE_URL} does not hold a postgres:// (or postgresql://) URL')
  })

  serve('maxConnections bounds the runtime\'s pool', async () => {
    const url = await pg.createDatabase('pool_size')
    const project = await compileWithUrlSet(url)
    const config = (await loadBundle(project.outDir)).config
    const busy = async (options: ReturnType<typeof storeOptionsOf>, marker: string): Promise<string> => {
      const store = await connectStore(url, project.stateDir, options) as PgStore
      try {
        const sleeping = Promise.all(Array.from({ length: 5 }, () => store.db.query(`SELECT pg_sleep(1), '${marker}'`)))
        // halfway through the sleeps: every connection the pool may open is open and busy by now
        await new Promise((r) => setTimeout(r, 500))
        const seen = await pg.sql(`SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(1), ''${marker}''%' AND pid <> pg_backend_pid()`, url)
        await sleeping
        return seen
      } finally {
        await store.close()
      }
    }
    assert.is(await busy(storeOptionsOf(config, false), 'three'), '3')
    // and without server.store's setting, the store's own default (more than three)
    const { maxConnections: _, ...unbounded } = storeOptionsOf(config, false)
    assert.is(await busy(unbounded, 'default'), '5')
  })

  serve('hookgate tasks --bundle and hookgate admin --config read the database server.store names', async () => {
    const url = withPassword(await pg.createDatabase('readers'))
    const project = await compileWithUrlSet(url)
    const scheduledFor = '2026-11-23T03:00:00.000Z'
    const runId = taskRunId('task:main:nightly', scheduledFor)
    const store = await connectStore(url, project.stateDir, {})
    await store.runs.create({ id: runId, definitionKind: 'task', definitionId: 'task:main:nightly', correlationId: 'c', action: 'wake', status: 'succeeded', scheduledFor })
    await store.close()

    const tasks = await hookgate(['tasks', '--bundle', project.outDir, '--state', project.stateDir, '--json'], project.dir, env({ HOOKGATE_STORE_URL: url }))
    assert.is(tasks.code, 0, describeRun(tasks))
    assert.is(stdoutJson<TaskListing[]>(tasks)[0]!.lastFiredFor, scheduledFor)
    // unset: said, and the state directory is not read in its place
    const unset = await hookgate(['tasks', '--bundle', project.outDir, '--state', project.stateDir, '--json'], project.dir, env())
    assert.is(unset.code, 0, describeRun(unset))
    assert.is(stdoutJson<TaskListing[]>(unset)[0]!.lastFiredFor, null)
    assert.match(unset.stderr, 'hookgate tasks: warning: cannot read the run history: server.store: secret ${HOOKGATE_STORE_URL} is not set in the environment (or name the store with --store URL)')

    const page = await spawnServer([hookgateBin, 'admin', '--port', '0', '--config', 'hooks.yaml', '--out', project.outDir, '--state', project.stateDir], { cwd: project.dir, env: env({ HOOKGATE_STORE_URL: url, HOOKGATE_ADMIN_TOKEN: ADMIN_TOKEN }), ready: { text: 'hookgate admin on ', url: /hookgate admin on (\S+?)\/? / } })
    try {
      const runs = await fetch(`${page.origin}/api/runs?limit=50`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then((r) => r.json()) as { rows: Array<{ id: string }> }
      assert.equal(runs.rows.map((r) => r.id), [runId])
    } finally {
      page.child.kill('SIGTERM')
      assert.is(await page.exited, 0, page.stderr())
    }
    assert.not.ok((page.stdout.join('\n') + page.stderr()).includes(PASSWORD), 'the password was printed')
    const refused = await hookgate(['admin', '--port', '0', '--config', 'hooks.yaml', '--out', project.outDir, '--state', project.stateDir], project.dir, env({ HOOKGATE_ADMIN_TOKEN: ADMIN_TOKEN }))
    assert.is(refused.code, 1, describeRun(refused))
    assert.is(msgOf(refused.stderr), 'hookgate admin: cannot start: server.store: secret ${HOOKGATE_STORE_URL} is not set in the environment (or name the store with --store URL)')
  })

  serve.run()
}
