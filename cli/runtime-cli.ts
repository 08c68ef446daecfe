// The runtime side of the CLI: `hookgate try`, serve, runs (show, replay), rejects (and, as they land, webhooks).
// Imports nothing from the compiler side.
import { readFileSync } from 'node:fs'
import { getCommand, readCommandArgs, usageLine } from './commands.js'
import { BundleLoadError, loadBundle } from '../runtime/bundle/load.js'
import { startService } from '../runtime/serve/service.js'
import { batchedStdout } from './log-output.js'
import { runsCommand, runsShowCommand } from './runs.js'
import { runsReplayCommand } from './runs-replay.js'
import { rejectsCommand } from './rejects.js'
import { storeMigrateCommand } from './store.js'
import { isPostgresUrl } from '../runtime/store/open.js'
import { tasksCommand } from './tasks.js'
import { dryRun } from '../runtime/endpoints/try.js'
import { hookName } from '../runtime/bundle/hook-path.js'

const EXIT = { ok: 0, refused: 1, usage: 2 } as const

export const TRY_USAGE = usageLine(getCommand('try'))

export async function main(command: string, argv: string[]): Promise<number | undefined> {
  if (command === 'try') return tryCommand(argv)
  if (command === 'serve') return serveCommand(argv)
  if (command === 'store migrate') return storeMigrateCommand(argv, { env: process.env })
  if (command === 'runs') return runsCommand(argv, { stateDir: '.hookgate' })
  if (command === 'runs show') return runsShowCommand(argv, { stateDir: '.hookgate' })
  if (command === 'runs replay') return runsReplayCommand(argv, { stateDir: '.hookgate' })
  if (command === 'rejects') return rejectsCommand(argv, { stateDir: '.hookgate' })
  if (command === 'tasks') return tasksCommand(argv, { stateDir: '.hookgate' })
  process.stderr.write(`hookgate ${command}: not available in this build yet\n`)
  return EXIT.usage
}

/** Runs until SIGTERM or SIGINT, then drains and exits 0; SIGHUP reloads the bundle. */
async function serveCommand(argv: string[]): Promise<number> {
  const parsed = readCommandArgs('serve', argv)
  if (parsed.kind !== 'ok') return parsed.exit!
  const values = parsed.values as { bundle: string; host?: string; port?: string; state?: string; store?: string; 'grace-seconds': string; 'no-fsync'?: boolean; 'log-bodies'?: boolean }
  const port = values.port === undefined ? undefined : Number(values.port)
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) {
    process.stderr.write(`hookgate serve: --port takes a number from 0 to 65535\n`)
    return EXIT.usage
  }
  if (values.store !== undefined && !isPostgresUrl(values.store)) {
    process.stderr.write(`hookgate serve: --store takes a postgres:// (or postgresql://) URL; the file store is the default and needs no flag\n`)
    return EXIT.usage
  }
  const grace = Number(values['grace-seconds'])
  // Listening for SIGTERM/SIGINT from the start: one that comes while the server starts (its
  // "listening" line is out before start-up has finished) stops it once it has started, instead
  // of killing the process mid-way.
  let stopAsked: string | undefined
  let onStop: ((signal: string) => void) | undefined
  const asked = (signal: string) => () => { if (onStop) onStop(signal); else stopAsked ??= signal }
  process.once('SIGTERM', asked('SIGTERM'))
  process.once('SIGINT', asked('SIGINT'))
  const out = batchedStdout()
  let service
  try {
    service = await startService({
      bundle: values.bundle,
      write: out.write,
      writeFaults: (line) => { process.stderr.write(line + '\n') },
      ...(values.host !== undefined ? { host: values.host } : {}),
      ...(port !== undefined ? { port } : {}),
      ...(values.state !== undefined ? { stateDir: values.state } : {}),
      graceMs: Number.isFinite(grace) && grace >= 0 ? grace * 1000 : 10_000,
      fsync: values['no-fsync'] !== true,
      logBodies: values['log-bodies'] === true,
      ...(values.store !== undefined ? { store: values.store } : {}),
    })
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    const reason = e.code === 'EADDRINUSE' ? `the address is already in use (${e.message.replace(/^listen EADDRINUSE: address already in use /, '')})` : e.message
    out.flush()
    process.stderr.write(`hookgate serve: cannot start: ${reason}\n`)
    // Promptly, whatever a half-started bundle may have left running (stderr to a pipe or file is
    // written synchronously, so the line above is out).
    process.exit(EXIT.refused)
  }
  process.on('SIGHUP', () => void service.reload())
  await new Promise<void>((resolveStop) => {
    onStop = (signal: string) => {
      // out before the listener closes: from this line on, new connections are refused
      out.write(JSON.stringify({ t: new Date().toISOString(), level: 'info', msg: `${signal}: draining and stopping` }))
      out.flush()
      service.close().finally(out.flush).then(resolveStop, resolveStop)
    }
    if (stopAsked) onStop(stopAsked)
  })
  return EXIT.ok
}

/** What a mapping would answer for a sample payload; exit 0 for 2xx, 1 otherwise, 2 for usage. */
async function tryCommand(argv: string[]): Promise<number> {
  const parsed = readCommandArgs('try', argv)
  if (parsed.kind !== 'ok') return parsed.exit!
  const { positionals } = parsed
  const values = parsed.values as { payload?: string; bundle: string; header: string[]; query: string[] }
  if (positionals.length !== 1 || !values.payload) {
    process.stderr.write(`hookgate try: need one mapping name and --payload FILE\n${TRY_USAGE}\n`)
    return EXIT.usage
  }
  const headers: Record<string, string> = Object.create(null)
  for (const h of values.header) {
    const i = h.indexOf(':')
    if (i <= 0) {
      process.stderr.write(`hookgate try: --header takes NAME:VALUE, not "${h}"\n`)
      return EXIT.usage
    }
    headers[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim()
  }
  const query: Record<string, string> = Object.create(null)
  for (const q of values.query) {
    const i = q.indexOf('=')
    query[i < 0 ? q : q.slice(0, i)] = i < 0 ? '' : q.slice(i + 1)
  }

  let bundle
  try {
    bundle = await loadBundle(values.bundle)
  } catch (err) {
    process.stderr.write(`hookgate try: ${err instanceof BundleLoadError ? err.message : (err as Error).message}\n`)
    return EXIT.usage
  }
  let text: string
  try {
    text = readFileSync(values.payload, 'utf8')
  } catch (err) {
    process.stderr.write(`hookgate try: cannot read ${values.payload}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}\n`)
    return EXIT.usage
  }

  const basePrefix = bundle.config.basePath.slice(1) + '/'
  const asked = positionals[0]!.replace(/^\/+/, '').replace(new RegExp('^' + basePrefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), '')
  // As the compiler named the routes (runtime/bundle/hook-path.ts); a name it would refuse is looked up as given, and not found.
  const name = hookName(asked) ?? asked
  const print = (status: number, body: Record<string, unknown>) => {
    process.stdout.write(JSON.stringify({ status, ...body }, null, 2) + '\n')
    return status < 300 ? EXIT.ok : EXIT.refused
  }

  let payload: unknown
  try {
    payload = text.trim() === '' ? {} : JSON.parse(text)
  } catch (err) {
    return print(400, { code: 'invalid_json', error: `the payload is not valid JSON: ${(err as Error).message}` })
  }
  const answer = await dryRun(bundle, name, payload, { headers, query })
  return print(answer.status, answer.body)
}
