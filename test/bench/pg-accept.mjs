// How many runs a PgRunLog accepts per second on a throwaway PostgreSQL (test/helpers/pg.ts), run by
// hand (not part of `npm test`): N concurrent callers, each creating agent-sized runs one after
// another for --duration seconds, group commit as the store does it. A first check of the store's
// accept path before it serves HTTP (issue 17 asks ≥ 0.35× the file store's agent rate).
//
//   node test/bench/pg-accept.mjs [--duration 5] [--callers 50]
import { pathToFileURL } from 'node:url'
import { join } from 'node:path'
import { readCli, root } from './lib.mjs'

const USAGE = 'usage: node test/bench/pg-accept.mjs [--duration S] [--callers N]'
const { number } = readCli('pg-accept', USAGE, { duration: { type: 'string', default: '5' }, callers: { type: 'string', default: '50' } })
const duration = number('duration', 1, 600)
const callers = number('callers', 1, 1000)
const build = (p) => import(pathToFileURL(join(root, 'build', p)).href)
const { startPostgres } = await build('test/helpers/pg.js')
const { openPool } = await build('runtime/store/postgres/client.js')
const { migrate } = await build('runtime/store/postgres/migrate.js')
const { PgRunLog } = await build('runtime/store/postgres/runs.js')

const pg = await startPostgres()
if (!pg) { console.error('pg-accept: no PostgreSQL server binaries'); process.exit(1) }
try {
  const db = await openPool(pg.url, { max: 10 })
  await migrate(db)
  let commits = 0
  const counted = { ...db, query: db.query.bind(db), transaction: (fn, o) => { commits++; return db.transaction(fn, o) }, close: () => db.close() }
  const log = new PgRunLog(counted, { hostId: 'bench' })
  const request = { message: 'summarise ' + 'x'.repeat(120), deliver: false, wakeMode: 'next-heartbeat', agentId: 'main', sessionKey: 'hook:bench' }
  let n = 0
  let stop = false
  const end = Date.now() + duration * 1000
  const caller = async (c) => {
    for (let i = 0; !stop; i++) {
      await log.create({ id: `r-${c}-${i}`, definitionKind: 'hook', definitionId: 'agent', correlationId: `c-${c}-${i}`, action: 'agent', agentId: 'main', sessionKey: 'hook:bench', request })
      n++
      if (Date.now() >= end) stop = true
    }
  }
  const t0 = performance.now()
  await Promise.all(Array.from({ length: callers }, (_, c) => caller(c)))
  const s = (performance.now() - t0) / 1000
  console.log(`${Math.round(n / s)} runs/s accepted (${n} in ${s.toFixed(1)} s, ${callers} callers), ${commits} commits (${(n / commits).toFixed(1)} runs per commit)`)
  await log.close()
  await db.close()
} finally {
  await pg.destroy()
}
