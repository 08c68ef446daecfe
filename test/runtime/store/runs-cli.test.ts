import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { appendFileSync, mkdirSync, mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import { RunStore, type NewRun, type RunRow } from '../../../runtime/store/file/runs.js'
import { RUNS_USAGE, run as runsVerb } from '../../../cli/verbs/runs.js'
import { commandHelp, getCommand } from '../../../cli/commands.js'
import type { CommandIO } from '../../../cli/flags.js'
import { tempDir } from '../../helpers/paths.js'

const runsCommand = (argv: string[], context: { stateDir: string; now?: () => number }, io: CommandIO) => runsVerb(argv, io, context)

const scratch = tempDir('hookgate-runs-cli-')
/** A new empty directory under this file's scratch directory (removed on exit). */
function freshDir(): string {
  return mkdtempSync(join(scratch, 'case-'))
}

interface Captured { code: number; stdout: string; stderr: string }

async function runs(argv: string[], stateDir = '/nonexistent-default-state', now?: () => number): Promise<Captured> {
  let stdout = ''
  let stderr = ''
  const code = await runsCommand(argv, { stateDir, ...(now ? { now } : {}) }, { stdout: (t) => { stdout += t }, stderr: (t) => { stderr += t } })
  return { code, stdout, stderr }
}

function newRun(id: string, extra: Partial<NewRun> = {}): NewRun {
  return { id, definitionKind: 'hook', definitionId: 'github', correlationId: `corr-${id}`, action: 'agent', ...extra }
}

/** A state dir with four runs: succeeded, failed, queued (a wake) and a trigger still running. */
async function seededStateDir(): Promise<{ dir: string; store: RunStore }> {
  const dir = freshDir()
  let t = Date.parse('2025-03-01T10:00:00.000Z')
  const store = RunStore.open(dir, { now: () => new Date((t += 60_000)) })
  await store.create(newRun('run-ok', { name: 'GitHub push', request: { message: 'build passed' } }))
  await store.transition('run-ok', 'running')
  await store.transition('run-ok', 'succeeded', { result: 'replied in #ci' })
  await store.create(newRun('run-bad', { definitionId: 'gmail' }))
  await store.transition('run-bad', 'failed', { error: 'the model provider answered 503 after three attempts and the run was given up for now' })
  await store.create(newRun('run-wake', { action: 'wake', definitionId: 'wake' }))
  await store.create(newRun('run-trig', { definitionKind: 'trigger', definitionId: 'deploys', status: 'running' }))
  return { dir, store }
}

// ---------------------------------------------------------------------------------------------

const json = suite('runsCommand --json')

json('prints every row newest first with every field, the request included', async () => {
  const { dir, store } = await seededStateDir()
  const out = await runs(['--state', dir, '--json'])
  assert.is(out.code, 0)
  assert.is(out.stderr, '')
  const rows = JSON.parse(out.stdout) as RunRow[]
  assert.equal(rows.map((r) => r.id), ['run-trig', 'run-wake', 'run-bad', 'run-ok'])
  // The file is the history: memory keeps finished runs without their request (it is never run again).
  assert.equal(rows.map(({ request: _r, ...rest }) => rest), store.list().map(({ request: _r, ...rest }) => rest))
  const ok = rows.find((r) => r.id === 'run-ok')!
  for (const key of ['id', 'definitionKind', 'correlationId', 'action', 'status', 'createdAt', 'updatedAt', 'startedAt', 'finishedAt', 'result', 'request']) {
    assert.ok(key in ok, `--json row has ${key}`)
  }
  assert.equal(ok.request, { message: 'build passed' })
  await store.close()
})

json('honours --limit', async () => {
  const { dir, store } = await seededStateDir()
  const rows = JSON.parse((await runs(['--state', dir, '--json', '--limit', '2'])).stdout) as RunRow[]
  assert.equal(rows.map((r) => r.id), ['run-trig', 'run-wake'])
  await store.close()
})

json('shows at most 50 runs by default', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir, { fsync: false })
  await Promise.all(Array.from({ length: 55 }, (_, i) => store.create(newRun(`bulk-${i}`))))
  const rows = JSON.parse((await runs(['--json'], dir)).stdout) as RunRow[]
  assert.is(rows.length, 50)
  assert.is(rows[0]!.id, 'bulk-54')
  await store.close()
})

json.run()

// ---------------------------------------------------------------------------------------------

const text = suite('runsCommand (text)')

text('prints an aligned table, one line per run, and the summary on stderr', async () => {
  const { dir, store } = await seededStateDir()
  const out = await runs(['--state', dir])
  assert.is(out.code, 0)
  const lines = out.stdout.trimEnd().split('\n')
  assert.is(lines.length, 5, 'a header and one line per run')
  assert.match(lines[0]!, /^CREATED\s+ID\s+KIND\s+ACTION\s+STATUS\s+NAME\s+ERROR$/)
  assert.match(lines[1]!, /^2025-03-01T10:\d\d:00\.000Z\s+run-trig\s+trigger\s+agent\s+running\s+deploys$/)
  assert.match(lines[4]!, /^\S+\s+run-ok\s+hook\s+agent\s+succeeded\s+GitHub push$/)
  const statusColumn = lines.map((l) => l.indexOf(l.includes('STATUS') ? 'STATUS' : l.split(/\s+/)[4]!))
  assert.ok(statusColumn.every((c) => c === statusColumn[0]), `columns line up: ${statusColumn}`)
  const bad = lines.find((l) => l.includes('run-bad'))!
  assert.match(bad, /the model provider answered 503 after three attempts and th…$/)
  assert.not.match(out.stdout, 'build passed', 'the request is only shown with --json')
  assert.is(out.stderr, '4 runs (1 succeeded, 1 failed, 1 running, 1 queued)\n')
  await store.close()
})

text('says how many it shows when --limit cuts the list', async () => {
  const { dir, store } = await seededStateDir()
  const out = await runs(['--state', dir, '--limit', '1'])
  assert.is(out.stdout.trimEnd().split('\n').length, 2)
  assert.is(out.stderr, '4 runs (1 succeeded, 1 failed, 1 running, 1 queued); showing the newest 1\n')
  await store.close()
})

text('strips terminal escape sequences that a webhook put into a run name or error', async () => {
  const dir = freshDir()
  const store = RunStore.open(dir)
  await store.create(newRun('evil', { name: 'pwn\u001b]0;owned\u0007\u001b[2J\r\nfake row', status: 'failed', error: 'x\u009b31m' }))
  const out = await runs(['--state', dir])
  assert.not.match(out.stdout, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/)
  assert.is(out.stdout.trimEnd().split('\n').length, 2, 'a name cannot add a line')
  await store.close()
})

text('uses the default state directory when --state is not given', async () => {
  const { dir, store } = await seededStateDir()
  const out = await runs([], dir)
  assert.is(out.code, 0)
  assert.match(out.stdout, 'run-trig')
  await store.close()
})

text('says there are no runs yet for a state directory without history', async () => {
  const dir = freshDir()
  const out = await runs(['--state', dir])
  assert.equal(out, { code: 0, stdout: '', stderr: 'no runs yet\n' })
  assert.equal(await runs(['--state', dir, '--json']), { code: 0, stdout: '[]\n', stderr: '' })
})

text('warns about unreadable lines but still shows the rest', async () => {
  const { dir, store } = await seededStateDir()
  await store.close()
  appendFileSync(join(dir, 'runs.jsonl'), 'garbage\n{"type":"status","id":"run-wake","status":"running","at":"2025-03-01T11:00:00.000Z"}\n')
  const out = await runs(['--state', dir])
  assert.is(out.code, 0)
  assert.match(out.stderr, /warning: skipped 1 unreadable line in /)
  assert.match(out.stdout, /run-wake\s+hook\s+wake\s+running/)
})

text.run()

// ---------------------------------------------------------------------------------------------

const missing = suite('runsCommand with a missing state directory')

missing('exits 0 and says no runs yet, naming the directory', async () => {
  const dir = join(freshDir(), 'never-served')
  assert.equal(await runs(['--state', dir]), { code: 0, stdout: '', stderr: `no runs yet (state directory ${dir} does not exist)\n` })
})

missing('prints an empty JSON array with --json', async () => {
  const dir = join(freshDir(), 'never-served')
  const out = await runs(['--state', dir, '--json'])
  assert.is(out.code, 0)
  assert.equal(JSON.parse(out.stdout), [])
  assert.is(out.stderr, `no runs yet (state directory ${dir} does not exist)\n`)
})

missing.run()

// ---------------------------------------------------------------------------------------------

const usage = suite('runsCommand usage errors')

usage('exits 2 with the usage on stderr for an unknown flag', async () => {
  const out = await runs(['--jsn'])
  assert.is(out.code, 2)
  assert.is(out.stdout, '')
  assert.match(out.stderr, "Unknown option '--jsn'")
  assert.ok(out.stderr.endsWith(`${RUNS_USAGE}\n`))
})

usage('exits 2 for a limit that is not a positive whole number', async () => {
  for (const limit of ['abc', '0', '-3', '1.5', '']) {
    const out = await runs(['--limit', limit])
    assert.is(out.code, 2, `--limit ${JSON.stringify(limit)}`)
    assert.match(out.stderr, RUNS_USAGE)
  }
})

usage('exits 2 for a positional argument or a flag without its value', async () => {
  assert.is((await runs(['extra'])).code, 2)
  assert.is((await runs(['--state'])).code, 2)
})

usage('prints the help from the command table on stdout and exits 0 for --help', async () => {
  assert.equal(await runs(['--help']), { code: 0, stdout: commandHelp(getCommand('runs')), stderr: '' })
  assert.ok(commandHelp(getCommand('runs')).startsWith(`${RUNS_USAGE}\n`))
})

usage('exits 1 when the state path cannot be read as a directory', async () => {
  const dir = freshDir()
  mkdirSync(join(dir, 'runs.jsonl')) // a directory where the history file should be
  const out = await runs(['--state', dir])
  assert.is(out.code, 1)
  assert.match(out.stderr, 'cannot read')
})

usage.run()

// ---------------------------------------------------------------------------------------------

const filters = suite('runsCommand filters')

const ids = (out: Captured) => (JSON.parse(out.stdout) as RunRow[]).map((r) => r.id)

filters('--kind keeps only runs of that kind of definition', async () => {
  const { dir, store } = await seededStateDir()
  assert.equal(ids(await runs(['--state', dir, '--json', '--kind', 'trigger'])), ['run-trig'])
  assert.equal(ids(await runs(['--state', dir, '--json', '--kind', 'hook'])), ['run-wake', 'run-bad', 'run-ok'])
  assert.equal(ids(await runs(['--state', dir, '--json', '--kind', 'task'])), [])
  await store.close()
})

filters('--status takes a comma list or repeats, and keeps runs in any of them', async () => {
  const { dir, store } = await seededStateDir()
  assert.equal(ids(await runs(['--state', dir, '--json', '--status', 'failed'])), ['run-bad'])
  assert.equal(ids(await runs(['--state', dir, '--json', '--status', 'failed,queued'])), ['run-wake', 'run-bad'])
  assert.equal(ids(await runs(['--state', dir, '--json', '--status', 'succeeded', '--status', 'running'])), ['run-trig', 'run-ok'])
  await store.close()
})

filters('--definition keeps only runs of that mapping, trigger or task', async () => {
  const { dir, store } = await seededStateDir()
  assert.equal(ids(await runs(['--state', dir, '--json', '--definition', 'gmail'])), ['run-bad'])
  assert.equal(ids(await runs(['--state', dir, '--json', '--definition', 'github'])), ['run-ok'])
  await store.close()
})

filters('--since keeps only runs created within the duration, parsed as hookgate rejects parses it', async () => {
  const { dir, store } = await seededStateDir()
  // runs were created at 10:01 (run-ok), 10:04 (run-bad), 10:06 (run-wake), 10:07 (run-trig)
  const at1010 = () => Date.parse('2025-03-01T10:10:00.000Z')
  assert.equal(ids(await runs(['--state', dir, '--json', '--since', '5m'], undefined, at1010)), ['run-trig', 'run-wake'])
  assert.equal(ids(await runs(['--state', dir, '--json', '--since', '1h'], undefined, at1010)), ['run-trig', 'run-wake', 'run-bad', 'run-ok'])
  await store.close()
})

filters('filters combine, --limit counts what passes them, and the summary says so', async () => {
  const { dir, store } = await seededStateDir()
  assert.equal(ids(await runs(['--state', dir, '--json', '--kind', 'hook', '--status', 'failed,succeeded', '--limit', '1'])), ['run-bad'])
  const out = await runs(['--state', dir, '--kind', 'hook', '--status', 'failed,succeeded'])
  assert.is(out.code, 0)
  assert.is(out.stdout.trimEnd().split('\n').length, 3)
  assert.is(out.stderr, '2 runs (1 succeeded, 1 failed) matching the filters\n')
  const none = await runs(['--state', dir, '--definition', 'nothing-here'])
  assert.is(none.stdout, '')
  assert.is(none.stderr, 'no runs match the filters (of 4 in the history)\n')
  await store.close()
})

filters('exits 2 with the usage for an unknown kind, status or duration', async () => {
  for (const argv of [['--kind', 'webhook'], ['--status', 'done'], ['--status', 'failed,nope'], ['--since', '1w'], ['--definition', '']]) {
    const out = await runs(argv)
    assert.is(out.code, 2, argv.join(' '))
    assert.ok(out.stderr.endsWith(`${RUNS_USAGE}\n`), out.stderr)
  }
})

filters.run()
