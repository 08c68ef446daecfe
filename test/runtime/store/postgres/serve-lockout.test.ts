// The auth lock-out across three real `hookgate serve --store postgres://…` runtimes on one
// database (issue 17, scale-out §7 scenario 5): one address sprays wrong tokens round-robin over the
// three; the 401s (before the first 429, and in all) stay within limit + 2 × (runtimes − 1); every
// runtime answers the lock-out within 1 s of the first; a correct token on one clears it on all
// within 1 s.
import { createHmac } from 'node:crypto'
import { connect } from 'node:net'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgateBin } from '../../../helpers/paths.js'
import { startPostgres } from '../../../helpers/pg.js'
import { assertOk, compileProject, send, setTestToken, sleep, spawnServer, type Reply, type ServeProcess } from '../../http/harness.js'

const TOKEN = setTestToken()
const LIMIT = 20
const pg = await startPostgres()
const serve = suite('hookgate serve --store postgres://: the lock-out across runtimes')

const CONFIG = `
server:
  authFailures: { limit: ${LIMIT}, windowSeconds: 60, lockoutSeconds: 60 }
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
`

const wrong = (host: ServeProcess): Promise<Reply> => send(host.origin, '/hooks/wake', { body: { text: 'x' }, token: 'wrong-token-wrong-token-wrong' })

if (!pg) {
  console.log('skipped: no PostgreSQL server binaries')
} else {
  serve.after(async () => { await pg.destroy() })

  serve('one address spraying wrong tokens over 3 runtimes: at most limit + 4 401s, 429 everywhere within 1 s, and a correct token clears it everywhere within 1 s', async () => {
    const url = await pg.createDatabase('serve_lockout')
    const project = await compileProject(CONFIG)
    const hosts: ServeProcess[] = []
    try {
      for (const name of ['a', 'b', 'c']) {
        hosts.push(await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--host', '127.0.0.1', '--state', `${project.stateDir}-${name}`, '--store', url], { cwd: project.dir }))
      }
      // a flush or two: each runtime learns that there are three
      await sleep(600)

      // Round-robin until every runtime answers the lock-out (429, Retry-After > 1 s); a 429 with
      // Retry-After 1 is a runtime holding the client while its merge is under way.
      let unauthorized = 0, held = 0, beforeFirst429: number | undefined
      let first: number | undefined
      const refusing = new Set<number>()
      for (let i = 0; refusing.size < hosts.length; i++) {
        assert.ok(i < 10 * LIMIT, `not locked out everywhere after ${i} wrong tokens (${unauthorized} 401s)`)
        assert.ok(first === undefined || Date.now() - first <= 1000, `only runtimes ${[...refusing].join(', ')} answer 429 1 s after the first`)
        const r = await wrong(hosts[i % 3]!)
        if (r.status === 401) unauthorized++
        else if (r.status !== 429) assert.unreachable(`unexpected ${r.status} ${r.text}`)
        else {
          beforeFirst429 ??= unauthorized
          if (r.headers['retry-after'] === '1') held++
          else {
            first ??= Date.now()
            refusing.add(i % 3)
          }
        }
      }
      console.log(`${unauthorized} 401s in all, ${beforeFirst429} before the first 429 (limit ${LIMIT}, 3 runtimes); ${held} held; every runtime locked out ${Date.now() - first!} ms after the first`)
      assert.ok(unauthorized <= LIMIT + 2 * (hosts.length - 1), `${unauthorized} 401s`)

      // a correct token on one clears it on all
      assertOk(await send(hosts[0]!.origin, '/hooks/wake', { body: { text: 'deploy finished' }, token: TOKEN }), 200, ['ok', 'action', 'runId', 'mode'])
      const cleared = Date.now()
      for (const host of hosts.slice(1)) {
        for (;;) {
          assert.ok(Date.now() - cleared <= 1000, `runtime ${host.origin} still answers 429 1 s after a correct token elsewhere`)
          const r = await wrong(host)
          if (r.status === 401) break
          assert.is(r.status, 429, r.text)
          await sleep(20)
        }
      }
      console.log(`cleared everywhere ${Date.now() - cleared} ms after the correct token`)
    } finally {
      for (const h of hosts) h.child.kill('SIGTERM')
      const codes = await Promise.all(hosts.map((h) => h.exited))
      assert.equal(codes, hosts.map(() => 0), hosts.map((h) => h.stderr()).join('\n'))
    }
    assert.is(await pg.sql('SELECT count(*) FROM hookgate_hosts', url), '0')
  })

/**
 * Requests written back to back on one connection (pipelined): the server takes them in one turn of
 * its event loop, before a merge it asked for at the first can have come back. Their statuses, in order.
 */
function pipelined(origin: string, requests: Array<{ path: string; headers: Record<string, string>; body: string }>): Promise<number[]> {
  const { hostname, port } = new URL(origin)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname)
    let got = Buffer.alloc(0)
    const statuses = (): number[] | undefined => {
      const out: number[] = []
      let at = 0
      while (out.length < requests.length) {
        const end = got.indexOf('\r\n\r\n', at)
        if (end < 0) return undefined
        const head = got.subarray(at, end).toString('latin1')
        const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0)
        if (got.length < end + 4 + length) return undefined
        out.push(Number(head.slice(9, 12)))
        at = end + 4 + length
      }
      return out
    }
    socket.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d])
      const done = statuses()
      if (done) { socket.destroy(); resolve(done) }
    })
    socket.on('error', reject)
    socket.on('close', () => reject(new Error(`the connection closed with ${JSON.stringify(got.toString('latin1').slice(0, 300))}`)))
    socket.write(requests.map(({ path, headers, body }) => `POST ${path} HTTP/1.1\r\nHost: ${hostname}\r\n${Object.entries({ ...headers, 'content-length': String(Buffer.byteLength(body)) }).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${body}`).join(''))
  })
}

  // The same request gets the same answer on either store (issue 23, found by the fuzz harness): a
  // runtime sharing its counts held a client whose count it was merging with 429 Retry-After 1,
  // where a runtime alone answers 401 — and refused a correctly signed request meanwhile.
  serve('one runtime on PostgreSQL answers a client\'s failures as the file store does: concurrent wrong tokens get 401 each, and a correct signature right after a wrong one passes', async () => {
    const url = await pg.createDatabase('serve_lockout_alike')
    const secret = 'signing-secret-signing-secret'
    const project = await compileProject(`${CONFIG}
  mappings:
    - id: signed
      match: { path: signed }
      action: wake
      textTemplate: "signed"
      signature: { scheme: github, secret: "\${HOOKGATE_TEST_SECRET}" }
`)
    const env = { ...process.env, HOOKGATE_TEST_SECRET: secret }
    const hosts: ServeProcess[] = []
    hosts.push(await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--host', '127.0.0.1', '--state', `${project.stateDir}-file`], { cwd: project.dir, env }))
    hosts.push(await spawnServer([hookgateBin, 'serve', '--bundle', project.outDir, '--port', '0', '--host', '127.0.0.1', '--state', `${project.stateDir}-pg`, '--store', url], { cwd: project.dir, env }))
    try {
      const wrongToken = { path: '/hooks/wake', headers: { 'content-type': 'application/json', authorization: 'Bearer wrong-token-wrong-token-wrong' }, body: '{"text":"x"}' }
      const body = JSON.stringify({ zen: 'keep it logically awesome' })
      const signed = (sig: string) => ({ path: '/hooks/signed', headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': `d-${Math.random()}`, 'x-hub-signature-256': sig }, body })
      for (const host of hosts) {
        assert.equal(await pipelined(host.origin, [wrongToken, wrongToken, wrongToken, wrongToken]), [401, 401, 401, 401], host.origin)
        // a correct signature passes right after a wrong one, while that failure's merge is under way
        assert.equal(await pipelined(host.origin, [signed('sha256=' + '0'.repeat(64)), signed('sha256=' + createHmac('sha256', secret).update(body).digest('hex'))]), [401, 200], host.origin)
        assert.equal(await pipelined(host.origin, [wrongToken, wrongToken]), [401, 401], host.origin)
      }
    } finally {
      for (const h of hosts) h.child.kill('SIGTERM')
      await Promise.all(hosts.map((h) => h.exited))
    }
  })

  serve.run()
}
