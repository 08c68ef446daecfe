// The rejected-request log through the real server and the real CLI: each refusal the contract
// names (400, 401, 404, 405, 408, 413, 415, 429, and 431 from the HTTP parser) shows up in
// `hookgate rejects --json` with its reason code while the server runs; no secret sent with a
// refused request (a wrong token, a cookie, a token in the query, the real token, a body without
// --log-bodies) reaches the files; and a flood of identical 401s is a record or two with its count.
//
// store: file only — it reads and seeds the file store's rejects files; the rejected-request log on
// PostgreSQL is test/runtime/store/postgres/rejects.test.ts and serve.test.ts.
import { appendFileSync, readFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { RejectLog, REJECTS_FILE, REJECTS_OLDER_FILE, type RejectRecord } from '../../../runtime/store/file/rejects.js'
import { describeRun, hookgate, stdoutJson } from '../../cli/cli-helpers.js'
import { assertError, assertRawError, compileProject, head, RawClient, send, setTestToken, spawnServe, until, type Project, type ServeProcess } from './harness.js'

const TOKEN = setTestToken()
const WRONG_TOKEN = 'tok_wrong_5f3c9e1a7b2d4c6e8f0a1b2c3d4e5f6a'
const COOKIE_SECRET = 'cookie_secret_9d8c7b6a5f4e3d2c1b0a'
const QUERY_SECRET = 'query_secret_1a2b3c4d5e6f7a8b9c0d'
const BODY_SECRET = 'body_secret_0f1e2d3c4b5a69788796'

function config(limit: number): string {
  return `
server:
  bodyTimeoutSeconds: 0.5
  maxBodyBytes: 1024
  authFailures: { limit: ${limit}, windowSeconds: 60, lockoutSeconds: 60 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  mappings:
    - id: ping
      match: { path: ping }
      action: wake
      wakeMode: next-heartbeat
      textTemplate: "ping"
`
}

const rejects = (stateDir: string, args: string[] = []) => hookgate(['rejects', '--state', stateDir, '--json', ...args], { cwd: stateDir, timeoutMs: 10_000 })

function rawFiles(stateDir: string): string {
  let text = ''
  for (const f of [REJECTS_FILE, REJECTS_OLDER_FILE]) {
    try { text += readFileSync(join(stateDir, f), 'utf8') } catch { /* absent */ }
  }
  return text
}

async function stop(server: ServeProcess): Promise<void> {
  server.child.kill('SIGTERM')
  assert.is(await server.exited, 0)
}

// ---------------------------------------------------------------------------------------------

const each = suite<{ project: Project; server: ServeProcess }>('hookgate rejects, for each refusal the server gives')

each.before(async (ctx) => {
  ctx.project = await compileProject(config(3))
  ctx.server = await spawnServe(ctx.project.outDir, ctx.project.stateDir)
})
each.after(async (ctx) => { if (ctx.server.child.exitCode === null) ctx.server.kill() })

const EXPECTED: Array<[number, string]> = [
  [401, 'unauthorized'], [429, 'too_many_auth_failures'], [400, 'token_in_query'], [404, 'no_mapping'], [405, 'method_not_allowed'],
  [408, 'body_timeout'], [413, 'payload_too_large'], [415, 'unsupported_media_type'], [431, 'headers_too_large'],
]

each('every refused case is listed with its status and reason code while the server runs, and no secret is in the log', async ({ project, server }) => {
  const origin = server.origin
  const secrets = { authorization: `Bearer ${WRONG_TOKEN}`, cookie: `sid=${COOKIE_SECRET}` }
  assertError(await send(origin, '/hooks/ping', { body: {}, headers: secrets }), 401, 'unauthorized')
  assertError(await send(origin, '/hooks/ping', { body: {}, headers: { 'x-hookgate-token': WRONG_TOKEN } }), 401, 'unauthorized')
  assertError(await send(origin, '/hooks/ping', { body: {}, headers: secrets }), 401, 'unauthorized')
  assertError(await send(origin, '/hooks/ping', { body: {}, headers: secrets }), 429, 'too_many_auth_failures')
  assertError(await send(origin, `/hooks/ping?token=${QUERY_SECRET}`, { body: {}, token: TOKEN }), 400, 'token_in_query')
  assertError(await send(origin, '/hooks/nope', { body: {}, token: TOKEN, headers: { cookie: `sid=${COOKIE_SECRET}` } }), 404, 'no_mapping')
  assertError(await send(origin, '/hooks/ping', { method: 'GET', token: TOKEN }), 405, 'method_not_allowed')
  assertError(await send(origin, '/hooks/ping', { body: 'x'.repeat(5000), token: TOKEN, headers: { 'content-type': 'application/json' } }), 413, 'payload_too_large')
  assertError(await send(origin, '/hooks/ping', { body: `hello ${BODY_SECRET}`, token: TOKEN, headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type')
  const slow = await RawClient.open(server.port)
  try {
    await slow.write(head('POST', '/hooks/ping', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': '100' }))
    assertRawError(await slow.response(5000), 408, 'body_timeout')
  } finally { slow.destroy() }
  const big = await RawClient.open(server.port)
  try {
    await big.write(head('POST', '/hooks/ping', { authorization: `Bearer ${WRONG_TOKEN}`, 'x-padding': 'p'.repeat(20_000), 'content-length': '2' }))
    assertRawError(await big.response(), 431, 'headers_too_large')
  } finally { big.destroy() }

  // the first refusal of each kind is written within the flush interval
  await until('every refusal in the log', () => {
    const codes = new Set(RejectLog.read(project.stateDir).records.map((r) => r.code))
    return EXPECTED.every(([, code]) => codes.has(code)) ? true : undefined
  })
  const r = await rejects(project.stateDir)
  assert.is(r.code, 0, describeRun(r))
  const records = stdoutJson<RejectRecord[]>(r)
  for (const [status, code] of EXPECTED) {
    const found = records.find((x) => x.code === code)
    assert.ok(found, `${status} ${code} is listed\n${r.stdout}`)
    assert.is(found!.status, status)
    assert.is(found!.client, '127.0.0.1')
  }
  const unauthorized = records.find((x) => x.code === 'unauthorized' && x.headers.cookie !== undefined)!
  assert.is(unauthorized.path, '/hooks/ping')
  assert.is(unauthorized.method, 'POST')
  assert.is(unauthorized.headers.authorization, '[redacted]')
  assert.is(unauthorized.headers.cookie, '[redacted]')
  assert.ok(records.every((x) => x.body === undefined), 'no body is kept without --log-bodies')
  assert.is(records.find((x) => x.code === 'token_in_query')!.path, '/hooks/ping', 'the query string is never recorded')

  await stop(server)
  const text = rawFiles(project.stateDir) + JSON.stringify(stdoutJson(await rejects(project.stateDir)))
  for (const secret of [WRONG_TOKEN, COOKIE_SECRET, QUERY_SECRET, TOKEN, BODY_SECRET]) assert.not.ok(text.includes(secret), `a secret reached the log: ${secret.slice(0, 12)}…`)
  // the three 401s share one key (client, path, status, code): counted together, written once or twice
  const counted = (stdoutJson<RejectRecord[]>(await rejects(project.stateDir))).filter((x) => x.code === 'unauthorized')
  assert.is(counted.reduce((n, x) => n + x.count, 0), 3)
  assert.ok(counted.length <= 2, `one record per minute, got ${counted.length}`)
})

each('--limit keeps the newest N and --since drops what is older than the duration', async ({ project }) => {
  const all = stdoutJson<RejectRecord[]>(await rejects(project.stateDir))
  assert.ok(all.length >= EXPECTED.length)
  const two = stdoutJson<RejectRecord[]>(await rejects(project.stateDir, ['--limit', '2']))
  assert.equal(two, all.slice(0, 2))
  // a record from three days ago in the older segment (the server is stopped: nothing else writes)
  const old: RejectRecord = { id: 'old-1', firstAt: new Date(Date.now() - 3 * 86_400_000).toISOString(), lastAt: new Date(Date.now() - 3 * 86_400_000).toISOString(), count: 1, method: 'POST', path: '/hooks/old', client: '198.51.100.9', status: 404, code: 'no_mapping', headers: {} }
  appendFileSync(join(project.stateDir, REJECTS_OLDER_FILE), JSON.stringify(old) + '\n')
  const everything = stdoutJson<RejectRecord[]>(await rejects(project.stateDir))
  assert.is(everything.at(-1)!.path, '/hooks/old')
  const recent = stdoutJson<RejectRecord[]>(await rejects(project.stateDir, ['--since', '1d']))
  assert.equal(recent, all)
  const usage = await hookgate(['rejects', '--state', project.stateDir, '--since', 'yesterday'], { cwd: project.stateDir })
  assert.is(usage.code, 2, describeRun(usage))
})

each.run()

// ---------------------------------------------------------------------------------------------

const flood = suite<{ project: Project; server: ServeProcess }>('a flood of refused requests')

flood.before(async (ctx) => {
  ctx.project = await compileProject(config(1_000_000))
  ctx.server = await spawnServe(ctx.project.outDir, ctx.project.stateDir, ['--log-bodies'])
})
flood.after(async (ctx) => { if (ctx.server.child.exitCode === null) ctx.server.kill() })

/** POSTs with a wrong token over a few keep-alive connections; resolves with the statuses seen. */
async function wrongTokenFlood(port: number, total: number, parallel: number): Promise<Map<number, number>> {
  const agent = new Agent({ keepAlive: true, maxSockets: parallel })
  const seen = new Map<number, number>()
  let sent = 0
  const one = (): Promise<void> => new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/hooks/ping', method: 'POST', agent, headers: { authorization: `Bearer ${WRONG_TOKEN}`, 'content-length': '0' } }, (res) => {
      res.resume()
      res.on('end', () => { seen.set(res.statusCode!, (seen.get(res.statusCode!) ?? 0) + 1); resolve() })
    })
    req.on('error', reject)
    req.end()
  })
  const worker = async (): Promise<void> => { while (sent < total) { sent++; await one() } }
  try {
    await Promise.all(Array.from({ length: parallel }, worker))
  } finally {
    agent.destroy()
  }
  return seen
}

flood('5,000 identical 401s from one address are one or a few records whose counts add up to 5,000', async ({ project, server }) => {
  const seen = await wrongTokenFlood(server.port, 5000, 16)
  assert.equal([...seen], [[401, 5000]])
  await stop(server)
  const records = stdoutJson<RejectRecord[]>(await rejects(project.stateDir)).filter((r) => r.code === 'unauthorized')
  assert.ok(records.length >= 1 && records.length <= 3, `one record per minute the flood spanned, got ${records.length}`)
  assert.is(records.reduce((n, r) => n + r.count, 0), 5000)
  const lines = rawFiles(project.stateDir).split('\n').filter((l) => l !== '').length
  assert.ok(lines <= 6, `a handful of writes, not one per request: ${lines} lines`)
  assert.not.ok(rawFiles(project.stateDir).includes(WRONG_TOKEN))
})

flood('with serve --log-bodies, a refusal after the body was read keeps the start of the body', async ({ project }) => {
  const again = await spawnServe(project.outDir, project.stateDir, ['--log-bodies'])
  try {
    assertError(await send(again.origin, '/hooks/ping', { body: 'plain text body', token: TOKEN, headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type')
  } finally {
    await stop(again)
  }
  const record = stdoutJson<RejectRecord[]>(await rejects(project.stateDir)).find((r) => r.code === 'unsupported_media_type')
  assert.is(record?.body, 'plain text body')
  assert.ok(stdoutJson<RejectRecord[]>(await rejects(project.stateDir)).some((r) => r.code === 'unauthorized'), 'the earlier records survive a restart')
})

flood.run()
