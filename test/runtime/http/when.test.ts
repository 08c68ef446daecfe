// match.when over real HTTP: a mapping whose conditions fail is passed over for the next one on
// its path; when none is chosen the answer is 204 and the run history records a skipped run
// whose result is "filtered".
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertError, assertOk, post, rowOf, serve, setTestToken, type Harness } from './harness.js'
import { readRows } from '../../helpers/history.js'

const TOKEN = setTestToken()

const CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: pr-opened
      match:
        path: github
        when:
          headers.x-github-event: pull_request
          payload.action: { in: [opened, reopened] }
      action: agent
      messageTemplate: "PR {{payload.number}} {{payload.action}}"
    - id: pushes
      match:
        path: github
        when: { headers.x-github-event: push, query.env: { matches: "^(prod|staging)$" } }
      action: wake
      textTemplate: "push"
    - id: only-tags
      match:
        path: tags
        when: { payload.ref: { matches: "^refs/tags/" } }
      action: wake
      textTemplate: "tag {{payload.ref}}"
    - id: tags-rest
      match: { path: tags }
      action: wake
      textTemplate: "not a tag"
`

let h: Harness
const when = suite('match.when over HTTP')
when.before(async () => { h = await serve(CONFIG) })
when.after(async () => { await h.close() })

when('the first mapping whose conditions hold is chosen', async () => {
  const r = await post(h.origin, '/hooks/github', TOKEN, { action: 'opened', number: 7 }, { 'x-github-event': 'pull_request' })
  const body = assertOk(r, 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assert.is((await rowOf(h.stateDir, body.runId))?.definitionId, 'pr-opened')
})

when('a failing condition falls through to the next mapping on the same path', async () => {
  const r = await post(h.origin, '/hooks/github?env=prod', TOKEN, { ref: 'refs/heads/main' }, { 'x-github-event': 'push' })
  const body = assertOk(r, 200, ['ok', 'action', 'runId', 'mode'])
  assert.is((await rowOf(h.stateDir, body.runId))?.definitionId, 'pushes')
  const tag = assertOk(await post(h.origin, '/hooks/tags', TOKEN, { ref: 'refs/heads/x' }), 200, ['ok', 'action', 'runId', 'mode'])
  assert.is((await rowOf(h.stateDir, tag.runId))?.definitionId, 'tags-rest')
})

when('when no mapping\'s conditions hold the answer is 204 and a skipped run with result "filtered" is recorded', async () => {
  const r = await post(h.origin, '/hooks/github', TOKEN, { action: 'closed', number: 8 }, { 'x-github-event': 'pull_request', 'x-correlation-id': 'filtered-pr-8' })
  assert.is(r.status, 204, r.text)
  assert.is(r.text, '')
  const rows = (await readRows(h.stateDir)).filter((row) => row.correlationId === 'filtered-pr-8')
  assert.is(rows.length, 1)
  assert.is(rows[0]!.status, 'skipped')
  assert.is(rows[0]!.result, 'filtered')
  assert.is(rows[0]!.definitionId, 'pr-opened', 'the row names the first mapping that was passed over')
  assert.is(rows[0]!.action, 'agent')
})

when('a query value outside the regular expression is filtered too', async () => {
  const r = await post(h.origin, '/hooks/github?env=dev', TOKEN, {}, { 'x-github-event': 'push' })
  assert.is(r.status, 204, r.text)
})

when('conditions never come before auth: a wrong token is still 401', async () => {
  assertError(await post(h.origin, '/hooks/github', 'wrong-token', { action: 'opened' }, { 'x-github-event': 'pull_request' }), 401, 'unauthorized')
})

when.run()
