// The configs the compiler fuzzer compiles: mutations of real ones (the golden fixtures under
// test/fixtures/diagnostics, the repo's hooks.yaml, examples/), structural — on the YAML document,
// so a mutation keeps the rest of the file as it was: drop, duplicate, retype, swap, a random
// scalar, an unknown key, an anchor and alias, a chain of aliases — and then bytes of the text.
// Each mutation picks its node by a number (modulo the nodes there are), so fast-check shrinks a
// failing case to fewer, simpler mutations of the same seed file.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import fc from 'fast-check'
import { isAlias, isMap, isScalar, isSeq, parseDocument, Scalar, visit, YAMLMap, YAMLSeq, type Document, type Node } from 'yaml'
import { fixturesDir, repoRoot } from '../helpers/paths.js'

const MARK = '# ---- expected ----'

/** The seed configs, by name: every golden fixture's input, the repo's hooks.yaml, the examples. */
export function seedConfigs(): Map<string, string> {
  const seeds = new Map<string, string>()
  const dir = join(fixturesDir, 'diagnostics')
  for (const name of readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort()) {
    const text = readFileSync(join(dir, name), 'utf8')
    const cut = text.indexOf(MARK)
    seeds.set(`fixtures/${name}`, cut < 0 ? text : text.slice(0, cut))
  }
  seeds.set('hooks.yaml', readFileSync(join(repoRoot, 'hooks.yaml'), 'utf8'))
  for (const ex of ['minimal', 'stripe']) seeds.set(`examples/${ex}/hooks.yaml`, readFileSync(join(repoRoot, 'examples', ex, 'hooks.yaml'), 'utf8'))
  return seeds
}

export type Mutation =
  | { op: 'drop'; at: number }
  | { op: 'duplicate'; at: number }
  | { op: 'retype'; at: number; value: unknown }
  | { op: 'swap'; at: number; with: number }
  | { op: 'scalar'; at: number; value: unknown }
  | { op: 'unknown-key'; at: number; key: string; value: unknown }
  | { op: 'alias'; at: number; to: number }
  | { op: 'alias-chain'; at: number; depth: number; width: number }
  | { op: 'alias-fanout'; at: number; copies: number; length: number }

export type ByteMutation =
  | { op: 'insert'; at: number; text: string }
  | { op: 'delete'; at: number; length: number }
  | { op: 'flip'; at: number; byte: number }

export interface CompilerCase {
  seed: string
  mutations: Mutation[]
  bytes: ByteMutation[]
  /** also run `hookgate compile --check --format json` on it (a process start each: a share of the cases) */
  viaCli: boolean
}

/** Scalars that mean something somewhere in a config. */
const INTERESTING = [
  '{{payload.a}}', '{{', '}}', '{{payload.__proto__}}', '{{item}}', '{{headers}}', '{{nope.x}}', '\\{{x}}', '${HOOKGATE_TOKEN}', '${', '${lower}', '{ generate: true }',
  '../outside.js', '/etc/passwd', 'ok.ts', 'transforms/../../x.ts', '/', '//', '/hooks', 'hooks', 'wake', 'agent', 'main', 'builtin/echo', 'openai/gpt-4o', 'x/y/z',
  '0 8 * * 1-5', '*/0 * * * *', '61 * * * *', '@daily', '30m', '0s', '-1s', '1e400', 'off', 'now', 'next-heartbeat', '^(a+)+$', '(', '[', '.*.*.*x',
  'postgres://u:p@h/db', 'https://user:pass@example.com/x', 'http://127.0.0.1:1', '0.0.0.0/0', '::1', '300.1.1.1', 'a'.repeat(2000), '', ' ', '\t', '\u0000', '\ud800',
  '\u{1f600}', 'é', 'true', 'null', '~', '0x10', '0o7', '.inf', '-.nan', '2001-01-01', '!!binary aGk=', '&anchor', '*alias', '#', ': ', '- ', '|', '>',
]

const scalarValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.constantFrom(...INTERESTING), weight: 4 },
  { arbitrary: fc.constantFrom(0, -1, 1, 7, 2 ** 31, 2 ** 53 + 1, 1e308, -0, 0.5, Infinity, NaN, true, false, null), weight: 2 },
  { arbitrary: fc.string({ maxLength: 12 }), weight: 1 },
)

const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: scalarValue, weight: 4 },
  { arbitrary: fc.array(scalarValue, { maxLength: 3 }), weight: 1 },
  { arbitrary: fc.dictionary(fc.constantFrom('id', 'path', 'action', 'x', 'match', 'when', 'model'), scalarValue, { maxKeys: 3 }), weight: 1 },
)

const at = fc.nat({ max: 10_000 })

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: at.map((n): Mutation => ({ op: 'drop', at: n })), weight: 4 },
  { arbitrary: at.map((n): Mutation => ({ op: 'duplicate', at: n })), weight: 4 },
  { arbitrary: fc.tuple(at, anyValue).map(([n, value]): Mutation => ({ op: 'retype', at: n, value })), weight: 4 },
  { arbitrary: fc.tuple(at, at).map(([n, m]): Mutation => ({ op: 'swap', at: n, with: m })), weight: 3 },
  { arbitrary: fc.tuple(at, scalarValue).map(([n, value]): Mutation => ({ op: 'scalar', at: n, value })), weight: 8 },
  { arbitrary: fc.tuple(at, fc.constantFrom('unknownKey', 'Id', 'paths', 'actions', '__proto__', 'constructor', 'match.path', 'textTemplates', 'x-extra'), anyValue).map(([n, key, value]): Mutation => ({ op: 'unknown-key', at: n, key, value })), weight: 3 },
  { arbitrary: fc.tuple(at, at).map(([n, m]): Mutation => ({ op: 'alias', at: n, to: m })), weight: 2 },
  // A billion laughs: `depth` levels, each a list of `width` aliases of the level below.
  { arbitrary: fc.tuple(at, fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 12 })).map(([n, depth, width]): Mutation => ({ op: 'alias-chain', at: n, depth, width })), weight: 1 },
  // An amplifier: one long anchored string, aliased by many copies of a list's entry (distinct
  // ids). Rare and mostly small: a large one compiles for seconds (the known defect's example is one).
  { arbitrary: fc.tuple(at, fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 20_000 })).map(([n, copies, length]): Mutation => ({ op: 'alias-fanout', at: n, copies, length })), weight: 1 },
)

const YAML_BITS = [':', ': ', '- ', '&a ', '*a', '!!str ', '!!map ', '!!seq ', '!!int ', '? ', '---\n', '...\n', '%YAML 1.1\n', '"', "'", '{', '}', '[', ']', ',', '#', '\t', '\n', '\r\n', '\r', '  ', '\u0000', '\ufeff', '\u0085', '<<: *a\n', '|', '>-\n', '@', '`', '\\']

export const byteMutation: fc.Arbitrary<ByteMutation> = fc.oneof(
  fc.tuple(at, fc.oneof(fc.constantFrom(...YAML_BITS), fc.string({ maxLength: 4 }))).map(([n, text]): ByteMutation => ({ op: 'insert', at: n, text })),
  fc.tuple(at, fc.integer({ min: 1, max: 8 })).map(([n, length]): ByteMutation => ({ op: 'delete', at: n, length })),
  fc.tuple(at, fc.integer({ min: 0, max: 255 })).map(([n, byte]): ByteMutation => ({ op: 'flip', at: n, byte })),
)

export function compilerCase(seeds: readonly string[]): fc.Arbitrary<CompilerCase> {
  return fc.record({
    seed: fc.constantFrom(...seeds),
    mutations: fc.array(mutation, { minLength: 1, maxLength: 4 }),
    bytes: fc.oneof({ arbitrary: fc.constant<ByteMutation[]>([]), weight: 3 }, { arbitrary: fc.array(byteMutation, { minLength: 1, maxLength: 3 }), weight: 1 }),
    // one case in 16: a process start costs ~0.7 s of CPU, a library compile ~20 ms
    viaCli: fc.integer({ min: 0, max: 15 }).map((n) => n === 0),
  })
}

// ---- applying a case ------------------------------------------------------------------------------

/** The nodes of a document, in document order (collections and scalars; aliases too). */
function nodesOf(doc: Document): Node[] {
  const out: Node[] = []
  visit(doc, {
    Map: (_, n) => { out.push(n as Node) },
    Seq: (_, n) => { out.push(n as Node) },
    Scalar: (_, n) => { out.push(n as Node) },
    Alias: (_, n) => { out.push(n as Node) },
  })
  return out
}

/** The collection holding `node`, and its key or index there. */
function parentOf(doc: Document, node: Node): { parent: YAMLMap | YAMLSeq; key: unknown } | undefined {
  let found: { parent: YAMLMap | YAMLSeq; key: unknown } | undefined
  visit(doc, {
    Map: (_, m) => {
      for (const pair of (m as YAMLMap).items) {
        if (pair.value === node || pair.key === node) { found = { parent: m as YAMLMap, key: pair.key }; return visit.BREAK }
      }
      return undefined
    },
    Seq: (_, s) => {
      const i = (s as YAMLSeq).items.indexOf(node)
      if (i >= 0) { found = { parent: s as YAMLSeq, key: i }; return visit.BREAK }
      return undefined
    },
  })
  return found
}

function replace(doc: Document, node: Node, next: unknown): void {
  const where = parentOf(doc, node)
  if (!where) { doc.contents = doc.createNode(next) as Node; return }
  if (isMap(where.parent)) {
    const pair = where.parent.items.find((p) => p.key === where.key)
    if (pair) pair.value = doc.createNode(next) as Node
  } else {
    where.parent.items[where.key as number] = doc.createNode(next) as Node
  }
}

let anchors = 0

function mutate(doc: Document, m: Mutation): void {
  const nodes = nodesOf(doc)
  if (nodes.length === 0) return
  const node = nodes[m.at % nodes.length]!
  switch (m.op) {
    case 'drop': {
      const where = parentOf(doc, node)
      if (!where) return
      if (isMap(where.parent)) where.parent.items = where.parent.items.filter((p) => p.key !== where.key)
      else where.parent.items.splice(where.key as number, 1)
      return
    }
    case 'duplicate': {
      const where = parentOf(doc, node)
      if (!where) return
      if (isMap(where.parent)) {
        const pair = where.parent.items.find((p) => p.key === where.key)
        if (pair) where.parent.items.push(pair.clone ? pair.clone() : pair)
      } else {
        where.parent.items.splice(where.key as number, 0, (node as { clone?: () => Node }).clone?.() ?? node)
      }
      return
    }
    case 'retype':
    case 'scalar':
      replace(doc, node, m.value)
      return
    case 'swap': {
      const other = nodes[m.with % nodes.length]!
      if (other === node || contains(node, other) || contains(other, node)) return
      const a = (node as { clone?: () => Node }).clone?.() ?? node
      const b = (other as { clone?: () => Node }).clone?.() ?? other
      replace(doc, node, b)
      replace(doc, other, a)
      return
    }
    case 'unknown-key':
      if (isMap(node)) node.set(doc.createNode(m.key), doc.createNode(m.value))
      return
    case 'alias': {
      const target = nodes[m.to % nodes.length]!
      if (target === node || isAlias(target) || contains(target, node)) return
      target.anchor ??= `fz${++anchors}`
      replace(doc, node, doc.createAlias(target as Scalar))
      return
    }
    case 'alias-fanout': {
      // the first list of maps from the chosen node on (wrapping around)
      const start = m.at % nodes.length
      const seq = [...nodes.slice(start), ...nodes.slice(0, start)].find((n) => isSeq(n) && n.items.some((i) => isMap(i))) as YAMLSeq | undefined
      if (!seq) return
      const item = seq.items.find((i) => isMap(i)) as YAMLMap
      const big = new Scalar('x'.repeat(m.length))
      big.anchor = `big${++anchors}`
      for (let i = 0; i < m.copies; i++) {
        const copy = item.clone() as YAMLMap
        let placed = false
        visit(copy, {
          Pair: (_, pair) => {
            const key = isScalar(pair.key) ? String(pair.key.value) : ''
            if (!placed && /template|name|text|message/i.test(key) && isScalar(pair.value)) {
              pair.value = i === 0 ? big : doc.createAlias(big)
              placed = true
              return visit.SKIP
            }
            // ids and paths made unique, so that the copies are mappings of their own
            if ((key === 'id' || key === 'path') && isScalar(pair.value) && typeof pair.value.value === 'string') pair.value.value += `-f${i}`
            return undefined
          },
        })
        if (!placed) copy.set('name', i === 0 ? big : doc.createAlias(big))
        seq.items.push(copy)
      }
      return
    }
    case 'alias-chain': {
      // lol0: &l0 [x, x, …]; lol1: &l1 [*l0, *l0, …]; … as the value of the chosen node
      const levels: Node[] = []
      let level: Node = doc.createNode(Array.from({ length: m.width }, () => 'lol')) as Node
      level.anchor = `lol${++anchors}`
      levels.push(level)
      for (let d = 1; d < m.depth; d++) {
        const below: Node = level
        const seq = new YAMLSeq()
        for (let i = 0; i < m.width; i++) seq.items.push(doc.createAlias(below as Scalar))
        seq.anchor = `lol${++anchors}`
        level = seq as unknown as Node
        levels.push(level)
      }
      replace(doc, node, levels)
      return
    }
  }
}

function contains(outer: Node, inner: Node): boolean {
  if (outer === inner) return true
  if (isMap(outer)) return outer.items.some((p) => (p.key && contains(p.key as Node, inner)) || (p.value && contains(p.value as Node, inner)))
  if (isSeq(outer)) return outer.items.some((i) => contains(i as Node, inner))
  return false
}

function mutateBytes(bytes: Buffer, m: ByteMutation): Buffer {
  const i = m.at % (bytes.length + 1)
  switch (m.op) {
    case 'insert': return Buffer.concat([bytes.subarray(0, i), Buffer.from(m.text, 'utf8'), bytes.subarray(i)])
    case 'delete': return Buffer.concat([bytes.subarray(0, i), bytes.subarray(i + m.length)])
    case 'flip': {
      if (bytes.length === 0) return bytes
      const out = Buffer.from(bytes)
      out[i % bytes.length] = m.byte
      return out
    }
  }
}

/**
 * The case's bytes (a byte mutation may leave invalid UTF-8: the compiler reads the file as it is).
 * Structural mutations the yaml library cannot write out are
 * skipped (a swap that leaves an alias before its anchor, say).
 */
export function applyCase(c: CompilerCase, seeds: ReadonlyMap<string, string>): Buffer {
  const source = seeds.get(c.seed)!
  anchors = 0
  let text = source
  const doc = parseDocument(source, { uniqueKeys: false })
  if (doc.errors.length === 0) {
    for (const m of c.mutations) {
      const before = doc.clone()
      try {
        mutate(doc, m)
        text = doc.toString({ lineWidth: 0 })
      } catch {
        // this mutation cannot be written out: undo it
        doc.contents = before.contents
      }
    }
  }
  let bytes: Buffer = Buffer.from(text, 'utf8')
  for (const b of c.bytes) bytes = mutateBytes(bytes, b)
  return bytes
}

export function showCase(c: CompilerCase, text: Buffer): string {
  const shown = text.toString('utf8')
  const lines = shown.split('\n')
  const clipped = lines.length > 80 ? [...lines.slice(0, 80), `… (${lines.length - 80} more lines)`] : lines
  return `  seed ${c.seed}; mutations ${JSON.stringify(c.mutations)}${c.bytes.length ? `; bytes ${JSON.stringify(c.bytes)}` : ''}${c.viaCli ? '; via the CLI too' : ''}\n  --- case.yaml (${text.length} bytes) ---\n${clipped.map((l) => '  | ' + l).join('\n')}`
}

