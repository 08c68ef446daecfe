// The load phase against YAML alias bombs: a count of aliases is no bound (149 aliases of one
// 100 KB string made a 14 MiB bundle, a few more ran for minutes), so what the aliases add when
// expanded is measured before anything expands them, and the alias that passes
// MAX_ALIAS_EXPANSION_BYTES is a compile error at its line:col. The golden fixtures
// yaml-alias-expansion and yaml-alias-cycle hold the nested and the self-referring forms.
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileFile } from '../../compiler/index.js'
import { MAX_ALIAS_EXPANSION_BYTES } from '../../compiler/load.js'
import { BUNDLE_FILE } from '../../runtime/bundle/format.js'
import { scratchDir } from '../helpers/paths.js'

/** A config whose first Trigger anchors a `bytes`-long prompt that the next `aliases` Triggers repeat. */
function aliasedPrompts(bytes: number, aliases: number): string {
  const lines = ['hooks:', '  enabled: true', '  token: ${HOOKGATE_TOKEN}', 'agents:', '  - id: main', '    model: builtin/echo', '    triggers:']
  lines.push('      - name: t0', '        path: t0', '        target: wake', `        prompt: &big "${'x'.repeat(bytes)}"`)
  for (let i = 1; i <= aliases; i++) lines.push(`      - name: t${i}`, `        path: t${i}`, '        target: wake', '        prompt: *big')
  return lines.join('\n') + '\n'
}

/** 1-based line of the prompt of Trigger `i` in aliasedPrompts. */
const promptLine = (i: number) => 8 + 4 * i + 3

const load = suite('loading hooks.yaml with aliases')

load('149 aliases of one 100 KB string are refused at the alias that passes 1 MiB, and no bundle is written', async () => {
  const dir = scratchDir('alias-bomb-')
  const file = join(dir, 'hooks.yaml')
  writeFileSync(file, aliasedPrompts(100_000, 149))
  const outcome = await compileFile(file, { outDir: join(dir, 'dist') })
  assert.not.ok(outcome.ok)
  assert.equal(outcome.diagnostics.map((d) => d.code), ['YAML_ALIAS_EXPANSION'])
  const d = outcome.diagnostics[0]!
  // each alias adds 100,002 bytes: the eleventh takes the sum past 1,048,576
  assert.is(d.line, promptLine(11), JSON.stringify(d))
  assert.is(d.column, 17)
  assert.match(d.message, /^alias \*big expands to 97\.7 KiB, taking what aliases add to the config past 1 MiB$/)
  assert.not.ok(existsSync(join(dir, 'dist', BUNDLE_FILE)), 'a bundle was written')
})

load('aliases that add less than the limit still compile (nine of one 100 KB string)', async () => {
  const dir = scratchDir('alias-fine-')
  const file = join(dir, 'hooks.yaml')
  writeFileSync(file, aliasedPrompts(100_000, 9))
  assert.ok(9 * 100_002 < MAX_ALIAS_EXPANSION_BYTES)
  const outcome = await compileFile(file, { outDir: join(dir, 'dist'), check: true })
  assert.ok(outcome.ok, JSON.stringify(outcome.diagnostics))
  assert.is(outcome.result!.manifest.routes.length, 10)
})

load('the limit is on bytes, not characters: 2-byte characters count twice', async () => {
  const dir = scratchDir('alias-utf8-')
  const file = join(dir, 'hooks.yaml')
  // 60,000 "é" are 120,000 bytes: nine aliases add 1,080,018 bytes, past the limit at the ninth
  writeFileSync(file, aliasedPrompts(0, 9).replace('&big ""', `&big "${'é'.repeat(60_000)}"`))
  const outcome = await compileFile(file, { outDir: join(dir, 'dist'), check: true })
  assert.equal(outcome.diagnostics.map((d) => `${d.line} ${d.code}`), [`${promptLine(9)} YAML_ALIAS_EXPANSION`])
})

load.run()

// ---------------------------------------------------------------------------------------------
// An unquoted ${…} inside a flow collection: yaml reads its braces as a nested mapping and reports
// a cascade (29 and 51 errors for the golden fixtures yaml-unquoted-reference-*) that names neither
// cause nor fix, so the load phase reports one YAML_UNQUOTED_REFERENCE at the ${ instead. The ${ is
// found from the token stream, so a ${ that is quoted, commented or in block style is never blamed
// for another error, and an error before the ${ is still reported as what it is.

/** the findings of compiling `text` as hooks.yaml, as `line:col CODE` */
async function findings(text: string): Promise<string[]> {
  const dir = scratchDir('yaml-ref-')
  const file = join(dir, 'hooks.yaml')
  writeFileSync(file, text)
  const outcome = await compileFile(file, { outDir: join(dir, 'dist'), check: true })
  return outcome.diagnostics.map((d) => `${d.line}:${d.column} ${d.code}`)
}

const ref = suite('an unquoted ${…} in a YAML flow collection')

ref('a syntax error before the ${ is reported as the YAML syntax error it is, not blamed on the ${', async () => {
  const text = ['hooks:', '  enabled: true', '  token: ${HOOKGATE_TOKEN}', '  mappings: [ { id: a ] ]', 'channels:', '  - { id: ops, type: slack, url: ${SLACK_URL} }', ''].join('\n')
  const found = await findings(text)
  assert.ok(found.length > 0 && found.every((f) => f.endsWith(' YAML_SYNTAX')), found.join('\n'))
  assert.match(found[0]!, /^4:/)
})

ref('a ${ quoted, in a comment or in a block value beside a genuine flow error is not blamed for it', async () => {
  const text = [
    'hooks:',
    '  enabled: true',
    '  token: ${HOOKGATE_TOKEN}',
    '  mappings:',
    '    - { id: a, match: { path: a }, action: wake, textTemplate: "x ${X} y", # ${NOT_THIS}',
    "        messageTemplate: '${Y}' ]",
    ''].join('\n')
  const found = await findings(text)
  assert.ok(found.length > 0 && found.every((f) => f.endsWith(' YAML_SYNTAX')), found.join('\n'))
})

ref('the first of several unquoted ${…} is the one finding, whatever follows it', async () => {
  const text = ['hooks: { enabled: true, token: ${HOOKGATE_TOKEN} }', 'channels:', '  - { id: ops, type: slack, url: ${SLACK_URL} }', '  - { id: x, [ }', ''].join('\n')
  assert.equal(await findings(text), ['1:32 YAML_UNQUOTED_REFERENCE'])
})

ref.run()
