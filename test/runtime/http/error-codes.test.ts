// The registry of HTTP error codes (runtime/http/error-codes.ts) against the source, both ways: a code
// answered that the registry lacks would reach clients undocumented (and the docs generated from the
// registry would not list it); a code the registry lists that nothing answers is documentation of a
// behaviour that does not exist. The source is read as TypeScript: every error the servers build
// (`new HttpError(status, code, …)`, the config-editing library's `new EditError(status, code, …)`)
// and every object that carries a code beside an error sentence (a mapping's failed outcome, the
// engine's refusal, a save's refusal, a dry run's answer).
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative, sep } from 'node:path'
import ts from 'typescript'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { ERROR_CODES, type ErrorCodeEntry, type ErrorSurface } from '../../../runtime/http/error-codes.js'
import { repoRoot } from '../../helpers/paths.js'

/** The servers' source (and the CLI's `hookgate try`, which answers with the server's codes); the page's browser code answers nothing. */
const SOURCE_DIRS = ['runtime', 'admin', 'gmail', 'cli']
const REGISTRY_FILE = join('runtime', 'http', 'error-codes.ts')
/** The error types whose second argument is a registry code. */
const ERROR_TYPES = new Set(['HttpError', 'EditError'])

interface Use { code: string; status: number[]; file: string; line: number }

function listSources(dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    const full = join(dir, name)
    if (statSync(full).isDirectory()) {
      if (relative(repoRoot, full) !== join('admin', 'ui')) out.push(...listSources(full))
    } else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(full)
  }
  return out
}

/** The string literals an expression can evaluate to: a literal, either side of a conditional, through parentheses and `as`. */
function literalStrings(e: ts.Expression | undefined): string[] {
  if (e === undefined) return []
  if (ts.isStringLiteralLike(e)) return [e.text]
  if (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e)) return literalStrings(e.expression)
  if (ts.isConditionalExpression(e)) return [...literalStrings(e.whenTrue), ...literalStrings(e.whenFalse)]
  return []
}

function literalNumbers(e: ts.Expression | undefined): number[] {
  if (e === undefined) return []
  if (ts.isNumericLiteral(e)) return [Number(e.text)]
  if (ts.isParenthesizedExpression(e)) return literalNumbers(e.expression)
  if (ts.isConditionalExpression(e)) return [...literalNumbers(e.whenTrue), ...literalNumbers(e.whenFalse)]
  return []
}

/** Every error code the source text builds an answer with. */
export function codesUsedIn(source: string, file: string): Use[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const uses: Use[] = []
  const add = (codes: string[], status: number[], node: ts.Node) => {
    const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1
    for (const code of codes) uses.push({ code, status, file, line })
  }
  const visit = (node: ts.Node): void => {
    if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && ERROR_TYPES.has(node.expression.text)) {
      const [status, code] = node.arguments ?? []
      add(literalStrings(code), literalNumbers(status), node)
    } else if (ts.isObjectLiteralExpression(node)) {
      const props = new Map<string, ts.Expression>()
      for (const p of node.properties) if (ts.isPropertyAssignment(p) && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) props.set(p.name.text, p.initializer)
      // the shape of an error: a code beside a sentence (`error` in answers and outcomes, `message` in refusals)
      if (props.has('code') && (props.has('error') || props.has('message'))) add(literalStrings(props.get('code')), literalNumbers(props.get('status')), node)
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return uses
}

function surfaceOf(file: string): ErrorSurface {
  const top = relative(repoRoot, file).split(sep)[0]
  return top === 'admin' ? 'admin' : top === 'gmail' ? 'gmail' : 'runtime'
}

const registry: Record<string, ErrorCodeEntry> = ERROR_CODES
const uses = SOURCE_DIRS.flatMap((d) => listSources(join(repoRoot, d)))
  .filter((f) => relative(repoRoot, f) !== REGISTRY_FILE)
  .flatMap((f) => codesUsedIn(readFileSync(f, 'utf8'), f))
const where = (u: Use) => `${relative(repoRoot, u.file)}:${u.line}`

// ---------------------------------------------------------------------------------------------
const scan = suite('the scan for error codes')

scan('finds a code in new HttpError, on either side of a conditional, and in an object with an error sentence', () => {
  const found = codesUsedIn([
    "throw new HttpError(404, 'not_found', 'x')",
    "new HttpError(s === 401 ? 401 : 403, s === 401 ? 'unauthorized' : 'forbidden', 'x')",
    "const o = { kind: 'error', status: 500, code: 'transform_failed', error: 'x' }",
    "const r = { code: 'store_unavailable', message: 'x', retryAfterSeconds: 5 }",
    "const d = { code: 'ERR_SOMETHING' }",
    "const e = { code: err.code, error: 'x' }",
  ].join('\n'), 'x.ts').map((u) => [u.code, u.status])
  assert.equal(found, [['not_found', [404]], ['unauthorized', [401, 403]], ['forbidden', [401, 403]], ['transform_failed', [500]], ['store_unavailable', []]])
})

scan.run()

// ---------------------------------------------------------------------------------------------
const codes = suite('the HTTP error code registry')

codes('reads codes from the source (the scan is not blind)', () => {
  for (const expected of ['not_found', 'unauthorized', 'token_invalid', 'transform_timeout', 'too_many_pending_runs', 'invalid_push', 'expectation_failed']) {
    assert.ok(uses.some((u) => u.code === expected), `${expected} was not found in the source`)
  }
})

codes('every code answered in the source is in the registry, with the status it is answered with', () => {
  const problems: string[] = []
  for (const u of uses) {
    const entry = registry[u.code]
    if (entry === undefined) problems.push(`${where(u)}: "${u.code}" is not in runtime/http/error-codes.ts`)
    else for (const s of u.status) if (!entry.status.includes(s)) problems.push(`${where(u)}: "${u.code}" is answered with ${s}; the registry says ${entry.status.join(', ')}`)
  }
  assert.equal(problems, [])
})

codes('every code answered on a surface is listed for that surface', () => {
  const problems = uses.filter((u) => registry[u.code] && !registry[u.code]!.surfaces.includes(surfaceOf(u.file))).map((u) => `${where(u)}: "${u.code}" is answered by ${surfaceOf(u.file)}, which the registry does not list`)
  assert.equal(problems, [])
})

codes('every code in the registry is answered somewhere in the source', () => {
  const used = new Set(uses.map((u) => u.code))
  assert.equal(Object.keys(registry).filter((c) => !used.has(c)), [], 'registry codes no source answers with')
})

codes('every entry has a one-line meaning, error statuses, a surface and a snake_case code', () => {
  for (const [code, entry] of Object.entries(registry)) {
    assert.match(code, /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/, `${code} is not snake_case`)
    assert.ok(entry.meaning.trim().length > 0, `${code} has no meaning`)
    assert.not.match(entry.meaning, /\n/, `${code}: the meaning is one line`)
    assert.ok(entry.status.length > 0 && entry.status.every((s) => s >= 400 && s <= 599), `${code}: statuses ${entry.status.join(', ')}`)
    assert.ok(entry.surfaces.length > 0, `${code} names no surface`)
  }
})

codes.run()
