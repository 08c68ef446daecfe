// `hookgate runs show` and `hookgate runs replay` through the real CLI against a spawned `hookgate
// serve`: a run whose transform threw is replayed once the transform is fixed and recompiled and
// succeeds as a new run linked to it; --payload replaces the stored payload; a signed mapping's run
// is replayed on the hook token; show lists a run with the runs sharing its correlation id.
import { createHmac, randomUUID } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import type { RunRow } from '../../runtime/store/store.js'
import { readRows } from '../helpers/history.js'
import { assertError, assertOk, compileProject, post, recompile, rowOf, runReaches, send, setTestToken, spawnServe, type Project, type ServeProcess } from '../runtime/http/harness.js'
import { describeRun, hookgate, runNode, stdoutJson, type CliResult } from './cli-helpers.js'
import { hookgateBin } from '../helpers/paths.js'
import { storeArgs } from '../helpers/stores.js'

const TOKEN = setTestToken()
process.env.HOOKGATE_TEST_GH_SECRET = 'gh-replay-secret'

const CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: orders
      match: { path: orders }
      action: wake
      wakeMode: now
      textTemplate: "order {{payload.id}}"
      transform: { module: orders.mjs }
    - id: github
      match: { path: github }
      action: wake
      wakeMode: now
      textTemplate: "github {{payload.action}}"
      signature: { scheme: github, secret: "\${HOOKGATE_TEST_GH_SECRET}" }
    - id: batch
      match: { path: batch }
      action: wake
      wakeMode: next-heartbeat
      forEach: "{{payload.events}}"
      textTemplate: "event {{item.n}}"
`
const BROKEN = `export default function () { throw new Error('orders transform not finished') }\n`
const FIXED = `export default function () { return undefined }\n`
const WAKE_KEYS = ['ok', 'action', 'runId', 'mode']

interface Ctx { project: Project; server: ServeProcess; tokenFile: string; failed: string; sibling: string; signed: string }

const replay = suite<Ctx>('hookgate runs replay and runs show against a running server')

replay.before(async (ctx) => {
  ctx.project = await compileProject(CONFIG, { 'transforms/orders.mjs': BROKEN })
  ctx.server = await spawnServe(ctx.project.outDir, ctx.project.stateDir)
  ctx.tokenFile = join(ctx.project.dir, 'token.txt')
  writeFileSync(ctx.tokenFile, `${TOKEN}\n`)
})
replay.after(async (ctx) => {
  ctx.server.child.kill('SIGTERM')
  await ctx.server.exited
})

const cli = (ctx: Ctx, args: string[]): Promise<CliResult> => hookgate(args, { cwd: ctx.project.dir })
const replayCli = (ctx: Ctx, id: string, more: string[] = []): Promise<CliResult> =>
  cli(ctx, ['runs', 'replay', id, '--state', ctx.project.stateDir, ...storeArgs(ctx.project.stateDir), '--url', ctx.server.origin, '--token-file', ctx.tokenFile, ...more])
const show = async (ctx: Ctx, id: string) => stdoutJson<{ run: RunRow; steps: RunRow[]; correlated: RunRow[]; replays: RunRow[] }>(await cli(ctx, ['runs', 'show', id, '--state', ctx.project.stateDir, ...storeArgs(ctx.project.stateDir), '--json']))
/** The newest row on disk that passes `test`. */
const newest = async (ctx: Ctx, test: (r: RunRow) => boolean): Promise<RunRow | undefined> => (await readRows(ctx.project.stateDir)).find(test)

replay('a run whose transform threw is stored with the request as it arrived, secret headers redacted', async (ctx) => {
  const correlation = `corr-${randomUUID()}`
  assertError(await post(ctx.server.origin, '/hooks/orders?region=eu', TOKEN, { id: 41 }, { 'x-correlation-id': correlation, 'x-order-source': 'shop' }), 500, 'transform_failed')
  assertError(await post(ctx.server.origin, '/hooks/orders', TOKEN, { id: 40 }, { 'x-correlation-id': correlation }), 500, 'transform_failed')
  const failed = await newest(ctx, (r) => r.definitionId === 'orders' && (r.received?.payload as { id?: number })?.id === 41)
  assert.ok(failed, 'the failed run has a row with its received request')
  assert.is(failed!.status, 'failed')
  assert.equal(failed!.received!.path, '/hooks/orders')
  assert.equal(failed!.received!.query, { region: 'eu' })
  assert.is(failed!.received!.headers['x-order-source'], 'shop')
  assert.is(failed!.received!.headers.authorization, '[redacted]', 'the token never reaches the disk')
  assert.not.match(JSON.stringify(await readRows(ctx.project.stateDir)), TOKEN)
  ctx.failed = failed!.id
  ctx.sibling = (await newest(ctx, (r) => r.correlationId === correlation && r.id !== failed!.id))!.id
})

replay('runs show lists the run\'s row and the runs sharing its correlation id', async (ctx) => {
  const shown = await show(ctx, ctx.failed)
  assert.is(shown.run.id, ctx.failed)
  assert.is(shown.run.status, 'failed')
  assert.equal(shown.run.received?.payload, { id: 41 })
  assert.equal(shown.correlated.map((r) => r.id), [ctx.sibling])
  assert.equal(shown.steps, [])
  const text = await cli(ctx, ['runs', 'show', ctx.failed, '--state', ctx.project.stateDir, ...storeArgs(ctx.project.stateDir)])
  assert.is(text.code, 0, describeRun(text))
  assert.match(text.stdout, new RegExp(`^id\\s+${ctx.failed}$`, 'm'))
  assert.match(text.stdout, /^error\s+transform of mapping "orders" failed: Error: orders transform not finished$/m)
  assert.match(text.stdout, /same correlation id:\nCREATED/)
  assert.match(text.stdout, ctx.sibling)
  assert.match(text.stdout, `hookgate runs replay ${ctx.failed}`)
})

replay('runs show and runs replay exit 1 for an unknown run id', async (ctx) => {
  for (const sub of [['runs', 'show', 'no-such-run', '--state', ctx.project.stateDir, ...storeArgs(ctx.project.stateDir)], ['runs', 'replay', 'no-such-run', '--state', ctx.project.stateDir, ...storeArgs(ctx.project.stateDir), '--url', ctx.server.origin, '--token-file', ctx.tokenFile]]) {
    const r = await cli(ctx, sub)
    assert.is(r.code, 1, describeRun(r))
    assert.match(r.stderr, 'no run with id no-such-run')
    assert.is(r.stdout, '')
  }
})

replay('a failed run replayed after its transform is fixed and recompiled succeeds as a new run with replayOf set', async (ctx) => {
  writeFileSync(join(ctx.project.dir, 'transforms/orders.mjs'), FIXED)
  await recompile(ctx.project)
  await ctx.server.line('bundle reloaded', 10_000)
  const r = await replayCli(ctx, ctx.failed)
  assert.is(r.code, 0, describeRun(r))
  const answer = stdoutJson<{ ok: boolean; runId: string; action: string }>(r)
  assert.is(answer.action, 'wake')
  assert.match(r.stderr, `replayed run ${ctx.failed} as run ${answer.runId}`)
  const row = await runReaches(ctx.project.stateDir, answer.runId, 'succeeded')
  assert.is(row.replayOf, ctx.failed)
  assert.is(row.definitionId, 'orders')
  assert.not.ok(row.correlationId === (await rowOf(ctx.project.stateDir, ctx.failed))!.correlationId, 'a replay is a new request with its own correlation id')
  assert.equal(row.received!.payload, { id: 41 })
  assert.equal(row.received!.query, { region: 'eu' }, 'the query is sent again')
  assert.is(row.received!.headers['x-order-source'], 'shop', 'stored headers are sent again')
  assert.is((row.request as { text?: string }).text, 'order 41')
  assert.is((await rowOf(ctx.project.stateDir, ctx.failed))!.status, 'failed', 'the original stays as it was')
  assert.equal((await show(ctx, ctx.failed)).replays.map((x) => x.id), [answer.runId])
})

replay('a replay with --payload sends the edited payload instead of the stored one', async (ctx) => {
  const file = join(ctx.project.dir, 'edited.json')
  writeFileSync(file, JSON.stringify({ id: 43 }))
  const r = await replayCli(ctx, ctx.failed, ['--payload', file])
  assert.is(r.code, 0, describeRun(r))
  const row = await runReaches(ctx.project.stateDir, stdoutJson<{ runId: string }>(r).runId, 'succeeded')
  assert.is(row.replayOf, ctx.failed)
  assert.is((row.request as { text?: string }).text, 'order 43')
})

replay('the token can come from HOOKGATE_TOKEN, and a wrong one is refused with exit 1', async (ctx) => {
  const args = [hookgateBin, 'runs', 'replay', ctx.failed, '--state', ctx.project.stateDir, ...storeArgs(ctx.project.stateDir), '--url', ctx.server.origin]
  const good = await runNode(args, { cwd: ctx.project.dir, env: { ...process.env, HOOKGATE_TOKEN: TOKEN } })
  assert.is(good.code, 0, describeRun(good))
  const bad = await runNode(args, { cwd: ctx.project.dir, env: { ...process.env, HOOKGATE_TOKEN: 'not-the-token' } })
  assert.is(bad.code, 1, describeRun(bad))
  assert.match(bad.stderr, 'refused the replay')
  assert.match(bad.stderr, '401 unauthorized')
})

replay('a signed mapping\'s run is replayed on the hook token, without its signature', async (ctx) => {
  const body = JSON.stringify({ action: 'opened' })
  const signature = `sha256=${createHmac('sha256', 'gh-replay-secret').update(body).digest('hex')}`
  const first = assertOk(await send(ctx.server.origin, '/hooks/github', { body, headers: { 'content-type': 'application/json', 'x-github-event': 'issues', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': signature } }), 200, WAKE_KEYS)
  const stored = await runReaches(ctx.project.stateDir, first.runId, 'succeeded')
  assert.is(stored.received!.headers['x-hub-signature-256'], '[redacted]', 'the signature was never stored')
  const r = await replayCli(ctx, first.runId)
  assert.is(r.code, 0, describeRun(r))
  const row = await runReaches(ctx.project.stateDir, stdoutJson<{ runId: string }>(r).runId, 'succeeded')
  assert.is(row.replayOf, first.runId)
  assert.is((row.request as { text?: string }).text, 'github opened')
  ctx.signed = first.runId
})

replay('a replay header without the hook token is 401 on a signed mapping, and a token alone still needs the signature', async (ctx) => {
  const body = { action: 'opened' }
  assertError(await send(ctx.server.origin, '/hooks/github', { body, headers: { 'x-hookgate-replay-of': ctx.signed } }), 401, 'unauthorized')
  assertError(await send(ctx.server.origin, '/hooks/github', { body, token: 'wrong-token', headers: { 'x-hookgate-replay-of': ctx.signed } }), 401, 'unauthorized')
  assertError(await send(ctx.server.origin, '/hooks/github', { body, token: TOKEN }), 401, 'signature_invalid')
  // checked once the token passed: a client without it learns nothing from the header's shape
  assertError(await send(ctx.server.origin, '/hooks/github', { body, headers: { 'x-hookgate-replay-of': 'not one id' } }), 401, 'unauthorized')
  assertError(await send(ctx.server.origin, '/hooks/github', { body, token: TOKEN, headers: { 'x-hookgate-replay-of': 'not one id' } }), 400, 'invalid_replay_of')
})

replay('a run without a stored request (a /wake) is refused with exit 1 and says why', async (ctx) => {
  const wake = assertOk(await post(ctx.server.origin, '/hooks/wake', TOKEN, { text: 'hello' }), 200, WAKE_KEYS)
  const r = await replayCli(ctx, wake.runId)
  assert.is(r.code, 1, describeRun(r))
  assert.match(r.stderr, `run ${wake.runId} has no stored request to send again`)
})

replay('a fan-out\'s later run, whose row names the run holding the request, is shown and replayed with the request whole', async (ctx) => {
  const body = { events: [{ n: 1 }, { n: 2 }, { n: 3 }], note: 'stored once' }
  const first = (await post(ctx.server.origin, '/hooks/batch', TOKEN, body)).json as { runIds: string[] }
  const last = first.runIds[2]!
  assert.is((await rowOf(ctx.project.stateDir, last))!.received, undefined, 'the request is kept in the first run\'s row only')
  const shown = await show(ctx, last)
  assert.equal(shown.run.received?.payload, body)
  assert.is(shown.run.receivedIn, undefined, 'shown where it is read')
  const text = await cli(ctx, ['runs', 'show', last, '--state', ctx.project.stateDir, ...storeArgs(ctx.project.stateDir)])
  assert.match(text.stdout, `hookgate runs replay ${last}`)
  const r = await replayCli(ctx, last)
  assert.is(r.code, 0, describeRun(r))
  const again = stdoutJson<{ runIds: string[] }>(r).runIds
  const rows = await Promise.all(again.map((id) => runReaches(ctx.project.stateDir, id, 'queued')))
  assert.equal(rows.map((row) => (row.request as { text?: string }).text), ['event 1', 'event 2', 'event 3'])
  assert.ok(rows.every((row) => row.replayOf === last))
})

replay('runs filters through the real CLI: only the failed orders runs', async (ctx) => {
  const r = await cli(ctx, ['runs', '--state', ctx.project.stateDir, ...storeArgs(ctx.project.stateDir), '--json', '--kind', 'hook', '--status', 'failed', '--definition', 'orders', '--since', '1h'])
  assert.is(r.code, 0, describeRun(r))
  assert.equal(stdoutJson<RunRow[]>(r).map((x) => x.id).sort(), [ctx.failed, ctx.sibling].sort())
})

replay.run()
