// Transform workers start at their first call, not at start-up (issue 16: two workers started
// right after listening competed with the first requests and held their memory in a server that
// may never run a transform). The call that starts a worker waits for it, and its timeout counts
// from the worker being ready, as before.
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertError, assertOk, post, rowOf, scratchDir, send, serve, setTestToken, sleep, type Harness } from './harness.js'

const TOKEN = setTestToken()
const MARKER = join(scratchDir('lazy-'), 'loaded.txt')
// Set before the server starts: the workers copy the names their mapping lists.
process.env.LAZY_MARKER = MARKER

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
      transform: { module: lazy.mjs, export: quick, env: [LAZY_MARKER], timeoutMs: 200 }
    - id: endless
      match: { path: endless }
      action: agent
      messageTemplate: endless
      transform: { module: lazy.mjs, export: endless, env: [LAZY_MARKER], timeoutMs: 200 }
`

const MODULE = `
import { appendFileSync } from 'node:fs'
// Each worker that imports this module says so; its loading takes longer than the 200 ms a call
// may take, so a call whose timer ran while its worker started would time out.
appendFileSync(process.env.LAZY_MARKER, 'loaded\\n')
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 400)
export function quick() { return { name: 'transformed' } }
export function endless() { for (;;) {} }
`

const loads = (): number => (existsSync(MARKER) ? readFileSync(MARKER, 'utf8').split('\n').filter(Boolean).length : 0)

const lazy = suite<{ h: Harness }>('transform workers start at first use')

lazy.before(async (ctx) => { ctx.h = await serve(CONFIG, { 'transforms/lazy.mjs': MODULE }) })
lazy.after(async (ctx) => { await ctx.h.close() })

lazy('a server that has answered no transform call has started no transform worker', async ({ h }) => {
  await sleep(700)
  assert.is(loads(), 0, 'a worker imported the transform module before any call needed it')
  // requests that need no transform do not start one either
  assert.is((await send(h.origin, '/healthz', { method: 'GET' })).status, 200)
  assert.is(loads(), 0)
})

lazy('the first call waits for its worker, and its timeout counts from the worker being ready', async ({ h }) => {
  const body = assertOk(await post(h.origin, '/hooks/quick', TOKEN, {}), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assert.is(rowOf(h.stateDir, body.runId)?.name, 'transformed')
  assert.is(loads(), 1, 'one call starts one worker, not the whole pool')
})

lazy('a transform that never answers still times out after its timeoutMs', async ({ h }) => {
  const started = Date.now()
  assertError(await post(h.origin, '/hooks/endless', TOKEN, {}), 500, 'transform_timeout')
  assert.ok(Date.now() - started < 5000)
  // the timed-out worker is replaced at the next call, which works
  const body = assertOk(await post(h.origin, '/hooks/quick', TOKEN, {}), 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assert.is(rowOf(h.stateDir, body.runId)?.name, 'transformed')
})

lazy.run()
