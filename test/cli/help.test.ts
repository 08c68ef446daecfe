// The command line is one table (cli/commands.ts): every command and group in it answers
// --help and -h on stdout with exit 0 listing all its flags, refuses an unknown flag with exit 2
// and its usage on stderr, and `hookgate --version` / `-v` print the package's version. The
// commands are walked from the table, so a command added to it is covered without a new test.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { COMMANDS, commandGroups, synopsis, usageLine } from '../../cli/commands.js'
import { repoRoot } from '../helpers/paths.js'
import { describeRun, hookgate, scratchDir, type CliResult } from './cli-helpers.js'

const cwd = scratchDir('help-')
const run = (args: string[]): Promise<CliResult> => hookgate(args, { cwd })
const words = (name: string) => name.split(' ')

// Every run is started when the file loads (a few at a time) and awaited by its test.
const helpRuns = COMMANDS.map((c) => ({ c, long: run([...words(c.name), '--help']), short: run([...words(c.name), '-h']), viaHelp: run(['help', ...words(c.name)]) }))
const groupRuns = [...commandGroups().entries()].map(([group, members]) => ({ group, members, run: run([...words(group), '--help']) }))
const unknownFlagRuns = COMMANDS.map((c) => ({ c, run: run([...words(c.name), '--no-such-flag']) }))
const topHelp = run(['--help'])
const versionRuns = [run(['--version']), run(['-v'])]

const help = suite('hookgate <command> --help, for every command in the command table')

help('the table has the commands the issue names, so the walk below is not vacuous', () => {
  const names = COMMANDS.map((c) => c.name)
  for (const name of ['compile', 'schema', 'try', 'serve', 'runs', 'tasks', 'import openclaw', 'webhooks gmail setup', 'webhooks gmail run']) assert.ok(names.includes(name), `missing ${name}`)
})

for (const { c, long, short, viaHelp } of helpRuns) {
  help(`${c.name} --help, -h and help ${c.name} exit 0 and list every flag on stdout`, async () => {
    for (const r of [await long, await short, await viaHelp]) {
      assert.is(r.code, 0, describeRun(r))
      assert.is(r.stderr, '', describeRun(r))
      assert.ok(r.stdout.startsWith(`${usageLine(c)}\n`), describeRun(r))
      for (const f of c.flags) assert.match(r.stdout, new RegExp(`^  --${f.name}\\b.*${escape(f.description)}`, 'm'), `--${f.name} with its description\n${describeRun(r)}`)
      assert.match(r.stdout, /-h, --help/)
    }
  })
}

for (const { group, members, run: started } of groupRuns) {
  help(`the group "${group}" answers --help with each of its commands`, async () => {
    const r = await started
    assert.is(r.code, 0, describeRun(r))
    for (const c of members) assert.match(r.stdout, synopsis(c))
  })
}

help('the top-level help lists every command with every one of its flags', async () => {
  const r = await topHelp
  assert.is(r.code, 0, describeRun(r))
  for (const c of COMMANDS) {
    assert.match(r.stdout, `  ${synopsis(c)}\n      ${c.summary}`)
    for (const f of c.flags) assert.match(r.stdout, `--${f.name}`)
  }
})

// Regression: the top-level help left out --max-errors, --grace-seconds, --log-bodies and --no-fsync.
help('the top-level help names --max-errors, --grace-seconds, --log-bodies and --no-fsync', async () => {
  const r = await topHelp
  for (const flag of ['--max-errors', '--grace-seconds', '--log-bodies', '--no-fsync', '--standalone']) assert.match(r.stdout, flag)
})

help.run()

const unknown = suite('hookgate <command> with an unknown flag')

for (const { c, run: started } of unknownFlagRuns) {
  unknown(`${c.name} --no-such-flag exits 2 with its usage on stderr and nothing on stdout`, async () => {
    const r = await started
    assert.is(r.code, 2, describeRun(r))
    assert.is(r.stdout, '', describeRun(r))
    assert.match(r.stderr, `${usageLine(c)}\n`)
  })
}

unknown.run()

const version = suite('hookgate --version')

version('--version and -v print the version from package.json and exit 0', async () => {
  const expected = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).version as string
  for (const started of versionRuns) {
    const r = await started
    assert.is(r.code, 0, describeRun(r))
    assert.is(r.stdout, `hookgate ${expected}\n`)
    assert.is(r.stderr, '')
  }
})

version.run()

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
