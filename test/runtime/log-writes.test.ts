// One way to log: the runtime (and the Gmail helper) log through the injected logger
// (runtime/observe/log.ts), so every line carries the time and is one JSON object an operator's log
// pipeline can parse; only the CLI (cli/) writes to stdout and stderr. A line written to a stream
// directly had no timestamp and sometimes was not JSON at all (the engine's, the handler's).
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import ts from 'typescript'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { repoRoot } from '../helpers/paths.js'
import { compileProject, post, setTestToken, spawnServe, type ServeProcess } from './http/harness.js'

/**
 * Files that hand the process's own streams on, with why: a transform's prints are its own, passed
 * through as bytes with backpressure (docs/mappings.md, "Where transforms run"), not log lines of the runtime.
 */
const PASSES_STREAMS_ON = new Map([['runtime/transforms/child.ts', 'a transform process\'s stdout and stderr, forwarded']])

function listTypeScript(dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    const full = join(dir, name)
    if (statSync(full).isDirectory()) out.push(...listTypeScript(full))
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(full)
  }
  return out
}

/** Every use of console.* and of process.stdout / process.stderr in a source text, as `line: text`. */
function directWrites(source: string, fileName: string): string[] {
  const sf = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: string[] = []
  const visit = (node: ts.Node): void => {
    if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression)) {
      const what = `${node.expression.text}.${node.name.text}`
      if (node.expression.text === 'console' || what === 'process.stdout' || what === 'process.stderr') {
        found.push(`${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}: ${what}`)
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return found
}

const scan = suite('nothing but the CLI writes to stdout or stderr')

scan('the scan finds a direct write, a console call and a stream handed on', () => {
  assert.equal(directWrites("process.stderr.write('x')\nconsole.error('y')\nforward(child, process.stdout)\n", 'x.ts'), ['1: process.stderr', '2: console.error', '3: process.stdout'])
  assert.equal(directWrites("// process.stderr.write('x')\nconst s = 'console.log'\nlog.error('fine')\n", 'x.ts'), [])
})

scan('no module of runtime/ or gmail/ writes to the process\'s streams or the console', () => {
  const problems: string[] = []
  for (const file of [...listTypeScript(join(repoRoot, 'runtime')), ...listTypeScript(join(repoRoot, 'gmail'))]) {
    const shown = relative(repoRoot, file)
    if (PASSES_STREAMS_ON.has(shown)) continue
    for (const hit of directWrites(readFileSync(file, 'utf8'), file)) problems.push(`${shown}:${hit}`)
  }
  assert.equal(problems, [], `log through the injected logger (runtime/observe/log.ts) instead:\n${problems.join('\n')}`)
})

scan('the files allowed to hand a stream on still do (else the exception is stale)', () => {
  for (const [file, why] of PASSES_STREAMS_ON) {
    assert.ok(directWrites(readFileSync(join(repoRoot, file), 'utf8'), file).length > 0, `${file} no longer hands on ${why}: drop it from the list`)
  }
})

scan.run()

// ---------------------------------------------------------------------------------------------

setTestToken()
const lines = suite<{ server?: ServeProcess }>('every line hookgate serve prints')

lines.before(async (ctx) => {
  // a generated hook token (said once, at start), and a transform that throws
  const project = await compileProject(`
hooks:
  enabled: true
  token: { generate: true }
  transformsDir: transforms
  mappings:
    - id: broken
      match: { path: broken }
      action: wake
      textTemplate: "never"
      transform: { module: broken.mjs, export: broken }
`, { 'transforms/broken.mjs': 'export function broken() { throw new TypeError(\'no repository in the payload\') }\n' })
  ctx.server = await spawnServe(project.outDir, project.stateDir)
})
lines.after(async (ctx) => {
  if (ctx.server && ctx.server.child.exitCode === null) ctx.server.child.kill('SIGKILL')
})

lines('a log pipeline reads every line, on stdout and on stderr, as one JSON object with its time, level and message', async (ctx) => {
  const server = ctx.server!
  const generated = JSON.parse(await server.line('generated a hook token')) as { token?: unknown }
  assert.type(generated.token, 'string')
  const token = generated.token as string
  assert.is((await post(server.origin, '/hooks/wake', token, { text: 'deploy finished', mode: 'now' })).status, 200)
  // a transform that throws: a failure line (stderr) beside the request line (stdout)
  assert.is((await post(server.origin, '/hooks/broken', token, { x: 1 })).status, 500)
  server.child.kill('SIGHUP')
  await server.line('nothing to reload')
  server.child.kill('SIGTERM')
  assert.is(await server.exited, 0, server.stderr())
  const stderr = server.stderr().split('\n').filter((l) => l !== '')
  const printed = [...server.stdout.filter((l) => l !== ''), ...stderr]
  assert.ok(printed.some((l) => l.includes('hookgate listening on')) && printed.some((l) => l.includes('"msg":"request"')) && stderr.some((l) => l.includes('no repository')), printed.join('\n'))
  for (const line of printed) {
    let parsed: { t?: unknown; level?: unknown; msg?: unknown } | undefined
    try {
      parsed = JSON.parse(line) as typeof parsed
    } catch {
      assert.unreachable(`not a JSON line: ${line}`)
    }
    assert.ok(typeof parsed?.t === 'string' && !Number.isNaN(Date.parse(parsed.t)) && parsed.t.endsWith('Z'), `no time: ${line}`)
    assert.ok(parsed?.level === 'info' || parsed?.level === 'warn' || parsed?.level === 'error', `no level: ${line}`)
    assert.ok(typeof parsed?.msg === 'string' && parsed.msg !== '', `no message: ${line}`)
  }
})

lines.run()
