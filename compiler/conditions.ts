// Compiles a mapping's `match.when` into the JS source of a predicate `(c, h, t) => boolean` that
// calls only the helpers of runtime/bundle/conditions.ts, and reports every mistake in it at its line:
// unknown operators, malformed paths, operands of the wrong shape, regular expressions that are not
// RE2 syntax (see regex-safety.ts).
//
// The language: a condition is a mapping whose entries must all hold. An entry is `all: [conditions]`,
// `any: [conditions]`, `not: condition`, or a path (`payload.a.b[0]`, `body.…`, `headers.<name>`,
// `query.<name>`) with either a scalar (shorthand for equals) or one operator: `{ equals: value }`,
// `{ in: [values] }`, `{ exists: true|false }`, `{ matches: regex, flags?: imsu }`.
//
// Security: user text reaches the generated code only through JSON.stringify (string literals and
// JSON.parse'd constants) or as decimal indexes; patterns are compiled once when the bundle loads,
// from their JSON-escaped source, by the runtime's RE2 engine (runtime/bundle/regex.ts).
import { closest, type DiagnosticBag } from './diagnostics.js'
import { pointer, type LoadedConfig, type PathSegment } from './load.js'
import { parseReference } from './templates.js'
import { checkPattern } from './regex-safety.js'
import { PATTERN_FLAGS } from '../runtime/bundle/regex.js'
import type { ConditionLeaf, ConditionNode } from '../runtime/bundle/format.js'

export interface CompiledCondition {
  /** JS source of `(c, h, t) => boolean`; `whenRegex` and `whenValues` are the pool's constants */
  code: string
  leaves: ConditionLeaf[]
  tree: ConditionNode
}

/** Regular expressions and non-scalar operands shared by every condition of a bundle, built once at load. */
export class ConditionPool {
  readonly regexes: Array<{ source: string; flags: string }> = []
  readonly values: unknown[] = []
  private readonly regexIndex = new Map<string, number>()

  regex(source: string, flags: string): number {
    const key = JSON.stringify([source, flags])
    let i = this.regexIndex.get(key)
    if (i === undefined) {
      i = this.regexes.push({ source, flags }) - 1
      this.regexIndex.set(key, i)
    }
    return i
  }

  value(v: unknown): number {
    return this.values.push(v) - 1
  }
}

const COMBINATORS = ['all', 'any', 'not'] as const
const OPERATORS = ['equals', 'in', 'exists', 'matches'] as const
type Operator = (typeof OPERATORS)[number]
const ROOTS = ['payload', 'body', 'headers', 'query']

export function compileCondition(value: unknown, at: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag, pool: ConditionPool): CompiledCondition | undefined {
  const leaves: ConditionLeaf[] = []
  let failed = false
  const error = (code: Parameters<DiagnosticBag['error']>[0], message: string, path: PathSegment[], prefer: 'key' | 'value', hint?: string) => {
    failed = true
    bag.error(code, message, loaded.locate(path, prefer), hint)
  }

  /** Returns the node and the code of one condition (a mapping of entries that must all hold). */
  const condition = (v: unknown, path: PathSegment[]): { tree: ConditionNode; code: string } | undefined => {
    if (!isMapping(v)) {
      error('CONDITION_INVALID', 'a condition must be a mapping such as payload.action: opened, or all, any or not', path, 'value')
      return undefined
    }
    const keys = Object.keys(v)
    if (keys.length === 0) {
      error('CONDITION_INVALID', 'an empty condition: name a path (payload.…, headers.…, query.…) or all, any or not', path, 'value')
      return undefined
    }
    const parts = keys.map((k) => entry(k, v[k], [...path, k]))
    if (parts.some((p) => p === undefined)) return undefined
    const done = parts as Array<{ tree: ConditionNode; code: string }>
    return done.length === 1 ? done[0]! : { tree: { all: done.map((p) => p.tree) }, code: `(${done.map((p) => p.code).join(' && ')})` }
  }

  const entry = (key: string, v: unknown, path: PathSegment[]): { tree: ConditionNode; code: string } | undefined => {
    if (key === 'all' || key === 'any') {
      if (!Array.isArray(v) || v.length === 0) {
        error('CONDITION_INVALID', `${key} takes a non-empty list of conditions`, path, 'value')
        return undefined
      }
      const parts = v.map((x, i) => condition(x, [...path, i]))
      if (parts.some((p) => p === undefined)) return undefined
      const done = parts as Array<{ tree: ConditionNode; code: string }>
      const tree: ConditionNode = key === 'all' ? { all: done.map((p) => p.tree) } : { any: done.map((p) => p.tree) }
      return { tree, code: `(${done.map((p) => p.code).join(key === 'all' ? ' && ' : ' || ')})` }
    }
    if (key === 'not') {
      const inner = condition(v, path)
      return inner && { tree: { not: inner.tree }, code: `!${inner.code}` }
    }
    if ((OPERATORS as readonly string[]).includes(key) || key === 'flags') {
      error('CONDITION_INVALID', `"${key}" needs a path before it`, path, 'key', `write e.g. payload.action: { ${key}: … }`)
      return undefined
    }
    const reference = checkPath(key, path)
    if (reference === undefined) {
      // still report its operator mistakes, unless the key was a misspelt all/any/not
      if (/[.[]/.test(key) || closest(key, COMBINATORS) === undefined) operand(v, path, { root: 'payload', keys: [] }, true)
      return undefined
    }
    return operand(v, path, reference, false)
  }

  const checkPath = (key: string, path: PathSegment[]): { root: string; keys: Array<string | number> } | undefined => {
    const root = /^[^.[]*/.exec(key)![0]
    if (!ROOTS.includes(root)) {
      const guess = /[.[]/.test(key) ? undefined : closest(key, COMBINATORS)
      if (guess !== undefined) {
        error('CONDITION_OPERATOR_UNKNOWN', `unknown condition "${key}"`, path, 'key', `did you mean "${guess}"?`)
      } else {
        const rootGuess = closest(root, ROOTS)
        error('CONDITION_PATH_INVALID', `condition path "${key}" must start with payload, body, headers or query`, path, 'key',
          rootGuess ? `did you mean "${rootGuess}${key.slice(root.length)}"?` : `to read a payload field, write "payload.${key}"`)
      }
      return undefined
    }
    const parsed = parseReference(key)
    if (!parsed.ok) {
      for (const e of parsed.errors) error('CONDITION_PATH_INVALID', `malformed condition path "${key}": ${e.message}`, path, 'key')
      return undefined
    }
    const ref = parsed.reference
    if ((ref.root === 'headers' || ref.root === 'query') && ref.keys.length === 0) {
      error('CONDITION_PATH_INVALID', `condition path "${key}" needs a name, e.g. ${ref.root === 'headers' ? 'headers.x-github-event' : 'query.ref'}`, path, 'key')
      return undefined
    }
    return ref
  }

  const operand = (v: unknown, path: PathSegment[], ref: { root: string; keys: Array<string | number> }, reportOnly: boolean): { tree: ConditionNode; code: string } | undefined => {
    const textual = ref.root === 'headers' || ref.root === 'query'
    let op: Operator
    let expected: unknown
    let flags = ''
    let at = path
    if (!isMapping(v)) {
      if (Array.isArray(v)) {
        error('CONDITION_INVALID', 'a list needs an operator: write { in: […] } to accept any of its values, or { equals: […] }', path, 'value')
        return undefined
      }
      op = 'equals'
      expected = v
    } else {
      const keys = Object.keys(v)
      const unknown = keys.filter((k) => !(OPERATORS as readonly string[]).includes(k) && k !== 'flags')
      for (const k of unknown) {
        const guess = closest(k, [...OPERATORS, ...COMBINATORS])
        error('CONDITION_OPERATOR_UNKNOWN', `unknown operator "${k}"`, [...path, k], 'key', guess ? `did you mean "${guess}"?` : `operators: ${OPERATORS.join(', ')}`)
      }
      if (unknown.length > 0) return undefined
      const named = keys.filter((k) => k !== 'flags') as Operator[]
      if (named.length !== 1) {
        error('CONDITION_INVALID', named.length === 0 ? 'name an operator: equals, in, exists or matches' : `one operator per path (found ${named.join(', ')}): combine them with all`, path, 'value')
        return undefined
      }
      op = named[0]!
      at = [...path, op]
      expected = v[op]
      if (v.flags !== undefined) {
        if (op !== 'matches') {
          error('CONDITION_INVALID', 'flags go with matches only', [...path, 'flags'], 'key')
          return undefined
        }
        if (typeof v.flags !== 'string' || !PATTERN_FLAGS.test(v.flags)) {
          error('CONDITION_INVALID', 'flags must be some of i, m, s and u, each at most once', [...path, 'flags'], 'value')
          return undefined
        }
        flags = v.flags
      }
    }
    if (reportOnly) return undefined

    const i = leaves.length
    const leafPath = describeReference(ref)
    const valueCode = ref.root === 'headers' ? `h.header(c.headers, ${lit(String(ref.keys[0]).toLowerCase())})`
      : ref.root === 'query' ? `h.get(c.query, [${lit(String(ref.keys[0]))}])`
        : ref.keys.length === 0 ? 'c.payload' : `h.get(c.payload, [${ref.keys.map((k) => (typeof k === 'number' ? String(k) : lit(k))).join(',')}])`
    const constant = (x: unknown) => (x === null || typeof x !== 'object' ? lit(x) : `whenValues[${pool.value(x)}]`)
    let code: string
    switch (op) {
      case 'equals': {
        const x = textual ? asText(expected, at) : checkJson(expected, at)
        if (x === undefined) return undefined
        expected = x.value
        code = `h.eq(t, ${i}, ${valueCode}, ${constant(expected)})`
        break
      }
      case 'in': {
        if (!Array.isArray(expected) || expected.length === 0) {
          error('CONDITION_INVALID', 'in takes a non-empty list of values', at, 'value')
          return undefined
        }
        const items = expected.map((x, n) => (textual ? asText(x, [...at, n]) : checkJson(x, [...at, n])))
        if (items.some((x) => x === undefined)) return undefined
        expected = items.map((x) => x!.value)
        code = `h.oneOf(t, ${i}, ${valueCode}, ${constant(expected)})`
        break
      }
      case 'exists':
        if (typeof expected !== 'boolean') {
          error('CONDITION_INVALID', 'exists takes true or false', at, 'value')
          return undefined
        }
        code = `h.has(t, ${i}, ${valueCode}, ${expected})`
        break
      case 'matches': {
        if (typeof expected !== 'string') {
          error('CONDITION_INVALID', 'matches takes a regular expression written as a string', at, 'value')
          return undefined
        }
        const checked = checkPattern(expected, flags)
        if (!checked.ok) {
          error(checked.code, checked.message, at, 'value', checked.hint)
          return undefined
        }
        code = `h.test(t, ${i}, ${valueCode}, whenRegex[${pool.regex(expected, flags)}])`
        break
      }
    }
    leaves.push({ at: pointer(path), path: leafPath, op, expected, ...(flags ? { flags } : {}) })
    return { tree: { leaf: i }, code }
  }

  /** Header and query values are text: numbers and booleans are compared as they are written. */
  const asText = (x: unknown, path: PathSegment[]): { value: string } | undefined => {
    if (typeof x === 'string') return { value: x }
    if ((typeof x === 'number' && Number.isFinite(x)) || typeof x === 'boolean') return { value: String(x) }
    error('CONDITION_INVALID', 'header and query values are text: compare them with a string, number or boolean', path, 'value')
    return undefined
  }

  const checkJson = (x: unknown, path: PathSegment[]): { value: unknown } | undefined => {
    if (isJson(x)) return { value: x }
    error('CONDITION_INVALID', 'the value must be plain JSON (no .inf or .nan)', path, 'value')
    return undefined
  }

  const root = condition(value, at)
  if (failed || root === undefined) return undefined
  return { code: `(c, h, t) => ${root.code}`, leaves, tree: root.tree }
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function isJson(v: unknown): boolean {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true
  if (typeof v === 'number') return Number.isFinite(v)
  if (Array.isArray(v)) return v.every(isJson)
  if (isMapping(v)) return Object.values(v).every(isJson)
  return false
}

/** `payload.a["b c"][0]`, with header names lower-case and `body` read as payload. */
function describeReference(ref: { root: string; keys: Array<string | number> }): string {
  const root = ref.root === 'body' ? 'payload' : ref.root
  if (root === 'headers') return `headers.${String(ref.keys[0]).toLowerCase()}`
  return root + ref.keys.map((k) => (typeof k === 'number' ? `[${k}]` : /^[A-Za-z_$][\w$-]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`)).join('')
}

function lit(v: unknown): string {
  return JSON.stringify(v).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
}

