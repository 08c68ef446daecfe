// `hookgate admin`: serves the operator page (admin/server.ts) until SIGTERM or SIGINT: the
// Agents, their Tasks and Webhook Triggers, and the run history, behind an admin token that must
// not be the hook token.
import { dirname, resolve } from 'node:path'
import { ExitCode } from '../exit-codes.js'
import { portNumber, processIO, readCommandArgs, usageLine, type CommandIO, type CommandSpec } from '../flags.js'
import { storeFlagOk } from '../history.js'
import { readConfig } from '../definitions.js'
import { storeUrlOf } from '../../runtime/store/open.js'
import { logLine } from '../log-output.js'

export const spec: CommandSpec = {
  name: 'admin',
  args: '',
  summary: 'serve the operator page: Agents, their Tasks and Webhook Triggers, run history',
  flags: [
    { name: 'config', value: 'FILE', default: 'hooks.yaml', description: 'the config the page edits (the source of truth: saves write it, then recompile)' },
    { name: 'out', value: 'DIR', default: 'dist', description: 'where a save writes the recompiled bundle (the folder `hookgate serve --bundle` reads and watches)' },
    { name: 'state', value: 'DIR', description: 'the runtime\'s state directory: run history, the runtime\'s address, tokens (default: server.stateDir, else .hookgate beside the config)' },
    { name: 'store', value: 'URL', description: 'show the run history of a PostgreSQL store (postgres://…) instead of the state directory\'s (default: server.store in the config)' },
    { name: 'host', value: 'HOST', default: '127.0.0.1', description: 'the address to listen on (loopback by default: the page edits the config)' },
    { name: 'port', value: 'PORT', default: '8790', description: 'the port to listen on, 0 for a free one' },
    { name: 'public-url', value: 'URL', description: 'the runtime\'s public URL, for the endpoint URLs the page shows (default: the address the runtime listens on)' },
  ],
  notes: [
    'the admin token is $HOOKGATE_ADMIN_TOKEN, else one generated into <state>/admin-token (mode 0600) and printed once;',
    'it must differ from the hook token. The page sends it as a header; nothing is kept in cookies',
  ],
}

export async function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const v = parsed.values as { config: string; out: string; state?: string; store?: string; host: string; port: string; 'public-url'?: string }
  if (!storeFlagOk('admin', v.store, io)) return ExitCode.usage
  const port = portNumber(v.port)
  if (port === undefined) {
    io.stderr(`hookgate admin: --port takes a number from 0 to 65535\n${usageLine(spec)}\n`)
    return ExitCode.usage
  }
  if (v['public-url'] !== undefined && !/^https?:\/\/[^\s/]+/.test(v['public-url'])) {
    io.stderr(`hookgate admin: --public-url takes an http(s) URL, e.g. https://hooks.example.com\n`)
    return ExitCode.usage
  }
  const read = await readConfig('admin', v.config, io)
  if (!read) return ExitCode.refused
  const { displayPath, stateDirOf } = await import('../../admin/endpoints.js')
  const { adminToken, hookTokenValue, sameToken } = await import('../../admin/tokens.js')
  const stateDir = stateDirOf(v.config, read.value, v.state)
  let token
  try {
    token = adminToken(stateDir)
  } catch (err) {
    io.stderr(logLine('error', `hookgate admin: cannot start: ${(err as Error).message}`))
    return ExitCode.refused
  }
  if (sameToken(token.digest, hookTokenValue(read.value.hooks?.token, dirname(resolve(v.config)), stateDir))) {
    io.stderr(logLine('error', `hookgate admin: cannot start: the admin token (${token.describe}) is the hook token; every webhook sender would hold the control plane. Give the page a token of its own`))
    return ExitCode.refused
  }
  // --store wins; else the database the runtime of this config writes to. One that cannot be named
  // here stops the page rather than show the state directory's history, which would be the wrong one.
  let store = v.store
  try {
    store ??= await configuredStore(read.value, v.config)
  } catch (err) {
    io.stderr(logLine('error', `hookgate admin: cannot start: ${(err as Error).message} (or name the store with --store URL)`))
    return ExitCode.refused
  }
  const { startAdmin } = await import('../../admin/server.js')
  let admin
  try {
    admin = await startAdmin({ config: v.config, outDir: v.out, stateDir, host: v.host, port, token, ...(v['public-url'] ? { publicUrl: v['public-url'] } : {}), ...(store !== undefined ? { store } : {}), log: (line) => io.stdout(line + '\n') })
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    io.stderr(logLine('error', `hookgate admin: cannot start: ${e.code === 'EADDRINUSE' ? `the address is already in use (${v.host}:${port})` : e.message}`))
    return ExitCode.refused
  }
  // Listening for SIGTERM before saying it is up: a stop sent as soon as the line is read must
  // close the page, not kill the process (a race a test hit).
  const stopped = new Promise<void>((done) => {
    const stop = () => { admin.close().then(done, done) }
    process.once('SIGTERM', stop)
    process.once('SIGINT', stop)
  })
  // log lines, as serve's: the token line has the shape of serve's generated hook token line
  if (token.generated) io.stdout(logLine('info', `generated an admin token (saved in ${displayPath(token.describe)}, mode 0600; it is printed only this once)`, { token: token.generated }))
  const shownToken = token.describe.startsWith('$') ? token.describe : displayPath(token.describe)
  io.stdout(logLine('info', `hookgate admin on ${admin.url}/ (config ${displayPath(resolve(v.config))}, bundle ${v.out}, state ${displayPath(stateDir)}, admin token ${shownToken})`, { url: `${admin.url}/`, config: resolve(v.config), bundle: v.out, state: stateDir, adminToken: shownToken }))
  await stopped
  return ExitCode.ok
}

/** The PostgreSQL URL server.store names, read as the runtime reads it; undefined for the file store. */
async function configuredStore(value: Record<string, any>, configFile: string): Promise<string | undefined> {
  const ref: unknown = value.server?.store
  if (ref === undefined) return undefined
  const { secretSpecOf } = await import('../../admin/tokens.js')
  const url = secretSpecOf(typeof ref === 'object' && ref !== null && 'url' in ref ? (ref as { url: unknown }).url : ref)
  if (url === undefined) throw new Error('server.store is not a reference (${HOOKGATE_STORE_URL}, { env }, { file }); hookgate compile says why')
  return storeUrlOf({ url }, dirname(resolve(configFile)))
}
