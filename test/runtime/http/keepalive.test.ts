// A refusal before the body is read keeps a keep-alive connection when the declared body is small
// (it is drained after the answer) and closes it when the body is large or of unknown length, so a
// flood of 401s costs no reconnect per request and a huge unread upload is never drained.
import { Agent, request } from 'node:http'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { serve, setTestToken } from './harness.js'

const token = setTestToken()
const h = await serve(`
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
agents:
  - { id: main, model: builtin/echo, heartbeat: { every: "off" } }
`)

function send(agent: Agent, auth: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; reused: boolean; connection: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(`${h.origin}/hooks/wake`, { method: 'POST', agent, headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json', ...headers } }, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode!, reused: req.reusedSocket, connection: res.headers.connection }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

const keep = suite('connections after a refusal')

keep('a 401 with a small body leaves the connection open for the next request', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const refused = await send(agent, 'wrong-token', JSON.stringify({ text: 'nope' }))
  assert.is(refused.status, 401)
  assert.is.not(refused.connection, 'close')
  const next = await send(agent, token, JSON.stringify({ text: 'hello', mode: 'next-heartbeat' }))
  assert.is(next.status, 200)
  assert.ok(next.reused, 'the second request opened a new connection')
  agent.destroy()
})

keep('a 413 by Content-Length closes the connection instead of draining the upload', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const big = 'x'.repeat(300 * 1024)
  const refused = await send(agent, token, big)
  assert.is(refused.status, 413)
  assert.is(refused.connection, 'close')
  agent.destroy()
})

keep.after(() => h.close())
keep.run()
