// `hookgate compile --standalone` (issue 11, item 8): a production host needs Node and dist/,
// nothing else. dist/ is copied into an empty folder with no node_modules anywhere above it and
// served by `node dist/hookgate-serve.mjs` over real HTTP: a wake, an agent turn, a mapping
// whose transform runs in the worker file written beside the runtime, and a match.when pattern
// matched by the RE2 engine written beside it (hookgate-re2.mjs), which a bundle without patterns
// never loads.
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { STANDALONE_FILE, WORKER_MODULE } from '../../runtime/bundle/format.js'
import { STANDALONE_PG_FILE, STANDALONE_RE2_FILE } from '../../compiler/standalone.js'
import { startPostgres } from '../helpers/pg.js'
import { tempDir } from '../helpers/paths.js'
import { assertOk, post, setTestToken, spawnServer, type ServeProcess } from '../runtime/http/harness.js'
import { describeRun, runNode, startIn, type CliResult } from './cli-helpers.js'

const TOKEN = setTestToken()
const WAKE_KEYS = ['ok', 'action', 'runId', 'mode']
const AGENT_KEYS = ['ok', 'action', 'runId', 'correlationId', 'sessionKey']

const CONFIG = `hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: shout
      match: { path: shout }
      action: agent
      messageTemplate: "said {{payload.text}}"
      transform: { module: shout.ts }
    - id: prod-deploys
      match:
        path: deploys
        when: { payload.title: { matches: "deploy.*to.*prod" } }
      action: wake
      textTemplate: "{{payload.title}}"
agents:
  - id: main
    model: builtin/echo
`
// null (→ 204) comes only from the transform: an answer of 204 proves the worker ran it
const SHOUT = `export default function (input: { payload: { text?: string; skip?: boolean } }) {
  if (input.payload.skip) return null
  return { message: String(input.payload.text ?? '').toUpperCase() }
}
`

/** Every folder from `dir` up to the root that holds a node_modules. */
function nodeModulesAbove(dir: string): string[] {
  const found: string[] = []
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, 'node_modules'))) found.push(join(d, 'node_modules'))
    if (dirname(d) === d) return found
  }
}

/** The environment of the host: no NODE_PATH or NODE_OPTIONS that could reach the checkout's packages. */
function hostEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env.NODE_PATH
  delete env.NODE_OPTIONS
  return env
}

const compiled = startIn({ 'hooks.yaml': CONFIG, 'transforms/shout.ts': SHOUT }, ['compile', 'hooks.yaml', '--out', 'dist', '--standalone'])

/** dist/ of the standalone compile, copied into a fresh folder under the temp root. */
async function hostWithDist(): Promise<{ host: string; dist: string; run: CliResult }> {
  const run = await compiled.result
  assert.is(run.code, 0, describeRun(run))
  const host = tempDir('hookgate-host-')
  const dist = join(host, 'dist')
  cpSync(join(compiled.dir, 'dist'), dist, { recursive: true })
  return { host, dist, run }
}

// ---------------------------------------------------------------------------------------------
const emitted = suite('hookgate compile --standalone')

emitted('writes the runtime and its transform worker beside the bundle, and says so', async () => {
  const { dist, run } = await hostWithDist()
  const names = readdirSync(dist)
  for (const name of [STANDALONE_FILE, `${WORKER_MODULE}.mjs`, 'hookgate.bundle.mjs', 'manifest.json']) assert.ok(names.includes(name), `${name} missing from ${names.join(', ')}`)
  assert.match(run.stderr, `wrote the standalone runtime: dist/${STANDALONE_FILE}`)
})

emitted('bundles the runtime and undici only: no compiler module or compile-time package, under 2 MiB', async () => {
  const { dist } = await hostWithDist()
  const text = readFileSync(join(dist, STANDALONE_FILE), 'utf8')
  // esbuild heads each module it bundles with a comment naming its path
  const modules = [...text.matchAll(/^\/\/ (\S+\.[cm]?js)$/gm)].map((m) => m[1]!)
  assert.ok(modules.some((m) => m.includes('node_modules/undici/')), 'undici is bundled')
  assert.ok(modules.some((m) => m.endsWith('runtime/serve/service.js')), 'the runtime is bundled')
  assert.equal(modules.filter((m) => /node_modules\/(yaml|typebox|esbuild)\/|(^|\/)compiler\//.test(m)), [])
  // the PostgreSQL client is in its own file, parsed only by a runtime on a postgres:// store
  assert.equal(modules.filter((m) => /node_modules\/pg[-/]/.test(m)), [])
  assert.ok(existsSync(join(dist, STANDALONE_PG_FILE)), `${STANDALONE_PG_FILE} is written beside it`)
  // so is the pattern engine, parsed only by a runtime whose bundle has patterns
  assert.equal(modules.filter((m) => m.includes('node_modules/re2js/')), [])
  const re2 = readFileSync(join(dist, STANDALONE_RE2_FILE), 'utf8')
  assert.ok(re2.includes('node_modules/re2js/'), `${STANDALONE_RE2_FILE} bundles re2js`)
  assert.match(re2, /re2js [\d.]+ is bundled above under its licence/)
  assert.ok(statSync(join(dist, STANDALONE_FILE)).size < 2 * 1024 * 1024, `${statSync(join(dist, STANDALONE_FILE)).size} bytes`)
})

emitted('with --check writes nothing', async () => {
  const run = await startIn({ 'hooks.yaml': CONFIG, 'transforms/shout.ts': SHOUT }, ['compile', 'hooks.yaml', '--out', 'dist', '--check', '--standalone'])
  const result = await run.result
  assert.is(result.code, 0, describeRun(result))
  assert.not.ok(existsSync(join(run.dir, 'dist')))
})

// ---------------------------------------------------------------------------------------------
const host = suite<{ server: ServeProcess; host: string; dist: string }>('node dist/hookgate-serve.mjs with no node_modules anywhere above it')

host.before(async (ctx) => {
  const { host: dir, dist } = await hostWithDist()
  assert.equal(nodeModulesAbove(dir), [], 'the host folder must have no node_modules above it')
  ctx.host = dir
  ctx.dist = dist
  // started from another folder and without --bundle: the bundle is the runtime's own folder
  const elsewhere = join(dir, 'elsewhere')
  mkdirSync(elsewhere)
  ctx.server = await spawnServer([join(dist, STANDALONE_FILE), '--port', '0', '--host', '127.0.0.1', '--state', join(dir, 'state')], { cwd: elsewhere, env: hostEnv() })
})
host.after(async ({ server }) => {
  if (server.child.exitCode === null) server.kill()
})

host('answers a wake with 200', async ({ server }) => {
  assertOk(await post(server.origin, '/hooks/wake', TOKEN, { text: 'standalone wake' }), 200, WAKE_KEYS)
})

host('answers an agent turn with 202', async ({ server }) => {
  assertOk(await post(server.origin, '/hooks/agent', TOKEN, { message: 'standalone agent' }), 202, AGENT_KEYS)
})

host('runs a mapping\'s transform in the worker written beside it', async ({ server }) => {
  assertOk(await post(server.origin, '/hooks/shout', TOKEN, { text: 'hello' }), 202, AGENT_KEYS)
  const skipped = await post(server.origin, '/hooks/shout', TOKEN, { skip: true })
  assert.is(skipped.status, 204, `the transform's null should answer 204: ${JSON.stringify(skipped)}`)
})

host('matches a match.when pattern with the RE2 engine written beside it, and a catastrophic text for irregexp is answered', async ({ server }) => {
  assertOk(await post(server.origin, '/hooks/deploys', TOKEN, { title: 'deploy api to prod' }), 200, WAKE_KEYS)
  assert.is((await post(server.origin, '/hooks/deploys', TOKEN, { title: 'deploy api to staging' })).status, 204)
  // cubic on V8's RegExp: hours for these 250,000 characters; the harness waits 5 s for an answer
  assert.is((await post(server.origin, '/hooks/deploys', TOKEN, { title: 'deploy to '.repeat(25_000) })).status, 204)
})

host('drains on SIGTERM and exits 0', async ({ server }) => {
  server.child.kill('SIGTERM')
  assert.is(await server.exited, 0, server.stderr())
  assert.is(server.stderr(), '')
})

host('dry-runs a mapping with try (its transform in the worker) and lists the runs it served', async ({ host: dir, dist }) => {
  writeFileSync(join(dir, 'payload.json'), '{"text":"dry run"}')
  const tried = await runNode([join(dist, STANDALONE_FILE), 'try', 'shout', '--payload', 'payload.json'], { cwd: dir, env: hostEnv() })
  assert.is(tried.code, 0, describeRun(tried))
  const shown = JSON.parse(tried.stdout) as { status: number; action: { message: string } }
  assert.is(shown.status, 202)
  assert.match(shown.action.message, 'DRY RUN')
  const runs = await runNode([join(dist, STANDALONE_FILE), 'runs', '--state', 'state', '--json'], { cwd: dir, env: hostEnv() })
  assert.is(runs.code, 0, describeRun(runs))
  const rows = JSON.parse(runs.stdout) as Array<{ action: string; status: string }>
  assert.equal(rows.map((r) => r.action).sort(), ['agent', 'agent', 'agent', 'wake', 'wake', 'wake', 'wake'])
  assert.is(rows.filter((r) => r.status === 'skipped').length, 3, 'the transform\'s null and the two filtered deploys are recorded as skipped')
})

// ---------------------------------------------------------------------------------------------
const lazy = suite('node dist/hookgate-serve.mjs with a bundle without match.when patterns')

lazy('never loads the pattern engine: it serves with hookgate-re2.mjs removed from dist/', async () => {
  const plain = startIn({ 'hooks.yaml': 'hooks:\n  enabled: true\n  token: "${HOOKGATE_TEST_TOKEN}"\n' }, ['compile', 'hooks.yaml', '--out', 'dist', '--standalone'])
  const run = await plain.result
  assert.is(run.code, 0, describeRun(run))
  const dir = tempDir('hookgate-host-')
  cpSync(join(plain.dir, 'dist'), join(dir, 'dist'), { recursive: true })
  rmSync(join(dir, 'dist', STANDALONE_RE2_FILE))
  const server = await spawnServer([join(dir, 'dist', STANDALONE_FILE), '--port', '0', '--host', '127.0.0.1', '--state', join(dir, 'state')], { cwd: dir, env: hostEnv() })
  try {
    assertOk(await post(server.origin, '/hooks/wake', TOKEN, { text: 'no patterns here' }), 200, WAKE_KEYS)
  } finally {
    server.child.kill('SIGTERM')
    assert.is(await server.exited, 0, server.stderr())
  }
})

// ---------------------------------------------------------------------------------------------
const pgHost = suite('node dist/hookgate-serve.mjs --store postgres://… with no node_modules anywhere above it')
const pg = await startPostgres()

pgHost('loads the PostgreSQL client from the file beside it and keeps a wake\'s run in the database', async () => {
  if (!pg) return console.log('skipped: no PostgreSQL server binaries')
  const { host: dir, dist } = await hostWithDist()
  const url = await pg.createDatabase('standalone')
  const server = await spawnServer([join(dist, STANDALONE_FILE), '--port', '0', '--host', '127.0.0.1', '--state', join(dir, 'state'), '--store', url], { cwd: dir, env: hostEnv() })
  try {
    const wake = assertOk(await post(server.origin, '/hooks/wake', TOKEN, { text: 'standalone on postgres' }), 200, WAKE_KEYS)
    assert.is(await pg.sql(`SELECT count(*) FROM hookgate_runs WHERE id = '${wake.runId}'`, url), '1')
  } finally {
    server.child.kill('SIGTERM')
    assert.is(await server.exited, 0, server.stderr())
  }
})
pgHost.after(async () => { await pg?.destroy() })

emitted.run()
host.run()
lazy.run()
pgHost.run()
