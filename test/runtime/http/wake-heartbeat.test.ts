// A wake that waits for the next heartbeat of an agent whose heartbeat is off was answered 200 and
// its run stayed queued for ever (found while fuzzing, issue 23): nothing acknowledged may be left
// unfinished. The compiler refuses such a mapping (WAKE_WITHOUT_HEARTBEAT, a golden fixture); /wake
// and a transform's override are refused at admission, by the server and by `hookgate try` alike.
import { join } from 'node:path'
import { writeFileSync } from 'node:fs'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgate, stdoutJson } from '../../cli/cli-helpers.js'
import { assertError, post, runReaches, serve, setTestToken, type Harness } from './harness.js'

const TOKEN = setTestToken()
const CONFIG = `hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: shifted
      match: { path: shifted }
      action: wake
      agentId: ops
      textTemplate: "x"
      transform: { module: later.mjs }
agents:
  - id: main
    default: true
    model: builtin/echo
  - id: ops
    model: builtin/echo
    heartbeat: { every: "off" }
`

const wakes = suite<{ h: Harness }>('a next-heartbeat wake of an agent without a heartbeat')
wakes.before(async (ctx) => { ctx.h = await serve(CONFIG, { 'transforms/later.mjs': 'export default () => ({ mode: "next-heartbeat" })\n' }) })
wakes.after(async ({ h }) => { await h.close() })

wakes('is refused at admission with 400 no_heartbeat instead of left queued for ever', async ({ h }) => {
  assertError(await post(h.origin, '/hooks/wake', TOKEN, { text: 'later', mode: 'next-heartbeat', agentId: 'ops' }), 400, 'no_heartbeat')
  assertError(await post(h.origin, '/hooks/shifted', TOKEN, {}), 400, 'no_heartbeat')
  // now is read at once, and a next-heartbeat wake of an agent with a heartbeat is taken as before
  const now = await post(h.origin, '/hooks/wake', TOKEN, { text: 'now', mode: 'now', agentId: 'ops' })
  assert.is(now.status, 200, now.text)
  await runReaches(h.stateDir, now.json.runId, 'succeeded', 15_000)
  assert.is((await post(h.origin, '/hooks/wake', TOKEN, { text: 'later', mode: 'next-heartbeat', agentId: 'main' })).status, 200)
})

wakes('hookgate try gives the same answer', async ({ h }) => {
  const payload = join(h.dir, 'wake.json')
  writeFileSync(payload, JSON.stringify({ text: 'later', mode: 'next-heartbeat', agentId: 'ops' }))
  const r = await hookgate(['try', 'wake', '--payload', payload, '--bundle', h.outDir], { cwd: h.dir })
  const shown = stdoutJson<{ status: number; code?: string; body?: { code?: string } }>(r)
  assert.is(shown.status, 400, r.stdout + r.stderr)
  const tried = await hookgate(['try', 'shifted', '--payload', payload, '--bundle', h.outDir], { cwd: h.dir })
  assert.is(stdoutJson<{ status: number }>(tried).status, 400, tried.stdout + tried.stderr)
})

wakes.run()
