// The page's Test button (POST /api/try) runs each draft as a compiled bundle, and importing a
// bundle is the only way to run it; Node never frees an imported module. The admin process must
// not keep them: 200 dry runs of a 200 KB Trigger once held 70–115 MiB for good. Measured in a
// child run with --expose-gc (dry-run-memory.child.ts), over real HTTP, after a full GC.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'

const CHILD = fileURLToPath(new URL('./dry-run-memory.child.js', import.meta.url))
const MiB = 1024 * 1024

interface Measured { before: { heap: number; rss: number }; after: { heap: number; rss: number }; statuses: Record<string, number> }

function measure(runs: number, promptBytes: number, warmUp: number): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', CHILD, String(runs), String(promptBytes), String(warmUp)], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d })
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d })
    // a bound for a busy machine: about 25 s on a quiet one
    const timer = setTimeout(() => child.kill('SIGKILL'), 100_000)
    child.on('close', (code) => {
      clearTimeout(timer)
      if (code !== 0) return reject(new Error(`the child exited ${code}:\n${stderr}`))
      resolve(JSON.parse(stdout.trim().split('\n').at(-1)!) as Measured)
    })
  })
}

const memory = suite('POST /api/try, the Test button')

memory('1,000 dry runs of a 100 KB Trigger leave the admin process holding no more than before (bundles are imported in a worker that is replaced)', async () => {
  const m = await measure(1000, 100_000, 50)
  // every run answered as the server would: 200, the wake with the rendered prompt
  assert.equal(m.statuses, { '200 200 wake true': 1050 }, JSON.stringify(m.statuses))
  const heap = (m.after.heap - m.before.heap) / MiB
  const rss = (m.after.rss - m.before.rss) / MiB
  // kept in this process, each run held ~0.1 MiB: ~100 MiB over 1,000
  assert.ok(heap < 30, `the heap grew by ${heap.toFixed(1)} MiB over 1,000 dry runs`)
  // the resident size also counts the worker's heap, which is bounded by its recycling
  assert.ok(rss < 96, `the resident size grew by ${rss.toFixed(1)} MiB over 1,000 dry runs`)
})

memory.run()
