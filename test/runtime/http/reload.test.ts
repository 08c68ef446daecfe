// Reloading a bundle many times, and a reload that cannot finish: an unchanged bundle is told by
// the hash on its first line without importing it (Node never frees an imported module), and a
// reload whose transform module never finishes loading is abandoned at its deadline, with the old
// bundle serving throughout and the next reload working.
import { readFileSync } from 'node:fs'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { assertOk, compileProject, post, recompile, serveProject, setTestToken, spawnServe, until, within, type Harness, type Project, type ServeProcess } from './harness.js'

const TOKEN = setTestToken()
const WAKE_KEYS = ['ok', 'action', 'runId', 'mode']

function config(names: string[], module = 'keep.mjs'): string {
  return `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
${names.map((n) => `    - id: ${n}\n      match: { path: ${n} }\n      action: wake\n      wakeMode: next-heartbeat\n      textTemplate: "${n}"\n      transform: { module: ${module} }`).join('\n')}
`
}

/** A transform module of about 2 MB, as one with a large lookup table would be. */
const LARGE = `const TABLE = ${JSON.stringify(Array.from({ length: 2 * 1024 * 1024 / 32 }, (_, i) => i.toString(36).padStart(31, 'x')).join(' '))}\nexport default function keep() { return TABLE.length > 0 ? {} : null }\n`

function rssOf(pid: number): number {
  const kib = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
  return Number(kib) * 1024
}

const unchanged = suite<{ project: Project; server: ServeProcess }>('hookgate serve receiving SIGHUP for an unchanged bundle')

unchanged.before(async (ctx) => {
  ctx.project = await compileProject(config(['first']), { 'transforms/keep.mjs': LARGE })
  ctx.server = await spawnServe(ctx.project.outDir, ctx.project.stateDir)
})
unchanged.after(async (ctx) => {
  ctx.server.child.kill('SIGTERM')
  await ctx.server.exited
})

unchanged('500 SIGHUPs of an unchanged 2 MB bundle keep the server\'s memory flat', async ({ server }) => {
  const hup = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const before = server.stdout.filter((l) => l.includes('bundle unchanged')).length
      server.child.kill('SIGHUP')
      await until('the reload to log "bundle unchanged"', () => server.stdout.filter((l) => l.includes('bundle unchanged')).length > before || undefined, 5000, 2)
    }
  }
  await hup(20)
  const start = rssOf(server.child.pid!)
  await hup(480)
  const growth = rssOf(server.child.pid!) - start
  // Regression: each SIGHUP imported a fresh copy of the bundle before comparing its hash, and an
  // imported module is never freed (200 reloads of a 2 MB bundle: 100 MB → 1.2 GB).
  assert.ok(growth < 30 * 1024 * 1024, `RSS grew by ${(growth / 1024 / 1024).toFixed(1)} MiB over 480 SIGHUPs`)
  assertOk(await post(server.origin, '/hooks/first', TOKEN, {}), 200, WAKE_KEYS)
})

unchanged.run()

const hung = suite<{ h: Harness }>('a reload whose transform module never finishes loading')

hung.before(async (ctx) => {
  const project = await compileProject(config(['first']), {
    'transforms/keep.mjs': 'export default function keep() { return {} }\n',
    // a timer keeps the worker alive, so this waits forever rather than ending the worker
    'transforms/never.mjs': 'await new Promise(() => { setInterval(() => {}, 1000) })\nexport default function never() { return {} }\n',
    'transforms/busy.mjs': 'const end = Date.now() + 20000\nwhile (Date.now() < end) { /* 20 s of top-level work */ }\nexport default function busy() { return {} }\n',
  })
  ctx.h = await serveProject(project, { reloadDeadlineMs: 1000 })
})
hung.after(async (ctx) => { await ctx.h.close() })

hung('is abandoned and logged at its deadline, the old bundle serving throughout, and the next reload works', async ({ h }) => {
  await recompile(h, config(['first', 'second'], 'never.mjs'))
  const reloading = h.service.reload()
  // requests are answered by the old bundle while the new one's workers hang
  assertOk(await post(h.origin, '/hooks/first', TOKEN, {}), 200, WAKE_KEYS)
  // Regression: the reload never settled, and every later reload waited on it forever.
  assert.is(await within(reloading, 5000, 'still hanging'), false)
  assert.ok(h.logs.some((l) => l.includes('"level":"error"') && l.includes('did not finish within 1000 ms')), h.logs.join('\n'))
  assert.is((await post(h.origin, '/hooks/second', TOKEN, {})).status, 404, 'the abandoned bundle was swapped in')

  await recompile(h, config(['first', 'second']))
  assert.is(await within(h.service.reload(), 5000, 'still hanging'), true)
  assertOk(await post(h.origin, '/hooks/second', TOKEN, {}), 200, WAKE_KEYS)
})

hung('a transform module looping for 20 s at load stalls no request: the reload is abandoned, the old bundle answers at once', async ({ h }) => {
  await recompile(h, config(['first', 'third'], 'busy.mjs'))
  const reloading = h.service.reload()
  // Regression: the loop ran on the main thread while the bundle was imported, stalling every request.
  const reply = await within(post(h.origin, '/hooks/first', TOKEN, {}), 4000, 'stalled')
  assert.ok(reply !== 'stalled', 'a request waited on the reload')
  assertOk(reply as Awaited<ReturnType<typeof post>>, 200, WAKE_KEYS)
  assert.is(await within(reloading, 5000, 'still hanging'), false)
  assert.is((await post(h.origin, '/hooks/third', TOKEN, {})).status, 404)
})

hung.run()
