// `hookgate schema infer FILE…`: a draft JSON Schema (2020-12) for a mapping's payload, merged from
// sample payloads (issue 26, item 4), to review and then give the mapping as its `schema:`. Merging:
// an object's properties are every key seen, `required` the keys every sample of it has; a value's
// `type` is the union of the types seen (`integer` only when no sample had a fraction, `null` in the
// union for a null); an array's `items` merges all its elements of all samples; a string is
// `format: date-time` when every sample of it is an RFC 3339 date-time; never `enum`, and
// `additionalProperties: true`, since samples are not the whole contract. Output is deterministic
// (properties and `required` sorted by code unit, keywords in one order) so it can be committed.
// Bounded: a file over 16 MiB or a value nested deeper than 64 is refused, exit 1, in one line.
//
// Written here rather than taken from npm: genson-js (0.0.8, last published 2024) is the one that
// merges samples this way, but counts required keys in a plain object (a key named `constructor`
// is never required, `__proto__` is dropped), writes `anyOf` for null-or-object and knows no
// formats; to-json-schema (six lodash packages) and json-schema-generator (request, optimist)
// infer from one value, not a merge of several. What is needed is the ~100 lines below.
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import { ExitCode } from '../exit-codes.js'
import { processIO, readCommandArgs, usageError, type CommandIO, type CommandSpec } from '../flags.js'

export const MAX_SAMPLE_BYTES = 16 * 1024 * 1024
export const MAX_SAMPLE_DEPTH = 64
export const DRAFT_2020_12 = 'https://json-schema.org/draft/2020-12/schema'

export const spec: CommandSpec = {
  name: 'schema infer',
  args: 'FILE...',
  summary: 'draft a JSON Schema for a payload from sample payloads (JSON files), to review',
  flags: [
    { name: 'out', value: 'FILE', description: 'write the schema to FILE instead of stdout' },
    { name: 'each', description: 'each FILE holds a JSON array whose every element is one sample' },
  ],
  notes: [
    'a key is required when every sample has it; other keys stay allowed (additionalProperties: true);',
    `refused (exit 1): invalid JSON (at file:line:col), a file over 16 MiB, nesting deeper than ${MAX_SAMPLE_DEPTH};`,
    'exit 0 drafted, 1 a sample refused, 2 usage error or a file that cannot be read or written',
  ],
}

type JsonType = 'array' | 'boolean' | 'integer' | 'null' | 'number' | 'object' | 'string'

/** What the samples showed at one place of the payload. */
interface Shape {
  types: Set<JsonType>
  strings: number
  dateTimes: number
  objects: number
  /** each key's shape; its `seen` counts the objects that had the key */
  properties: Map<string, Shape & { seen: number }>
  items?: Shape
}

const newShape = (): Shape => ({ types: new Set(), strings: 0, dateTimes: 0, objects: 0, properties: new Map() })

/** RFC 3339 date-time, what JSON Schema's `format: date-time` means. */
const DATE_TIME = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/

/** Thrown by add() at a container nested deeper than MAX_SAMPLE_DEPTH; `sample` is its sample's index. */
export class TooDeep extends Error {
  sample = -1
}

/** Adds one value to the shape; `depth` counts the arrays and objects it sits in. */
function add(shape: Shape, value: unknown, depth: number): void {
  if (value === null) shape.types.add('null')
  else if (typeof value === 'boolean') shape.types.add('boolean')
  else if (typeof value === 'number') shape.types.add(Number.isInteger(value) ? 'integer' : 'number')
  else if (typeof value === 'string') {
    shape.types.add('string')
    shape.strings++
    if (DATE_TIME.test(value)) shape.dateTimes++
  } else {
    if (depth >= MAX_SAMPLE_DEPTH) throw new TooDeep()
    if (Array.isArray(value)) {
      shape.types.add('array')
      for (const item of value) add(shape.items ??= newShape(), item, depth + 1)
    } else {
      shape.types.add('object')
      shape.objects++
      for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
        let property = shape.properties.get(key)
        if (!property) shape.properties.set(key, property = { ...newShape(), seen: 0 })
        property.seen++
        add(property, v, depth + 1)
      }
    }
  }
}

const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** The JSON Schema of a shape, keywords in one order. */
function render(shape: Shape): Record<string, unknown> {
  const types = [...shape.types].filter((t) => !(t === 'integer' && shape.types.has('number'))).sort(byCodeUnit)
  const out: Record<string, unknown> = {}
  if (types.length > 0) out.type = types.length === 1 ? types[0] : types
  if (shape.strings > 0 && shape.dateTimes === shape.strings) out.format = 'date-time'
  if (shape.types.has('object')) {
    const keys = [...shape.properties.keys()].sort(byCodeUnit)
    // fromEntries defines each key as an own property, `__proto__` included
    if (keys.length > 0) out.properties = Object.fromEntries(keys.map((k) => [k, render(shape.properties.get(k)!)]))
    const required = keys.filter((k) => shape.properties.get(k)!.seen === shape.objects)
    if (required.length > 0) out.required = required
    out.additionalProperties = true
  }
  if (shape.items) out.items = render(shape.items)
  return out
}

/** The draft schema of the samples (at least one). */
export function inferSchema(samples: readonly unknown[]): Record<string, unknown> {
  const root = newShape()
  samples.forEach((sample, index) => {
    try {
      add(root, sample, 0)
    } catch (err) {
      if (err instanceof TooDeep) err.sample = index
      throw err
    }
  })
  return {
    $schema: DRAFT_2020_12,
    description: `Drafted by hookgate schema infer from ${samples.length} sample payload${samples.length === 1 ? '' : 's'}: review it. A key is required only because every sample had it, and other keys are allowed.`,
    ...render(root),
  }
}

/** The offset of the first character that makes `text` not JSON, or -1 when it is JSON (no recursion: any nesting). */
function syntaxErrorAt(text: string): number {
  const scalar = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y
  const closers: string[] = []
  let i = 0
  const space = () => { while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++ }
  const string = (): boolean => {
    for (i++; i < text.length;) {
      const c = text[i]!
      if (c === '"') { i++; return true }
      if (c < ' ') return false
      if (c !== '\\') i++
      else if (text[i + 1] === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) i += 6
      else if (text[i + 1] !== undefined && '"\\/bfnrt'.includes(text[i + 1]!)) i += 2
      else return false
    }
    return false
  }
  let want: 'value' | 'key' | 'next' = 'value'
  for (;;) {
    space()
    if (want === 'key') {
      if (text[i] !== '"' || !string()) return i
      space()
      if (text[i++] !== ':') return i - 1
      want = 'value'
    } else if (want === 'value') {
      const c = text[i]
      if (c === '{' || c === '[') {
        closers.push(c === '{' ? '}' : ']')
        i++
        space()
        if (text[i] === closers.at(-1)) { closers.pop(); i++; want = 'next' } else want = c === '{' ? 'key' : 'value'
      } else if (c === '"') {
        if (!string()) return i
        want = 'next'
      } else {
        scalar.lastIndex = i
        if (!scalar.test(text)) return i
        i = scalar.lastIndex
        want = 'next'
      }
    } else {
      const closer = closers.at(-1)
      if (closer === undefined) return i < text.length ? i : -1
      if (text[i] === ',') { i++; want = closer === '}' ? 'key' : 'value' } else if (text[i] === closer) { closers.pop(); i++ } else return i
    }
  }
}

/** `line:col: unexpected "x"` for text that JSON.parse refused. */
function whereInvalid(text: string, fallback: string): string {
  const at = syntaxErrorAt(text)
  if (at < 0) return fallback
  const before = text.slice(0, at)
  const line = before.split('\n').length
  const col = at - before.lastIndexOf('\n')
  return `${line}:${col}: not valid JSON: ${at >= text.length ? 'unexpected end of the file' : `unexpected ${JSON.stringify(String.fromCodePoint(text.codePointAt(at)!))}`}`
}

export async function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const values = parsed.values as { out?: string; each?: boolean }
  const files = parsed.positionals
  if (files.length === 0) return usageError(spec, 'name at least one sample file', io)
  if (values.out === '') return usageError(spec, '--out needs a file name', io)
  const refuse = (why: string) => {
    io.stderr(`hookgate schema infer: ${why}\n`)
    return ExitCode.refused
  }
  const samples: unknown[] = []
  /** where each sample came from, for an error */
  const from: string[] = []
  for (const file of files) {
    let text: string
    try {
      const size = statSync(file).size
      if (size > MAX_SAMPLE_BYTES) return refuse(`${file}: ${size} bytes is over the 16 MiB a sample may have`)
      text = readFileSync(file, 'utf8')
    } catch (err) {
      io.stderr(`hookgate schema infer: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}\n`)
      return ExitCode.usage
    }
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch (err) {
      return refuse(`${file}:${whereInvalid(text, (err as Error).message)}`)
    }
    if (values.each && !Array.isArray(value)) return refuse(`${file}: --each needs a JSON array of samples, and this is not an array`)
    const found = values.each ? value as unknown[] : [value]
    samples.push(...found)
    from.push(...found.map((_, n) => (values.each ? `${file} (element ${n})` : file)))
  }
  if (samples.length === 0) return refuse('no samples: every --each array was empty')
  let schema: Record<string, unknown>
  try {
    schema = inferSchema(samples)
  } catch (err) {
    if (err instanceof TooDeep) return refuse(`${from[err.sample]}: arrays and objects nested deeper than ${MAX_SAMPLE_DEPTH} levels`)
    throw err
  }
  const text = JSON.stringify(schema, null, 2) + '\n'
  if (values.out === undefined) {
    io.stdout(text)
    return ExitCode.ok
  }
  try {
    writeFileSync(values.out, text)
  } catch (err) {
    io.stderr(`hookgate schema infer: cannot write ${values.out}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}\n`)
    return ExitCode.usage
  }
  io.stderr(`hookgate schema infer: wrote ${values.out} from ${samples.length} sample${samples.length === 1 ? '' : 's'}\n`)
  return ExitCode.ok
}
