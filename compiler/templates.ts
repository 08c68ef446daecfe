// Compiles a template string such as `Hi {{payload.user.name}} at {{now}}` into the JS source of
// an arrow function `(c, h) => <string expression>` that the runtime calls with a RenderContext and
// the helpers of runtime/bundle/template-helpers.ts.
//
// Security: template text reaches the generated code only as JSON.stringify'd string literals
// (literal text and property keys, with U+2028/U+2029 escaped as well) or as decimal integer
// literals (array indexes). Nothing the user writes is ever pasted into the code raw.
// Over 400 lines because the template grammar's parser and its code generator are one pass: the
// security rule above is easier to check where both are seen together.
import { editDistance } from './diagnostics.js'

export type TemplateErrorCode = 'TEMPLATE_SYNTAX' | 'TEMPLATE_UNKNOWN_ROOT' | 'TEMPLATE_FORBIDDEN_KEY' | 'WORKFLOW_STEP_REF_UNKNOWN' | 'WORKFLOW_STEP_REF_NOT_NEEDED'

export interface TemplateError {
  code: TemplateErrorCode
  message: string
  /** 0-based offset (UTF-16 code units) into the template string where the problem starts */
  offset: number
  /** length of the offending span */
  length: number
  hint?: string
}

/** `body` is normalised to `payload` */
export type TemplateRoot = 'payload' | 'headers' | 'query' | 'path' | 'now' | 'steps' | 'item' | 'index'

/**
 * Where a template of a workflow step stands: `{{steps.<id>.output…}}` may read the output of a step
 * it needs. `check` says why `stepId` may not be read there (undefined when it may).
 */
export interface TemplateOptions {
  steps?: { check(stepId: string): { code: 'WORKFLOW_STEP_REF_UNKNOWN' | 'WORKFLOW_STEP_REF_NOT_NEEDED'; message: string; hint?: string } | undefined }
  /** every tag's text is percent-encoded (a URL's path and query: a value cannot add a segment or a parameter) */
  encodeUriComponents?: boolean
  /** `{{item}}` and `{{index}}` may be read: a mapping that fans out (forEach, or a transform's array) */
  item?: boolean
}

export interface CompiledTemplate {
  /** JS source of an arrow function `(c, h) => <string expression>`; c is the render context, h the runtime helpers */
  code: string
  /** roots the template reads */
  roots: TemplateRoot[]
  /** true when the template has no tags (code returns a constant string literal) */
  constant: boolean
  /** the literal text before the first tag (all of it when constant): every rendering starts with it */
  lead: string
}

export type CompileTemplateResult = { ok: true; template: CompiledTemplate } | { ok: false; errors: TemplateError[] }

const KNOWN_ROOTS = ['payload', 'body', 'headers', 'query', 'path', 'now', 'item', 'index'] as const
type KnownRoot = (typeof KNOWN_ROOTS)[number]
/** Roots that exist only where a mapping fans out (forEach, or a transform that may return an array). */
const FAN_OUT_ROOTS: ReadonlySet<string> = new Set(['item', 'index'])

const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'prototype', 'constructor'])

/** One `.name`, `[0]` or `["key"]` step after the root. */
interface Segment {
  key: string | number
  /** span of the whole step, from its `.` or `[` */
  start: number
  end: number
  /** span of the key itself (the name without its dot; the whole bracket for bracket steps) */
  keyOffset: number
  keyLength: number
}

interface Tag {
  root: string
  rootOffset: number
  segments: Segment[]
  /** source text of the expression inside the braces, without surrounding whitespace */
  expression: string
}

type TagParse = { tag: Tag; error?: undefined; next: number } | { tag?: undefined; error: TemplateError; next: number }

function isNameChar(ch: string): boolean {
  return ch !== '.' && ch !== '[' && ch !== ']' && ch !== '{' && ch !== '}' && !/\s/.test(ch)
}

function isWhitespace(ch: string): boolean {
  return /\s/.test(ch)
}

function isDigit(ch: string): boolean {
  return ch >= '0' && ch <= '9'
}

function syntaxError(message: string, offset: number, length: number): TemplateError {
  return { code: 'TEMPLATE_SYNTAX', message, offset, length }
}

function unclosedError(start: number): TemplateError {
  return syntaxError('unclosed "{{" (missing "}}")', start, 2)
}

/** A short, quoted excerpt of template text for messages. */
function excerpt(s: string): string {
  return JSON.stringify(s.length > 24 ? s.slice(0, 24) + '…' : s)
}

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
}

/**
 * Parses the tag whose `{{` is at `start`. On success `next` is the offset after its `}}`; on a
 * syntax error `next` is where scanning resumes (after the tag's `}}`, or at the next `{{` when the
 * tag never closes).
 */
function parseTag(text: string, start: number): TagParse {
  const n = text.length
  let p = start + 2

  const fail = (at: number, message: string, length?: number): TagParse => {
    const close = text.indexOf('}}', at)
    const reopen = text.indexOf('{{', at)
    if (close === -1 || (reopen !== -1 && reopen < close)) {
      return { error: unclosedError(start), next: reopen === -1 ? n : reopen }
    }
    return { error: syntaxError(message, at, length ?? Math.max(1, close - at)), next: close + 2 }
  }
  /** Span of a bad bracket step: through its `]` when one comes before the tag's `}}`. */
  const bracketLength = (open: number): number => {
    const bracketClose = text.indexOf(']', open)
    const close = text.indexOf('}}', open)
    return bracketClose !== -1 && (close === -1 || bracketClose < close) ? bracketClose + 1 - open : 1
  }

  while (p < n && isWhitespace(text[p]!)) p++
  if (text.startsWith('}}', p)) return { error: syntaxError('empty template tag', start, p + 2 - start), next: p + 2 }

  const expressionStart = p
  const rootOffset = p
  while (p < n && isNameChar(text[p]!)) p++
  if (p === rootOffset) {
    return fail(p, p < n ? `expected a variable name, found ${excerpt(text[p]!)}` : 'expected a variable name')
  }
  const root = text.slice(rootOffset, p)

  const segments: Segment[] = []
  while (p < n) {
    const stepStart = p
    if (text[p] === '.') {
      p++
      while (p < n && isNameChar(text[p]!)) p++
      if (p === stepStart + 1) return fail(stepStart, 'expected a name after "."', 1)
      segments.push({ key: text.slice(stepStart + 1, p), start: stepStart, end: p, keyOffset: stepStart + 1, keyLength: p - stepStart - 1 })
    } else if (text[p] === '[') {
      p++
      const first = text[p]
      let key: string | number
      if (first !== undefined && isDigit(first)) {
        const digitsStart = p
        while (p < n && isDigit(text[p]!)) p++
        const index = Number(text.slice(digitsStart, p))
        if (!Number.isSafeInteger(index)) return fail(digitsStart, 'index is too large', p - digitsStart)
        if (text[p] !== ']') return fail(stepStart, 'expected "]" after the index', bracketLength(stepStart))
        key = index
      } else if (first === '"' || first === "'") {
        const quote = first
        const quoteOffset = p
        p++
        let value = ''
        let terminated = false
        while (p < n) {
          const ch = text[p]!
          if (ch === quote) {
            terminated = true
            p++
            break
          }
          if (ch === '\\' && quote === '"') {
            const escaped = text[p + 1]
            if (escaped !== undefined && Object.hasOwn(SIMPLE_ESCAPES, escaped)) {
              value += SIMPLE_ESCAPES[escaped]
              p += 2
              continue
            }
            if (escaped === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(p + 2, p + 6))) {
              value += String.fromCharCode(parseInt(text.slice(p + 2, p + 6), 16))
              p += 6
              continue
            }
            return fail(p, `invalid escape "\\${escaped ?? ''}" in a quoted key`, Math.min(2, n - p))
          }
          value += ch
          p++
        }
        if (!terminated) return fail(quoteOffset, 'unterminated quoted key', 1)
        if (text[p] !== ']') return fail(stepStart, 'expected "]" after the quoted key', p - stepStart)
        key = value
      } else {
        return fail(stepStart, 'expected an index or a quoted key after "["', bracketLength(stepStart))
      }
      p++ // the ']'
      segments.push({ key, start: stepStart, end: p, keyOffset: stepStart, keyLength: p - stepStart })
    } else {
      break
    }
  }
  const expression = text.slice(expressionStart, p)

  while (p < n && isWhitespace(text[p]!)) p++
  if (text.startsWith('}}', p)) return { tag: { root, rootOffset, segments, expression }, next: p + 2 }
  if (p >= n) return fail(p, 'unclosed')
  const close = text.indexOf('}}', p)
  return fail(p, `unexpected ${excerpt(text.slice(p, close === -1 ? n : close))} in template tag`)
}

/** Whether a root takes the tag's steps: payload any, headers and query none or one name, path and now none. */
function takesSteps(root: KnownRoot, segments: readonly Segment[]): boolean {
  if (root === 'payload' || root === 'body' || root === 'item') return true
  if (root === 'headers' || root === 'query') return segments.length === 0 || (segments.length === 1 && typeof segments[0]!.key === 'string')
  return segments.length === 0
}

/**
 * A hint suggests only tags that compile where the unknown one stands: a root near the one written
 * that takes the same steps (so `{{foo.bar}}` never becomes `{{now.bar}}`), else reading it as a payload field.
 */
function unknownRootHint(tag: Tag): string {
  const steps = tag.expression.slice(tag.root.length)
  const compiles = (t: string) => compileTemplate(t).ok
  const lower = tag.root.toLowerCase()
  let best: string | undefined
  let bestDistance = 3 // suggest only within an edit distance of 2
  for (const known of KNOWN_ROOTS) {
    if (FAN_OUT_ROOTS.has(known)) continue
    const distance = editDistance(lower, known)
    if (distance < bestDistance && takesSteps(known, tag.segments) && compiles(`{{${known}${steps}}}`)) {
      best = `{{${known}${steps}}}`
      bestDistance = distance
    }
  }
  const asPayloadField = `{{payload.${tag.expression}}}`
  const roots = 'template variables start with payload, body, headers, query, path or now'
  if (!compiles(asPayloadField)) return best !== undefined ? `did you mean ${best}?` : roots
  if (best === undefined) return `did you mean ${asPayloadField}? ${roots}`
  if (best.startsWith('{{payload') || best.startsWith('{{body')) return `did you mean ${best}?`
  return `did you mean ${best}? (to read a payload field, write ${asPayloadField})`
}

/** Checks a parsed tag's root and keys; reports every problem it finds. */
function checkTag(tag: Tag, options: TemplateOptions = {}): TemplateError[] {
  const errors: TemplateError[] = []
  const { root, rootOffset, segments } = tag
  if (root === 'steps' && options.steps) {
    const [id, output] = segments
    if (id === undefined || typeof id.key !== 'string' || output === undefined || output.key !== 'output') {
      errors.push(syntaxError('a step is read as {{steps.<step id>.output}} or a field under it, e.g. {{steps.fetch.output.body.id}}', rootOffset, Math.max(root.length, (segments[segments.length - 1]?.end ?? 0) - rootOffset)))
    } else {
      const problem = options.steps.check(id.key)
      if (problem) errors.push({ ...problem, offset: id.keyOffset, length: id.keyLength })
    }
  } else if (FORBIDDEN_KEYS.has(root)) {
    errors.push({ code: 'TEMPLATE_FORBIDDEN_KEY', message: `forbidden key ${JSON.stringify(root)}`, offset: rootOffset, length: root.length })
  } else if (FAN_OUT_ROOTS.has(root) && !options.item) {
    errors.push({
      code: 'TEMPLATE_UNKNOWN_ROOT',
      message: `template variable ${JSON.stringify(root)} exists only in a mapping that fans out`,
      offset: rootOffset,
      length: root.length,
      hint: 'set forEach (e.g. forEach: "{{payload.messages}}") or a transform that returns an array on this mapping',
    })
  } else if (!(KNOWN_ROOTS as readonly string[]).includes(root)) {
    errors.push({
      code: 'TEMPLATE_UNKNOWN_ROOT',
      message: `unknown template variable ${JSON.stringify(root)}`,
      offset: rootOffset,
      length: root.length,
      hint: unknownRootHint(tag),
    })
  }
  for (const segment of segments) {
    if (typeof segment.key !== 'string') continue
    const effective = root === 'headers' ? segment.key.toLowerCase() : segment.key
    if (FORBIDDEN_KEYS.has(segment.key) || FORBIDDEN_KEYS.has(effective)) {
      errors.push({
        code: 'TEMPLATE_FORBIDDEN_KEY',
        message: `forbidden key ${JSON.stringify(segment.key)}`,
        offset: segment.keyOffset,
        length: segment.keyLength,
      })
    }
  }
  const first = segments[0]
  const last = segments[segments.length - 1]
  if (first !== undefined && last !== undefined) {
    const span = { offset: first.start, length: last.end - first.start }
    if (root === 'path' || root === 'now' || root === 'index') {
      errors.push(syntaxError(`"${root}" takes no sub-path`, span.offset, span.length))
    } else if ((root === 'headers' || root === 'query') && (segments.length > 1 || typeof first.key === 'number')) {
      errors.push(syntaxError(`"${root}" takes exactly one name, e.g. {{${root}.${root === 'headers' ? 'x-github-event' : 'name'}}}`, span.offset, span.length))
    }
  }
  return errors
}

/** A JS string literal for `s`: JSON.stringify plus the two line terminators JSON leaves raw. */
function stringLiteral(s: string): string {
  return JSON.stringify(s).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
}

function keyLiteral(key: string | number): string {
  // Indexes come from a run of digits checked with Number.isSafeInteger, so String() is a decimal literal.
  return typeof key === 'number' ? String(key) : stringLiteral(key)
}

/** The JS expression (of type string) for one valid tag, and the root it reads. */
function tagCode(tag: Tag): { code: string; root: TemplateRoot } {
  const root = (tag.root === 'body' ? 'payload' : tag.root) as TemplateRoot
  const keys = tag.segments.map((s) => s.key)
  switch (root) {
    case 'steps':
      return { root, code: `h.text(h.get(c.steps, [${keys.map(keyLiteral).join(',')}]))` }
    case 'payload':
      return { root, code: keys.length === 0 ? 'h.json(c.payload)' : `h.text(h.get(c.payload, [${keys.map(keyLiteral).join(',')}]))` }
    case 'headers':
      return { root, code: keys.length === 0 ? 'h.headersJson(c.headers)' : `h.header(c.headers, ${stringLiteral(String(keys[0]).toLowerCase())})` }
    case 'query':
      return { root, code: keys.length === 0 ? 'h.json(c.query)' : `h.text(h.get(c.query, [${stringLiteral(String(keys[0]))}]))` }
    case 'path':
      return { root, code: 'c.path' }
    case 'now':
      return { root, code: 'c.now' }
    case 'item':
      return { root, code: keys.length === 0 ? 'h.text(c.item)' : `h.text(h.get(c.item, [${keys.map(keyLiteral).join(',')}]))` }
    case 'index':
      return { root, code: 'String(c.index ?? "")' }
  }
}

/**
 * Compiles a template. `\{{` is a literal `{{`; a lone `}}` is literal text. Reports every error in
 * the template, in order of offset.
 */
export function compileTemplate(text: string, options: TemplateOptions = {}): CompileTemplateResult {
  const errors: TemplateError[] = []
  const parts: string[] = []
  const roots: TemplateRoot[] = []
  let literal = ''
  let tagCount = 0
  let i = 0
  let literalStart = 0
  let lead: string | undefined

  while (i < text.length) {
    const open = text.indexOf('{{', i)
    if (open === -1) break
    if (open > 0 && text[open - 1] === '\\' && open - 1 >= i) {
      // `\{{`: drop the backslash, keep the braces as text
      literal += text.slice(literalStart, open - 1) + '{{'
      i = literalStart = open + 2
      continue
    }
    literal += text.slice(literalStart, open)
    lead ??= literal
    if (literal !== '') parts.push(stringLiteral(literal))
    literal = ''
    tagCount++
    const parsed = parseTag(text, open)
    if (parsed.error !== undefined) {
      errors.push(parsed.error)
    } else {
      const tagErrors = checkTag(parsed.tag, options)
      if (tagErrors.length > 0) {
        errors.push(...tagErrors)
      } else {
        const { code, root } = tagCode(parsed.tag)
        parts.push(options.encodeUriComponents ? `encodeURIComponent(${code})` : code)
        if (!roots.includes(root)) roots.push(root)
      }
    }
    i = literalStart = parsed.next
  }
  literal += text.slice(literalStart)
  if (literal !== '') parts.push(stringLiteral(literal))

  if (errors.length > 0) {
    return { ok: false, errors: errors.sort((a, b) => a.offset - b.offset) }
  }
  const body = parts.length === 0 ? '""' : parts.join(' + ')
  return { ok: true, template: { code: `(c, h) => ${body}`, roots, constant: tagCount === 0, lead: lead ?? literal } }
}

export interface Reference {
  /** as written: `body` is not normalised here */
  root: string
  keys: Array<string | number>
}

/**
 * Parses a bare reference such as `payload.pull_request.labels[0]` or `headers.x-github-event`
 * (what a template tag holds between its braces), for `match.when` paths. Offsets in the errors are
 * into `text`. Known roots and forbidden keys are checked as in templates.
 */
export function parseReference(text: string): { ok: true; reference: Reference } | { ok: false; errors: TemplateError[] } {
  if (/[{}]/.test(text)) return { ok: false, errors: [syntaxError('"{" and "}" have no place in a path', Math.max(0, text.search(/[{}]/)), 1)] }
  const parsed = parseTag(`{{${text}}}`, 0)
  const shift = (e: TemplateError): TemplateError => ({ ...e, offset: Math.max(0, Math.min(text.length, e.offset - 2)) })
  if (parsed.error !== undefined) return { ok: false, errors: [shift(parsed.error)] }
  const errors = checkTag(parsed.tag)
  if (errors.length > 0) return { ok: false, errors: errors.map(shift) }
  return { ok: true, reference: { root: parsed.tag.root, keys: parsed.tag.segments.map((s) => s.key) } }
}
