// `hookgate tasks`: each task of a compiled bundle with its next firing times and its last firing
// from the run history, as a table or JSON, through the real CLI and in-process with a fixed clock.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileProject, setTestToken, type Project } from '../http/harness.js'
import { describeRun, hookgate, stdoutJson } from '../../cli/cli-helpers.js'
import { openTestStore, storeArgs } from '../../helpers/stores.js'
import { taskRunId } from '../../../runtime/scheduler/fire.js'
import { run as tasksVerb, type TaskListing } from '../../../cli/verbs/tasks.js'
import type { CommandIO } from '../../../cli/flags.js'

const tasksCommand = (argv: string[], context: { stateDir: string }, io: CommandIO, now: () => number) => tasksVerb(argv, io, { ...context, now })

setTestToken()

const CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
agents:
  - id: main
    model: builtin/echo
    tasks:
      - name: standup
        schedule: "0 9 * * MON-FRI"
        timezone: Europe/Berlin
        target: agent
        prompt: what is on today?
      - name: poll
        every: 90s
        catchUp: skip
        target: wake
`

let project: Project

const cli = suite('hookgate tasks')

cli.before(async () => {
  project = await compileProject(CONFIG)
  const store = await openTestStore(project.stateDir, { fsync: false })
  const scheduledFor = '2026-11-23T08:00:00.000Z'
  await store.runs.create({ id: taskRunId('task:main:standup', scheduledFor), definitionKind: 'task', definitionId: 'task:main:standup', correlationId: 'c', action: 'agent', status: 'succeeded', scheduledFor })
  await store.close()
})

cli('--json lists each task with its schedule, its last firing and --count next times', async () => {
  const r = await hookgate(['tasks', '--bundle', project.outDir, '--state', project.stateDir, ...storeArgs(project.stateDir), '--json', '--count', '3'], { cwd: project.dir })
  assert.is(r.code, 0, describeRun(r))
  const tasks = stdoutJson<TaskListing[]>(r)
  assert.equal(tasks.map((t) => [t.id, t.name, t.target, t.schedule, t.timezone, t.catchUp]), [
    ['task:main:standup', 'standup', 'agent', '0 9 * * MON-FRI', 'Europe/Berlin', 'once'],
    ['task:main:poll', 'poll', 'wake', 'every 90s', null, 'skip'],
  ])
  assert.is(tasks[0]!.lastFiredFor, '2026-11-23T08:00:00.000Z')
  assert.is(tasks[1]!.lastFiredFor, null)
  for (const t of tasks) {
    assert.is(t.next.length, 3)
    assert.ok(Date.parse(t.next[0]!) > Date.now() - 1000)
  }
  const poll = tasks[1]!.next.map(Date.parse)
  assert.equal([poll[1]! - poll[0]!, poll[2]! - poll[1]!], [90_000, 90_000])
})

cli('the table shows the next weekday mornings at 09:00 Berlin time (08:00 UTC in winter)', async () => {
  let stdout = ''
  const friday = Date.parse('2026-11-27T10:00:00Z')
  const code = await tasksCommand(['--bundle', project.outDir, '--state', project.stateDir, ...storeArgs(project.stateDir), '--count', '2'], { stateDir: '.hookgate' }, { stdout: (t) => { stdout += t }, stderr: () => {} }, () => friday)
  assert.is(code, 0)
  assert.match(stdout, 'task:main:standup  standup\n')
  assert.match(stdout, '  schedule   0 9 * * MON-FRI (Europe/Berlin), catchUp once\n')
  assert.match(stdout, '  last fired 2026-11-23T08:00:00.000Z\n')
  assert.match(stdout, '  next       2026-11-30T08:00:00.000Z\n             2026-12-01T08:00:00.000Z\n')
})

cli('--count must be a whole number of at least 1 (exit 2)', async () => {
  const r = await hookgate(['tasks', '--bundle', project.outDir, '--count', '0'], { cwd: project.dir })
  assert.is(r.code, 2, describeRun(r))
  assert.match(r.stderr, '--count takes a whole number')
})

cli.run()
