// Edits hooks.yaml so that a diff shows the edit and nothing else. The yaml package's document API
// keeps comments and key order, but printing a document normalises spacing the author chose
// (`{ path: x }` → `{path: x}`, two spaces before a comment → one). So the document is printed
// twice, before and after the edit, and only the lines the edit changed are carried into the
// original text: every other line stays byte for byte as it was.
import { parseDocument, type Document, type ToStringOptions } from 'yaml'
import { documentValue } from '../compiler/load.js'

export class YamlEditError extends Error {
  override name = 'YamlEditError'
}

/** The original text with `edit` applied, every line the edit did not touch left as it was. */
export function preservingEdit(original: string, edit: (doc: Document) => void): string {
  const doc = parseDocument(original, { keepSourceTokens: false })
  if (doc.errors.length > 0) throw new YamlEditError(`the file is not valid YAML: ${doc.errors[0]!.message.split('\n')[0]}`)
  const options: ToStringOptions = { lineWidth: 0, flowCollectionPadding: /\{ \S/.test(original), ...indentationOf(original) }
  const before = doc.toString(options)
  edit(doc)
  const after = doc.toString(options)
  if (before === original) return after
  const a = splitLines(original)
  const b0 = splitLines(before)
  // The printed lines stand for the original ones: align them ignoring whitespace (the printer
  // respaces, and may add or drop a blank line, e.g. before a trailing comment), so that every
  // edit of the printed text lands at the same place in the original.
  const atOriginal = alignLines(a, b0)
  const b1 = splitLines(after)
  const out: string[] = []
  let i = 0
  for (const h of diffLines(b0, b1)) {
    const start = Math.max(i, atOriginal[h.start]!)
    out.push(...a.slice(i, start))
    const end = Math.max(start, atOriginal[h.end]!)
    const replaced = b1.slice(h.newStart, h.newEnd)
    // A line changed in place keeps the author's spacing before its comment (`enabled: false   # …`).
    if (end - start === replaced.length) replaced.forEach((line, k) => { replaced[k] = keepCommentSpacing(a[start + k]!, line) })
    out.push(...replaced)
    i = end
  }
  out.push(...a.slice(i))
  const merged = out.join('\n')
  // A file indented in a way the printer cannot imitate (list items indented differently from
  // one list to the next) could give new lines a wrong nesting: then the printed document is the
  // result, still with every comment and key in its order.
  return sameValue(merged, after) ? merged : after
}

/** `printed` with the whitespace `original` had before the same trailing comment (the printer writes one space). */
function keepCommentSpacing(original: string, printed: string): string {
  const p = /^(.*\S) (#.*)$/.exec(printed)
  const o = /^(.*\S)(\s+)(#.*)$/.exec(original)
  return p && o && p[2] === o[3] ? p[1] + o[2] + p[2] : printed
}

/** The file's own indentation step and list style, so that printed lines fit beside its lines. */
function indentationOf(text: string): Pick<ToStringOptions, 'indent' | 'indentSeq'> {
  const lines = text.split('\n').filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#'))
  let indent = 0
  for (const l of lines) {
    const n = l.length - l.trimStart().length
    if (n > 0 && (indent === 0 || n < indent)) indent = n
  }
  // `key:` with its list items at the key's own column
  let flushSeq = false
  for (let i = 0; i + 1 < lines.length; i++) {
    const key = lines[i]!
    const next = lines[i + 1]!
    if (/:\s*(#.*)?$/.test(key) && next.trimStart().startsWith('- ') && next.length - next.trimStart().length === key.length - key.trimStart().length) flushSeq = true
  }
  return { ...(indent >= 2 && indent <= 8 ? { indent } : {}), ...(flushSeq ? { indentSeq: false } : {}) }
}

function sameValue(x: string, y: string): boolean {
  const dx = parseDocument(x)
  const dy = parseDocument(y)
  if (dx.errors.length > 0 || dy.errors.length > 0) return false
  const vx = documentValue(dx)
  const vy = documentValue(dy)
  return vx.ok && vy.ok && JSON.stringify(vx.value) === JSON.stringify(vy.value)
}

/**
 * For each printed line index k (and k = printed.length), the index of the original line it stands
 * for; a printed line with no original counterpart maps to the next one that has one.
 */
function alignLines(original: readonly string[], printed: readonly string[]): number[] {
  const squash = (l: string) => l.replace(/\s+/g, '')
  const hunks = diffLines(original.map(squash), printed.map(squash))
  const map = new Array<number>(printed.length + 1).fill(-1)
  map[printed.length] = original.length
  let i = 0
  let k = 0
  for (const h of [...hunks, { start: original.length, end: original.length, newStart: printed.length, newEnd: printed.length }]) {
    // equal lines before the hunk pair up one to one
    while (k < h.newStart) map[k++] = i++
    i = h.end
    k = h.newEnd
  }
  for (let j = printed.length - 1; j >= 0; j--) if (map[j] === -1) map[j] = map[j + 1]!
  return map
}

function splitLines(text: string): string[] {
  return text.split('\n')
}

/** A run of lines [start, end) of the old text replaced by [newStart, newEnd) of the new one. */
export interface Hunk { start: number; end: number; newStart: number; newEnd: number }

/**
 * The changed regions between two line lists, by the longest common subsequence of the lines
 * between their common prefix and suffix (an edit touches a few places of a small file).
 */
export function diffLines(a: readonly string[], b: readonly string[]): Hunk[] {
  let pre = 0
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++
  let suf = 0
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++
  const x = a.slice(pre, a.length - suf)
  const y = b.slice(pre, b.length - suf)
  if (x.length === 0 && y.length === 0) return []
  if (x.length * y.length > 4_000_000) return [{ start: pre, end: pre + x.length, newStart: pre, newEnd: pre + y.length }]
  // lcs[i][j]: the common subsequence length of x[i..] and y[j..]
  const w = y.length + 1
  const lcs = new Uint32Array((x.length + 1) * w)
  for (let i = x.length - 1; i >= 0; i--) {
    for (let j = y.length - 1; j >= 0; j--) {
      lcs[i * w + j] = x[i] === y[j] ? lcs[(i + 1) * w + j + 1]! + 1 : Math.max(lcs[(i + 1) * w + j]!, lcs[i * w + j + 1]!)
    }
  }
  const hunks: Hunk[] = []
  let open: Hunk | undefined
  let i = 0
  let j = 0
  const close = () => { if (open) { hunks.push(open); open = undefined } }
  while (i < x.length || j < y.length) {
    if (i < x.length && j < y.length && x[i] === y[j]) {
      close()
      i++
      j++
      continue
    }
    open ??= { start: pre + i, end: pre + i, newStart: pre + j, newEnd: pre + j }
    if (j < y.length && (i === x.length || lcs[i * w + j + 1]! >= lcs[(i + 1) * w + j]!)) {
      j++
      open.newEnd = pre + j
    } else {
      i++
      open.end = pre + i
    }
  }
  close()
  return hunks
}
