// Issue 23: a match.when pattern stalled the whole server. With V8's backtracking irregexp,
// `deploy.*to.*prod` (accepted by the old check) took 7–11 s on a 9.6 KB body, cubic in its length,
// blocking every request, /healthz included; `(a+)+$` and `(x+x+)+y` are exponential. The runtime
// now matches with RE2, linear in the text. The server runs in its own process (the real CLI), so a
// stall shows as requests that get no answer, not as a stalled test runner: `send` gives each one
// 5 s, where irregexp would need hours on these 250,000-character fields. No timing is asserted.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileProject, post, send, setTestToken, spawnServe, type ServeProcess } from './harness.js'

const TOKEN = setTestToken()
const FIELD = 250_000

/** One hook name per pattern, each over a field as long as the default 256 KiB body allows. */
const CATASTROPHIC: Array<{ name: string; pattern: string; text: string }> = [
  { name: 'deploy', pattern: 'deploy.*to.*prod', text: 'deploy to '.repeat(FIELD / 10) },
  { name: 'nested', pattern: '(a+)+$', text: 'a'.repeat(FIELD - 1) + '!' },
  { name: 'overlap', pattern: '(x+x+)+y', text: 'x'.repeat(FIELD) },
]

const CONFIG = `hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
${CATASTROPHIC.map(({ name, pattern }) => `    - id: ${name}
      match:
        path: ${name}
        when: { payload.title: { matches: ${JSON.stringify(pattern)} } }
      action: wake
      textTemplate: "${name} matched"
`).join('')}`

const stall = suite<{ server: ServeProcess }>('a match.when pattern that backtracks catastrophically on irregexp')

stall.before(async (ctx) => {
  const project = await compileProject(CONFIG)
  ctx.server = await spawnServe(project.outDir, project.stateDir)
})
stall.after(async ({ server }) => {
  server.child.kill('SIGTERM')
  await server.exited
})

stall('over a 250,000-character field does not block /healthz: every request, healthz included, is answered', async ({ server }) => {
  // the three bodies go out first; healthz is asked while the server has them to match
  const heavy = CATASTROPHIC.map(({ name, text }) => post(server.origin, `/hooks/${name}`, TOKEN, { title: text }))
  const health = send(server.origin, '/healthz', { method: 'GET' })
  const [healthz, ...answers] = await Promise.all([health, ...heavy])
  assert.is(healthz!.status, 200, healthz!.text)
  assert.is(healthz!.json.ok, true)
  // none of the texts matches its pattern: each request is filtered (204), and answered
  assert.equal(answers.map((a) => a.status), [204, 204, 204], answers.map((a) => a.text).join('\n'))
})

stall('still chooses the mapping when the text matches', async ({ server }) => {
  const texts: Record<string, string> = { deploy: 'please deploy this to prod', nested: 'aaa', overlap: 'xxy' }
  for (const { name } of CATASTROPHIC) {
    const r = await post(server.origin, `/hooks/${name}`, TOKEN, { title: texts[name] })
    assert.is(r.status, 200, `${name}: ${r.text}`)
  }
})

stall('keeps serving after many such requests in a row', async ({ server }) => {
  const { name, text } = CATASTROPHIC[0]!
  for (let i = 0; i < 5; i++) assert.is((await post(server.origin, `/hooks/${name}`, TOKEN, { title: text })).status, 204)
  assert.is((await send(server.origin, '/healthz', { method: 'GET' })).status, 200)
})

stall.run()

// What one request's patterns may read is bounded as they run (runtime/bundle/conditions.ts), not by
// refusing ordinary patterns that share a hook name at compile time.
const BUDGET_CONFIG = `hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: deploys
      match:
        path: deploys
        when: { payload.title: { matches: "deploy.*to.*prod" } }
      action: wake
    - id: tags
      match:
        path: deploys
        when: { payload.ref: { matches: "^refs/(heads|tags)/[A-Za-z0-9._/-]+$" } }
      action: wake
    - id: nth
      match:
        path: nth
        when: { payload.x: { matches: "a[ab]{300}$" } }
      action: wake
`

const budget = suite<{ server: ServeProcess; project: Awaited<ReturnType<typeof compileProject>> }>('the work budget of a request\'s patterns')

budget.before(async (ctx) => {
  ctx.project = await compileProject(BUDGET_CONFIG)
  ctx.server = await spawnServe(ctx.project.outDir, ctx.project.stateDir)
})
budget.after(async ({ server }) => {
  server.child.kill('SIGTERM')
  await server.exited
})

budget('ordinary patterns on one hook name compile together and match', async ({ server }) => {
  assert.is((await post(server.origin, '/hooks/deploys', TOKEN, { title: 'deploy it to prod' })).status, 200)
  assert.is((await post(server.origin, '/hooks/deploys', TOKEN, { title: 'nothing', ref: 'refs/tags/v1.2' })).status, 200)
  assert.is((await post(server.origin, '/hooks/deploys', TOKEN, { title: 'nothing', ref: 'main' })).status, 204)
})

budget('a text too long for a large pattern is refused with 413 condition_text_too_long before it is matched, and healthz keeps answering', async ({ server }) => {
  // 301 instructions × 250,000 characters is over the budget: without it this match would hold
  // the event loop for seconds (the pattern defeats RE2's DFA cache on a/b text)
  let text = ''
  for (let i = 0; i < FIELD; i++) text += (i * 7919) % 3 === 0 ? 'b' : 'a'
  const refused = post(server.origin, '/hooks/nth', TOKEN, { x: text })
  const health = send(server.origin, '/healthz', { method: 'GET' })
  const [r, h] = await Promise.all([refused, health])
  assert.is(h!.status, 200)
  assert.is(r.status, 413, r.text)
  assert.is(r.json.code, 'condition_text_too_long')
  assert.match(String(r.json.error), 'would read 250000 characters')
  // a short text is matched as usual
  assert.is((await post(server.origin, '/hooks/nth', TOKEN, { x: 'a' + 'b'.repeat(300) })).status, 200)
  assert.is((await post(server.origin, '/hooks/nth', TOKEN, { x: 'b'.repeat(301) })).status, 204)
})

budget.run()
