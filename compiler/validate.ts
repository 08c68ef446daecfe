// Phase 2, validate: holds the loaded document to the TypeBox schema and turns every schema
// error into a diagnostic at its YAML node, with "did you mean" hints for misspelt keys and values.
// It also owns what later phases see of an invalid document: the config without the parts that
// failed (a mapping, trigger, task, agent, channel, provider or workflow with an error in it, or a
// wrong setting), so that they still check everything else in the same run.
import Value from 'typebox/value'
import { Settings } from 'typebox/system'
import { ConfigSchema, formOf, type HooksConfig } from './schema.js'
import { closest, type DiagnosticBag } from './diagnostics.js'
import type { LoadedConfig, PathSegment } from './load.js'

type JsonSchema = Record<string, any>

interface SchemaError {
  keyword: string
  schemaPath: string
  instancePath: string
  params: Record<string, any>
  message: string
}

/** Returns the typed config when it is valid; otherwise reports every error and returns undefined. */
export function validateConfig(loaded: LoadedConfig, bag: DiagnosticBag): HooksConfig | undefined {
  const value = loaded.value ?? {}
  const before = bag.errorCount
  checkAgainst(ConfigSchema as unknown as JsonSchema, value, [], loaded, bag)
  return bag.errorCount === before ? (value as HooksConfig) : undefined
}

/** What later phases get: a config that holds to the schema, and how to point into the file from it. */
export interface ValidParts {
  config: HooksConfig
  /** the loaded file seen through `config`: its paths are translated to the file's where parts were left out */
  loaded: LoadedConfig
  leftOut: LeftOut
}

/**
 * Reports every schema error, then leaves out each part that holds one (see PARTS) and returns the
 * rest. Undefined only when what is left is still not a config (e.g. `hooks` itself is wrong).
 */
export function validateParts(loaded: LoadedConfig, bag: DiagnosticBag): ValidParts | undefined {
  const value = loaded.value ?? {}
  const before = bag.items.length
  checkAgainst(ConfigSchema as unknown as JsonSchema, value, [], loaded, bag)
  // Every schema error names the JSON pointer of its node; that node's part is what is left out.
  const faults = bag.items.slice(before).filter((d) => d.severity === 'error').map((d) => parsePointer(d.path))
  if (faults.length === 0) return { config: value as HooksConfig, loaded, leftOut: new LeftOut(value, []) }
  const parts = faults.map(partOf)
  if (parts.some((p) => p.length === 0)) return undefined
  const { config, originalIndexes } = without(value, parts)
  if (!Value.Check(ConfigSchema, config)) return undefined
  return { config: config as HooksConfig, loaded: seenThrough(loaded, config, originalIndexes), leftOut: new LeftOut(value, parts) }
}

/**
 * The parts a schema error leaves out, most specific first: a list item later phases can do
 * without. An error outside them leaves out its setting (the key, or a whole list of plain values).
 */
const PARTS: ReadonlyArray<readonly PathSegment[]> = [
  ['agents', '*', 'triggers', '*'],
  ['agents', '*', 'tasks', '*'],
  ['agents', '*'],
  ['hooks', 'mappings', '*'],
  ['hooks', 'presets', '*'],
  ['channels', '*'],
  ['providers', '*'],
  ['workflows', '*'],
]

function partOf(fault: PathSegment[]): PathSegment[] {
  for (const pattern of PARTS) {
    if (fault.length >= pattern.length && pattern.every((p, i) => p === '*' ? typeof fault[i] === 'number' : p === fault[i])) return fault.slice(0, pattern.length)
  }
  const firstIndex = fault.findIndex((s) => typeof s === 'number')
  return firstIndex < 0 ? fault : fault.slice(0, firstIndex)
}

/** A copy of `value` without `parts`; list items are removed, and each shortened list remembers the indexes its items had. */
function without(value: unknown, parts: PathSegment[][]): { config: unknown; originalIndexes: WeakMap<unknown[], number[]> } {
  const config = structuredClone(value)
  const dropped = new Map<unknown[], Set<number>>()
  for (const part of parts) {
    const parent = valueAt(config, part.slice(0, -1)) as any
    const last = part[part.length - 1]!
    if (Array.isArray(parent) && typeof last === 'number') dropped.set(parent, (dropped.get(parent) ?? new Set()).add(last))
    else if (parent && typeof parent === 'object') delete parent[last]
  }
  const originalIndexes = new WeakMap<unknown[], number[]>()
  for (const [list, gone] of dropped) {
    const kept = list.map((_, i) => i).filter((i) => !gone.has(i))
    const items = kept.map((i) => list[i])
    list.length = 0
    list.push(...items)
    originalIndexes.set(list, kept)
  }
  return { config, originalIndexes }
}

/** The loaded file as later phases see it: their paths into `config` are the file's paths once list indexes are mapped back. */
function seenThrough(loaded: LoadedConfig, config: unknown, originalIndexes: WeakMap<unknown[], number[]>): LoadedConfig {
  const inFile = (path: readonly PathSegment[]): PathSegment[] => {
    let node: any = config
    return path.map((seg) => {
      const list = Array.isArray(node) ? node : undefined
      node = node != null && typeof node === 'object' ? node[seg] : undefined
      return list && typeof seg === 'number' ? originalIndexes.get(list)?.[seg] ?? seg : seg
    })
  }
  return {
    ...loaded,
    value: config,
    locate: (path, prefer) => loaded.locate(inFile(path), prefer),
    locateText: (path, value, offset, needle) => loaded.locateText(inFile(path), value, offset, needle),
    sourcePath: inFile,
  }
}

type Declared = 'agents' | 'channels' | 'providers' | 'workflows'

/**
 * What validate left out, for later phases to stay quiet where it would make their findings noise:
 * a reference to a left-out agent is not unknown, a left-out token is not missing.
 */
export class LeftOut {
  constructor(private readonly value: unknown, private readonly parts: readonly PathSegment[][]) {}

  /** True when the setting at `path` (of the file), or a part holding it, was left out. */
  has(path: readonly PathSegment[]): boolean {
    return this.parts.some((p) => p.length <= path.length && p.every((s, i) => s === path[i]))
  }

  /** True when an agent, channel, provider or workflow was left out. */
  any(list: Declared): boolean {
    return this.parts.some((p) => p[0] === list && p.length <= 2)
  }

  /** True when a left-out item of `list` may have had this id, so a reference to it is not known to be wrong. */
  mayDeclare(list: Declared, id: string): boolean {
    return this.parts.some((p) => {
      if (p[0] !== list || p.length > 2) return false
      if (p.length === 1) return true
      const declared = (valueAt(this.value, p) as { id?: unknown } | undefined)?.id
      return typeof declared !== 'string' || declared === id
    })
  }
}

// TypeBox stops at 8 errors by default; a config review wants all of them.
Settings.Set({ maxErrors: 100_000 })

function checkAgainst(schema: JsonSchema, value: unknown, base: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag): void {
  const errors = [...Value.Errors(schema, value)] as SchemaError[]
  // Errors inside a union's branches are noise until we know which branch the user meant.
  const unions = errors.filter((e) => e.keyword === 'anyOf')
  const insideUnion = (e: SchemaError) => unions.some((u) => e !== u && e.schemaPath.startsWith(u.schemaPath + '/anyOf/'))
  for (const e of errors) {
    if (insideUnion(e)) continue
    const path = [...base, ...parsePointer(e.instancePath)]
    const where = (prefer: 'key' | 'value' = 'value') => loaded.locate(path, prefer)
    const subject = describePath(path)
    switch (e.keyword) {
      case 'boolean':
        break // the additionalProperties error below says the same with the key's name
      case 'additionalProperties': {
        const known = Object.keys(subschemaAt(schema, e.schemaPath)?.properties ?? {})
        // Renaming a key to one the object already has would only make it a duplicate key.
        const present = Object.keys((valueAt(value, parsePointer(e.instancePath)) as object | undefined) ?? {})
        const free = known.filter((k) => !present.includes(k))
        for (const key of e.params.additionalProperties as string[]) {
          const guess = closest(key, free)
          const taken = guess === undefined ? closest(key, present.filter((k) => known.includes(k))) : undefined
          const keyPath = [...path, key]
          bag.error('SCHEMA_UNKNOWN_KEY', `unknown key "${key}"${path.length ? ` in ${subject}` : ''}`, loaded.locate(keyPath, 'key'),
            guess ? `did you mean "${guess}"?` : taken ? `"${taken}" is already set here: remove this misspelt copy` : known.length ? `allowed keys: ${known.join(', ')}` : undefined)
        }
        break
      }
      case 'required':
        for (const key of e.params.requiredProperties as string[]) {
          bag.error('SCHEMA_MISSING_KEY', `missing required key "${key}"${path.length ? ` in ${subject}` : ''}`, where())
        }
        break
      case 'type':
        bag.error('SCHEMA_TYPE', `${subject} must be ${article(e.params.type)}, not ${typeName(valueAt(value, parsePointer(e.instancePath)))}`, where())
        break
      case 'enum':
      case 'const': {
        const allowed: unknown[] = e.keyword === 'enum' ? e.params.allowedValues : [e.params.allowedValue]
        const actual = valueAt(value, parsePointer(e.instancePath))
        const guess = typeof actual === 'string' ? closest(actual, allowed.map(String)) : undefined
        bag.error('SCHEMA_ENUM', `${subject} must be one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}`, where(), guess ? `did you mean "${guess}"?` : undefined)
        break
      }
      case 'pattern': {
        const described = formOf(subschemaAt(schema, e.schemaPath))
        bag.error('SCHEMA_FORMAT', `${subject} has the wrong form${described ? `: ${described}` : ''}`, where())
        break
      }
      case 'minLength': case 'maxLength': case 'minimum': case 'maximum': case 'exclusiveMinimum':
      case 'exclusiveMaximum': case 'minItems': case 'maxItems': case 'multipleOf':
        bag.error('SCHEMA_RANGE', `${subject} ${e.message}`, where())
        break
      case 'anyOf':
        checkUnion(subschemaAt(schema, e.schemaPath), valueAt(value, parsePointer(e.instancePath)), path, loaded, bag)
        break
      default:
        bag.error('SCHEMA_INVALID', `${subject} ${e.message}`, where())
    }
  }
}

/** Picks the branch the user evidently meant and reports its errors; else says what would fit. */
function checkUnion(union: JsonSchema | undefined, value: unknown, path: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag): void {
  const flatten = (bs: JsonSchema[]): JsonSchema[] => bs.flatMap((b) => (b.anyOf ? flatten(b.anyOf) : [b]))
  const branches = flatten(union?.anyOf ?? [])
  const kind = jsonType(value)
  const sameType = branches.filter((b) => b.type === kind || (b.type === 'integer' && kind === 'number') || (b.const !== undefined && jsonType(b.const) === kind))
  let chosen: JsonSchema | undefined
  if (sameType.length === 1) chosen = sameType[0]
  else if (kind === 'object' && value && sameType.length > 1) {
    const keys = Object.keys(value as object)
    // A misspelt key still tells which branch was meant: { fil: x } means { file: x }.
    const overlap = (b: JsonSchema) => keys.filter((k) => k in (b.properties ?? {}) || closest(k, Object.keys(b.properties ?? {}))).length
    const best = Math.max(...sameType.map(overlap))
    const top = sameType.filter((b) => overlap(b) === best)
    if (best > 0 && top.length === 1) chosen = top[0]
  }
  if (chosen) {
    checkAgainst(chosen, value, path, loaded, bag)
    return
  }
  const subject = describePath(path)
  const shapes = branches.map(describeShape).join(', or ')
  const code = branches.every((b) => b.const !== undefined) ? 'SCHEMA_ENUM' : sameType.length === 0 ? 'SCHEMA_TYPE' : 'SCHEMA_INVALID'
  bag.error(code, `${subject} must be ${shapes}`, loaded.locate(path), formOf(union))
}

function describeShape(s: JsonSchema): string {
  if (s.const !== undefined) return JSON.stringify(s.const)
  if (s.type === 'object' && s.properties) return `{ ${Object.keys(s.properties).join(', ')} }`
  return article(String(s.type ?? 'value'))
}

function parsePointer(p: string): PathSegment[] {
  if (!p) return []
  return p.slice(1).split('/').map((s) => {
    const k = s.replace(/~1/g, '/').replace(/~0/g, '~')
    return /^(0|[1-9]\d*)$/.test(k) ? Number(k) : k
  })
}

function subschemaAt(root: JsonSchema, schemaPath: string): JsonSchema | undefined {
  let node: any = root
  for (const seg of parsePointer(schemaPath.replace(/^#/, ''))) {
    if (node == null) return undefined
    node = node[seg]
  }
  return node
}

function valueAt(root: unknown, path: PathSegment[]): unknown {
  let v: any = root
  for (const seg of path) {
    if (v == null || typeof v !== 'object' || !Object.hasOwn(v, seg)) return undefined
    v = v[seg]
  }
  return v
}

function jsonType(v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'array'
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number'
  return typeof v
}

function typeName(v: unknown): string {
  const t = jsonType(v)
  return t === 'integer' ? 'a number' : t === 'undefined' ? 'empty' : article(t)
}

function article(t: string): string {
  if (t === 'null') return 'null'
  return /^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`
}

/** `hooks.mappings[2].match.path`, the way a user reads the YAML. */
export function describePath(path: readonly PathSegment[]): string {
  if (path.length === 0) return 'the config'
  let out = ''
  for (const seg of path) out += typeof seg === 'number' ? `[${seg}]` : out ? `.${seg}` : seg
  return out
}
