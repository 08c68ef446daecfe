// Transform processes start at their first call, not at start-up (issue 16: two workers started
// right after listening competed with the first requests and held their memory in a server that
// may never run a transform). The call that starts a process waits for it, and its timeout counts
// from the process being ready, as before. The server runs in this process: its transform
// processes are this process's children.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { transformProcesses } from '../../helpers/processes.js'
import { assertError, assertOk, post, rowOf, send, serve, setTestToken, sleep, type Harness } from './harness.js'

const TOKEN = setTestToken()

const CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: quick
      match: { path: quick }
      action: agent
      messageTemplate: quick
      transform: { module: lazy.mjs, export: quick, timeoutMs: 200 }
    - id: endless
      match: { path: endless }
      action: agent
      messageTemplate: endless
      transform: { module: lazy.mjs, export: endless, timeoutMs: 200 }
`

const MODULE = `
// Its loading takes longer than the 200 ms a call may take, so a call whose timer ran while its
// process started would time out.
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 400)
export function quick() { return { name: 'transformed' } }
export function endless() { for (;;) {} }
`

const started = (): number => transformProcesses(process.pid).length

const lazy = suite<{ h: Harness }>('transform processes start at first use')

lazy.before(async (ctx) => { ctx.h = await serve(CONFIG, { 'transforms/lazy.mjs': MODULE }) })
lazy.after(async (ctx) => { await ctx.h.close() })

lazy('a server that has answered no transform call has started no transform process', async ({ h }) => {
  await sleep(700)
  assert.is(started(), 0, 'a transform process started before any call needed it')
  // requests that need no transform do not start one either
  assert.is((await send(h.origin, '/healthz', { method: 'GET' })).status, 200)
  assert.is(started(), 0)
})

lazy('the first call waits for its process, and its timeout counts from the process being ready', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/quick', TOKEN, {}), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assert.is((await rowOf(h.stateDir, body.runId))?.name, 'transformed')
  assert.is(started(), 1, 'one call starts one process, not the whole pool')
})

lazy('a transform that never answers still times out after its timeoutMs', async ({ h }) => {
  const started = Date.now()
  assertError(await post(h.origin, '/hooks/endless', TOKEN, {}), 500, 'transform_timeout')
  assert.ok(Date.now() - started < 5000)
  // the timed-out process is replaced at the next call, which works
  const body = assertOk(await post(h.origin, '/hooks/quick', TOKEN, {}), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assert.is((await rowOf(h.stateDir, body.runId))?.name, 'transformed')
})

lazy.run()
