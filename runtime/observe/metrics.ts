// A small metrics registry and its Prometheus text exposition (format 0.0.4): counters (with or
// without labels), histograms with fixed buckets, and gauges read when scraped. The runtime takes
// no dependency for this. Imports nothing.
//
// Hot path: an increment walks at most one Map per label (or holds its child and touches one
// number); label text is built once, when a label set is first seen, never per increment.

export const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/

type LabelValue = string | number

/** One counter: what a hot path keeps and increments. */
export class Counter {
  value = 0
  inc(by = 1): void {
    this.value += by
  }
}

interface Family {
  readonly name: string
  write(out: string[]): void
}

function checkNames(name: string, labelNames: readonly string[]): void {
  if (!METRIC_NAME.test(name)) throw new Error(`invalid metric name "${name}"`)
  for (const l of labelNames) {
    if (!LABEL_NAME.test(l) || l.startsWith('__')) throw new Error(`invalid label name "${l}" on ${name}`)
  }
}

/** A label value as the format wants it inside quotes: backslash, double quote and newline escaped. */
export function escapeLabelValue(value: string): string {
  return /[\\"\n]/.test(value) ? value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') : value
}

/** HELP text escapes only backslash and newline. */
function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')
}

/** `{a="x",b="y"}`, or '' without labels. */
function labelText(names: readonly string[], values: readonly LabelValue[]): string {
  if (names.length === 0) return ''
  let s = '{'
  for (let i = 0; i < names.length; i++) s += `${i ? ',' : ''}${names[i]}="${escapeLabelValue(String(values[i]))}"`
  return s + '}'
}

export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN'
  if (v === Infinity) return '+Inf'
  if (v === -Infinity) return '-Inf'
  return String(v)
}

function header(out: string[], name: string, help: string, type: string): void {
  out.push(`# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}\n`)
}

/**
 * A counter with labels. Children live in nested Maps, one level per label, so `labels(a, b)` is
 * two Map lookups; a hot path that knows its label set ahead keeps the child instead.
 */
export class CounterFamily implements Family {
  private readonly root = new Map<LabelValue, unknown>()
  /** in creation order, with their label text built once */
  private readonly children: Array<{ text: string; counter: Counter }> = []

  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[]) {
    checkNames(name, labelNames)
  }

  labels(...values: LabelValue[]): Counter {
    if (values.length !== this.labelNames.length) throw new Error(`${this.name} takes ${this.labelNames.length} label values, not ${values.length}`)
    let level: Map<LabelValue, unknown> = this.root
    const last = values.length - 1
    if (last < 0) return this.leaf(level, '', values)
    for (let i = 0; i < last; i++) {
      let next = level.get(values[i]!) as Map<LabelValue, unknown> | undefined
      if (!next) level.set(values[i]!, (next = new Map()))
      level = next
    }
    return (level.get(values[last]!) as Counter | undefined) ?? this.leaf(level, values[last]!, values)
  }

  private leaf(level: Map<LabelValue, unknown>, key: LabelValue, values: readonly LabelValue[]): Counter {
    const existing = level.get(key) as Counter | undefined
    if (existing) return existing
    const counter = new Counter()
    level.set(key, counter)
    this.children.push({ text: labelText(this.labelNames, values), counter })
    return counter
  }

  write(out: string[]): void {
    header(out, this.name, this.help, 'counter')
    for (const c of this.children) out.push(`${this.name}${c.text} ${formatValue(c.counter.value)}\n`)
  }
}

/**
 * A histogram with fixed upper bounds and no labels. Counts are kept per bucket and made
 * cumulative when scraped, so an observation is a short scan and two additions.
 */
export class Histogram implements Family {
  private readonly bounds: Float64Array
  private readonly counts: Float64Array
  private readonly leTexts: string[]
  private sum = 0
  private count = 0

  constructor(readonly name: string, readonly help: string, buckets: readonly number[]) {
    checkNames(name, [])
    for (let i = 1; i < buckets.length; i++) {
      if (!(buckets[i]! > buckets[i - 1]!)) throw new Error(`${name}: bucket bounds must increase`)
    }
    this.bounds = Float64Array.from(buckets.filter((b) => b !== Infinity))
    this.counts = new Float64Array(this.bounds.length + 1)
    this.leTexts = [...this.bounds].map((b) => formatValue(b))
    this.leTexts.push('+Inf')
  }

  observe(value: number): void {
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && value > bounds[i]!) i++
    this.counts[i]! += 1
    this.sum += value
    this.count += 1
  }

  write(out: string[]): void {
    header(out, this.name, this.help, 'histogram')
    let cumulative = 0
    for (let i = 0; i < this.counts.length; i++) {
      cumulative += this.counts[i]!
      out.push(`${this.name}_bucket{le="${this.leTexts[i]}"} ${formatValue(cumulative)}\n`)
    }
    out.push(`${this.name}_sum ${formatValue(this.sum)}\n${this.name}_count ${formatValue(this.count)}\n`)
  }
}

/** A gauge's reading: one number, or one number per label set. */
export type GaugeReading = number | Iterable<readonly [readonly LabelValue[], number]>

/**
 * A value read when scraped (a length, a configured limit, the process's memory): a gauge, or a
 * counter kept by someone else (the process's CPU time).
 */
export class Gauge implements Family {
  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[], private readonly read: () => GaugeReading, private readonly type: 'gauge' | 'counter' = 'gauge') {
    checkNames(name, labelNames)
  }

  write(out: string[]): void {
    const reading = this.read()
    header(out, this.name, this.help, this.type)
    if (typeof reading === 'number') {
      out.push(`${this.name} ${formatValue(reading)}\n`)
      return
    }
    for (const [values, v] of reading) out.push(`${this.name}${labelText(this.labelNames, values)} ${formatValue(v)}\n`)
  }
}

/** Metric families in registration order; a name is registered once. */
export class Registry {
  private readonly families: Family[] = []
  private readonly names = new Set<string>()

  counter(name: string, help: string, labelNames: readonly string[] = []): CounterFamily {
    return this.add(new CounterFamily(name, help, labelNames))
  }

  histogram(name: string, help: string, buckets: readonly number[]): Histogram {
    return this.add(new Histogram(name, help, buckets))
  }

  gauge(name: string, help: string, labelNames: readonly string[], read: () => GaugeReading): Gauge {
    return this.add(new Gauge(name, help, labelNames, read))
  }

  /** A counter that something else keeps, read when scraped. */
  counterReading(name: string, help: string, read: () => number): Gauge {
    return this.add(new Gauge(name, help, [], read, 'counter'))
  }

  private add<F extends Family>(family: F): F {
    if (this.names.has(family.name)) throw new Error(`metric ${family.name} is registered twice`)
    this.names.add(family.name)
    this.families.push(family)
    return family
  }

  /** The exposition text: every family with its HELP and TYPE lines, ending with a newline. */
  render(): string {
    const out: string[] = []
    for (const f of this.families) f.write(out)
    return out.join('')
  }
}
