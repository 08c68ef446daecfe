// The README works as printed: its example is the file in examples/minimal/, every
// `node bin/hookgate.js …` command it prints runs from the root of a fresh clone and gives the
// output it shows (boundary ids aside), its curl lines work against the repo's hooks.yaml, and its
// command list is the command table's.
import { execFile, spawnSync } from 'node:child_process'
import { createServer } from 'node:net'
import { compileFile } from '../../compiler/index.js'
import { startService } from '../../runtime/serve/service.js'
import { COMMANDS, synopsis } from '../../cli/commands.js'
import { cpSync, readFileSync, realpathSync, symlinkSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgateBin, repoRoot, tempDir } from '../helpers/paths.js'

const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8')

/** The first fenced block after `<!-- readme-example: NAME -->`. */
function exampleBlock(name: string): string {
  const at = readme.indexOf(`<!-- readme-example: ${name} -->`)
  assert.ok(at >= 0, `README has no example ${name}`)
  const m = /```[a-z]*\n([\s\S]*?)```/.exec(readme.slice(at))
  assert.ok(m, `README example ${name} has no fenced block`)
  return m![1]!
}

/**
 * Every `node bin/hookgate.js …` command the README prints, in order: each line of its sh blocks
 * and each inline code span that starts so. `serve` runs until stopped; the curl test covers it.
 */
function readmeCommands(): string[] {
  const fenced = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n').map((l) => ({ at: m.index!, text: l.trim() })))
  const inline = [...readme.matchAll(/(?<!`)`(node bin\/hookgate\.js [^`]+)`(?!`)/g)].map((m) => ({ at: m.index!, text: m[1]! }))
  return [...fenced, ...inline]
    .filter((c) => c.text.startsWith('node bin/hookgate.js ') && !c.text.startsWith('node bin/hookgate.js serve'))
    .sort((a, b) => a.at - b.at)
    .map((c) => c.text)
}

/**
 * A fresh clone, as far as the commands can tell: the repo's files without anything generated
 * (dist/, state, build/), with build/ and node_modules linked in as `npm ci` would have made them.
 */
function freshCopy(): string {
  const copy = join(tempDir('hookgate-readme-'), 'hookgate')
  const skip = new Set(['.git', 'node_modules', 'build', 'dist', '.hookgate'])
  cpSync(repoRoot, copy, { recursive: true, filter: (from) => !skip.has(basename(from)) })
  symlinkSync(realpathSync(join(repoRoot, 'build')), join(copy, 'build'))
  symlinkSync(realpathSync(join(repoRoot, 'node_modules')), join(copy, 'node_modules'))
  return copy
}

const example = suite('the README example')

example('examples/minimal/hooks.yaml is the file the README shows', () => {
  assert.is(readFileSync(join(repoRoot, 'examples', 'minimal', 'hooks.yaml'), 'utf8'), exampleBlock('hooks.yaml'))
})

// Regression: the README's commands compiled the repo's own hooks.yaml, so `try deploys` answered 404.
example('every node bin/hookgate.js command in the README runs as printed from the root of a fresh clone', () => {
  const commands = readmeCommands()
  const tryCommands = exampleBlock('try-commands').split('\n').filter(Boolean)
  for (const expected of [...tryCommands, 'node bin/hookgate.js runs']) assert.ok(commands.includes(expected), `not collected: ${expected}`)
  const copy = freshCopy()
  // No secret in the environment: the tour must not need one.
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` }
  delete env.HOOKGATE_TOKEN
  const outputs = new Map<string, string>()
  for (const command of commands) {
    const run = spawnSync('bash', ['-c', command], { cwd: copy, encoding: 'utf8', env, timeout: 30_000 })
    assert.is(run.status, 0, `${command}\nexit ${run.status}\n--- stdout ---\n${run.stdout}\n--- stderr ---\n${run.stderr}`)
    outputs.set(command, run.stdout)
  }
  const shown = exampleBlock('try-output')
  const actual = JSON.parse(outputs.get(tryCommands.find((l) => l.includes(' try '))!)!)
  const normalise = (s: string) => s.replace(/id="[0-9a-f…]+"/g, 'id="…"')
  assert.is(actual.status, Number(/"status": (\d+)/.exec(shown)![1]))
  assert.is(actual.mapping, /"mapping": "([^"]+)"/.exec(shown)![1])
  assert.is(actual.action.kind, /"kind": "([^"]+)"/.exec(shown)![1])
  assert.is(actual.action.name, /"name": "([^"]+)"/.exec(shown)![1])
  assert.is(normalise(actual.action.message), normalise(JSON.parse(/"message": ("(?:[^"\\]|\\.)*")/.exec(shown)![1]!)))
  assert.is(actual.external, true)
  const agent = [...outputs].find(([c]) => c.includes(' try agent '))
  assert.ok(agent, 'the README shows try agent')
  assert.is(JSON.parse(agent![1]).status, 202)
})

example('the command-line section lists exactly the commands of the command table', () => {
  assert.is(exampleBlock('commands'), COMMANDS.map((c) => `hookgate ${synopsis(c)}`).join('\n') + '\n')
})

/** The repo's hooks.yaml compiled and served in-process on a fresh state directory, for `use`. */
async function withRepoServer(use: (s: { dir: string; state: string; service: Awaited<ReturnType<typeof startService>>; logs: string[] }) => Promise<void>): Promise<void> {
  const dir = tempDir()
  const out = join(dir, 'dist')
  const state = join(dir, 'state')
  const compiled = await compileFile(join(repoRoot, 'hooks.yaml'), { outDir: out })
  assert.ok(compiled.ok, JSON.stringify(compiled.diagnostics))
  const logs: string[] = []
  const service = await startService({ bundle: out, port: 0, stateDir: state, watch: false, write: (l) => logs.push(l) })
  try {
    await use({ dir, state, service, logs })
  } finally {
    await service.close()
  }
}

/** A README block as script lines: continuations joined, comments and blank lines dropped. */
function scriptLines(block: string): string[] {
  return block.replace(/\\\n\s*/g, '').split('\n').filter((l) => l.trim() && !l.trim().startsWith('#'))
}

example('the curl lines work as printed against the repo\'s hooks.yaml', () => withRepoServer(async ({ dir, state, service }) => {
    const script = exampleBlock('curl')
      .replaceAll('http://127.0.0.1:8787', service.url)
      .replaceAll('.hookgate/token', join(state, 'token'))
      .replace('node bin/hookgate.js runs', `"${process.execPath}" "${hookgateBin}" runs --state "${state}" --json`)
    // Run the block as one script, printing a separator after each command's output.
    const output = await runScript(scriptLines(script).map((l) => (l.startsWith('TOKEN=') ? l : `${l}; echo; echo ----`)).join('\n'), dir)
    const parts = output.split('----\n').map((p) => p.trim()).filter(Boolean)
    assert.is(parts.length, 4, output)
    const [wake, agent, alerts] = parts.slice(0, 3).map((p) => JSON.parse(p))
    assert.equal([wake.ok, wake.action, wake.mode], [true, 'wake', 'now'])
    assert.equal([agent.ok, agent.action], [true, 'agent'])
    assert.match(agent.sessionKey, /^hook:/)
    assert.equal([alerts.ok, alerts.action], [true, 'wake'])
    const rows = JSON.parse(parts[3]!) as Array<{ id: string }>
    assert.equal(rows.map((r) => r.id).sort(), [wake.runId, agent.runId, alerts.runId].sort())
}))

example('the signed GitHub curl lines work as printed against the repo\'s hooks.yaml: 202, a replay, a 401', () => withRepoServer(async ({ dir, state, service, logs }) => {
    assert.ok(logs.some((l) => l.includes('generated a signing secret for mapping') && l.includes('signing-secrets/github')), logs.join('\n'))
    const script = exampleBlock('github-curl')
      .replaceAll('http://127.0.0.1:8787', service.url)
      .replaceAll('.hookgate/signing-secrets/github', join(state, 'signing-secrets', 'github'))
    const output = await runScript(scriptLines(script).map((l) => (l.startsWith('curl') ? `${l}; echo; echo ----` : l)).join('\n'), dir)
    const [first, again, wrong] = output.split('----\n').map((p) => p.trim()).filter(Boolean).map((p) => JSON.parse(p))
    assert.equal([first.ok, first.action], [true, 'agent'])
    assert.equal(again, first, 'the redelivery is answered as the original')
    assert.equal([wrong.ok, wrong.code], [false, 'signature_invalid'])
    const rows = (await service.engine.runs.list()).filter((r) => r.definitionId === 'github')
    assert.is(rows.length, 1, 'one run for one delivery')
}))

example('the Stripe lines work as printed from the root of a fresh clone', async () => {
  const copy = freshCopy()
  const port = await freePort()
  const script = exampleBlock('stripe-curl')
    .replaceAll('8788', String(port))
    .replace('sleep 1', `until curl -s -o /dev/null http://127.0.0.1:${port}/healthz; do sleep 0.1; done`)
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` }
  const output = await runScript(script, copy, env)
  const answer = JSON.parse(output.trim().split('\n').filter((l) => l.startsWith('{')).at(-1)!)
  assert.equal([answer.ok, answer.action], [true, 'agent'], output)
})

/** A port free right now on 127.0.0.1. */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

/** bash, asynchronously, so the in-process server keeps answering while the script runs. */
function runScript(script: string, cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-c', `set -e\n${script}`], { cwd, encoding: 'utf8', env, timeout: 60_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stdout}\n${stderr}`)) : resolve(stdout)))
  })
}

example.run()
