// Fan-out (one run per element of forEach or of a transform's array, all accepted in one durable
// write) and synchronous answers (waitForCompletion), through the real server.
import { request } from 'node:http'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { startFakeOpenAI } from '../../fakes/openai.js'
import type { RunStore } from '../../../runtime/store/file/runs.js'
import type { RunRow } from '../../../runtime/store/store.js'
import { readRows } from '../../helpers/history.js'
import { fileStoreOnly } from '../../helpers/stores.js'
import { assertError, assertOk, post, runReaches, serve, setTestToken, until, type Harness } from './harness.js'

const token = setTestToken()
const openai = await startFakeOpenAI()

const CONFIG = `
hooks:
  enabled: true
  token: \${HOOKGATE_TEST_TOKEN}
  transformsDir: transforms
  presets: [gmail]
  mappings:
    - id: batch
      match: { path: batch }
      action: agent
      wakeMode: next-heartbeat
      deliver: false
      forEach: "{{payload.messages}}"
      maxItems: 3
      sessionKey: "hook:batch:{{item.id}}"
      messageTemplate: "#{{index}} {{item.subject}}"
    - id: split
      match: { path: split }
      action: agent
      wakeMode: next-heartbeat
      deliver: false
      transform: { module: split.mjs }
      messageTemplate: "line {{item}}"
    - id: pings
      match: { path: pings }
      action: wake
      wakeMode: next-heartbeat
      forEach: "{{payload.events}}"
      textTemplate: "ping {{item.n}}"
    - id: sync
      match: { path: sync }
      action: agent
      wakeMode: next-heartbeat
      deliver: false
      waitForCompletion: true
      messageTemplate: "ask {{payload.q}}"
    - id: slow
      match: { path: slow }
      action: agent
      agentId: slowpoke
      wakeMode: next-heartbeat
      deliver: false
      waitForCompletion: true
      waitTimeoutSeconds: 0.3
      messageTemplate: "slow {{payload.q}}"
providers:
  - id: fake
    type: openai
    baseUrl: ${openai.url}
    timeoutSeconds: 10
    maxRetries: 0
agents:
  - id: main
    default: true
    model: builtin/echo
    heartbeat: { every: "off" }
  - id: slowpoke
    model: fake/gpt-slow
    heartbeat: { every: "off" }
`

const h: Harness = await serve(CONFIG, {
  'transforms/split.mjs': 'export default function split({ payload }) { return String(payload.text).split(",") }\n',
})
const call = (path: string, body: unknown, headers: Record<string, string> = {}) => post(h.origin, path, token, body as Record<string, unknown>, headers)
const rows = (): Promise<RunRow[]> => readRows(h.stateDir)
const messageOf = (id: string) => (h.service.engine.runs.get(id)?.request as { message?: string } | undefined)?.message

const forEach = suite('forEach: one run per element')

forEach('three messages start three runs, listed as runIds, each rendering its own item and index', async () => {
  const r = await call('/hooks/batch', { messages: [{ id: 'a', subject: 'one' }, { id: 'b', subject: 'two' }, { id: 'c', subject: 'three' }] })
  const body = assertOk(r, 202, ['ok', 'action', 'runId', 'runIds', 'correlationId', 'sessionKey', 'sessionKeys'])
  assert.is(body.runIds.length, 3)
  assert.is(body.runId, body.runIds[0], 'runId is the first run, for clients that read one')
  assert.equal(body.sessionKeys, ['hook:batch:a', 'hook:batch:b', 'hook:batch:c'])
  assert.equal(body.runIds.map(messageOf), ['#0 one', '#1 two', '#2 three'])
  const onDisk = (await rows()).filter((row) => body.runIds.includes(row.id))
  assert.is(onDisk.length, 3, 'every run is on disk when the answer comes')
  assert.ok(onDisk.every((row) => row.correlationId === body.correlationId), 'the runs share the request correlation id')
})

forEach('a repeat with the same Idempotency-Key answers the same runIds and starts nothing', async () => {
  const payload = { messages: [{ id: 'r1', subject: 'x' }, { id: 'r2', subject: 'y' }] }
  const first = await call('/hooks/batch', payload, { 'idempotency-key': 'fan-once' })
  assert.is(first.status, 202)
  const before = (await rows()).length
  const again = await call('/hooks/batch', payload, { 'idempotency-key': 'fan-once' })
  assert.is(again.status, 202)
  assert.equal(again.json.runIds, first.json.runIds)
  assert.is(again.headers['idempotent-replayed'], 'true')
  assert.is((await rows()).length, before)
})

forEach('more elements than maxItems are refused with 413 too_many_items and start no run', async () => {
  const before = (await rows()).length
  const r = await call('/hooks/batch', { messages: [{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }] })
  assertError(r, 413, 'too_many_items')
  assert.is((await rows()).length, before)
})

forEach('a forEach that finds no array is refused with 400 for_each_not_array', async () => {
  assertError(await call('/hooks/batch', { messages: { id: 'a' } }), 400, 'for_each_not_array')
  assertError(await call('/hooks/batch', {}), 400, 'for_each_not_array')
})

forEach('an empty array starts nothing: 204 and one skipped row saying empty', async () => {
  const r = await call('/hooks/batch', { messages: [] })
  assert.is(r.status, 204)
  const row = (await rows()).find((x) => x.definitionId === 'batch' && x.status === 'skipped')
  assert.ok(row, 'the request left a skipped row')
  assert.is(row!.result, 'empty')
})

fileStoreOnly(forEach)('all the runs of one request are written by one journal append, one flush and one fdatasync', async () => {
  // wakes waiting for a heartbeat that never comes: once the earlier agent runs are done,
  // nothing else writes the history meanwhile
  await until('the earlier runs to finish', () => (h.service.engine.backlog === 0 ? true : undefined))
  const before = { ...(h.service.engine.runs as RunStore).journalStats }
  const r = await call('/hooks/pings', { events: [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }] })
  const body = assertOk(r, 200, ['ok', 'action', 'runId', 'runIds', 'mode'])
  assert.is(body.runIds.length, 4)
  const after = (h.service.engine.runs as RunStore).journalStats
  assert.equal({ appends: after.appends - before.appends, flushes: after.flushes - before.flushes, fsyncs: after.fsyncs - before.fsyncs }, { appends: 1, flushes: 1, fsyncs: 1 })
  assert.equal(body.runIds.map((id: string) => (h.service.engine.runs.get(id)?.request as { text: string }).text), ['ping 1', 'ping 2', 'ping 3', 'ping 4'])
})

forEach.run()

const transform = suite('a transform that returns an array')

transform('fans out: one run per element, each rendered with the element as {{item}}', async () => {
  const r = await call('/hooks/split', { text: 'x,y' })
  const body = assertOk(r, 202, ['ok', 'action', 'runId', 'runIds', 'correlationId', 'sessionKey', 'sessionKeys'])
  assert.equal(body.runIds.map(messageOf), ['line x', 'line y'])
})

transform.run()

const gmail = suite('the gmail preset')

gmail('a batch of three messages starts three agent runs, one per message under its own session key', async () => {
  const messages = ['m1', 'm2', 'm3'].map((id) => ({ id, from: `${id}@example.com`, subject: `about ${id}`, snippet: 's', body: 'b' }))
  const r = await call('/hooks/gmail', { messages })
  const body = assertOk(r, 202, ['ok', 'action', 'runId', 'runIds', 'correlationId', 'sessionKey', 'sessionKeys'])
  assert.is(body.runIds.length, 3)
  assert.equal(body.sessionKeys, ['hook:gmail:m1', 'hook:gmail:m2', 'hook:gmail:m3'])
  body.runIds.forEach((id: string, i: number) => assert.match(messageOf(id) ?? '', `Subject: about m${i + 1}`))
})

gmail.run()

const wait = suite('waitForCompletion')

wait('a mapping with waitForCompletion answers 200 with the echo reply once the run succeeded', async () => {
  const r = await call('/hooks/sync', { q: 'hello' })
  const body = assertOk(r, 200, ['ok', 'action', 'runId', 'correlationId', 'sessionKey', 'status', 'reply'])
  assert.is(body.status, 'succeeded')
  assert.match(body.reply, /^echo: /)
  assert.match(body.reply, 'ask hello')
})

wait('an /agent call with waitForCompletion answers 200 with the reply', async () => {
  const r = await call('/hooks/agent', { message: 'sync please', waitForCompletion: true, waitTimeoutSeconds: 5, wakeMode: 'next-heartbeat', deliver: false })
  const body = assertOk(r, 200, ['ok', 'action', 'runId', 'correlationId', 'sessionKey', 'status', 'reply'])
  assert.match(body.reply, 'sync please')
})

wait('a run slower than its wait answers the usual 202 and still finishes', async () => {
  openai.queue({ delayMs: 1200 })
  const r = await call('/hooks/slow', { q: 'later' })
  const body = assertOk(r, 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  const row = await runReaches(h.stateDir, body.runId, 'succeeded', 5000)
  assert.match(row.result ?? '', 'slow later')
})

wait('a client that hangs up while waiting cancels nothing: the run still finishes', async () => {
  openai.queue({ delayMs: 400 })
  const before = new Set((await rows()).map((r) => r.id))
  const req = request({ host: '127.0.0.1', port: h.port, path: '/hooks/slow', method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, agent: false })
  req.on('error', () => {})
  req.end(JSON.stringify({ q: 'gone' }))
  const id = await until('the run to be accepted', async () => (await rows()).find((r) => r.definitionId === 'slow' && !before.has(r.id))?.id)
  req.destroy()
  const row = await runReaches(h.stateDir, id, 'succeeded', 5000)
  assert.match(row.result ?? '', 'slow gone')
})

wait('a repeat of a waited request with the same Idempotency-Key gets the stored acceptance, not a second run', async () => {
  const first = await call('/hooks/sync', { q: 'once' }, { 'idempotency-key': 'wait-once' })
  assert.is(first.status, 200)
  const again = await call('/hooks/sync', { q: 'once' }, { 'idempotency-key': 'wait-once' })
  const body = assertOk(again, 202, ['ok', 'action', 'runId', 'correlationId', 'sessionKey'])
  assert.is(body.runId, first.json.runId)
  assert.is(again.headers['idempotent-replayed'], 'true')
})

wait.after(async () => {
  await h.close()
  await openai.close()
})

wait.run()
