// What the real `hookgate serve` loads at start (issue 16): the runtime bundled into one file
// (build/serve/hookgate-serve.mjs) with its transform worker beside it, and no undici (~20 MiB
// and tens of ms) until something calls out. A preload reports, as the process exits, how many of
// undici's files are in the module cache (undici is CommonJS, so an import of it lands there too).
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI } from '../../fakes/openai.js'
import { hookgateBin } from '../../helpers/paths.js'
import { assertOk, compileProject, post, rowOf, runReaches, scratchDir, setTestToken, spawnServe, type ServeProcess } from './harness.js'
import { serveStoreArgs, storeArgs } from '../../helpers/stores.js'

const TOKEN = setTestToken()
const dir = scratchDir('startup-')
const PRELOAD = join(dir, 'count-undici.cjs')
writeFileSync(PRELOAD, `process.on('exit', () => require('node:fs').writeFileSync(process.env.UNDICI_COUNT_FILE, String(Object.keys(require.cache).filter((k) => /[\\\\/]undici[\\\\/]/.test(k)).length)))\n`)

/** Spawns the real CLI with the preload; `stop()` ends it with SIGTERM and returns how many undici files it had loaded. */
async function spawnCounting(outDir: string, stateDir: string): Promise<{ server: ServeProcess; stop(): Promise<number> }> {
  const countFile = join(scratchDir('count-'), 'undici.txt')
  const saved = { NODE_OPTIONS: process.env.NODE_OPTIONS, UNDICI_COUNT_FILE: process.env.UNDICI_COUNT_FILE }
  process.env.NODE_OPTIONS = `--require ${PRELOAD}`
  process.env.UNDICI_COUNT_FILE = countFile
  let server: ServeProcess
  try {
    server = await spawnServe(outDir, stateDir)
  } finally {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v
  }
  return {
    server,
    async stop() {
      server.child.kill('SIGTERM')
      assert.is(await server.exited, 0)
      return Number(readFileSync(countFile, 'utf8'))
    },
  }
}

const AGENT_KEYS = ['ok', 'action', 'runId', 'correlationId', 'sessionKey']

const startup = suite('hookgate serve at start')

startup('serving builtin/echo, a wake and a transform load no undici; the transform runs in the worker beside the bundled runtime', async () => {
  const project = await compileProject(`
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  transformsDir: transforms
  mappings:
    - id: named
      match: { path: named }
      action: agent
      messageTemplate: hello
      transform: { module: name.mjs }
agents:
  - { id: main, default: true, model: builtin/echo }
`, { 'transforms/name.mjs': 'export default function () { return { name: "named by the transform" } }\n' })
  const { server, stop } = await spawnCounting(project.outDir, project.stateDir)
  try {
    assertOk(await post(server.origin, '/hooks/wake', TOKEN, { text: 'hello' }), 200, ['ok', 'action', 'mode', 'runId'])
    const body = assertOk(await post(server.origin, '/hooks/named', TOKEN, {}), 202, AGENT_KEYS)
    assert.is((await rowOf(project.stateDir, body.runId))?.name, 'named by the transform')
    await runReaches(project.stateDir, body.runId, 'succeeded')
  } finally {
    assert.is(await stop(), 0, 'undici was loaded though nothing called out')
  }
})

startup('undici loads at the first call to a model provider (the probe above can see it)', async () => {
  const model = await startFakeOpenAI()
  try {
    const project = await compileProject(`
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
providers:
  - { id: fake, type: openai, baseUrl: ${model.url}, maxRetries: 0 }
agents:
  - { id: main, default: true, model: fake/model, heartbeat: { every: "off" } }
`)
    const { server, stop } = await spawnCounting(project.outDir, project.stateDir)
    try {
      const body = assertOk(await post(server.origin, '/hooks/agent', TOKEN, { message: 'hi', deliver: false }), 202, AGENT_KEYS)
      await runReaches(project.stateDir, body.runId, 'succeeded')
    } finally {
      assert.ok(await stop() > 0)
    }
  } finally {
    await model.close()
  }
})

/** Spawns `hookgate <args>`, sends SIGTERM the moment a stdout line matches `ready`, and resolves with the exit code. */
function stopAtOnce(args: string[], cwd: string, ready: RegExp): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [hookgateBin, ...args], { cwd, env: { ...process.env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let sent = false
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d
      if (!sent && ready.test(out)) { sent = true; child.kill('SIGTERM') }
    })
    child.stderr.setEncoding('utf8').on('data', (d: string) => { out += d })
    const safety = setTimeout(() => child.kill('SIGKILL'), 20_000)
    child.on('exit', (code, signal) => { clearTimeout(safety); resolve({ code, signal, out }) })
  })
}

startup('a SIGTERM sent the moment serve and admin say they are up stops them cleanly (exit 0), not mid-start', async () => {
  // Regression: the signal handlers were installed only after start-up finished, and the
  // "listening" line comes before that: a supervisor's quick stop killed the process (no exit code).
  const project = await compileProject(`
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
agents:
  - { id: main, default: true, model: builtin/echo }
`)
  for (let i = 0; i < 3; i++) {
    const serve = await stopAtOnce(['serve', '--bundle', project.outDir, '--port', '0', '--state', project.stateDir, ...await serveStoreArgs(project.stateDir)], project.dir, /hookgate listening/)
    assert.equal({ code: serve.code, signal: serve.signal }, { code: 0, signal: null }, serve.out)
    const admin = await stopAtOnce(['admin', '--port', '0', '--config', 'hooks.yaml', '--out', project.outDir, '--state', project.stateDir, ...storeArgs(project.stateDir)], project.dir, /admin token/)
    assert.equal({ code: admin.code, signal: admin.signal }, { code: 0, signal: null }, admin.out)
  }
})

startup.run()
