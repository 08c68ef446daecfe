// The runtime's footprint (DESIGN §1): runtime/ never imports compiler/, admin/, yaml, typebox or
// esbuild, and its only packages besides Node built-ins are undici and, loaded only by a bundle
// with match.when patterns, re2js. Every .ts file under runtime/
// (the source tree, not build/) is parsed with the TypeScript parser, so comments and strings that
// merely mention an import cannot confuse the scan, and every form is seen: import, import type,
// export … from, import x = require(), dynamic import(), require() and import('…') types.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import ts from 'typescript'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { repoRoot } from '../helpers/paths.js'

const runtimeDir = join(repoRoot, 'runtime')
const compilerDir = join(repoRoot, 'compiler')
const adminDir = join(repoRoot, 'admin')

type ImportKind = 'import' | 'export from' | 'import = require' | 'dynamic import' | 'require' | 'import type node'

interface FoundImport {
  kind: ImportKind
  /** the module specifier, or null when it is computed at run time */
  specifier: string | null
  /** 1-based */
  line: number
}

/** Every module reference in a TypeScript source text. */
function findImports(source: string, fileName = 'source.ts'): FoundImport[] {
  const sf = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: FoundImport[] = []
  const add = (kind: ImportKind, node: ts.Node, spec: ts.Node | undefined) => {
    const specifier = spec && ts.isStringLiteralLike(spec) ? spec.text : null
    found.push({ kind, specifier, line: sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1 })
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) add('import', node, node.moduleSpecifier)
    else if (ts.isExportDeclaration(node) && node.moduleSpecifier) add('export from', node, node.moduleSpecifier)
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) add('import = require', node, node.moduleReference.expression)
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add('dynamic import', node, node.arguments[0])
    else if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'require') add('require', node, node.arguments[0])
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add('import type node', node, node.argument.literal)
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return found
}

const FORBIDDEN_PACKAGES = ['yaml', 'typebox', '@sinclair/typebox', 'esbuild']
const ALLOWED_PACKAGES = new Set(['undici'])

function isRelativeOrAbsolute(specifier: string): boolean {
  return specifier.startsWith('./') || specifier.startsWith('../') || specifier === '.' || specifier === '..' || isAbsolute(specifier)
}

/** 'undici' for 'undici/lib/x', '@scope/pkg' for '@scope/pkg/sub'; undefined for node:, relative and absolute. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('node:') || isRelativeOrAbsolute(specifier)) return undefined
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}

function isInside(child: string, parent: string): boolean {
  const rel = relative(parent, child)
  return rel === '' || (!rel.startsWith('..' + sep) && rel !== '..' && !isAbsolute(rel))
}

/** Why `specifier`, imported from `fromFile`, must not be in the runtime; undefined when it may. */
function forbiddenReason(specifier: string, fromFile: string): string | undefined {
  const pkg = packageOf(specifier)
  if (pkg !== undefined && FORBIDDEN_PACKAGES.includes(pkg)) return `imports the compile-time package ${pkg}`
  if (isRelativeOrAbsolute(specifier) && isInside(resolve(dirname(fromFile), specifier), compilerDir)) return 'imports from compiler/'
  if (isRelativeOrAbsolute(specifier) && isInside(resolve(dirname(fromFile), specifier), adminDir)) return 'imports from admin/ (the control plane)'
  return undefined
}

/** Human-readable findings for one source text. */
function problemsIn(source: string, fromFile: string): string[] {
  const shown = relative(repoRoot, fromFile)
  return findImports(source, fromFile).flatMap((imp) => {
    const reason = imp.specifier === null ? undefined : forbiddenReason(imp.specifier, fromFile)
    return reason ? [`${shown}:${imp.line}: ${imp.kind} ${JSON.stringify(imp.specifier)} ${reason}`] : []
  })
}

function listTypeScript(dir: string): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const full = join(dir, name)
    if (statSync(full).isDirectory()) return listTypeScript(full)
    return name.endsWith('.ts') ? [full] : []
  })
}

// ---------------------------------------------------------------------------------------------
const scanner = suite('findImports (the scanner this test relies on)')

const synthetic = join(runtimeDir, 'synthetic.ts')
const nested = join(runtimeDir, 'deep', 'synthetic.ts')

const FORBIDDEN_FORMS: Array<[string, string, string]> = [
  ['a named import of yaml', "import { parse } from 'yaml'\n", synthetic],
  ['a multi-line import of yaml', 'import {\n  parse,\n  stringify,\n} from "yaml"\n', synthetic],
  ['a side-effect import of esbuild', "import 'esbuild'\n", synthetic],
  ['a default import of typebox', "import Type from 'typebox'\n", synthetic],
  ['an import of a typebox sub-path', "import { Compile } from 'typebox/compile'\n", synthetic],
  ['an import of the old @sinclair/typebox', "import { Type } from '@sinclair/typebox'\n", synthetic],
  ['a namespace import of esbuild', "import * as esbuild from 'esbuild'\n", synthetic],
  ['an import type from compiler/', "import type { HooksConfig } from '../compiler/schema.js'\n", synthetic],
  ['an export * from compiler/', "export * from '../compiler/index.js'\n", synthetic],
  ['an export { } from yaml', "export { parse } from 'yaml'\n", synthetic],
  ['a dynamic import() of yaml', "const m = await import('yaml')\n", synthetic],
  ['a dynamic import() with a template literal', 'const m = await import(`esbuild`)\n', synthetic],
  ['a dynamic import() of compiler/ inside a function', "export async function f() {\n  if (Math.random() > 2) {\n    return import('../compiler/emit.js')\n  }\n}\n", synthetic],
  ['a require() of esbuild', "const esbuild = require('esbuild')\n", synthetic],
  ['an import = require() of typebox', "import Type = require('typebox')\n", synthetic],
  ['an import("…") type of compiler/', "let c: import('../compiler/resolve.js').ResolvedConfig | undefined\n", synthetic],
  ['a relative import from a nested runtime folder into compiler/', "import { compileFile } from '../../compiler/index.js'\n", nested],
  ['an import from admin/ (the control plane)', "import { startAdmin } from '../admin/server.js'\n", synthetic],
  ['a dynamic import() of admin/ from a nested runtime folder', "const m = await import('../../admin/server.js')\n", nested],
  ['an absolute import into compiler/', `import { compileFile } from ${JSON.stringify(join(compilerDir, 'index.js'))}\n`, synthetic],
]

for (const [what, source, from] of FORBIDDEN_FORMS) {
  scanner(`catches ${what}`, () => {
    assert.is(problemsIn(source, from).length, 1, `not caught in:\n${source}`)
  })
}

scanner('does not flag comments, strings, node: built-ins, undici, runtime siblings or look-alike folders', () => {
  const source = [
    "// import { parse } from 'yaml'",
    "/* const esbuild = require('esbuild') */",
    "const text = \"import 'typebox'\"",
    "const code = `export * from '../compiler/index.js'`",
    "import { readFileSync } from 'node:fs'",
    "import { request } from 'undici'",
    "import { FORMAT_VERSION } from './bundle-format.js'",
    "import { x } from './compiler/local.js'",
    "import { y } from '../compilers/other.js'",
    "import { z } from 'yaml-ish'",
    'const later = await import(someUrl)',
  ].join('\n')
  assert.equal(problemsIn(source, synthetic), [])
})

scanner('reports the kind, the specifier and the line of every form', () => {
  const source = "import a from 'a'\nexport { b } from 'b'\nconst c = require('c')\nconst d = await import('d')\nconst e = await import(url)\n"
  assert.equal(findImports(source), [
    { kind: 'import', specifier: 'a', line: 1 },
    { kind: 'export from', specifier: 'b', line: 2 },
    { kind: 'require', specifier: 'c', line: 3 },
    { kind: 'dynamic import', specifier: 'd', line: 4 },
    { kind: 'dynamic import', specifier: null, line: 5 },
  ])
})

scanner('names the package of a bare specifier', () => {
  assert.is(packageOf('undici'), 'undici')
  assert.is(packageOf('undici/lib/fetch'), 'undici')
  assert.is(packageOf('@sinclair/typebox/compiler'), '@sinclair/typebox')
  assert.is(packageOf('node:fs'), undefined)
  assert.is(packageOf('./x.js'), undefined)
  assert.is(packageOf('/abs/x.js'), undefined)
})

// ---------------------------------------------------------------------------------------------
const runtime = suite('runtime/ source files')

const files = listTypeScript(runtimeDir)

runtime('are found in the source tree', () => {
  const names = files.map((f) => relative(runtimeDir, f))
  for (const expected of ['bundle/load.ts', 'bundle/format.ts', 'endpoints/mapping.ts', 'bundle/template-helpers.ts']) {
    assert.ok(names.includes(expected), `${expected} was not scanned`)
  }
  assert.ok(files.every((f) => !f.includes(`${sep}build${sep}`)), 'the scan must read sources, not build/')
})

runtime('never import yaml, typebox, esbuild or anything under compiler/ or admin/', () => {
  const problems = files.flatMap((f) => problemsIn(readFileSync(f, 'utf8'), f))
  assert.equal(problems, [])
})

/** The PostgreSQL client: the store's one module that may load it, and only when a postgres:// store is opened. */
const PG_CLIENT_MODULE = join('store', 'postgres', 'client.ts')
/** The pattern engine (re2js): loaded by this module only, and only for a bundle with match.when patterns. */
const PATTERN_MODULE = 'bundle/regex.ts'

runtime('import no package other than undici besides node: built-ins (and pg in the postgres store\'s client module, re2js in regex.ts)', () => {
  const packages = new Set<string>()
  for (const f of files) {
    for (const imp of findImports(readFileSync(f, 'utf8'), f)) {
      const pkg = imp.specifier === null ? undefined : packageOf(imp.specifier)
      if (pkg === 'pg' && relative(runtimeDir, f) === PG_CLIENT_MODULE) continue
      if (pkg === 're2js' && relative(runtimeDir, f) === PATTERN_MODULE) continue
      if (pkg !== undefined) packages.add(pkg)
    }
  }
  assert.equal([...packages].filter((p) => !ALLOWED_PACKAGES.has(p)), [], 'bare imports other than undici (write node built-ins as node:…)')
})

runtime('load pg only with a dynamic import in the postgres store\'s client module (a file-store host never loads it)', () => {
  const source = readFileSync(join(runtimeDir, PG_CLIENT_MODULE), 'utf8')
  const pgImports = findImports(source, PG_CLIENT_MODULE).filter((imp) => imp.specifier === 'pg')
  assert.ok(pgImports.some((imp) => imp.kind === 'dynamic import'), 'the client is loaded with import()')
  const sf = ts.createSourceFile(PG_CLIENT_MODULE, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const staticValue = sf.statements.filter((st) => ts.isImportDeclaration(st) && ts.isStringLiteral(st.moduleSpecifier) && st.moduleSpecifier.text === 'pg' && !st.importClause?.isTypeOnly)
  assert.equal(staticValue.length, 0, 'a static value import of pg would load it at every start')
})

runtime('load re2js only with a dynamic import in regex.ts (a runtime without match.when patterns never loads it)', () => {
  const found = files.flatMap((f) => valueImportsOf('re2js', readFileSync(f, 'utf8'), relative(runtimeDir, f)))
  assert.equal(found, ['bundle/regex.ts:dynamic import'])
})

/** Where a source text loads undici's code: every reference to it except type-only ones. */
function undiciValueImports(source: string, fileName: string): string[] {
  return valueImportsOf('undici', source, fileName)
}

/** Where a source text loads a package's code: every reference to it except type-only ones. */
function valueImportsOf(pkg: string, source: string, fileName: string): string[] {
  const sf = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const typeOnly = (node: ts.Node): boolean => {
    if (ts.isImportDeclaration(node)) {
      const clause = node.importClause
      if (!clause) return false
      if (clause.isTypeOnly) return true
      const named = clause.namedBindings
      return clause.name === undefined && named !== undefined && ts.isNamedImports(named) && named.elements.every((e) => e.isTypeOnly)
    }
    if (ts.isExportDeclaration(node)) return node.isTypeOnly
    return ts.isImportTypeNode(node)
  }
  const found: string[] = []
  const visit = (node: ts.Node): void => {
    const spec = ts.isImportDeclaration(node) || ts.isExportDeclaration(node) ? node.moduleSpecifier
      : ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword ? node.arguments[0]
      : ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) ? node.argument.literal
      : undefined
    if (spec && ts.isStringLiteralLike(spec) && packageOf(spec.text) === pkg && !typeOnly(node)) {
      found.push(`${fileName}:${ts.isCallExpression(node) ? 'dynamic import' : 'import'}`)
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return found
}

runtime('load undici only through undici.ts, when something first calls out (a static import would load it at every start)', () => {
  const found = files.flatMap((f) => undiciValueImports(readFileSync(f, 'utf8'), relative(runtimeDir, f)))
  assert.equal(found, ['lib/undici.ts:dynamic import'])
})

runtime('compute a module specifier only where the bundle file itself is imported', () => {
  // a computed import('…') could load anything at run time; the ones expected load the bundle:
  // bundle.ts on the main thread and the transform worker in its thread
  const computed = files.flatMap((f) => findImports(readFileSync(f, 'utf8'), f).filter((imp) => imp.specifier === null).map((imp) => `${relative(runtimeDir, f)}:${imp.kind}`))
  assert.equal(computed.sort(), ['bundle/load.ts:dynamic import', 'transforms/hookgate-worker.ts:dynamic import'])
})

// ---------------------------------------------------------------------------------------------
const layering = suite('the store: one interface, two implementations beside it')

const storeDir = join(runtimeDir, 'store')
const IMPLEMENTATIONS = ['file', 'postgres'].map((name) => join(storeDir, name))
/** the one module above the stores that names them: it picks one from the configuration */
const PICKER = join(storeDir, 'open.ts')

/** `file:line: specifier` for every import of a store implementation from outside it (and outside open.ts). */
function implementationImports(fromFile: string, source: string): string[] {
  if (fromFile === PICKER || IMPLEMENTATIONS.some((dir) => isInside(fromFile, dir))) return []
  return findImports(source, fromFile).flatMap((imp) => {
    if (imp.specifier === null || !isRelativeOrAbsolute(imp.specifier)) return []
    const target = resolve(dirname(fromFile), imp.specifier)
    return IMPLEMENTATIONS.some((dir) => isInside(target, dir)) ? [`${relative(repoRoot, fromFile)}:${imp.line}: ${imp.specifier}`] : []
  })
}

layering('the interface is runtime/store/store.ts, and the file store lives in its own folder beside it', () => {
  const names = files.map((f) => relative(runtimeDir, f))
  assert.ok(names.includes(join('store', 'store.ts')))
  assert.ok(names.some((n) => n.startsWith(join('store', 'file') + sep)))
})

layering('nothing above the store imports an implementation: only runtime/store/open.ts names them', () => {
  const above = [...files, ...listTypeScript(adminDir), ...listTypeScript(join(repoRoot, 'gmail')), ...listTypeScript(compilerDir)]
  assert.equal(above.flatMap((f) => implementationImports(f, readFileSync(f, 'utf8'))), [])
})

layering('the check sees an implementation import, and lets open.ts and the implementations through', () => {
  assert.equal(implementationImports(join(runtimeDir, 'agents', 'engine.ts'), "import { RunStore } from '../store/file/runs.js'\n").length, 1)
  assert.equal(implementationImports(join(runtimeDir, 'service.ts'), "const pg = await import('./store/postgres/index.js')\n").length, 1)
  assert.equal(implementationImports(PICKER, "import { FileStore } from './file/index.js'\n"), [])
  assert.equal(implementationImports(join(storeDir, 'file', 'runs.ts'), "import { Journal } from './journal.js'\n"), [])
})

scanner.run()
runtime.run()
layering.run()
