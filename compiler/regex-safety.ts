// Decides at compile time whether a `match.when` regular expression could backtrack exponentially.
// The runtime's engine (V8's irregexp) backtracks, so a pattern such as `(a+)+$` can take minutes on
// a 30-character payload field; such a pattern must never reach a bundle.
//
// The check is sound and deliberately simple (it rejects some safe patterns, never lets through an
// exponential one): exponential backtracking needs a loop that can read the same text in two ways.
// So a pattern is refused when it has
//   - a backreference (`\1`, `\k<name>`): matching with them is NP-hard in general;
//   - a repeated group (`*`, `+`, `{n,}`, `{n,m}` with m > 1) holding another repetition with more
//     than one round: `(a+)+`, `(a*)*`, `(\w+\s?)*`, `(?:a{2})*`;
//   - a repeated group whose alternatives (expanded into fixed sequences of characters) are not
//     prefix-free: `(a|a)*`, `(a|ab)*`, `(|a)+`, `(a?)*`, `([a-z]|x)+`. A prefix-free set of
//     alternatives reads any text in at most one way, so the loop cannot branch;
//   - a lookaround inside a repeated group (too rich for this check).
// Polynomial backtracking (`.*a.*b` on a long text) is not refused; the body limit bounds it.
// No npm package was taken for this: none is in the shared install, and the rules above are short.

export type RegexSafety = { safe: true } | { safe: false; reason: string }

/** One character the pattern reads: the source of a regex that matches exactly that character. */
interface CharAtom { kind: 'char'; source: string }
type RegexNode =
  | CharAtom
  | { kind: 'seq'; items: RegexNode[] }
  | { kind: 'alt'; alts: RegexNode[] }
  | { kind: 'group'; body: RegexNode; look: boolean }
  | { kind: 'repeat'; body: RegexNode; min: number; max: number }
  | { kind: 'assert' }
  | { kind: 'backref' }

/** Words (alternatives expanded into character sequences) kept per repeated group before giving up. */
const MAX_WORDS = 64

/** `source` must already be a valid pattern for `flags` (new RegExp accepted it). */
export function checkRegexSafety(source: string, flags: string): RegexSafety {
  const tree = new Parser(source).parse()
  const reason = findHazard(tree, flags)
  return reason === undefined ? { safe: true } : { safe: false, reason }
}

class Parser {
  private i = 0
  constructor(private readonly s: string) {}

  parse(): RegexNode {
    const node = this.alternation()
    // A stray ')' cannot occur: the pattern compiled. Anything left is read as more alternatives.
    return this.i < this.s.length ? { kind: 'seq', items: [node, this.alternation()] } : node
  }

  private alternation(): RegexNode {
    const alts = [this.sequence()]
    while (this.s[this.i] === '|') {
      this.i++
      alts.push(this.sequence())
    }
    return alts.length === 1 ? alts[0]! : { kind: 'alt', alts }
  }

  private sequence(): RegexNode {
    const items: RegexNode[] = []
    while (this.i < this.s.length && this.s[this.i] !== '|' && this.s[this.i] !== ')') {
      let atom = this.atom()
      for (;;) {
        const q = this.quantifier()
        if (!q) break
        atom = { kind: 'repeat', body: atom, min: q.min, max: q.max }
      }
      items.push(atom)
    }
    return items.length === 1 ? items[0]! : { kind: 'seq', items }
  }

  private quantifier(): { min: number; max: number } | undefined {
    const c = this.s[this.i]
    let q: { min: number; max: number } | undefined
    if (c === '*') q = { min: 0, max: Infinity }
    else if (c === '+') q = { min: 1, max: Infinity }
    else if (c === '?') q = { min: 0, max: 1 }
    if (q) {
      this.i++
    } else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.s.slice(this.i))
      if (!m) return undefined
      this.i += m[0].length
      const min = Number(m[1])
      q = { min, max: m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]) }
    } else {
      return undefined
    }
    if (this.s[this.i] === '?') this.i++ // lazy: the same paths, tried in another order
    return q
  }

  private atom(): RegexNode {
    const s = this.s
    const c = s[this.i]!
    if (c === '(') {
      this.i++
      let look = false
      if (s.startsWith('?:', this.i)) this.i += 2
      else if (s.startsWith('?=', this.i) || s.startsWith('?!', this.i)) { this.i += 2; look = true }
      else if (s.startsWith('?<=', this.i) || s.startsWith('?<!', this.i)) { this.i += 3; look = true }
      else if (s.startsWith('?<', this.i)) this.i = s.indexOf('>', this.i) + 1
      const body = this.alternation()
      this.i++ // ')'
      return { kind: 'group', body, look }
    }
    if (c === '[') {
      const start = this.i
      this.i++
      if (s[this.i] === '^') this.i++
      while (this.i < s.length && s[this.i] !== ']') this.i += s[this.i] === '\\' ? 2 : 1
      this.i++
      return { kind: 'char', source: s.slice(start, this.i) }
    }
    if (c === '\\') return this.escape()
    this.i++
    if (c === '^' || c === '$') return { kind: 'assert' }
    if (c === '.') return { kind: 'char', source: '.' }
    return literal(c)
  }

  private escape(): RegexNode {
    const s = this.s
    const start = this.i
    const c = s[this.i + 1] ?? ''
    this.i += 2
    if (/[1-9]/.test(c)) return { kind: 'backref' }
    if (c === 'k' && s[this.i] === '<') return { kind: 'backref' }
    if (c === 'b' || c === 'B') return { kind: 'assert' }
    if (/[dDwWsS]/.test(c)) return { kind: 'char', source: '\\' + c }
    if ((c === 'p' || c === 'P') && s[this.i] === '{') this.i = s.indexOf('}', this.i) + 1
    else if (c === 'u' && s[this.i] === '{') this.i = s.indexOf('}', this.i) + 1
    else if (c === 'u' && /^[0-9a-fA-F]{4}$/.test(s.slice(this.i, this.i + 4))) this.i += 4
    else if (c === 'x' && /^[0-9a-fA-F]{2}$/.test(s.slice(this.i, this.i + 2))) this.i += 2
    else if (c === 'c' && /^[A-Za-z]$/.test(s[this.i] ?? '')) this.i += 1
    return { kind: 'char', source: s.slice(start, this.i) }
  }
}

function literal(c: string): CharAtom {
  return { kind: 'char', source: `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` }
}

function findHazard(node: RegexNode, flags: string): string | undefined {
  switch (node.kind) {
    case 'backref':
      return 'backreferences are not allowed'
    case 'char':
    case 'assert':
      return undefined
    case 'seq':
      return firstOf(node.items, (n) => findHazard(n, flags))
    case 'alt':
      return firstOf(node.alts, (n) => findHazard(n, flags))
    case 'group':
      return findHazard(node.body, flags)
    case 'repeat': {
      const inner = findHazard(node.body, flags)
      if (inner !== undefined || node.max <= 1) return inner
      if (hasRepetition(node.body)) return 'a repeated group holds another repetition (nested quantifiers such as (a+)+)'
      const words = expand(node.body)
      if (words === undefined) return 'a repeated group holds a lookaround or too many alternatives to check'
      if (!prefixFree(words, flags)) return 'the alternatives of a repeated group overlap, so it can read the same text in several ways (such as (a|a)* or (a|ab)*)'
      return undefined
    }
  }
}

function firstOf<T>(items: readonly T[], f: (t: T) => string | undefined): string | undefined {
  for (const item of items) {
    const r = f(item)
    if (r !== undefined) return r
  }
  return undefined
}

function hasRepetition(node: RegexNode): boolean {
  switch (node.kind) {
    case 'repeat': return node.max > 1 || hasRepetition(node.body)
    case 'seq': return node.items.some(hasRepetition)
    case 'alt': return node.alts.some(hasRepetition)
    case 'group': return hasRepetition(node.body)
    default: return false
  }
}

/** Every fixed character sequence a loop-free node can read; undefined when it cannot tell. */
function expand(node: RegexNode): CharAtom[][] | undefined {
  switch (node.kind) {
    case 'char': return [[node]]
    case 'assert': return [[]] // zero-width: dropping it can only make words collide, never hide a collision
    case 'backref': return undefined
    case 'group': return node.look ? undefined : expand(node.body)
    case 'alt': {
      const out: CharAtom[][] = []
      for (const alt of node.alts) {
        const words = expand(alt)
        if (words === undefined) return undefined
        out.push(...words)
        if (out.length > MAX_WORDS) return undefined
      }
      return out
    }
    case 'seq': {
      let out: CharAtom[][] = [[]]
      for (const item of node.items) {
        const words = expand(item)
        if (words === undefined) return undefined
        out = out.flatMap((w) => words.map((x) => [...w, ...x]))
        if (out.length > MAX_WORDS) return undefined
      }
      return out
    }
    case 'repeat': {
      // Only repetitions of at most one round get here (hasRepetition rejected the others).
      const words = expand(node.body)
      if (words === undefined) return undefined
      return node.min === 0 ? [[], ...words] : words
    }
  }
}

/** True when no word can read a beginning of what another word reads (equal words included). */
function prefixFree(words: CharAtom[][], flags: string): boolean {
  for (let a = 0; a < words.length; a++) {
    for (let b = a + 1; b < words.length; b++) {
      const x = words[a]!
      const y = words[b]!
      let overlap = true
      for (let k = 0; k < Math.min(x.length, y.length) && overlap; k++) overlap = intersects(x[k]!, y[k]!, flags)
      if (overlap) return false
    }
  }
  return true
}

const charSets = new Map<string, Uint8Array>()

/** Whether two one-character atoms share a character (every UTF-16 code unit is tried). */
function intersects(x: CharAtom, y: CharAtom, flags: string): boolean {
  // With the u flag a class may hold characters beyond the 16-bit units tried below: assume they meet.
  if (flags.includes('u') && [x, y].some((a) => /\\[pP]|\\u\{|[\ud800-\udfff]/.test(a.source))) return true
  const sx = charSet(x.source, flags)
  const sy = charSet(y.source, flags)
  for (let c = 0; c < 0x10000; c++) if (sx[c] && sy[c]) return true
  return false
}

function charSet(source: string, flags: string): Uint8Array {
  const key = `${flags}/${source}`
  let set = charSets.get(key)
  if (set === undefined) {
    if (charSets.size >= 256) charSets.clear() // a long-lived compiler (serve --watch, admin) stays small
    set = new Uint8Array(0x10000)
    const re = new RegExp(`^(?:${source})$`, flags.replace(/[gym]/g, ''))
    for (let c = 0; c < 0x10000; c++) if (re.test(String.fromCharCode(c))) set[c] = 1
    charSets.set(key, set)
  }
  return set
}
