// `npm start`: compiles the repo's hooks.yaml, then runs the runtime (`hookgate serve`) and the
// operator page (`hookgate admin`) side by side as two processes — the runtime never loads the
// control plane — and prints both URLs. Ctrl-C (or SIGTERM) stops both; when one of them stops on
// its own, the other is stopped too and its exit code is this script's.
import { spawn, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const bin = fileURLToPath(new URL('../bin/hookgate.js', import.meta.url))
const config = process.env.HOOKGATE_CONFIG ?? 'hooks.yaml'
const out = process.env.HOOKGATE_OUT ?? 'dist'

const compiled = spawnSync(process.execPath, [bin, 'compile', config, '--out', out], { stdio: 'inherit' })
if (compiled.status !== 0) process.exit(compiled.status ?? 1)

const children = new Map()
const urls = {}
let stopping = false

function start(name, args, urlPattern) {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
  children.set(name, child)
  let buffered = ''
  child.stdout.on('data', (chunk) => {
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
  child.on('exit', (code, signal) => {
    children.delete(name)
    if (!stopping) {
      process.stderr.write(`npm start: hookgate ${name} stopped (${signal ?? `exit ${code}`}); stopping the rest\n`)
      process.exitCode = code ?? 1
      stop('SIGTERM')
    }
    if (children.size === 0) process.exit()
  })
}

function stop(signal) {
  stopping = true
  for (const child of children.values()) child.kill(signal)
}

process.on('SIGINT', () => stop('SIGTERM'))
process.on('SIGTERM', () => stop('SIGTERM'))

start('serve', ['serve', '--bundle', out], /hookgate listening on (\S+)/)
start('admin', ['admin', '--config', config, '--out', out], /hookgate admin on (\S+)/)
