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
// The ports: `npm start -- --port N --admin-port M`, else $HOOKGATE_PORT and $HOOKGATE_ADMIN_PORT,
// else the config's server.port (8787 when unset) and 8790; 0 takes a free one. HOOKGATE_CONFIG
// (default hooks.yaml) and HOOKGATE_OUT (dist) move what it compiles and where the bundle goes.
//
// Its own lines are JSON log lines, as serve's and admin's are ({"t","level","msg",…}: info on
// stdout, errors on stderr), and so are compile's, each of its lines wrapped into one; when stderr
// is a terminal, a human summary (the two URLs, compile's diagnostics as printed) is added there.
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const bin = fileURLToPath(new URL('../bin/hookgate.js', import.meta.url))
const config = process.env.HOOKGATE_CONFIG ?? 'hooks.yaml'
const out = process.env.HOOKGATE_OUT ?? 'dist'
const human = process.stderr.isTTY === true

function log(level, msg, fields = {}) {
  const line = JSON.stringify({ t: new Date().toISOString(), level, msg, ...fields }) + '\n'
  if (level === 'error') process.stderr.write(line)
  else process.stdout.write(line)
}

/** The ports from the flags, else the environment; a malformed one stops here with exit 2 (a usage error). */
function ports() {
  let flags
  try {
    flags = parseArgs({ args: process.argv.slice(2), options: { port: { type: 'string' }, 'admin-port': { type: 'string' } }, strict: true }).values
  } catch (err) {
    log('error', `npm start: ${err.message}; usage: npm start -- --port N --admin-port M`)
    process.exit(2)
  }
  const pick = (flag, env, name) => {
    const value = flags[flag] ?? process.env[env]
    if (value === undefined) return undefined
    if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) {
      log('error', `npm start: ${flags[flag] !== undefined ? `--${flag}` : `$${env}`} takes a port number from 0 to 65535, not "${value}"`, { [name]: value })
      process.exit(2)
    }
    return value
  }
  return { port: pick('port', 'HOOKGATE_PORT', 'port'), adminPort: pick('admin-port', 'HOOKGATE_ADMIN_PORT', 'adminPort') ?? '8790' }
}
const { port, adminPort } = ports()
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
    if (!stopping) {
      log('error', `npm start: hookgate ${name} stopped (${signal ?? `exit ${code}`}); stopping the rest`, { child: name, ...(signal ? { signal } : { exitCode: code }) })
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
        log('info', 'hookgate is up', { webhooks: urls.serve, page: urls.admin })
        if (human) process.stderr.write(`\nhookgate is up:\n  webhooks       ${urls.serve}\n  operator page  ${urls.admin}  (sign in with the admin token named above)\n\n`)
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

// compile prints its diagnostics (`file:line:col: error|warning CODE: …` and their hints) and its
// summary ("compiled N routes into …") on stderr: each line becomes a log line of its own, at the
// level of the finding it belongs to (a hint follows its finding; any other line is an error), the
// summary and stdout at info
const compile = spawn(process.execPath, [bin, 'compile', config, '--out', out], { stdio: ['ignore', 'pipe', 'pipe'] })
children.set('compile', compile)
const FINDING = /^\S.*:\d+:\d+: (error|warning) /
const streams = [compile.stdout, compile.stderr].map((stream) => new Promise((done) => {
  const lines = createInterface({ input: stream })
  let finding = 'info'
  lines.on('line', (line) => {
    if (line.trim() === '') return
    const m = FINDING.exec(line)
    if (m) finding = m[1] === 'error' ? 'error' : 'warn'
    else if (/^compiled \d+ route/.test(line)) finding = 'info'
    else if (!/^\s/.test(line)) finding = 'error'
    const level = stream === compile.stderr ? finding : 'info'
    log(level, line, { from: 'compile' })
    if (human && level === 'error') process.stderr.write(line + '\n')
  })
  lines.on('close', done)
}))
compile.on('exit', async (code, signal) => {
  children.delete('compile')
  await Promise.all(streams)
  if (stopping) {
    if (children.size === 0) process.exit()
    return
  }
  if (code !== 0) process.exit(code ?? (signal ? 1 : 0))
  serveChild('serve', ['serve', '--bundle', out, ...(port !== undefined ? ['--port', port] : [])], /hookgate listening on (\S+)/)
  serveChild('admin', ['admin', '--config', config, '--out', out, '--port', adminPort], /hookgate admin on (\S+)/)
})
