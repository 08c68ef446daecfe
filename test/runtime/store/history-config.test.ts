// server.history in hooks.yaml reaches the run store: the compiler turns keepRuns, compactAboveMiB
// and keepRequestMiB into the bundle's server.history, and the engine opens the history with them.
import { openStore, storeOptionsOf } from '../../../runtime/store/open.js'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { loadBundle } from '../../../runtime/bundle/load.js'
import { Engine } from '../../../runtime/agents/engine.js'
import { DEFAULT_COMPACT_ABOVE_BYTES, DEFAULT_KEEP_HISTORY, DEFAULT_KEEP_REQUEST_BYTES, RunStore } from '../../../runtime/store/file/runs.js'
import { compileProject, setTestToken } from '../http/harness.js'
import { scratchDir } from '../../helpers/paths.js'

setTestToken()
const HOOKS = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
`

const history = suite('server.history')

history('defaults to 50,000 finished runs, compaction past 64 MiB and 32 MiB of stored requests', async () => {
  const bundle = await loadBundle((await compileProject(HOOKS)).outDir)
  assert.equal(bundle.config.server.history, { keepRuns: DEFAULT_KEEP_HISTORY, compactAboveBytes: DEFAULT_COMPACT_ABOVE_BYTES, keepRequestBytes: DEFAULT_KEEP_REQUEST_BYTES })
  assert.equal([DEFAULT_KEEP_HISTORY, DEFAULT_COMPACT_ABOVE_BYTES, DEFAULT_KEEP_REQUEST_BYTES], [50_000, 64 * 1024 * 1024, 32 * 1024 * 1024], 'as docs/operations.md says')
})

history('keepRuns, compactAboveMiB and keepRequestMiB from hooks.yaml decide what the engine\'s run store keeps at open', async () => {
  const bundle = await loadBundle((await compileProject(`server:\n  history: { keepRuns: 3, compactAboveMiB: 1, keepRequestMiB: 0 }\n${HOOKS}`)).outDir)
  assert.equal(bundle.config.server.history, { keepRuns: 3, compactAboveBytes: 1024 * 1024, keepRequestBytes: 0 })
  const dir = scratchDir('history-')
  const store = RunStore.open(dir, { fsync: false })
  // a little over 1 MiB of finished runs, each request in its own file (over 64 KiB)
  for (let i = 0; i < 12; i++) await store.create({ id: `old-${i}`, definitionKind: 'hook', definitionId: 'orders', correlationId: `c-${i}`, action: 'wake', status: 'failed', received: { path: '/hooks/orders', query: {}, headers: {}, payload: { pad: String(i).repeat(100 * 1024) } } })
  await store.close()
  const engine = Engine.open(openStore(dir, storeOptionsOf(bundle.config, false)), bundle.config, bundle.workflows)
  try {
    assert.ok(engine.runs.compaction, 'compacted past 1 MiB')
    assert.is(engine.runs.compaction!.keptRuns, 3)
    assert.equal(engine.runs.list().map((r) => r.id), ['old-11', 'old-10', 'old-9'])
  } finally {
    await engine.close()
  }
  assert.equal(RunStore.readRows(dir).map((r) => RunStore.readReceived(dir, r) !== undefined), [false, false, false], 'keepRequestMiB: 0 keeps no stored request file')
})

history('is refused at compile time when out of range', async () => {
  try {
    await compileProject(`server:\n  history: { keepRuns: 0 }\n${HOOKS}`)
    assert.unreachable('compiled')
  } catch (err) {
    assert.match((err as Error).message, 'keepRuns')
  }
})

history.run()
