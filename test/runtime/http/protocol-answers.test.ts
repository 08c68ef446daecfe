// Requests Node would answer by itself, without the contract's JSON body: an Expect header other than
// 100-continue (Node's bare 417) and CONNECT (Node closed the socket without a word). Found by the
// fuzz harness (issue 23): every answer, a protocol-level refusal included, is the one JSON shape.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertRawError, head, post, RawClient, serve, setTestToken, type Harness } from './harness.js'

const TOKEN = setTestToken()
const CONFIG = `hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - { id: alert, match: { path: alert }, action: wake, textTemplate: "x" }
`

const answers = suite<{ h: Harness }>('protocol-level refusals')
answers.before(async (ctx) => { ctx.h = await serve(CONFIG) })
answers.after(async ({ h }) => { await h.close() })

answers('an Expect header other than 100-continue gets 417 with the JSON error body, not Node\'s bare answer', async ({ h }) => {
  const client = await RawClient.open(h.port)
  await client.write(head('POST', '/hooks/alert', { authorization: `Bearer ${TOKEN}`, expect: 'something-else', 'content-length': '2', 'content-type': 'application/json' }) + '{}')
  const reply = await client.response()
  assertRawError(reply, 417, 'expectation_failed')
  client.destroy()
})

answers('CONNECT gets 405 with the JSON error body instead of a closed socket', async ({ h }) => {
  const client = await RawClient.open(h.port)
  await client.write('CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n')
  const reply = await client.response()
  assertRawError(reply, 405, 'method_not_allowed')
  client.destroy()
})

answers('the server goes on serving after both', async ({ h }) => {
  const r = await post(h.origin, '/hooks/alert', TOKEN, {})
  assert.is(r.status, 200, r.text)
})

answers.run()
