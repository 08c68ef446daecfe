// The generated references of docs/reference/ (config.md, cli.md, errors.md) against what
// scripts/docs.mjs makes from the sources now: a schema key, a flag or an error code changed
// without `npm run docs` leaves a page that is not true any more, and a key or flag without a
// description of its own leaves a row that says nothing. Both fail here; the fix is in the source
// (compiler/schema.ts, the verb's spec, runtime/http/error-codes.ts), then `npm run docs`. And the
// hand-written docs/http-api.md keeps a row for every field the built-in endpoints read.
import { spawn } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { COMMANDS } from '../../cli/commands.js'
import { ConfigSchema } from '../../compiler/schema.js'
import { ERROR_CODES } from '../../runtime/http/error-codes.js'
import { repoRoot, scratchDir } from '../helpers/paths.js'

interface Page {
  path: string
  text: string
  missing: string[]
  counts: Record<string, number>
}

const docs = await import(pathToFileURL(join(repoRoot, 'scripts', 'docs.mjs')).href) as { references(): Promise<Page[]> }
const pages = await docs.references()
const page = (path: string): Page => pages.find((p) => p.path === path)!

/** The first line where two texts part, for a message that says where the page went stale. */
function firstDifference(committed: string, made: string): string {
  const a = committed.split('\n')
  const b = made.split('\n')
  const i = a.findIndex((line, n) => line !== b[n])
  const at = i < 0 ? a.length : i
  return `line ${at + 1}:\n  committed: ${a[at] ?? '(end of file)'}\n  made now:  ${b[at] ?? '(end of file)'}`
}

/** Runs `node scripts/docs.mjs --check` from `root`; the child is killed after 60 s (code null). */
function check(root: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(root, 'scripts', 'docs.mjs'), '--check'], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d })
    child.on('error', (err) => resolve({ code: null, stderr: err.message }))
    child.on('close', (code) => resolve({ code, stderr }))
  })
}

const current = suite('the generated references are what `npm run docs` makes now')

for (const path of ['docs/reference/config.md', 'docs/reference/cli.md', 'docs/reference/errors.md']) {
  current(`${path} is not stale: a source changed without \`npm run docs\` fails here`, () => {
    const made = page(path)
    let committed: string
    try {
      committed = readFileSync(join(repoRoot, path), 'utf8')
    } catch {
      assert.unreachable(`${path} is missing: run \`npm run docs\``)
      return
    }
    if (committed !== made.text) assert.unreachable(`${path} differs from what \`npm run docs\` makes now (run it and commit the page), at ${firstDifference(committed, made.text)}`)
  })
}

current('`node scripts/docs.mjs --check` passes on the repo, and fails naming the page when a committed page was edited by hand', async () => {
  const ok = await check(repoRoot)
  assert.is(ok.code, 0, ok.stderr)

  // a copy of the script beside the same build, with one page edited by hand
  const root = scratchDir('docs-check-')
  mkdirSync(join(root, 'scripts'))
  cpSync(join(repoRoot, 'scripts', 'docs.mjs'), join(root, 'scripts', 'docs.mjs'))
  symlinkSync(join(repoRoot, 'build'), join(root, 'build'), 'dir')
  cpSync(join(repoRoot, 'docs', 'reference'), join(root, 'docs', 'reference'), { recursive: true })
  const errors = join(root, 'docs', 'reference', 'errors.md')
  writeFileSync(errors, readFileSync(errors, 'utf8').replace('| `not_found` | 404 |', '| `not_found` | 410 |'))
  const stale = await check(root)
  assert.is(stale.code, 1, stale.stderr)
  assert.match(stale.stderr, 'docs/reference/errors.md is not what `npm run docs` makes now')
  assert.not.match(stale.stderr, 'config.md')
})

current.run()

const described = suite('every key, flag and error code says what it is, in the source')

described('every key of hooks.yaml has a description of its own (not only its type\'s, such as an id\'s form)', () => {
  assert.equal(page('docs/reference/config.md').missing, [], 'add a description to these keys in compiler/schema.ts (described(Type, …) for a shared type)')
})

described('every key of the schema is a row of the config reference, in the section of the object that holds it', () => {
  const sections = page('docs/reference/config.md').text.split(/\n(?=## )/)
  const sectionOf = (title: string) => sections.find((s) => s.startsWith(`## ${title}\n`))
  let keys = 0
  // the live schema: a shared type (an id, a secret reference) carries a mark JSON leaves out, and
  // its own inner keys ({ env }, { file }) are explained once under Formats, not under every key
  const visit = (title: string, schema: Record<string, any>): void => {
    if (schema['~format']) return
    if (schema.type === 'object' && schema.properties) {
      const section = sectionOf(title || 'top level')
      assert.ok(section, `no section for ${title}`)
      for (const [key, value] of Object.entries<Record<string, any>>(schema.properties)) {
        keys++
        assert.ok(section!.includes(`\n| \`${key}\` |`), `${title || 'top level'}: no row for the key ${key}`)
        visit(`${title ? `${title}.` : ''}${key}`, value)
      }
    }
    if (schema.type === 'array' && schema.items) visit(`${title}[]`, schema.items)
    for (const branch of schema.anyOf ?? []) visit(title, branch)
  }
  visit('', ConfigSchema as unknown as Record<string, any>)
  assert.is(keys, page('docs/reference/config.md').counts.keys)
})

described('every flag of every command has a description, and is in the CLI reference under its command', () => {
  const made = page('docs/reference/cli.md')
  assert.equal(made.missing, [], 'add a description to these flags in their verb\'s spec')
  const sections = made.text.split(/\n(?=## hookgate )/)
  for (const c of COMMANDS) {
    const section = sections.find((s) => s.startsWith(`## hookgate ${c.name}\n`))
    assert.ok(section, `no section for ${c.name}`)
    for (const f of c.flags) assert.ok(section!.includes(`| \`--${f.name}`), `${c.name}: no row for --${f.name}`)
  }
  assert.is(made.counts.commands, COMMANDS.length)
})

described('every error code of the registry is a row of the error reference, with its statuses and surfaces', () => {
  const made = page('docs/reference/errors.md')
  assert.equal(made.missing, [])
  for (const [code, entry] of Object.entries(ERROR_CODES)) {
    assert.ok(made.text.includes(`| \`${code}\` | ${entry.status.join(', ')} | ${entry.surfaces.join(', ')} |`), `no row for ${code}`)
  }
  assert.is(made.counts.codes, Object.keys(ERROR_CODES).length)
})

described.run()

const api = suite('docs/http-api.md, written by hand, names every field the built-in endpoints read')

api('every field /hooks/wake and /hooks/agent read from the body is a row of its endpoint\'s table', () => {
  const text = readFileSync(join(repoRoot, 'docs', 'http-api.md'), 'utf8')
  for (const [endpoint, module] of [['wake', 'wake.ts'], ['agent', 'agent.ts']] as const) {
    const source = readFileSync(join(repoRoot, 'runtime', 'endpoints', module), 'utf8')
    // the readers of runtime/endpoints/policy.ts: field(o, 'name', …) and mode(o, 'name')
    const fields = [...source.matchAll(/\b(?:field<\w+>|mode)\(o, '(\w+)'/g)].map((m) => m[1]!)
    assert.ok(fields.length >= 4, `${module}: found ${fields.join(', ')}`)
    const section = text.split(/\n(?=## )/).find((s) => s.startsWith(`## POST /hooks/${endpoint}\n`))
    assert.ok(section, `no section for POST /hooks/${endpoint}`)
    for (const f of fields) assert.ok(section!.includes(`\n| \`${f}\` |`), `POST /hooks/${endpoint}: no row for the field ${f}`)
  }
})

api.run()
