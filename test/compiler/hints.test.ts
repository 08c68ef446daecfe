// "Did you mean" and "write …" hints: every hint the golden fixtures produce that names a
// replacement is applied to a copy of its file, and the finding must go away without a new one at
// that place; plus the regressions of hints that suggested something that does not compile.
import { cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { isMap, parseDocument } from 'yaml'
import { compileFile } from '../../compiler/index.js'
import { closest, editDistance, type Diagnostic } from '../../compiler/diagnostics.js'
import { compileTemplate } from '../../compiler/templates.js'
import { fixturesDir, scratchDir, writeTree } from '../helpers/paths.js'

type Segment = string | number

function segments(pointer: string): Segment[] {
  if (pointer === '') return []
  return pointer.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~')).map((s) => (/^\d+$/.test(s) ? Number(s) : s))
}

function pointerOf(path: readonly Segment[]): string {
  return path.map((s) => '/' + String(s).replace(/~/g, '~0').replace(/\//g, '~1')).join('')
}

/** The file with one hint applied, and the path in the config where the result is to be judged. */
interface Applied { source: string; at: string; kind: 'template root' | 'value' | 'key' | 'secret reference' | 'setting' }

/** Every replacement a hint names, applied one at a time; hints that name none give nothing. */
function applyHint(source: string, d: Diagnostic): Applied[] {
  const hint = d.hint ?? ''
  const path = segments(d.path)
  const out: Applied[] = []
  const tags = [...hint.matchAll(/\{\{[^}]*\}\}/g)].map((m) => m[0])
  if (tags.length > 0 && d.code.startsWith('TEMPLATE_')) {
    const lines = source.split('\n')
    const offset = lines.slice(0, d.line - 1).reduce((n, l) => n + l.length + 1, 0) + d.column - 1
    const open = source.lastIndexOf('{{', offset)
    const close = source.indexOf('}}', offset) + 2
    for (const tag of tags) out.push({ source: source.slice(0, open) + tag + source.slice(close), at: d.path, kind: 'template root' })
    return out
  }
  const meant = /^did you mean "([^"]*)"\?$/.exec(hint)
  if (meant) {
    const doc = parseDocument(source)
    // Findings that point at a key (an unknown key, a condition's operator or path) rename it.
    if (d.code === 'SCHEMA_UNKNOWN_KEY' || d.code === 'CONDITION_OPERATOR_UNKNOWN' || d.code === 'CONDITION_PATH_INVALID') {
      const parent = path.slice(0, -1)
      const value = doc.getIn(path, true)
      doc.deleteIn(path)
      doc.setIn([...parent, meant[1]!], value)
      return [{ source: String(doc), at: pointerOf([...parent, meant[1]!]), kind: 'key' }]
    }
    doc.setIn(path, meant[1])
    return [{ source: String(doc), at: d.path, kind: 'value' }]
  }
  const write = /^(?:write|use) ([A-Za-z]+): ([^\s<]+)(?:\s|$)/.exec(hint)
  if (write) {
    const [, key, text] = write as unknown as [string, string, string]
    const doc = parseDocument(source)
    const target = path[path.length - 1] === key ? path : [...path.slice(0, -1), key]
    if (!isMap(doc.getIn(target.slice(0, -1), true))) return []
    doc.setIn(target, text)
    return [{ source: String(doc), at: pointerOf(target), kind: text.startsWith('${') ? 'secret reference' : 'setting' }]
  }
  return []
}

function codesAt(list: Diagnostic[], pointer: string): string[] {
  return list.filter((d) => d.path === pointer).map((d) => d.code).sort()
}

const work = scratchDir('hints-')
cpSync(join(fixturesDir, 'diagnostics'), work, { recursive: true })
const fixtures = readdirSync(work).filter((f) => f.endsWith('.yaml')).sort()
const appliedKinds = new Map<string, number>()

const golden = suite('every hint in the golden fixtures')

for (const name of fixtures) {
  golden(`${name}: applying each suggested replacement makes its finding disappear`, async () => {
    const file = join(work, name)
    const source = readFileSync(file, 'utf8')
    const before = (await compileFile(file, { outDir: join(work, 'out'), check: true })).diagnostics.filter((d) => d.file.endsWith(name))
    let n = 0
    for (const d of before) {
      for (const applied of applyHint(source, d)) {
        const copy = join(work, `${name}.hint-${n++}.yaml`)
        writeFileSync(copy, applied.source)
        const after = (await compileFile(copy, { outDir: join(work, 'out'), check: true })).diagnostics
        const what = `${d.line}:${d.column} ${d.code} (hint: ${d.hint}) applied as ${applied.kind}`
        assert.not.ok(after.some((x) => x.code.startsWith('YAML_')), `${what}: the file no longer parses`)
        const left = [...codesAt(before, d.path)]
        left.splice(left.indexOf(d.code), 1)
        const was = applied.at === d.path ? left : codesAt(before, applied.at)
        const now = codesAt(after, applied.at)
        assert.ok(now.every((c) => was.includes(c)) && now.filter((c) => c === d.code).length <= was.filter((c) => c === d.code).length,
          `${what}: at ${applied.at} the findings were [${was}] apart from this one and are now [${now}]`)
        appliedKinds.set(applied.kind, (appliedKinds.get(applied.kind) ?? 0) + 1)
      }
    }
  })
}

golden('covers hints for template roots, enum values, key names and secret references', () => {
  for (const kind of ['template root', 'value', 'key', 'secret reference']) assert.ok((appliedKinds.get(kind) ?? 0) > 0, `no ${kind} hint was applied: ${JSON.stringify([...appliedKinds])}`)
})

golden.run()

// ---------------------------------------------------------------------------------------------

const roots = suite('compileTemplate hints for an unknown root')

function hintOf(template: string): string {
  const r = compileTemplate(template)
  assert.not.ok(r.ok, `${template} compiled`)
  return r.ok ? '' : r.errors.find((e) => e.code === 'TEMPLATE_UNKNOWN_ROOT')?.hint ?? ''
}

// Regression: {{foo.bar}} was told "did you mean {{now.bar}}?", and now takes no sub-path.
roots('{{foo.bar}} is not told to write {{now.bar}}, which does not compile', () => {
  const hint = hintOf('{{foo.bar}}')
  assert.not.match(hint, '{{now')
  assert.match(hint, '{{payload.foo.bar}}')
})

roots('every tag a hint suggests compiles', () => {
  for (const t of ['{{foo.bar}}', '{{foo}}', '{{nwo}}', '{{pth.x}}', '{{hedaers.x-event}}', '{{qeury.a.b}}', '{{paylod.__proto__}}', '{{x[0]}}', '{{bdoy.a[1]}}']) {
    const suggested = [...hintOf(t).matchAll(/\{\{[^}]*\}\}/g)].map((m) => m[0])
    for (const s of suggested) assert.ok(compileTemplate(s).ok, `${t}: the hint suggests ${s}, which does not compile`)
  }
})

roots('a near root that takes the path is still suggested', () => {
  assert.match(hintOf('{{hedaers.x-event}}'), 'did you mean {{headers.x-event}}?')
  assert.match(hintOf('{{nwo}}'), 'did you mean {{now}}?')
  assert.not.match(hintOf('{{qeury.a.b}}'), '{{query')
})

roots.run()

// ---------------------------------------------------------------------------------------------

const distance = suite('editDistance and closest')

// Regression: "agnet" and "wkae" got no hint while "agnt" did: a swap of two letters counted two edits.
distance('agnet and wkae get a hint like agnt does: a transposition is one edit', () => {
  assert.is(editDistance('agnet', 'agent'), 1)
  assert.is(editDistance('wkae', 'wake'), 1)
  assert.is(closest('agnet', ['wake', 'agent', 'workflow']), 'agent')
  assert.is(closest('wkae', ['wake', 'agent', 'workflow']), 'wake')
  assert.is(closest('agnt', ['wake', 'agent', 'workflow']), 'agent')
})

distance('counts insertions, deletions and substitutions as before', () => {
  assert.is(editDistance('', 'abc'), 3)
  assert.is(editDistance('kitten', 'sitting'), 3)
  assert.is(editDistance('ca', 'abc'), 3) // optimal string alignment: no edit of a swapped pair
})

distance.run()

// ---------------------------------------------------------------------------------------------

const schemaHints = suite('validate hints through compileFile')

async function findings(yaml: string, files: Record<string, string> = {}): Promise<Diagnostic[]> {
  const dir = scratchDir()
  writeTree(dir, { 'hooks.yaml': yaml, ...files })
  return (await compileFile(join(dir, 'hooks.yaml'), { outDir: join(dir, 'out'), check: true })).diagnostics
}

schemaHints('a misspelt enum value with two letters swapped is told the value it meant', async () => {
  const list = await findings('hooks:\n  enabled: false\n  mappings:\n    - match: { path: a }\n      action: wkae\n    - match: { path: b }\n      action: agnet\n')
  assert.equal(list.filter((d) => d.code === 'SCHEMA_ENUM').map((d) => d.hint), ['did you mean "wake"?', 'did you mean "agent"?'])
})

// Regression: a Discord webhook URL written in a slack channel was told to use ${SLACK_WEBHOOK_URL}.
schemaHints('a literal Discord URL is not told to use SLACK_WEBHOOK_URL', async () => {
  const list = await findings('hooks:\n  enabled: false\nchannels:\n  - id: alerts\n    type: slack\n    url: https://discord.com/api/webhooks/1/abc\n')
  const d = list.find((x) => x.code === 'SECRET_LITERAL')
  assert.ok(d, JSON.stringify(list))
  assert.not.match(d!.hint!, 'SLACK_WEBHOOK_URL')
  assert.match(d!.hint!, 'write url: ${DISCORD_WEBHOOK_URL}')
  assert.match(d!.hint!, 'type: discord')
})

schemaHints('reference hints name the secret of the field: a provider key after its provider, a bot token, a push token', async () => {
  const list = await findings(`hooks:
  enabled: false
  gmail:
    pushToken: literal-push-token
providers:
  - id: my-gateway
    type: openai
    baseUrl: https://llm.example/v1
    apiKey: sk-literal
channels:
  - id: tg
    type: telegram
    botToken: 123:literal
`)
  assert.equal(list.filter((d) => d.code === 'SECRET_LITERAL').map((d) => d.hint), [
    'write pushToken: ${GMAIL_PUSH_TOKEN} (or { file: path })',
    'write apiKey: ${MY_GATEWAY_API_KEY} (or { file: path })',
    'write botToken: ${TELEGRAM_BOT_TOKEN} (or { file: path })',
  ])
})

schemaHints('an unknown key is not told to become a key its object already has', async () => {
  const list = await findings('hooks:\n  enabled: false\n  mappings:\n    - match: { path: a }\n      action: wake\n      textTemplate: a\n      textTemplat: b\n')
  const d = list.find((x) => x.code === 'SCHEMA_UNKNOWN_KEY')
  assert.ok(d && !d.hint?.startsWith('did you mean'), JSON.stringify(d))
})

schemaHints.run()
