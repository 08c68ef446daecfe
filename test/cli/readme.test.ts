// The README's example works as printed: its hooks.yaml compiles, and the commands it shows give
// the output it shows (boundary ids aside).
import { execFileSync } from 'node:child_process'
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

example.run()
