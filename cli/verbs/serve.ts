// `hookgate serve`: the runtime serving a compiled bundle until SIGTERM or SIGINT (then it drains
// and exits 0); SIGHUP or a changed bundle file reloads it. bin/hookgate.js loads this verb from
// build/serve/hookgate-serve.mjs, where scripts/build.mjs bundles it with the runtime (cli/serve-main.ts),
// and `hookgate compile --standalone` bundles it into dist/ (cli/standalone.ts): it imports no compiler code.
import { ExitCode } from '../exit-codes.js'
import { BUNDLE_FLAG, portNumber, processIO, readCommandArgs, type CommandIO, type CommandSpec } from '../flags.js'
import { storeFlagOk } from '../history.js'
import { startService } from '../../runtime/serve/service.js'
import { batchedStdout, logLine } from '../log-output.js'

export const spec: CommandSpec = {
  name: 'serve',
  args: '',
  summary: 'serve a compiled bundle (SIGHUP or a changed bundle reloads, SIGTERM drains and exits 0)',
  flags: [
    BUNDLE_FLAG,
    { name: 'host', value: 'HOST', description: 'the address to listen on (default: server.host, else 127.0.0.1)' },
    { name: 'port', value: 'PORT', description: 'the port to listen on, 0 for a free one (default: server.port, else 8787)' },
    { name: 'state', value: 'DIR', description: 'the state directory: run history, sessions, lock (default: server.stateDir, else .hookgate)' },
    { name: 'store', value: 'URL', description: 'keep runs and sessions in PostgreSQL (postgres://…), which several runtimes may share, instead of the state directory (default: server.store in the bundle; the flag wins over it)' },
    { name: 'grace-seconds', value: 'N', default: '10', description: 'on SIGTERM, how long requests and running turns get to finish' },
    { name: 'log-bodies', description: 'log the first 2 KiB of each body (debugging only: bodies can carry secrets)' },
    { name: 'no-fsync', description: 'skip the store\'s fdatasync (benchmarks only: gives up durability)' },
  ],
}

/** Runs until SIGTERM or SIGINT, then drains and exits 0; SIGHUP reloads the bundle. */
export async function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const values = parsed.values as { bundle: string; host?: string; port?: string; state?: string; store?: string; 'grace-seconds': string; 'no-fsync'?: boolean; 'log-bodies'?: boolean }
  const port = values.port === undefined ? undefined : portNumber(values.port)
  if (values.port !== undefined && port === undefined) {
    io.stderr(`hookgate serve: --port takes a number from 0 to 65535\n`)
    return ExitCode.usage
  }
  if (!storeFlagOk('serve', values.store, io, 'the file store is the default and needs no flag')) return ExitCode.usage
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
      writeFaults: (line) => io.stderr(line + '\n'),
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
    io.stderr(logLine('error', `hookgate serve: cannot start: ${reason}`))
    // Promptly, whatever a half-started bundle may have left running (stderr to a pipe or file is
    // written synchronously, so the line above is out).
    process.exit(ExitCode.refused)
  }
  process.on('SIGHUP', () => void service.reload())
  await new Promise<void>((resolveStop) => {
    onStop = (signal: string) => {
      // out before the listener closes: from this line on, new connections are refused
      out.write(logLine('info', `${signal}: draining and stopping`).trimEnd())
      out.flush()
      service.close().finally(out.flush).then(resolveStop, resolveStop)
    }
    if (stopAsked) onStop(stopAsked)
  })
  return ExitCode.ok
}
