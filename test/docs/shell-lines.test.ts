// The README and every page under docs/ work as printed. Each file's `sh` blocks run, line by line
// and in order, as one terminal session (set -e: the first line that fails fails the file, named
// file:line) from the root of a fresh copy of the repo (node_modules and build/ linked in, as
// `npm ci` leaves them); a block after `<!-- sh: background -->` is started in the background,
// waited for until its port answers (at most 30 s) and stopped once the file's other blocks ran;
// a block after `<!-- sh: skip — REASON -->` is skipped with its reason printed. Every `yaml` block
// compiles alone (`compile --check`, with the repo's transforms/ beside it) unless it is marked
// `<!-- yaml: fragment of hooks.yaml under KEY — needs … -->` (or `<!-- yaml: not hooks.yaml — … -->`
// for another program's YAML, e.g. Prometheus's). No shell line holds usage notation.
//
// The one liberty taken with "as printed": the ports 8787, 8788 and 8790 in a file's shell lines
// are replaced by free ones (and HOOKGATE_PORT / HOOKGATE_ADMIN_PORT set to them), so that the test
// can run beside anything else on the machine. Global npm installs go to a temporary prefix.
import { spawn, spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, readdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { basename, dirname, join, relative } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { repoRoot, scratchDir } from '../helpers/paths.js'

/** One fenced block of a Markdown file, with the HTML comment on the line before it, if any. */
interface Block {
  file: string
  /** 1-based line of the block's first content line */
  line: number
  lang: string
  body: string
  mark?: string
}

/** README.md and every docs/**.md, relative to the repo root. */
function docFiles(): string[] {
  const out = ['README.md']
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(repoRoot, dir), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const rel = join(dir, entry.name)
      if (entry.isDirectory()) walk(rel)
      else if (entry.name.endsWith('.md')) out.push(rel)
    }
  }
  walk('docs')
  return out
}

/** The fenced blocks of `file`, each with the `<!-- … -->` comment that stands on the line before its fence. */
function blocks(file: string): Block[] {
  const lines = readFileSync(join(repoRoot, file), 'utf8').split('\n')
  const out: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,})(\S*)\s*$/.exec(lines[i]!)
    if (!open) continue
    const fence = open[2]!
    const body: string[] = []
    let j = i + 1
    while (j < lines.length && lines[j]!.trim() !== fence) body.push(lines[j++]!)
    const before = i > 0 ? /^\s*<!--\s*(.*?)\s*-->\s*$/.exec(lines[i - 1]!) : null
    out.push({ file, line: i + 2, lang: open[3]!, body: body.join('\n') + '\n', ...(before ? { mark: before[1]! } : {}) })
    i = j
  }
  return out
}

/** A shell block's lines as typed: continuations joined, each with the file line it starts on. */
function shellLines(block: Block): Array<{ line: number; text: string }> {
  const out: Array<{ line: number; text: string }> = []
  const raw = block.body.split('\n')
  for (let i = 0; i < raw.length; i++) {
    const start = i
    let text = raw[i]!
    while (text.endsWith('\\') && i + 1 < raw.length) text = text.slice(0, -1) + ' ' + raw[++i]!.trim()
    if (text.trim() && !text.trim().startsWith('#')) out.push({ line: block.line + start, text })
  }
  return out
}

const shellMark = (b: Block) => (b.mark?.startsWith('sh:') ? b.mark.slice(3).trim() : undefined)

/**
 * A fresh clone as far as the commands can tell: the repo's files without anything generated
 * (dist/, state, build/, node_modules), with build/ and node_modules linked in as `npm ci` made them.
 */
function freshCopy(): string {
  const copy = join(scratchDir('copy-'), 'hookgate')
  const skip = new Set(['.git', 'node_modules', 'build', 'dist', '.hookgate', 'state'])
  cpSync(repoRoot, copy, { recursive: true, filter: (from) => !skip.has(basename(from)) })
  symlinkSync(realpathSync(join(repoRoot, 'build')), join(copy, 'build'))
  symlinkSync(realpathSync(join(repoRoot, 'node_modules')), join(copy, 'node_modules'))
  return copy
}

/** A port free right now on 127.0.0.1. */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`

/**
 * The bash script that runs a file's shell blocks as one session: each line preceded by where it
 * is printed (so a failure names file:line), background blocks started with `&` and waited for by
 * their port answering, every background job stopped at the end.
 */
function scriptFor(file: string, fileBlocks: Block[], ports: Map<string, string>): { script: string; ran: number; skipped: string[] } {
  const sub = (s: string) => s.replace(/\b(8787|8788|8790)\b/g, (p) => ports.get(p)!)
  const parts = [
    'set -e',
    `trap 'echo "failed at $__at: $BASH_COMMAND" >&2' ERR`,
    // Background jobs share the script's process group (no job control), so the test can stop
    // whatever they started by that group even if the script is killed; here they are stopped and
    // waited for (serve drains, then lets go of the state lock) once the file's lines ran.
    `trap 'set +e; trap - ERR; jobs=$(jobs -p); [ -z "$jobs" ] || kill $jobs 2>/dev/null; wait 2>/dev/null; true' EXIT`,
  ]
  let ran = 0
  const skipped: string[] = []
  for (const b of fileBlocks.filter((x) => x.lang === 'sh')) {
    const mark = shellMark(b)
    if (mark?.startsWith('skip')) {
      skipped.push(`${file}:${b.line}: ${mark.replace(/^skip\s*[—:-]?\s*/, '')}`)
      continue
    }
    const lines = shellLines(b)
    if (mark === 'background') {
      assert.is(lines.length, 1, `${file}:${b.line}: a background block holds a single command`)
      const l = lines[0]!
      const cmd = sub(l.text)
      const port = /--port[ =](\d+)/.exec(cmd)?.[1] ?? ports.get('8787')!
      parts.push(`__at=${q(`${file}:${l.line}`)}`, `( ${cmd} ) > .docs-background-${l.line}.log 2>&1 &`)
      // Waited for by outcome: the port answers HTTP (any status), or the 30 s are up.
      parts.push(`__t=0; until curl -s -o /dev/null http://127.0.0.1:${port}/; do sleep 0.1; __t=$((__t+1)); if [ $__t -ge 300 ]; then echo "not answering on ${port}: ${file}:${l.line}" >&2; cat .docs-background-${l.line}.log >&2; exit 1; fi; done`)
      ran++
      continue
    }
    for (const l of lines) {
      // The copy's node_modules is the worktree's, linked: `npm ci` there would empty the real one.
      assert.not.match(l.text, /\bnpm (ci|install|i)\b(?!.*(-g\b|--global\b|--prefix\b))/, `${file}:${l.line}: a line that reinstalls node_modules cannot run in the linked copy; mark its block <!-- sh: skip — … -->`)
      parts.push(`__at=${q(`${file}:${l.line}`)}`, sub(l.text))
      ran++
    }
  }
  return { script: parts.join('\n') + '\n', ran, skipped }
}

/** bash, asynchronously, in its own process group, killed whole after `timeoutMs`. */
function runBash(script: string, cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${timeoutMs} ms)`
      try { process.kill(-child.pid!, 'SIGKILL') } catch { /* gone */ }
    }, timeoutMs)
    child.on('close', (code) => {
      clearTimeout(timer)
      try { process.kill(-child.pid!, 'SIGTERM') } catch { /* gone */ }
      resolve({ code, stdout, stderr })
    })
  })
}

const files = docFiles()
const all = files.flatMap(blocks)

const rules = suite('shell lines and YAML blocks of README.md and docs/')

rules('a reader finds the manual: the README is at most 250 lines and links docs/README.md, which links every page', () => {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8')
  assert.ok(readme.split('\n').length <= 250, `README.md has ${readme.split('\n').length} lines`)
  assert.match(readme, /\]\(docs\/README\.md\)/)
  const map = readFileSync(join(repoRoot, 'docs', 'README.md'), 'utf8')
  for (const f of files.filter((f) => f.startsWith('docs/') && f !== 'docs/README.md')) {
    assert.ok(map.includes(`](${relative('docs', f)})`), `docs/README.md does not link ${f}`)
  }
})

rules('every link to a file of the repo from README.md and docs/ names a file that exists', () => {
  const missing: string[] = []
  for (const f of files) {
    const text = readFileSync(join(repoRoot, f), 'utf8').replace(/```[\s\S]*?```/g, '')
    for (const m of text.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)) {
      const target = m[1]!
      if (/^[a-z]+:/.test(target)) continue
      const at = join(repoRoot, dirname(f), target)
      try { readFileSync(at) } catch (e) { if ((e as NodeJS.ErrnoException).code !== 'EISDIR') missing.push(`${f}: ${target}`) }
    }
  }
  assert.equal(missing, [])
})

rules('a pasted shell line never holds usage notation, and every fenced block says what it is', () => {
  const bad: string[] = []
  for (const b of all) {
    if (!b.lang) bad.push(`${b.file}:${b.line}: a fenced block without a language (sh, text, yaml, json, …)`)
    if (b.lang !== 'sh') continue
    for (const l of shellLines(b)) {
      if (/\[--?[a-z]/.test(l.text) || /<[A-Za-z][\w -]*>/.test(l.text) || l.text.includes('…')) bad.push(`${b.file}:${l.line}: usage notation in a shell line: ${l.text}`)
      // Outside the install page the newcomer has no `hookgate` on PATH: a clone spells it node bin/hookgate.js.
      if (b.file !== 'docs/install.md' && /(^|[;&|(]\s*|\$\(\s*)hookgate\s/.test(l.text.trim())) bad.push(`${b.file}:${l.line}: bare hookgate in a clone: ${l.text}`)
    }
  }
  assert.equal(bad, [])
})

rules('every sh mark is one the test knows, and every skip says why', () => {
  const bad = all
    .filter((b) => b.lang === 'sh' && b.mark?.startsWith('sh:'))
    .filter((b) => { const m = shellMark(b)!; return !(m === 'background' || /^skip\s*[—:-]\s*\S/.test(m)) })
    .map((b) => `${b.file}:${b.line}: <!-- ${b.mark} -->`)
  assert.equal(bad, [])
})

rules('every yaml block compiles as shown, or says which key it sits under and what it needs', () => {
  const failures: string[] = []
  let compiled = 0
  for (const b of all.filter((x) => x.lang === 'yaml')) {
    if (b.mark !== undefined && b.mark.startsWith('yaml:')) {
      if (!/^yaml: (fragment of hooks\.yaml under \S+|not hooks\.yaml) — (needs )?\S/.test(b.mark)) failures.push(`${b.file}:${b.line}: the mark must read "yaml: fragment of hooks.yaml under KEY — needs …" or "yaml: not hooks.yaml — WHAT IT IS": ${b.mark}`)
      continue
    }
    const dir = scratchDir('yaml-')
    cpSync(join(repoRoot, 'transforms'), join(dir, 'transforms'), { recursive: true })
    writeFileSync(join(dir, 'hooks.yaml'), b.body)
    const run = spawnSync(process.execPath, [join(repoRoot, 'bin', 'hookgate.js'), 'compile', 'hooks.yaml', '--check'], { cwd: dir, encoding: 'utf8', timeout: 60_000 })
    compiled++
    if (run.status !== 0) failures.push(`${b.file}:${b.line}: exit ${run.status}\n${run.stdout}${run.stderr}`)
  }
  console.log(`  compiled ${compiled} yaml blocks`)
  assert.equal(failures, [])
})

rules('examples/minimal/hooks.yaml is the file the README shows, and try answers as the README shows', () => {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8')
  const block = (name: string) => /```[a-z]*\n([\s\S]*?)```/.exec(readme.slice(readme.indexOf(`<!-- readme-example: ${name} -->`)))![1]!
  assert.ok(readme.includes('<!-- readme-example: hooks.yaml -->'))
  assert.is(readFileSync(join(repoRoot, 'examples', 'minimal', 'hooks.yaml'), 'utf8'), block('hooks.yaml'))
  const copy = freshCopy()
  const compile = spawnSync(process.execPath, ['bin/hookgate.js', 'compile', 'examples/minimal/hooks.yaml', '--out', 'examples/minimal/dist'], { cwd: copy, encoding: 'utf8' })
  assert.is(compile.status, 0, compile.stderr)
  const run = spawnSync(process.execPath, ['bin/hookgate.js', 'try', 'deploys', '--payload', 'examples/minimal/deploy.json', '--bundle', 'examples/minimal/dist'], { cwd: copy, encoding: 'utf8' })
  assert.is(run.status, 0, run.stderr)
  const actual = JSON.parse(run.stdout)
  const shown = block('try-output')
  const normalise = (s: string) => s.replace(/id="[0-9a-f…]+"/g, 'id="…"')
  assert.is(actual.status, Number(/"status": (\d+)/.exec(shown)![1]))
  assert.is(actual.mapping, /"mapping": "([^"]+)"/.exec(shown)![1])
  assert.is(actual.action.kind, /"kind": "([^"]+)"/.exec(shown)![1])
  assert.is(actual.action.name, /"name": "([^"]+)"/.exec(shown)![1])
  assert.is(normalise(actual.action.message), normalise(JSON.parse(/"message": ("(?:[^"\\]|\\.)*")/.exec(shown)![1]!)))
  assert.is(actual.external, true)
})

rules.run()

const run = suite('every shell line runs as printed')

for (const file of files) {
  const fileBlocks = blocks(file)
  if (!fileBlocks.some((b) => b.lang === 'sh')) continue
  run(`${file}: every shell line runs as printed from the root of a fresh copy`, async () => {
    const ports = new Map<string, string>()
    for (const p of ['8787', '8788', '8790']) ports.set(p, String(await freePort()))
    const { script, ran, skipped } = scriptFor(file, fileBlocks, ports)
    for (const s of skipped) console.log(`  skipped ${s}`)
    console.log(`  ${file}: ${ran} shell lines, ${skipped.length} blocks skipped`)
    if (ran === 0) return
    const copy = freshCopy()
    const prefix = join(dirname(copy), 'npm-prefix')
    mkdirSync(join(prefix, 'bin'), { recursive: true })
    // No secret of this machine's environment: the lines must bring what they need.
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: `${join(prefix, 'bin')}:${dirname(process.execPath)}:${process.env.PATH}`,
      npm_config_prefix: prefix,
      HOOKGATE_PORT: ports.get('8787'),
      HOOKGATE_ADMIN_PORT: ports.get('8790'),
    }
    for (const k of Object.keys(env)) if (/^HOOKGATE_(?!PORT$|ADMIN_PORT$)|_TOKEN$|_SECRET$|_KEY$/.test(k)) delete env[k]
    const result = await runBash(script, copy, env, 180_000)
    assert.is(result.code, 0, `${file}\n--- stdout ---\n${result.stdout.slice(-4000)}\n--- stderr ---\n${result.stderr.slice(-4000)}`)
  })
}

run.run()
