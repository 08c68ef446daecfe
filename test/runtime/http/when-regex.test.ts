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

/** One hook name per pattern: each fits the work budget for the default 256 KiB body alone. */
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
