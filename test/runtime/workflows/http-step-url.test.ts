// "A value rendered into a URL can never change its structure": an http step's URL cannot be walked
// off the path its config fixed. Through the real server, against a real local HTTP server that
// records what arrives: dot-segment values (raw or percent-encoded) are refused or arrive encoded
// inside their own segment, "?", "#", "\", "@" and ":" stay inside their segment, and the step's
// secret header never reaches another path. Then the rule over random values, on the rendered URL.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { post, serve, setTestToken, until, type Harness } from '../http/harness.js'
import type { RunRow } from '../../../runtime/store/store.js'
import { compileTemplate } from '../../../compiler/templates.js'
import { templateHelpers, type CompiledRender } from '../../../runtime/bundle/template-helpers.js'
import { scopedStepUrl, StepUrlRefused } from '../../../runtime/bundle/step-url.js'
import { readRows } from '../../helpers/history.js'

const token = setTestToken()
process.env.HOOKGATE_TEST_MEMBERS_KEY = 'members-admin-key-7731'

// The API the step calls: records every request; /redirect answers 307 to a path outside the scope.
const arrived: Array<{ method: string; url: string; headers: IncomingHttpHeaders }> = []
const api = createServer((req, res) => {
  arrived.push({ method: req.method!, url: req.url!, headers: req.headers })
  req.resume().on('end', () => {
    if (req.url!.endsWith('/members/redirect')) res.writeHead(307, { location: '/api/admin/wipe' }).end()
    else res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
  })
})
await new Promise<void>((r) => api.listen(0, '127.0.0.1', r))
const apiOrigin = `http://127.0.0.1:${(api.address() as AddressInfo).port}`

const CONFIG = `
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  mappings:
    - { id: remove, match: { path: remove }, action: workflow, workflow: remove-member }
agents:
  - { id: main, model: builtin/echo, heartbeat: { every: "off" } }
workflows:
  - id: remove-member
    steps:
      - id: call
        action: http
        method: DELETE
        url: "${apiOrigin}/api/orgs/{{payload.org}}/members/{{payload.user}}"
        headers: { x-api-key: "\${HOOKGATE_TEST_MEMBERS_KEY}" }
`

async function finished(h: Harness, runId: string): Promise<{ workflow: RunRow; step: RunRow }> {
  return until(`workflow ${runId} to finish`, async () => {
    const rows = (await readRows(h.stateDir))
    const workflow = rows.find((r) => r.id === runId)
    const step = rows.find((r) => r.parentRunId === runId && r.stepId === 'call')
    return workflow && step && ['succeeded', 'failed'].includes(workflow.status) ? { workflow, step } : undefined
  }, 15_000)
}

const walk = suite('an http step URL walked by its template values')

walk('dot-segments are refused and ? # \\ @ : stay inside their segment: the secret header reaches only /api/orgs/<org>/members/<user>', async () => {
  const h = await serve(CONFIG)
  try {
    // value → the raw path that may arrive (null: the step must be refused, nothing sent)
    const cases: Array<[{ org: string; user: string }, string | null]> = [
      [{ org: 'acme', user: 'bob' }, '/api/orgs/acme/members/bob'],
      [{ org: 'acme', user: '..' }, null],
      [{ org: 'acme', user: '.' }, null],
      [{ org: '..', user: 'bob' }, null],
      [{ org: '.', user: '.' }, null],
      [{ org: 'acme', user: '%2e%2e' }, '/api/orgs/acme/members/%252e%252e'],
      [{ org: 'acme', user: '%2E.' }, '/api/orgs/acme/members/%252E.'],
      [{ org: 'acme', user: '.%2E' }, '/api/orgs/acme/members/.%252E'],
      [{ org: 'acme', user: '...' }, '/api/orgs/acme/members/...'],
      [{ org: 'acme', user: '../../admin' }, '/api/orgs/acme/members/..%2F..%2Fadmin'],
      [{ org: 'acme', user: '..\\..\\admin' }, '/api/orgs/acme/members/..%5C..%5Cadmin'],
      [{ org: 'acme', user: 'x?role=owner' }, '/api/orgs/acme/members/x%3Frole%3Downer'],
      [{ org: 'acme', user: 'x#frag' }, '/api/orgs/acme/members/x%23frag'],
      [{ org: 'evil@acme', user: 'x' }, '/api/orgs/evil%40acme/members/x'],
      [{ org: 'evil.example:80', user: 'x' }, '/api/orgs/evil.example%3A80/members/x'],
      // the call is not followed off its scope: a 307 to /api/admin/wipe is the step's answer
      [{ org: 'acme', user: 'redirect' }, '/api/orgs/acme/members/redirect'],
    ]
    const expected: string[] = []
    for (const [payload, path] of cases) {
      const answer = await post(h.origin, '/hooks/remove', token, payload)
      assert.is(answer.status, 202, answer.text)
      const { workflow, step } = await finished(h, answer.json.runId as string)
      const label = JSON.stringify(payload)
      if (path === null) {
        assert.is(step.status, 'failed', `${label} was not refused`)
        assert.match(step.error ?? '', /refused: a value rendered into its path made a "\." or "\.\." segment/, label)
        assert.is(workflow.status, 'failed', label)
      } else {
        expected.push(path)
        if (payload.user !== 'redirect') assert.is(step.status, 'succeeded', `${label}: ${step.error}`)
      }
    }
    // Everything that arrived, and only that: each a DELETE with the secret key, on its own path.
    assert.equal(arrived.map((r) => r.url), expected)
    for (const r of arrived) {
      assert.is(r.method, 'DELETE')
      assert.is(r.headers['x-api-key'], 'members-admin-key-7731')
      assert.is(r.url.split('/').length, 6, `${r.url} has more or fewer segments than the template`)
    }
    assert.not.ok(arrived.some((r) => r.url.startsWith('/api/admin')), 'the redirect was followed with the secret header')
  } finally {
    await h.close()
  }
})

const rule = suite('scopedStepUrl over random values')

const isRefusal = (err: unknown) => err instanceof StepUrlRefused

/** The url template compiled as the compiler does for an http step, rendered with `payload`. */
function renderer(text: string): (payload: unknown) => string {
  const compiled = compileTemplate(text, { encodeUriComponents: true })
  if (!compiled.ok) throw new Error(JSON.stringify(compiled.errors))
  // eslint-disable-next-line no-new-func -- the test runs the compiled code as the bundle does
  const fn = new Function(`return ${compiled.template.code}`)() as CompiledRender
  return (payload) => fn({ payload, headers: {}, query: {}, path: 'p', now: '' }, templateHelpers)
}

rule('no value moves a rendered URL off its origin and path prefix, nor adds or removes a segment or a parameter', () => {
  const templates = [
    { text: 'https://api.test/api/orgs/{{payload.a}}/members/{{payload.b}}', scope: 'https://api.test/api/orgs/', segments: 5, params: [] as string[] },
    { text: 'https://api.test/api/{{payload.a}}{{payload.b}}', scope: 'https://api.test/api/', segments: 2, params: [] },
    { text: 'https://api.test/api/x{{payload.a}}/y?q={{payload.b}}&r=1', scope: 'https://api.test/api/x', segments: 3, params: ['q', 'r'] },
    { text: 'https://api.test/items?tag={{payload.a}}#{{payload.b}}', scope: 'https://api.test/items?tag=', segments: 1, params: ['tag'] },
  ]
  const pieces = ['.', '..', '%2e', '%2E', '%', '2e', '/', '\\', '?', '#', '@', ':', '&', '=', 'a', ' ', '%2f', '\t']
  let seed = 20231
  const random = (n: number) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n }
  const value = () => Array.from({ length: random(5) }, () => pieces[random(pieces.length)]).join('')
  let refused = 0
  let sent = 0
  for (const t of templates) {
    const render = renderer(t.text)
    for (let i = 0; i < 1500; i++) {
      const payload = { a: value(), b: value() }
      let url: URL
      try {
        url = scopedStepUrl(render(payload), t.scope)
      } catch (err) {
        assert.ok(err instanceof StepUrlRefused, String(err))
        refused++
        continue
      }
      sent++
      const where = `${t.text} with ${JSON.stringify(payload)} → ${url.href}`
      assert.is(url.origin, 'https://api.test', where)
      assert.is(url.username + url.password, '', where)
      assert.ok(url.pathname.startsWith(new URL(t.scope).pathname), where)
      assert.is(url.pathname.split('/').length - 1, t.segments, where)
      assert.equal([...new Set(url.searchParams.keys())], t.params, where)
    }
  }
  assert.ok(refused > 0 && sent > refused, `refused ${refused}, sent ${sent}`)
  // the brief's own example: "..", raw or encoded, never reaches /api/orgs/acme/
  const members = renderer(templates[0]!.text)
  assert.throws(() => scopedStepUrl(members({ a: 'acme', b: '..' }), templates[0]!.scope), isRefusal)
  assert.is(scopedStepUrl(members({ a: 'acme', b: '%2e%2e' }), templates[0]!.scope).pathname, '/api/orgs/acme/members/%252e%252e')
})

rule('a URL outside the scope is refused even when rendered some other way', () => {
  assert.throws(() => scopedStepUrl('https://api.test/api/admin', 'https://api.test/api/orgs/'), /leaves https:\/\/api.test\/api\/orgs\//)
  assert.throws(() => scopedStepUrl('https://evil.test/api/orgs/x', 'https://api.test/api/orgs/'), isRefusal)
  assert.throws(() => scopedStepUrl('https://u:p@api.test/api/orgs/x', 'https://api.test/api/orgs/'), isRefusal)
  assert.throws(() => scopedStepUrl('https://api.test/items/x?tag=1', 'https://api.test/items?tag='), isRefusal)
  assert.throws(() => scopedStepUrl('https://api.test/api/orgs/a/%2E%2e/b', 'https://api.test/api/orgs/'), isRefusal)
  assert.throws(() => scopedStepUrl('https://api.test/api/orgs/a\\..\\b', 'https://api.test/api/orgs/'), isRefusal)
  assert.is(scopedStepUrl('https://api.test/api/orgs/a/b?x=..', 'https://api.test/api/orgs/').href, 'https://api.test/api/orgs/a/b?x=..')
})

walk.after(() => { api.close() })
walk.run()
rule.run()
