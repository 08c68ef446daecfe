// Edits hooks.yaml so that a diff shows the edit and nothing else. The yaml package's document API
// keeps comments and key order, but printing a document normalises spacing the author chose
// (`{ path: x }` → `{path: x}`, two spaces before a comment → one). So the document is printed
// twice, before and after the edit, and only the lines the edit changed are carried into the
// original text: every other line stays byte for byte as it was.
import { parseDocument, type Document, type ToStringOptions } from 'yaml'

export class YamlEditError extends Error {
  override name = 'YamlEditError'
}

/** The original text with `edit` applied, every line the edit did not touch left as it was. */
export function preservingEdit(original: string, edit: (doc: Document) => void): string {
  const doc = parseDocument(original, { keepSourceTokens: false })
  if (doc.errors.length > 0) throw new YamlEditError(`the file is not valid YAML: ${doc.errors[0]!.message.split('\n')[0]}`)
  const options: ToStringOptions = { lineWidth: 0, flowCollectionPadding: /\{ \S/.test(original) }
  const before = doc.toString(options)
  edit(doc)
  const after = doc.toString(options)
  if (before === original) return after
  const a = splitLines(original)
  const b0 = splitLines(before)
  // Printing changed the number of lines (a folded or re-flowed value): no line map to follow, so
  // the printed document is the result, still with every comment and key in its order.
  if (a.length !== b0.length) return after
  const b1 = splitLines(after)
  const out: string[] = []
  let i = 0
  for (const h of diffLines(b0, b1)) {
    out.push(...a.slice(i, h.start))
    out.push(...b1.slice(h.newStart, h.newEnd))
    i = h.end
  }
  out.push(...a.slice(i))
  return out.join('\n')
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
