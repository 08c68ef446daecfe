// The request log line is written field by field for speed; it must stay the exact JSON that
// JSON.stringify({ t, level, msg, ...entry }) gives, escapes included.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { requestLine } from '../../runtime/serve/service.js'
import type { RequestLog } from '../../runtime/http/handler.js'

const line = suite('requestLine')

const entries: RequestLog[] = [
  { method: 'POST', path: '/hooks/wake', status: 200, ms: 1.23, client: '127.0.0.1', runId: 'f3229df9-2ec0-48d2-b391-4786264b678a' },
  { method: 'GET', path: '/nothing', status: 404, ms: 0, client: '::1', code: 'not_found' },
  { method: 'POST', path: '/hooks/"quoted"\\back\nline\u2028\u0001é🔑', status: 400, ms: 12.5, client: '10.0.0.1', code: 'invalid_json', body: '{"a":"\\u0000</script>"}' },
]

for (const e of entries) {
  line(`is JSON.stringify's text for ${e.method} ${JSON.stringify(e.path)}`, () => {
    const text = requestLine(e)
    const parsed = JSON.parse(text) as Record<string, unknown>
    assert.type(parsed.t, 'string')
    assert.ok(!Number.isNaN(Date.parse(parsed.t as string)))
    assert.is(text, JSON.stringify({ t: parsed.t, level: 'info', msg: 'request', ...e }))
    assert.not.ok(text.includes('\n'), 'one line')
  })
}

line.run()
