// The auth lock-out across three real `hookgate serve --store postgres://…` runtimes on one
// database (issue 17, scale-out §7 scenario 5): one address sprays wrong tokens round-robin over the
// three; the 401s (before the first 429, and in all) stay within limit + 2 × (runtimes − 1); every
// runtime answers the lock-out within 1 s of the first; a correct token on one clears it on all
// within 1 s.
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

  serve.run()
}
