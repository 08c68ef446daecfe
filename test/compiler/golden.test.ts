// Golden diagnostics: every file under test/fixtures/diagnostics is a hooks.yaml whose expected
// findings are written after a `# ---- expected ----` line, one `# line:col: severity CODE: message`
// each (hints on `#   hint: …`). A `.good.yaml` expects no errors. HOOKGATE_UPDATE_GOLDEN=1 rewrites them.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileFile } from '../../compiler/index.js'
import { DiagnosticCodes } from '../../compiler/diagnostics.js'
import { fixturesDir, tempDir } from '../helpers/paths.js'

const dir = join(fixturesDir, 'diagnostics')
const MARK = '# ---- expected ----'
const update = process.env.HOOKGATE_UPDATE_GOLDEN === '1'
const out = tempDir()
const seenCodes = new Set<string>()

const golden = suite('compileFile against golden diagnostics')

for (const name of readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort()) {
  golden(`${name} reports exactly its expected findings`, async () => {
    const file = join(dir, name)
    const text = readFileSync(file, 'utf8')
    const cut = text.indexOf(MARK)
    const expected = cut < 0 ? [] : text.slice(cut + MARK.length).split('\n').map((l) => l.replace(/^# ?/, '')).filter((l) => l.trim() !== '')
    const outcome = await compileFile(file, { outDir: out, check: true })
    const actual = outcome.diagnostics.flatMap((d) => {
      assert.ok(d.file.endsWith(name) || !d.file.endsWith('.yaml'), `finding points at another file: ${d.file}`)
      const where = d.file.endsWith(name) ? '' : `${d.file.slice(d.file.indexOf('transforms/'))}:`
      const line = `${where}${d.line}:${d.column}: ${d.severity} ${d.code}: ${d.message}`
      seenCodes.add(d.code)
      return d.hint ? [line, `  hint: ${d.hint}`] : [line]
    })
    if (update) {
      const body = cut < 0 ? text.replace(/\n*$/, '\n') : text.slice(0, cut)
      writeFileSync(file, body + MARK + '\n' + actual.map((l) => `# ${l}`).join('\n') + '\n')
      return
    }
    assert.equal(actual.join('\n'), expected.join('\n'))
    if (name.endsWith('.good.yaml')) assert.ok(outcome.ok, `${name} should compile`)
    if (name.endsWith('.bad.yaml')) assert.not.ok(outcome.ok, `${name} should not compile`)
  })
}

// Codes found by other test files (the CLI, path-escape and transform tests) rather than fixtures.
const COVERED_ELSEWHERE = new Set(['CONFIG_FILE_UNREADABLE', 'TOO_MANY_ERRORS'])

golden('every diagnostic code has a fixture that produces it', () => {
  if (update) return
  const missing = Object.keys(DiagnosticCodes).filter((c) => !seenCodes.has(c) && !COVERED_ELSEWHERE.has(c))
  assert.equal(missing, [])
})

golden.run()
