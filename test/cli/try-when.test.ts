// `hookgate try` on a mapping with match.when: the dry run says which comparison failed, where it
// is in hooks.yaml, and the values compared.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { join } from 'node:path'
import { writeFileSync } from 'node:fs'
import { describeRun, hookgate, scratchDir, stdoutJson, writeTree } from './cli-helpers.js'

const CONFIG = `hooks:
  enabled: true
  token: \${HOOKGATE_TOKEN}
  mappings:
    - id: pr-opened
      match:
        path: github
        when:
          headers.x-github-event: pull_request
          payload.action: { in: [opened, reopened] }
      action: agent
      messageTemplate: "PR {{payload.action}}"
    - id: prod-deploys
      match:
        path: deploys
        when: { payload.title: { matches: "deploy.*to.*\\\\bprod\\\\z", flags: i } }
      action: wake
`

const work = scratchDir('try-when-')
writeTree(work, { 'hooks.yaml': CONFIG })
const compiled = await hookgate(['compile', 'hooks.yaml', '--out', 'out'], { cwd: work })
if (compiled.code !== 0) throw new Error(`the test config does not compile\n${describeRun(compiled)}`)

let payloads = 0
function tryGithub(payload: unknown, event: string) {
  const file = join(work, `payload-${++payloads}.json`)
  writeFileSync(file, JSON.stringify(payload))
  return hookgate(['try', 'github', '--payload', file, '--bundle', 'out', '--header', `X-GitHub-Event:${event}`], { cwd: work })
}

const tryWhen = suite('hookgate try on a mapping with match.when')

const closedRun = tryGithub({ action: 'closed' }, 'pull_request')
const openedRun = tryGithub({ action: 'opened' }, 'pull_request')

tryWhen('shows the failed condition: its place in hooks.yaml, the path, the operator and both values', async () => {
  const run = await closedRun
  assert.is(run.code, 0, describeRun(run))
  const out = stdoutJson<any>(run)
  assert.is(out.status, 204)
  assert.is(out.reason, 'filtered')
  assert.equal(out.when, [{
    mapping: 'pr-opened',
    failed: [{ at: '/hooks/mappings/0/match/when/payload.action', path: 'payload.action', op: 'in', expected: ['opened', 'reopened'], actual: 'closed', held: false }],
  }])
})

tryWhen('a payload the conditions accept gets the mapping\'s action', async () => {
  const run = await openedRun
  const out = stdoutJson<any>(run)
  assert.is(out.status, 202, describeRun(run))
  assert.is(out.mapping, 'pr-opened')
})

function tryDeploys(title: string) {
  const file = join(work, `payload-${++payloads}.json`)
  writeFileSync(file, JSON.stringify({ title }))
  return hookgate(['try', 'deploys', '--payload', file, '--bundle', 'out'], { cwd: work })
}
const stagingRun = tryDeploys('Deploy api to staging')
const prodRun = tryDeploys('Deploy api to PROD')

tryWhen('explains a failed matches as any other comparison: the pattern as written, its flags and the text', async () => {
  const run = await stagingRun
  assert.is(run.code, 0, describeRun(run))
  const out = stdoutJson<any>(run)
  assert.is(out.status, 204)
  assert.equal(out.when, [{
    mapping: 'prod-deploys',
    failed: [{ at: '/hooks/mappings/1/match/when/payload.title', path: 'payload.title', op: 'matches', expected: 'deploy.*to.*\\bprod\\z', flags: 'i', actual: 'Deploy api to staging', held: false }],
  }])
})

tryWhen('a text the pattern matches (RE2 syntax: \\z, with the i flag) gets the mapping\'s action', async () => {
  const run = await prodRun
  const out = stdoutJson<any>(run)
  assert.is(out.status, 200, describeRun(run))
  assert.is(out.mapping, 'prod-deploys')
})

tryWhen.run()
