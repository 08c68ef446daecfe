// The transform pool against real transform processes (a compiled bundle, the real worker): what
// crosses the pipe in each direction arrives as it was sent (JSON when it carries the value
// exactly, v8 serialization when not), and what a transform writes on the answer pipe itself
// cannot make the server read more than an answer's cap.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { BundleRoute, TransformInput } from '../../runtime/bundle/format.js'
import { loadBundle, type LoadedBundle } from '../../runtime/bundle/load.js'
import { TransformFailed, TransformPool } from '../../runtime/transforms/pool.js'
import { rejectionOf } from '../helpers/async.js'
import { compileProject } from './http/harness.js'

const CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
${['echo', 'odd', 'forge', 'plain'].map((name) => `    - id: ${name}
      match: { path: ${name} }
      action: agent
      messageTemplate: ${name}
      transform: { module: values.mjs, export: ${name} }`).join('\n')}
`

const VALUES = `
import { writeSync } from 'node:fs'
export function echo(input) { return input }
// values JSON would change or drop
export function odd() {
  const shared = { s: 1 }
  return { date: new Date(0), map: new Map([['k', 1]]), nothing: undefined, nan: NaN, negativeZero: -0, bytes: new Uint8Array([1, 2]), pair: [shared, shared], holes: [1, , 3], big: 10n }
}
// a frame header announcing 4 GiB on the answer pipe (fd 3), then nothing
export function forge() { writeSync(3, Buffer.from([0xff, 0xff, 0xff, 0xff])); return new Promise(() => {}) }
export function plain() { return { name: 'plain' } }
`

interface Ctx { bundle: LoadedBundle; pool: TransformPool; route(id: string): BundleRoute }

const input = (payload: unknown): TransformInput => ({ payload, headers: { 'x-source': 'test' }, query: { q: '1' }, path: 'echo' })

const pool = suite<Ctx>('the transform pool\'s pipe')

pool.before(async (ctx) => {
  process.env.HOOKGATE_TEST_TOKEN ??= 'a-test-token-0123456789abcdef'
  const project = await compileProject(CONFIG, { 'transforms/values.mjs': VALUES })
  ctx.bundle = await loadBundle(project.outDir)
  ctx.pool = TransformPool.forBundle(ctx.bundle, { size: 1 })!
  ctx.route = (id) => ctx.bundle.routeTable.get(id)![0]!
})
pool.after(async (ctx) => { await ctx.pool.close() })

pool('a payload arrives as parsed JSON and comes back the same, unicode and awkward keys included', async ({ pool, route }) => {
  const payload = { text: 'naïve ☃ \u{1F600} \ud800', __proto__key: { constructor: 'x', toString: 'y' }, n: [0, -1.5, 1e21], empty: {}, none: null }
  const sent = input(JSON.parse(JSON.stringify(payload)))
  assert.equal(await pool.run(route('echo'), sent), sent)
})

pool('an answer JSON cannot carry exactly arrives as the transform returned it', async ({ pool, route }) => {
  const out = await pool.run(route('odd'), input({})) as Record<string, unknown>
  assert.instance(out.date, Date)
  assert.is((out.date as Date).getTime(), 0)
  assert.instance(out.map, Map)
  assert.ok(Object.hasOwn(out, 'nothing'), 'a member whose value is undefined is kept (mapping.ts refuses it as an unknown key)')
  assert.ok(Number.isNaN(out.nan))
  assert.ok(Object.is(out.negativeZero, -0))
  assert.instance(out.bytes, Uint8Array)
  const pair = out.pair as object[]
  assert.ok(pair[0] === pair[1], 'a shared object stays one object')
  assert.not.ok(1 in (out.holes as unknown[]), 'a hole stays a hole')
  assert.is(out.big, 10n)
})

pool('a transform announcing a 4 GiB answer on its answer pipe is stopped; the server reads no more of it and the next call runs', async ({ pool, route }) => {
  const err = await rejectionOf(pool.run(route('forge'), input({})), TransformFailed)
  assert.match(err.message, 'the transform process sent a frame of 4294967295 bytes')
  assert.equal(await pool.run(route('plain'), input({})), { name: 'plain' })
})

pool.run()
