// The README's example works as printed: its hooks.yaml compiles, and the commands it shows give
// the output it shows (boundary ids aside).
import { execFile, execFileSync } from 'node:child_process'
import { compileFile } from '../../compiler/index.js'
import { startService } from '../../runtime/service.js'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
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

/** The fenced sh block that follows the hooks.yaml example. */
function commandsAfterExample(): string[] {
  const at = readme.indexOf('<!-- readme-example: hooks.yaml -->')
  const blocks = [...readme.slice(at).matchAll(/```sh\n([\s\S]*?)```/g)]
  return blocks[0]![1]!.split('\n').filter((l) => l.trim() !== '')
}

const example = suite('the README example')

example('compiles and answers try exactly as the README shows', () => {
  const dir = tempDir()
  writeFileSync(join(dir, 'hooks.yaml'), exampleBlock('hooks.yaml'))
  let output = ''
  for (const line of commandsAfterExample()) {
    const cmd = line.replace(/^node bin\/hookgate\.js/, `"${process.execPath}" "${hookgateBin}"`)
    output = execFileSync('bash', ['-c', cmd], { cwd: dir, encoding: 'utf8', env: { ...process.env, HOOKGATE_TOKEN: 'a-token-for-the-readme-test-0123456789' } })
  }
  const shown = exampleBlock('try-output')
  const actual = JSON.parse(output)
  const normalise = (s: string) => s.replace(/id="[0-9a-f…]+"/g, 'id="…"')
  assert.is(actual.status, Number(/"status": (\d+)/.exec(shown)![1]))
  assert.is(actual.mapping, /"mapping": "([^"]+)"/.exec(shown)![1])
  assert.is(actual.action.kind, /"kind": "([^"]+)"/.exec(shown)![1])
  assert.is(actual.action.name, /"name": "([^"]+)"/.exec(shown)![1])
  assert.is(normalise(actual.action.message), normalise(JSON.parse(/"message": ("(?:[^"\\]|\\.)*")/.exec(shown)![1]!)))
  assert.is(actual.external, true)
})

example('the curl lines work as printed against the repo\'s hooks.yaml', async () => {
  const dir = tempDir()
  const out = join(dir, 'dist')
  const state = join(dir, 'state')
  const compiled = await compileFile(join(repoRoot, 'hooks.yaml'), { outDir: out })
  assert.ok(compiled.ok, JSON.stringify(compiled.diagnostics))
  const logs: string[] = []
  const service = await startService({ bundle: out, port: 0, stateDir: state, watch: false, write: (l) => logs.push(l) })
  try {
    const script = exampleBlock('curl')
      .replaceAll('http://127.0.0.1:8787', service.url)
      .replaceAll('.hookgate/token', join(state, 'token'))
      .replace('node bin/hookgate.js runs', `"${process.execPath}" "${hookgateBin}" runs --state "${state}" --json`)
    // Run the block as one script, printing a separator after each command's output.
    const lines = script.replace(/\\\n\s*/g, '').split('\n').filter((l) => l.trim() && !l.trim().startsWith('#'))
    const output = await runScript(lines.map((l) => (l.startsWith('TOKEN=') ? l : `${l}; echo; echo ----`)).join('\n'), dir)
    const parts = output.split('----\n').map((p) => p.trim()).filter(Boolean)
    assert.is(parts.length, 4, output)
    const [wake, agent, alerts] = parts.slice(0, 3).map((p) => JSON.parse(p))
    assert.equal([wake.ok, wake.action, wake.mode], [true, 'wake', 'now'])
    assert.equal([agent.ok, agent.action], [true, 'agent'])
    assert.match(agent.sessionKey, /^hook:/)
    assert.equal([alerts.ok, alerts.action], [true, 'wake'])
    const rows = JSON.parse(parts[3]!) as Array<{ id: string }>
    assert.equal(rows.map((r) => r.id).sort(), [wake.runId, agent.runId, alerts.runId].sort())
  } finally {
    await service.close()
  }
})

/** bash, asynchronously, so the in-process server keeps answering while the script runs. */
function runScript(script: string, cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-c', `set -e\n${script}`], { cwd, encoding: 'utf8' }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)))
  })
}

example.run()
