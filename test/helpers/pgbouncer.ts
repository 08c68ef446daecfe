// A throwaway PgBouncer in transaction mode in front of a throwaway PostgreSQL (test/helpers/pg.ts):
// what the "works behind pgbouncer in transaction mode" is checked against. Unix socket
// only, like the server; as root it runs as nobody (it refuses root too). Debian's `pgbouncer`
// package, which .ci/run installs; without it the caller skips.
import { spawn, type ChildProcess } from 'node:child_process'
import { accessSync, chownSync, constants, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { TestPostgres } from './pg.js'
import { sleep } from './async.js'

const NOBODY = 65534
/** The port only names the socket file (.s.PGSQL.6432). */
const PORT = 6432

export interface TestPgbouncer {
  /** the URL of `database` through the bouncer */
  url(database: string): string
  stop(): Promise<void>
}

function binary(): string | undefined {
  for (const path of ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer']) {
    try { accessSync(path, constants.X_OK); return path } catch { /* not here */ }
  }
  return undefined
}

/** A bouncer in transaction mode in front of `pg` (every database, user hookgate), or null without the binary. */
export async function startPgbouncer(pg: TestPostgres): Promise<TestPgbouncer | null> {
  const bin = binary()
  if (!bin) return null
  // beside the server's own directory under the same temp base, so that nobody can reach it
  const dir = mkdtempSync(join(pg.socketDir, '..', '..', 'hookgate-pgbouncer-'))
  const config = join(dir, 'pgbouncer.ini')
  writeFileSync(join(dir, 'users.txt'), '"hookgate" ""\n')
  writeFileSync(config, [
    '[databases]',
    `* = host=${pg.socketDir} port=${pg.port} user=hookgate`,
    '[pgbouncer]',
    `unix_socket_dir = ${dir}`,
    `listen_port = ${PORT}`,
    'auth_type = any',
    `auth_file = ${join(dir, 'users.txt')}`,
    'pool_mode = transaction',
    'max_client_conn = 500',
    'default_pool_size = 20',
    'ignore_startup_parameters = extra_float_digits,options',
    `logfile = ${join(dir, 'pgbouncer.log')}`,
    '',
  ].join('\n'))
  const root = process.getuid?.() === 0
  if (root) for (const p of [dir, config, join(dir, 'users.txt')]) chownSync(p, NOBODY, NOBODY)
  const child: ChildProcess = spawn(bin, [config], { stdio: 'ignore', ...(root ? { uid: NOBODY, gid: NOBODY } : {}) })
  const cleanup = (): void => { child.kill('SIGKILL'); rmSync(dir, { recursive: true, force: true }) }
  process.on('exit', cleanup)
  const socket = join(dir, `.s.PGSQL.${PORT}`)
  for (let waited = 0; !existsSync(socket); waited += 20) {
    if (waited > 10_000 || child.exitCode !== null) { cleanup(); throw new Error(`pgbouncer did not start (see ${join(dir, 'pgbouncer.log')})`) }
    await sleep(20)
  }
  return {
    url: (database) => `postgres://hookgate@/${database}?host=${dir}&port=${PORT}`,
    async stop() {
      process.off('exit', cleanup)
      child.kill('SIGINT')
      await new Promise((r) => { if (child.exitCode !== null) r(undefined); else child.once('exit', r) })
      cleanup()
    },
  }
}
