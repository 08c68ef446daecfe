// The metrics registry on its own: what it renders is the Prometheus text format a real parser
// reads back unchanged (escaped label values and HELP text included), counters keep one child per
// label set, histogram buckets are cumulative with inclusive upper bounds, and bad names are refused.
import { createRequire } from 'node:module'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { escapeLabelValue, formatValue, Registry } from '../../runtime/observe/metrics.js'

/** parse-prometheus-text-format: its UMD build carries its one dependency inside, so it loads alone. */
const parsePrometheus = createRequire(import.meta.url)('parse-prometheus-text-format/dist/parse-prometheus-text-format.umd.js') as (text: string) => Array<{ name: string; help: string; type: string; metrics: Array<Record<string, any>> }>

const render = suite('Registry.render')

render('label values with backslashes, quotes and newlines come back unchanged through a real parser', () => {
  const r = new Registry()
  const c = r.counter('t_things_total', 'Things', ['name'])
  const awkward = ['a\\b', 'say "hi"', 'two\nlines', 'all \\"\n of them', 'plain']
  awkward.forEach((v, i) => c.labels(v).inc(i + 1))
  const [family] = parsePrometheus(r.render())
  assert.equal(family!.metrics.map((m) => [m.labels.name, m.value]), awkward.map((v, i) => [v, String(i + 1)]))
})

render('HELP text with a backslash and a newline stays on one line and parses back', () => {
  const r = new Registry()
  r.counter('t_help_total', 'first line\nsecond \\ line').labels().inc()
  const text = r.render()
  assert.is(text.split('\n').filter((l) => l.startsWith('# HELP')).length, 1)
  assert.is(parsePrometheus(text)[0]!.help, 'first line\nsecond \\ line')
})

render('every family has HELP and TYPE lines and the text ends with a newline', () => {
  const r = new Registry()
  r.counter('t_a_total', 'A').labels().inc()
  r.gauge('t_b', 'B', ['k'], () => [[['x'], 2], [['y'], 3]])
  r.histogram('t_c_seconds', 'C', [0.1, 1]).observe(0.5)
  const text = r.render()
  assert.ok(text.endsWith('\n'))
  assert.equal(parsePrometheus(text).map((f) => [f.name, f.type]), [['t_a_total', 'COUNTER'], ['t_b', 'GAUGE'], ['t_c_seconds', 'HISTOGRAM']])
})

render.run()

const counters = suite('CounterFamily.labels')

counters('the same label values give the same counter; the label text is built once', () => {
  const r = new Registry()
  const c = r.counter('t_requests_total', 'R', ['route', 'status'])
  assert.is(c.labels('wake', 200), c.labels('wake', 200))
  assert.is.not(c.labels('wake', 200), c.labels('wake', 401))
  c.labels('wake', 200).inc()
  c.labels('wake', 200).inc(2)
  assert.match(r.render(), 't_requests_total{route="wake",status="200"} 3\n')
})

counters('a wrong number of label values is refused', () => {
  const c = new Registry().counter('t_x_total', 'X', ['a', 'b'])
  assert.throws(() => c.labels('only one'), /takes 2 label values/)
})

counters.run()

const histograms = suite('Histogram.observe')

histograms('buckets are cumulative, an upper bound is inclusive, and +Inf equals the count', () => {
  const r = new Registry()
  const h = r.histogram('t_latency_seconds', 'L', [0.01, 0.1, 1])
  for (const v of [0.005, 0.01, 0.05, 0.1, 3]) h.observe(v)
  const m = parsePrometheus(r.render())[0]!.metrics[0]!
  assert.equal(m.buckets, { '0.01': '2', '0.1': '4', '1': '4', '+Inf': '5' })
  assert.is(m.count, '5')
  assert.is(Number(m.sum), 0.005 + 0.01 + 0.05 + 0.1 + 3)
})

histograms('bucket bounds that do not increase are refused', () => {
  assert.throws(() => new Registry().histogram('t_h_seconds', 'H', [1, 0.5]), /must increase/)
})

histograms.run()

const names = suite('Registry names')

names('invalid metric and label names and a second registration of a name are refused', () => {
  const r = new Registry()
  assert.throws(() => r.counter('1bad', 'x'), /invalid metric name/)
  assert.throws(() => r.counter('t-dash_total', 'x'), /invalid metric name/)
  assert.throws(() => r.counter('t_ok_total', 'x', ['__reserved']), /invalid label name/)
  assert.throws(() => r.counter('t_ok_total', 'x', ['has space']), /invalid label name/)
  r.counter('t_once_total', 'x')
  assert.throws(() => r.gauge('t_once_total', 'x', [], () => 1), /registered twice/)
})

names('special values are written as the format spells them', () => {
  assert.equal([Infinity, -Infinity, NaN, 0.25, 3].map(formatValue), ['+Inf', '-Inf', 'NaN', '0.25', '3'])
  assert.is(escapeLabelValue('plain'), 'plain')
})

names.run()
