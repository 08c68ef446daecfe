// `hooks.enabled: false`, seen from outside: the server says at start that ingress is off, and
// every hook path answers 404 hooks_disabled without asking for a token (so it never reads as a
// token problem and never counts toward a lock-out); /healthz and /metrics are unchanged.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertError, send, serve, setTestToken, type Harness } from './harness.js'

const TOKEN = setTestToken()

const CONFIG = `
server:
  authFailures: { limit: 3, windowSeconds: 60, lockoutSeconds: 60 }
hooks:
  enabled: false
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: alerts
      match: { path: alerts }
      action: wake
      textTemplate: "{{payload.status}}"
`

const disabled = suite<{ h: Harness }>('a server whose config has hooks.enabled false')

disabled.before(async (context) => {
  context.h = await serve(CONFIG)
})

disabled.after(async ({ h }) => {
  await h.close()
})

disabled('says at start that ingress is disabled', ({ h }) => {
  assert.ok(h.logs.some((l) => l.includes('hooks are disabled') && l.includes('404 hooks_disabled')), h.logs.join('\n'))
})

// Regression: the check came after auth, so everyone got 401 "a valid hook token is required".
disabled('answers 404 hooks_disabled, not 401, to a hook request without a token', async ({ h }) => {
  assertError(await send(h.origin, '/hooks/alerts', { body: { status: 'firing' } }), 404, 'hooks_disabled')
})

disabled('answers 404 hooks_disabled on every hook path, with or without a token, any method', async ({ h }) => {
  for (const path of ['/hooks/alerts', '/hooks/wake', '/hooks/agent', '/hooks/nobody', '/hooks', '/hooks/']) {
    assertError(await send(h.origin, path, { body: {} }), 404, 'hooks_disabled')
    assertError(await send(h.origin, path, { body: {}, token: TOKEN }), 404, 'hooks_disabled')
    assertError(await send(h.origin, path, { body: {}, token: 'wrong' }), 404, 'hooks_disabled')
    assertError(await send(h.origin, path, { method: 'GET' }), 404, 'hooks_disabled')
  }
})

disabled('counts no refused hook toward the lock-out: the tenth tokenless request is still 404', async ({ h }) => {
  for (let i = 0; i < 10; i++) assertError(await send(h.origin, '/hooks/alerts', { body: {} }), 404, 'hooks_disabled')
})

disabled('leaves /healthz and /metrics as they are', async ({ h }) => {
  const health = await send(h.origin, '/healthz', { method: 'GET' })
  assert.is(health.status, 200, health.text)
  assert.is(health.json.ok, true)
  assertError(await send(h.origin, '/metrics', { method: 'GET' }), 401, 'unauthorized')
  const metrics = await send(h.origin, '/metrics', { method: 'GET', token: TOKEN })
  assert.is(metrics.status, 200, metrics.text)
  assert.match(metrics.text, 'hookgate_http_requests_total')
})

disabled('still answers 404 not_found outside the base path', async ({ h }) => {
  assertError(await send(h.origin, '/elsewhere', { body: {} }), 404, 'not_found')
})

disabled.run()
