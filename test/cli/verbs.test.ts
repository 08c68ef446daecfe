// The command line is one module per verb (cli/verbs/), assembled into one table (cli/commands.ts)
// over shared flags and exit codes (cli/flags.ts, cli/exit-codes.ts). What this holds:
// - bin/hookgate.js finds a verb by its file name alone: a verb in a file its words do not name, or
//   one left out of the table, would be unreachable or missing from the help;
// - the table never loads the compiler: a verb (and every module of cli/) imports the compiler, the
//   control plane, the Gmail helper or a compile-time package only when it runs, so `hookgate --help`
//   and every runtime command start without them;
// - exit codes are the named constants of cli/exit-codes.ts, never a number written in a verb;
// - every command that reads state takes --json.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative, sep } from 'node:path'
import { pathToFileURL } from 'node:url'
import ts from 'typescript'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { COMMANDS, VERBS, verbFile } from '../../cli/commands.js'
import { ExitCode } from '../../cli/exit-codes.js'
import type { Verb } from '../../cli/flags.js'
import { repoRoot } from '../helpers/paths.js'
import { describeRun, hookgate, scratchDir } from './cli-helpers.js'

const cliDir = join(repoRoot, 'cli')
const verbsDir = join(cliDir, 'verbs')

function listTypeScript(dir: string): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const full = join(dir, name)
    if (statSync(full).isDirectory()) return listTypeScript(full)
    return name.endsWith('.ts') ? [full] : []
  })
}

const verbs = suite('one module per verb')

verbs('every module under cli/verbs/ is a command of the table, in the file its words name, and every command has one', async () => {
  const files = readdirSync(verbsDir).filter((f) => f.endsWith('.ts')).map((f) => f.replace(/\.ts$/, '.js')).sort()
  assert.equal(files, COMMANDS.map((c) => verbFile(c.name)).sort())
  for (const file of files) {
    // the module bin/hookgate.js would load for those words (the built one, beside this test's build)
    const loaded = await import(pathToFileURL(join(repoRoot, 'build', 'cli', 'verbs', file)).href) as Verb
    assert.ok(COMMANDS.includes(loaded.spec), `${file}: its spec is the table's`)
    assert.is(verbFile(loaded.spec.name), file)
    assert.type(loaded.run, 'function')
  }
  assert.is(VERBS.length, COMMANDS.length)
})

verbs('a command that groups others (runs) lists exactly the commands its name starts', () => {
  for (const c of COMMANDS) {
    const members = COMMANDS.filter((m) => m.name.startsWith(c.name + ' '))
    assert.equal((c.subcommands ?? []).map((m) => m.name), members.map((m) => m.name), c.name)
  }
})

verbs('every command that reads state takes --json', () => {
  const reading = COMMANDS.filter((c) => c.readsState)
  assert.equal(reading.map((c) => c.name), ['runs', 'runs show', 'tasks', 'rejects', 'store migrate', 'trigger list', 'task list'])
  for (const c of reading) assert.ok(c.flags.some((f) => f.name === 'json' && f.value === undefined), `${c.name} has no --json`)
})

/** The folders and packages a module of cli/ may import only when it runs (`await import(…)`). */
const LOADED_WHEN_RUN = ['compiler', 'admin', 'gmail']
const PACKAGES_WHEN_RUN = new Set(['yaml', 'typebox', 'esbuild', 'json5'])

/** `file:line: specifier` for every static, non-type import of the compiler, the control plane, the Gmail helper or a compile-time package. */
function libraryImportsAtLoad(file: string, text: string): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: string[] = []
  for (const st of sf.statements) {
    if (!(ts.isImportDeclaration(st) || ts.isExportDeclaration(st)) || !st.moduleSpecifier || !ts.isStringLiteral(st.moduleSpecifier)) continue
    const clause = ts.isImportDeclaration(st) ? st.importClause : undefined
    const typeOnly = ts.isImportDeclaration(st)
      ? clause !== undefined && (clause.isTypeOnly || (clause.name === undefined && clause.namedBindings !== undefined && ts.isNamedImports(clause.namedBindings) && clause.namedBindings.elements.length > 0 && clause.namedBindings.elements.every((e) => e.isTypeOnly)))
      : st.isTypeOnly
    const spec = st.moduleSpecifier.text
    if (typeOnly) continue
    const target = relative(repoRoot, join(file, '..', spec)).split(sep)[0]!
    const heavy = spec.startsWith('.') ? LOADED_WHEN_RUN.includes(target) : PACKAGES_WHEN_RUN.has(spec.split('/')[0]!)
    if (heavy) found.push(`${relative(repoRoot, file).split(sep).join('/')}:${sf.getLineAndCharacterOfPosition(st.getStart(sf)).line + 1}: ${spec}`)
  }
  return found
}

verbs('no module of cli/ loads the compiler, the control plane or the Gmail helper when it is imported', () => {
  assert.equal(listTypeScript(cliDir).flatMap((f) => libraryImportsAtLoad(f, readFileSync(f, 'utf8'))), [])
})

verbs('the check above sees the compiler, admin, gmail or yaml imported at load, and lets types, the runtime and a later import() through', () => {
  const text = [
    "import { compileFile } from '../../compiler/index.js'",
    "import type { Diagnostic } from '../../compiler/diagnostics.js'",
    "import { type Edit } from '../../admin/definitions.js'",
    "export { setup } from '../../gmail/setup.js'",
    "import { parseDocument } from 'yaml'",
    "import { startService } from '../../runtime/serve/service.js'",
    "import { join } from 'node:path'",
    "import { ExitCode } from '../exit-codes.js'",
    "const later = await import('../../admin/server.js')",
  ].join('\n')
  assert.equal(libraryImportsAtLoad(join(verbsDir, 'probe.ts'), text), ['cli/verbs/probe.ts:1: ../../compiler/index.js', 'cli/verbs/probe.ts:4: ../../gmail/setup.js', 'cli/verbs/probe.ts:5: yaml'])
})

/** `file:line` of every exit code written as a number: a return, an exit or an exitCode of a numeric literal. */
function numericExitCodes(file: string, text: string): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: string[] = []
  const at = (node: ts.Node) => `${relative(repoRoot, file).split(sep).join('/')}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}`
  const visit = (node: ts.Node): void => {
    if (ts.isReturnStatement(node) && node.expression && ts.isNumericLiteral(node.expression)) found.push(at(node))
    if (ts.isCallExpression(node) && node.getText(sf).startsWith('process.exit(') && node.arguments[0] && ts.isNumericLiteral(node.arguments[0])) found.push(at(node))
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.EqualsToken && node.left.getText(sf).endsWith('exitCode') && ts.isNumericLiteral(node.right)) found.push(at(node))
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return found
}

verbs('exit codes are the named constants of cli/exit-codes.ts: no command returns a number of its own', () => {
  const sources = [...listTypeScript(cliDir), ...listTypeScript(join(repoRoot, 'gmail'))]
  assert.equal(sources.flatMap((f) => numericExitCodes(f, readFileSync(f, 'utf8'))), [])
  assert.equal(numericExitCodes('x.ts', 'function f() { return 2 }\nprocess.exit(1)\nprocess.exitCode = 2\nfunction g() { return ExitCode.ok }\n'), ['x.ts:1', 'x.ts:2', 'x.ts:3'])
  assert.equal(ExitCode, { ok: 0, refused: 1, usage: 2, internal: 2 })
})

const exits = suite('exit codes of the real executable')

exits('a usage error, a refusal and a success exit 2, 1 and 0, from the one table of codes', async () => {
  const cwd = scratchDir('verbs-exit-')
  const usage = await hookgate(['runs', '--limit', '0'], { cwd })
  assert.is(usage.code, ExitCode.usage, describeRun(usage))
  const refused = await hookgate(['runs', 'show', 'no-such-run', '--state', cwd], { cwd })
  assert.is(refused.code, ExitCode.refused, describeRun(refused))
  const ok = await hookgate(['runs', '--json', '--state', join(cwd, 'none')], { cwd })
  assert.is(ok.code, ExitCode.ok, describeRun(ok))
  assert.equal(JSON.parse(ok.stdout), [])
})

verbs.run()
exits.run()
