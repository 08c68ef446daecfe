// Regressions: with server.maxBodyBytes 4 MiB a 2 MB payload got 500 and no run row, a 600 KB
// message got 202 and then failed ("journal record … exceeds the limit"), and four 250 KB wakes on
// builtin/echo left their runs queued forever (the turn record, repeating every prompt, was over
// the journal's 1 MiB line). Whatever the config admits is stored and run. The tests that look at
// the file store's blobs and lines run on it alone (fileStoreOnly); the conformance suite holds
// every store to large bodies (test/runtime/store/conformance/).
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { Journal } from '../../../runtime/store/file/journal.js'
import { RunStore } from '../../../runtime/store/file/runs.js'
import { compileProject, post, runReaches, serveProject, setTestToken } from './harness.js'
import { fileStoreOnly } from '../../helpers/stores.js'

const TOKEN = setTestToken()
const CONFIG = `
server:
  maxBodyBytes: 4194304
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: bulk
      match: { path: bulk }
      action: agent
      deliver: false
      messageTemplate: "bulk {{payload}}"
agents:
  - id: main
    model: builtin/echo
    heartbeat: { every: "off" }
`
const big = (bytes: number, fill = 'a') => ({ data: fill.repeat(bytes) })

const large = suite('payloads as large as the config admits')

fileStoreOnly(large)('a 2 MB payload on a mapping is accepted (202), recorded and run', async () => {
  const h = await serveProject(await compileProject(CONFIG))
  try {
    const r = await post(h.origin, '/hooks/bulk', TOKEN, big(2_000_000))
    assert.is(r.status, 202, r.text)
    const row = await runReaches(h.stateDir, r.json.runId, 'succeeded', 8000)
    assert.match(row.result ?? '', 'echo: ')
    assert.ok(readdirSync(Journal.blobDir(join(h.stateDir, 'runs.jsonl'))).length >= 1, 'the request went to a blob')
  } finally {
    await h.close()
  }
})

large('a 600 KB /agent message gets 202 and then succeeds', async () => {
  const h = await serveProject(await compileProject(CONFIG))
  try {
    const r = await post(h.origin, '/hooks/agent', TOKEN, { message: 'm'.repeat(600_000), deliver: false })
    assert.is(r.status, 202, r.text)
    await runReaches(h.stateDir, r.json.runId, 'succeeded', 8000)
  } finally {
    await h.close()
  }
})

large('four 250 KB wakes on builtin/echo all finish instead of staying queued', async () => {
  const h = await serveProject(await compileProject(CONFIG))
  try {
    const ids: string[] = []
    for (let i = 0; i < 3; i++) ids.push((await post(h.origin, '/hooks/wake', TOKEN, { text: String(i).repeat(250_000), mode: 'next-heartbeat' })).json.runId)
    ids.push((await post(h.origin, '/hooks/wake', TOKEN, { text: 'x'.repeat(250_000), mode: 'now' })).json.runId)
    for (const id of ids) await runReaches(h.stateDir, id, 'succeeded', 8000)
  } finally {
    await h.close()
  }
})

fileStoreOnly(large)('a large JSON body is stored as sent (pretty-printed, CRLF, a byte order mark): one line per record, and it reads back as its payload', async () => {
  const h = await serveProject(await compileProject(CONFIG))
  try {
    const payload = { items: Array.from({ length: 400 }, (_, i) => ({ id: i, name: `item ${i}`, note: 'caf\u00e9 "q" \\ \u2028' })) }
    const text = '\ufeff' + JSON.stringify(payload, null, 2).replace(/\n/g, '\r\n')
    assert.ok(text.length > 16 * 1024)
    const r = await post(h.origin, '/hooks/bulk', TOKEN, text, { 'content-type': 'application/json' })
    assert.is(r.status, 202, r.text)
    await runReaches(h.stateDir, r.json.runId, 'succeeded', 8000)
    const file = join(h.stateDir, 'runs.jsonl')
    const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean)
    for (const line of lines) JSON.parse(line)
    const own = lines.find((l) => l.includes(r.json.runId) && l.includes('"received"'))!
    assert.ok(own.includes('"payload":{    "items": [      {        "id": 0,'), 'the bytes as sent, line breaks as spaces, not serialised again')
    const row = RunStore.readRows(h.stateDir).find((x) => x.id === r.json.runId)!
    assert.is(row.receivedBlob, undefined, 'inline in its line')
    assert.equal(RunStore.readReceived(h.stateDir, row)?.payload, payload)
  } finally {
    await h.close()
  }
})

fileStoreOnly(large)('a large accepted run left unfinished by a crash is resumed from its blob', async () => {
  const project = await compileProject(CONFIG)
  // What a process killed right after the 202 leaves behind: the row, its request in a blob.
  const store = RunStore.open(project.stateDir)
  const request = { message: 'z'.repeat(1_500_000), external: true, source: 'hook /hooks/agent', agentId: 'main', sessionKey: 'hook:big', name: null, wakeMode: 'next-heartbeat', deliver: false, channel: 'last', to: null, model: null, thinking: null, timeoutSeconds: null }
  await store.create({ id: 'big-run', definitionKind: 'hook', definitionId: 'agent', correlationId: 'c', action: 'agent', agentId: 'main', sessionKey: 'hook:big', request })
  await store.close()
  const onDisk = RunStore.readRows(project.stateDir).find((x) => x.id === 'big-run')!
  assert.ok(onDisk.requestBlob, 'a large request lives in a blob')
  assert.is(onDisk.request, undefined)
  const h = await serveProject(project)
  try {
    const row = await runReaches(project.stateDir, 'big-run', 'succeeded', 8000)
    assert.match(row.result ?? '', 'echo: ')
  } finally {
    await h.close()
  }
})

large.run()
