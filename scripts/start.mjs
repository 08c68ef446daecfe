// `npm start`: compiles the repo's hooks.yaml, then runs the runtime (`hookgate serve`) and the
// operator page (`hookgate admin`) side by side as two processes — the runtime never loads the
// control plane — and prints both URLs. When one of them stops on its own, the other is stopped
// too and its exit code is this script's.
//
// Every stop signal stops everything this script started: SIGINT (Ctrl-C), SIGTERM and SIGHUP (a
// closed terminal) each send SIGTERM to the children (serve drains; SIGHUP is never passed on, as
// serve reads it as "reload"), and so does the loss of the parent: `npm start` runs this script
// under `sh -c`, and a SIGTERM npm forwards to the shell, or a SIGHUP that ends npm, used to leave
// this script and both servers running, holding the ports and the state lock. package.json execs
// the script so that npm's signals reach it; the parent check covers whatever runs it otherwise.
// A child that has not stopped STOP_DEADLINE_MS after the signal is killed.
//
// HOOKGATE_CONFIG (default hooks.yaml), HOOKGATE_OUT (dist) and HOOKGATE_ADMIN_PORT (8790) move
// what it compiles, where the bundle goes and where the page listens.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const bin = fileURLToPath(new URL('../bin/hookgate.js', import.meta.url))
const config = process.env.HOOKGATE_CONFIG ?? 'hooks.yaml'
const out = process.env.HOOKGATE_OUT ?? 'dist'
const adminPort = process.env.HOOKGATE_ADMIN_PORT ?? '8790'
/** serve's drain takes up to its --grace-seconds (10 s); past this a child is killed */
const STOP_DEADLINE_MS = 30_000
/** how often the parent is checked for: an orphan is noticed within this */
const PARENT_CHECK_MS = 250

const children = new Map()
const urls = {}
let stopping = false

function run(name, args, onStdout) {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', onStdout ? 'pipe' : 'inherit', 'inherit'] })
  children.set(name, child)
  if (onStdout) child.stdout.on('data', onStdout)
  child.on('exit', (code, signal) => {
    children.delete(name)
    if (!stopping && name !== 'compile') {
      process.stderr.write(`npm start: hookgate ${name} stopped (${signal ?? `exit ${code}`}); stopping the rest\n`)
      process.exitCode = code ?? 1
      stop()
    }
    if (stopping && children.size === 0) process.exit()
  })
  return child
}

function serveChild(name, args, urlPattern) {
  let buffered = ''
  run(name, args, (chunk) => {
    process.stdout.write(chunk)
    if (urls[name]) return
    buffered += chunk.toString('utf8')
    const m = urlPattern.exec(buffered)
    if (m) {
      urls[name] = m[1]
      buffered = ''
      if (urls.serve && urls.admin) {
        process.stdout.write(`\nhookgate is up:\n  webhooks       ${urls.serve}\n  operator page  ${urls.admin}  (sign in with the admin token named above)\n\n`)
      }
    }
  })
}

function stop() {
  if (stopping) return
  stopping = true
  if (children.size === 0) process.exit()
  for (const child of children.values()) child.kill('SIGTERM')
  setTimeout(() => {
    for (const child of children.values()) child.kill('SIGKILL')
  }, STOP_DEADLINE_MS).unref()
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, stop)

// Orphaned (the shell or npm above this script is gone): nobody is left to stop us, so stop.
const parent = process.ppid
setInterval(() => {
  if (process.ppid !== parent) stop()
}, PARENT_CHECK_MS).unref()

run('compile', ['compile', config, '--out', out]).on('exit', (code, signal) => {
  if (stopping) return
  if (code !== 0) process.exit(code ?? (signal ? 1 : 0))
  serveChild('serve', ['serve', '--bundle', out], /hookgate listening on (\S+)/)
  serveChild('admin', ['admin', '--config', config, '--out', out, '--port', adminPort], /hookgate admin on (\S+)/)
})
