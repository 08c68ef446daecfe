// A runtime that dies mid-write, for the conformance suite's crash case: it opens the store named on
// its command line (a state directory, or a postgres:// URL) and writes runs as fast as it can from
// several workers at once, printing each write once it resolved (acknowledged: durable). The test
// SIGKILLs it while writes are in flight, then opens the store again.
//   node crash-child.js <spec> <stateDir> <store options as JSON>
import { connectStore } from '../../../../runtime/store/open.js'

const [spec, stateDir, optionsJson] = process.argv.slice(2)
const store = await connectStore(spec!, stateDir!, JSON.parse(optionsJson ?? '{}'))
let next = 0

async function worker(): Promise<void> {
  for (;;) {
    const n = next++
    const id = `crash-${n}`
    await store.runs.create({ id, definitionKind: 'hook', definitionId: 'orders', correlationId: `c-${id}`, action: 'agent', agentId: 'main', request: { message: `run ${n}` } })
    process.stdout.write(`queued ${id}\n`)
    if (n % 3 === 0) continue
    await store.runs.transition(id, 'running')
    process.stdout.write(`running ${id}\n`)
    if (n % 3 === 1) continue
    await store.runs.transition(id, 'succeeded', { result: `done ${n}` })
    process.stdout.write(`succeeded ${id}\n`)
  }
}

await Promise.all(Array.from({ length: 8 }, () => worker()))
