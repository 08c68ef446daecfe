// Phase 1, load: reads hooks.yaml and parses it with node positions kept, so that every later
// phase can point at the YAML node a finding is about (file:line:col plus JSON pointer).
import { readFileSync, realpathSync } from 'node:fs'
import { dirname, relative, resolve } from 'node:path'
import { isAlias, isMap, isPair, isScalar, isSeq, Lexer, parseDocument, type Alias, type Document, type Node } from 'yaml'
import type { DiagnosticBag, Location } from './diagnostics.js'

export type PathSegment = string | number

export interface LoadedConfig {
  /** absolute path of hooks.yaml */
  absFile: string
  /** the file as shown in diagnostics */
  file: string
  /** absolute directory holding hooks.yaml: the root of the config tree */
  dir: string
  source: string
  /** the plain JS value of the document (undefined for an empty file) */
  value: unknown
  /** where the node at `path` starts; `key` points at the key of a map entry instead of its value */
  locate(path: readonly PathSegment[], prefer?: 'key' | 'value'): Location
  /**
   * Where the text at `offset` of the string value at `path` stands in the file (for template
   * errors): the matching occurrence of `needle` in the node's source, falling back to the node.
   */
  locateText(path: readonly PathSegment[], value: string, offset: number, needle: string): Location
  /** the path in the file of the node at `path` in `value` (they differ where validate left parts out) */
  sourcePath(path: readonly PathSegment[]): PathSegment[]
}

/** Shown paths are relative to the working directory when the file lies under it. */
export function displayPath(absPath: string): string {
  const rel = relative(process.cwd(), absPath)
  return rel && !rel.startsWith('..') && !rel.startsWith('/') ? rel : absPath
}

export function pointer(path: readonly PathSegment[]): string {
  return path.map((s) => '/' + String(s).replace(/~/g, '~0').replace(/\//g, '~1')).join('')
}

export function loadConfig(file: string, bag: DiagnosticBag): LoadedConfig | undefined {
  const absFile = resolve(file)
  const shown = displayPath(absFile)
  let source: string
  try {
    source = readFileSync(absFile, 'utf8')
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message
    bag.error('CONFIG_FILE_UNREADABLE', `cannot read ${shown}: ${reason}`, { file: shown, line: 1, column: 1, path: '' })
    return undefined
  }
  return parseConfigSource(source, absFile, bag)
}

/** Parses already-read YAML text; exported for tests and for `hookgate compile -` style callers. */
export function parseConfigSource(source: string, absFile: string, bag: DiagnosticBag): LoadedConfig | undefined {
  const shown = displayPath(absFile)
  const doc = parseDocument(source, { uniqueKeys: true, prettyErrors: false, keepSourceTokens: false })
  // Positions from the text itself: yaml's LineCounter is fed by its lexer, which during error
  // recovery misses the line break inside a multi-line token, and pointed past the end of a line.
  const linePos = lineStarts(source)
  const at = (offset: number, path = ''): Location => {
    const p = linePos(offset)
    return { file: shown, line: p.line, column: p.col, path }
  }
  if (doc.errors.length > 0) {
    // One unquoted ${…} in a flow collection makes yaml report a cascade (29 to 477 errors seen)
    // that names neither the cause nor the fix: where one stands at or before the first error,
    // it is the one finding.
    const firstError = doc.errors.reduce((min, e) => Math.min(min, e.pos[0]), Infinity)
    const ref = unquotedReferenceInFlow(source, firstError)
    if (ref) {
      const where = ref.inside === 'map' ? 'a flow mapping { … }' : 'a flow sequence [ … ]'
      const quoted = ref.value !== undefined ? `"${ref.value}"` : `the whole value in "…"`
      bag.error(
        'YAML_UNQUOTED_REFERENCE',
        `unquoted ${ref.text} inside ${where}: YAML reads the braces of ${'${…}'} there as a nested mapping, not as part of the value`,
        at(ref.offset),
        `quote the value (${quoted}), or write the ${ref.inside === 'map' ? 'mapping' : 'sequence'} in block style, one entry per line, where ${'${…}'} needs no quotes`,
      )
      return undefined
    }
  }
  let syntaxErrors = 0
  for (const e of doc.errors) {
    syntaxErrors++
    const code = e.code === 'DUPLICATE_KEY' ? 'YAML_DUPLICATE_KEY' : 'YAML_SYNTAX'
    bag.error(code, firstLine(e.message), at(e.pos[0]))
  }
  if (syntaxErrors > 0) return undefined
  for (const w of doc.warnings) {
    bag.warning('YAML_SYNTAX', firstLine(w.message), at(w.pos[0]))
  }
  const expanded = documentValue(doc)
  if (!expanded.ok) {
    if (expanded.code === 'YAML_ALIAS_EXPANSION') bag.error(expanded.code, expanded.message, at(expanded.offset), expanded.hint)
    else bag.error(expanded.code, firstLine(expanded.message), at(expanded.offset))
    return undefined
  }
  const value = expanded.value

  const locateNode = (path: readonly PathSegment[], prefer: 'key' | 'value'): { node: Node | undefined; found: number } => {
    let node: unknown = doc.contents
    let keyNode: unknown
    let found = 0
    for (const seg of path) {
      keyNode = undefined
      if (isMap(node)) {
        const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(seg))
        if (!pair) break
        keyNode = pair.key
        node = pair.value ?? pair.key
      } else if (isSeq(node) && typeof seg === 'number' && node.items[seg] !== undefined) {
        node = node.items[seg]
      } else {
        break
      }
      found++
    }
    const chosen = prefer === 'key' && keyNode && found === path.length ? keyNode : node
    return { node: chosen as Node | undefined, found }
  }

  return {
    absFile,
    file: shown,
    // The real directory: transforms resolve through symlinks, so their paths must compare with it.
    dir: realDirOf(absFile),
    source,
    value,
    locate(path, prefer = 'value') {
      const { node } = locateNode(path, prefer)
      const start = node?.range?.[0] ?? 0
      return at(start, pointer(path))
    },
    locateText(path, value, offset, needle) {
      const { node } = locateNode(path, 'value')
      const range = node?.range
      if (!range) return at(0, pointer(path))
      // The k-th occurrence in the value is the k-th in the source, unless quoting escapes hide one.
      const nth = needle ? countOccurrences(value.slice(0, offset), needle) : 0
      const text = source.slice(range[0], range[1])
      let idx = -1
      for (let i = 0; i <= nth; i++) {
        idx = text.indexOf(needle, idx + 1)
        if (idx < 0) break
      }
      return at(idx >= 0 ? range[0] + idx : range[0], pointer(path))
    },
    sourcePath: (path) => [...path],
  }
}

/**
 * What YAML aliases may add to a config, in bytes, once every `*alias` is replaced by the value its
 * anchor names (README, "The config"). A count of aliases is no bound: 149 aliases of one 100 KB
 * string made a 14 MiB bundle, and a few more ran for minutes.
 */
export const MAX_ALIAS_EXPANSION_BYTES = 1024 * 1024

export type DocumentValue =
  | { ok: true; value: unknown }
  | { ok: false; code: 'YAML_ALIAS_EXPANSION' | 'YAML_SYNTAX'; message: string; hint?: string; offset: number }

/**
 * A parsed document's plain value, its aliases expanded only after what they add has been measured
 * against MAX_ALIAS_EXPANSION_BYTES: the one way the compiler, the operator page and the Gmail
 * helper turn hooks.yaml into data (an overview, a listing or a check never expands a bomb either).
 * Refused: where the alias that passes the limit stands.
 */
export function documentValue(doc: Document, limit = MAX_ALIAS_EXPANSION_BYTES): DocumentValue {
  const over = aliasPastLimit(doc, limit)
  if (over) {
    return {
      ok: false,
      code: 'YAML_ALIAS_EXPANSION',
      message: Number.isFinite(over.size)
        ? `alias *${over.name} expands to ${formatBytes(over.size)}, taking what aliases add to the config past ${formatBytes(limit)}`
        : `alias *${over.name} stands inside its own anchor, so it would expand without end`,
      hint: 'an alias repeats the whole value of its anchor: write the value out where it is needed, or share smaller values',
      offset: over.offset,
    }
  }
  try {
    return { ok: true, value: doc.toJS({ maxAliasCount: 1000 }) }
  } catch (err) {
    return { ok: false, code: 'YAML_SYNTAX', message: (err as Error).message, offset: 0 }
  }
}

/**
 * Walks the document once in source order, adding up what each alias expands to (its anchor's value
 * with every alias inside it expanded too, measured once per node), and stops at the first alias
 * that takes the sum past `limit`. An alias inside its own anchor expands without end.
 */
function aliasPastLimit(doc: Document, limit: number): { name: string; size: number; offset: number } | undefined {
  const anchors = new Map<string, unknown>()
  const targets = new Map<Alias, unknown>()
  const sizes = new Map<unknown, number>()
  /** bytes of the node with every alias in it expanded (roughly its JSON: quotes and separators counted as 2 and 1) */
  const expandedSize = (node: unknown): number => {
    if (node === null || node === undefined) return 4
    const known = sizes.get(node)
    if (known !== undefined) return known
    sizes.set(node, Infinity)
    let size = 2
    if (isAlias(node)) size = expandedSize(targets.get(node))
    else if (isScalar(node)) size += typeof node.value === 'string' ? Buffer.byteLength(node.value) : String(node.value).length
    else if (isMap(node)) for (const pair of node.items) size += expandedSize(pair.key) + expandedSize(pair.value) + 2
    else if (isSeq(node)) for (const item of node.items) size += expandedSize(item) + 1
    sizes.set(node, size)
    return size
  }
  let added = 0
  const visit = (node: unknown): { name: string; size: number; offset: number } | undefined => {
    if (isAlias(node)) {
      targets.set(node, anchors.get(node.source))
      const size = expandedSize(node)
      added += size
      return added > limit ? { name: node.source, size, offset: node.range?.[0] ?? 0 } : undefined
    }
    if (isScalar(node) || isMap(node) || isSeq(node)) {
      // an anchor names the node from here on (a later one of the same name replaces it)
      if (node.anchor) anchors.set(node.anchor, node)
      if (isMap(node)) {
        for (const pair of node.items) {
          const found = visit(pair.key) ?? visit(pair.value)
          if (found) return found
        }
      } else if (isSeq(node)) {
        for (const item of node.items) {
          const found = visit(item)
          if (found) return found
        }
      }
    }
    return undefined
  }
  return visit(doc.contents)
}

/**
 * The first `${` that stands unquoted inside a flow collection (`{ … }` or `[ … ]`) at or before
 * `limit`, found from yaml's own lexer so that quoted strings, comments and block scalars are told
 * apart from flow syntax: there a plain scalar stops at `{`, so `${X}` lexes as a scalar ending in
 * `$` followed at once by a `{`. In block style `${X}` is an ordinary plain scalar and never found.
 */
export function unquotedReferenceInFlow(
  source: string,
  limit = Infinity,
): { offset: number; text: string; inside: 'map' | 'seq'; value: string | undefined } | undefined {
  const open: Array<'map' | 'seq'> = []
  let offset = 0
  let plain: { offset: number; text: string } | undefined
  let afterScalarMark = false
  for (const token of new Lexer().lex(source)) {
    if (afterScalarMark) {
      // the source of a plain scalar follows its (zero-width) marker
      afterScalarMark = false
      plain = { offset, text: token }
      offset += token.length
      continue
    }
    if (token === '{' && plain && open.length > 0 && plain.text.endsWith('$')) {
      const at = offset - 1
      if (at > limit) return undefined
      const text = REFERENCE.exec(source.slice(at))?.[0] ?? '${'
      return { offset: at, text, inside: open[open.length - 1]!, value: flowPlainValue(source, plain.offset, at) }
    }
    plain = undefined
    if (token === '\x1f') { afterScalarMark = true; continue }
    // the document-mode and flow-error-end marks take no room in the source
    if (token === '\x02' || token === '\x18') {
      if (token === '\x18') open.length = 0
      continue
    }
    if (token === '{') open.push('map')
    else if (token === '[') open.push('seq')
    else if ((token === '}' || token === ']') && open.length > 0) open.pop()
    offset += token.length
  }
  return undefined
}

const REFERENCE = /^\$\{[^{}\n]*\}/

/**
 * The whole value a plain scalar meant to be, from `start` to where a flow plain scalar ends
 * (`,`, a bracket, a line break, ` #`), reading each ${…} in it whole; undefined when it spans
 * lines or holds what a double-quoted string would need escaped.
 */
function flowPlainValue(source: string, start: number, firstRef: number): string | undefined {
  let end = firstRef
  for (;;) {
    const ref = REFERENCE.exec(source.slice(end))
    if (ref) { end += ref[0].length; continue }
    const c = source.charAt(end)
    if (c === '' || ',[]{}\n\r'.includes(c) || (c === ' ' && source.charAt(end + 1) === '#')) break
    end++
  }
  const value = source.slice(start, end).trimEnd()
  return /["\\\n\r\t]/.test(value) ? undefined : value
}

function formatBytes(n: number): string {
  const fixed = (x: number) => x.toFixed(1).replace(/\.0$/, '')
  return n >= 1024 * 1024 ? `${fixed(n / 1024 / 1024)} MiB` : n >= 1024 ? `${fixed(n / 1024)} KiB` : `${n} bytes`
}

function realDirOf(absFile: string): string {
  try {
    return realpathSync(dirname(absFile))
  } catch {
    return dirname(absFile)
  }
}

function countOccurrences(text: string, needle: string): number {
  let n = 0
  for (let i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + needle.length)) n++
  return n
}

function firstLine(message: string): string {
  const line = message.split('\n')[0] ?? message
  return line.charAt(0).toLowerCase() + line.slice(1).replace(/\.$/, '')
}

export type { Document }

/** The 1-based line and column of a character offset in `source`, found by binary search over where its lines start. */
export function lineStarts(source: string): (offset: number) => { line: number; col: number } {
  const starts = [0]
  for (let i = source.indexOf('\n'); i >= 0; i = source.indexOf('\n', i + 1)) starts.push(i + 1)
  return (offset) => {
    const at = Math.max(0, Math.min(offset, source.length))
    let lo = 0
    let hi = starts.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (starts[mid]! <= at) lo = mid
      else hi = mid - 1
    }
    return { line: lo + 1, col: at - starts[lo]! + 1 }
  }
}
