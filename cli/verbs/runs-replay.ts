// `hookgate runs replay RUN_ID [--payload FILE] [--state DIR | --store URL] [--url URL] [--token-file FILE]`: sends
// a past run's stored request (the request its mapping saw, secret headers left out) to the running
// server again, with the hook token and `x-hookgate-replay-of: RUN_ID`. The server runs it through
// the bundle it serves now, as a new run with `replayOf` set, accepted durably like any request; a
// signed mapping takes it on the token, since the sender's signature headers were never stored.
// This command only reads the history: the server alone writes it.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ExitCode } from '../exit-codes.js'
import { DEFAULT_STATE_DIR, HISTORY_FLAGS, processIO, readCommandArgs, usageLine, type CommandIO, type CommandSpec, type VerbContext } from '../flags.js'
import { historyAt, printable, readHistory, storeFlagOk } from '../history.js'
import { GENERATED_TOKEN_FILE } from '../../runtime/bundle/secrets.js'

export const spec: CommandSpec = {
  name: 'runs replay',
  args: 'RUN_ID',
  summary: 'send a past run\'s stored request again, through the running server and its current bundle, as a new run',
  flags: [
    { name: 'payload', value: 'FILE', description: 'a JSON body to send instead of the stored payload' },
    ...HISTORY_FLAGS,
    { name: 'url', value: 'URL', default: 'http://127.0.0.1:8787', description: 'the running server' },
    { name: 'token-file', value: 'FILE', description: 'a file holding the hook token (default: $HOOKGATE_TOKEN, else <state>/token)' },
  ],
  notes: [
    'the new run has replayOf set to RUN_ID; secret headers were stored redacted and are not sent;',
    'a signed mapping takes the replay on the hook token (its signature is not checked again)',
    'exit 0 when the server accepted it (2xx), 1 when it refused it or the run has no stored request, 2 usage error',
  ],
}

export const RUNS_REPLAY_USAGE = usageLine(spec)

/** Headers never sent again: the transport's own, the ones the replay sets itself, and a stored Idempotency-Key (the replay would be answered as the original). */
const NOT_REPLAYED = new Set([
  'host', 'content-length', 'content-type', 'transfer-encoding', 'connection', 'keep-alive', 'expect', 'upgrade', 'te', 'trailer',
  'authorization', 'x-hookgate-token', 'x-hookgate-replay-of', 'idempotency-key', 'x-correlation-id',
])


export async function run(argv: string[], io: CommandIO = processIO, context: VerbContext & { stateDir?: string } = {}): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const values = parsed.values as { payload?: string; state?: string; store?: string; url: string; 'token-file'?: string }
  const usage = (why: string): number => {
    io.stderr(`hookgate runs replay: ${why}\n${RUNS_REPLAY_USAGE}\n`)
    return ExitCode.usage
  }
  if (parsed.positionals.length !== 1 || parsed.positionals[0] === '') return usage('name one run id')
  if (!storeFlagOk('runs replay', values.store, io)) return ExitCode.usage
  const id = parsed.positionals[0]!
  const stateDir = values.state || context.stateDir || DEFAULT_STATE_DIR
  let server: URL
  try {
    server = new URL(values.url)
    if (server.protocol !== 'http:' && server.protocol !== 'https:') throw new Error('not http')
  } catch {
    return usage(`--url takes the server's http:// or https:// address, not "${values.url}"`)
  }

  let payload: unknown
  let hasPayload = false
  if (values.payload !== undefined) {
    try {
      const text = readFileSync(values.payload, 'utf8')
      payload = text.trim() === '' ? {} : JSON.parse(text)
      hasPayload = true
    } catch (err) {
      const e = err as NodeJS.ErrnoException
      return usage(e.code ? `cannot read ${values.payload}: ${e.code}` : `${values.payload} is not valid JSON: ${e.message}`)
    }
  }
  const token = await readToken(values['token-file'], context.env ?? process.env, stateDir)
  if ('error' in token) return usage(token.error)

  const reader = historyAt(stateDir, values.store)
  let received: Awaited<ReturnType<typeof reader.received>>
  try {
    const history = await readHistory('runs replay', reader, io)
    if (!history) return ExitCode.refused
    const row = history.rows.find((r) => r.id === id)
    if (!row) {
      io.stderr(`hookgate runs replay: no run with id ${printable(id)} in ${reader.where}\n`)
      return ExitCode.refused
    }
    received = await reader.received(row)
  } finally {
    // a database reader holds a connection that would keep the process alive
    await reader.close().catch(() => {})
  }
  if (!received) {
    io.stderr(`hookgate runs replay: run ${id} has no stored request to send again (only mapped runs recorded by this version keep one, and a compaction may have dropped an old run's)\n`)
    return ExitCode.refused
  }

  const target = new URL(received.path, server)
  for (const [k, v] of Object.entries(received.query)) target.searchParams.append(k, v)
  const headers: Record<string, string> = {}
  for (const [k, v] of Object.entries(received.headers)) {
    // a secret was stored as [redacted]: the replay goes without it
    if (!NOT_REPLAYED.has(k) && v !== '[redacted]') headers[k] = v
  }
  headers['content-type'] = 'application/json'
  headers.authorization = `Bearer ${token.value}`
  headers['x-hookgate-replay-of'] = id

  let status: number
  let text: string
  try {
    const response = await fetch(target, { method: 'POST', headers, body: JSON.stringify(hasPayload ? payload : received.payload), redirect: 'manual', signal: AbortSignal.timeout(30_000) })
    status = response.status
    text = await response.text()
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause
    io.stderr(`hookgate runs replay: cannot reach the server at ${server.origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}\n`)
    return ExitCode.refused
  }
  if (text !== '') io.stdout(text.endsWith('\n') ? text : `${text}\n`)
  let answer: { runId?: unknown; code?: unknown; error?: unknown } = {}
  try { answer = text === '' ? {} : JSON.parse(text) } catch { /* shown above as it came */ }
  if (status >= 200 && status < 300) {
    io.stderr(typeof answer.runId === 'string' ? `replayed run ${id} as run ${answer.runId} (${status})\n` : `replayed run ${id}: the server answered ${status}\n`)
    return ExitCode.ok
  }
  io.stderr(`hookgate runs replay: the server refused the replay of run ${id}: ${status}${typeof answer.code === 'string' ? ` ${printable(answer.code)}` : ''}\n`)
  return ExitCode.refused
}

/** The hook token: --token-file, else $HOOKGATE_TOKEN, else the one the server generated into the state directory. */
async function readToken(file: string | undefined, env: NodeJS.ProcessEnv, stateDir: string): Promise<{ value: string } | { error: string }> {
  const from = (path: string, missing: string): { value: string } | { error: string } => {
    let text: string
    try {
      text = readFileSync(path, 'utf8').trim()
    } catch (err) {
      return { error: `${missing} (${(err as NodeJS.ErrnoException).code ?? 'unreadable'}: ${path})` }
    }
    return text === '' ? { error: `${path} is empty` } : { value: text }
  }
  if (file !== undefined) return from(file, 'cannot read --token-file')
  if (env.HOOKGATE_TOKEN) return { value: env.HOOKGATE_TOKEN }
  return from(join(stateDir, GENERATED_TOKEN_FILE), 'no hook token: pass --token-file FILE or set HOOKGATE_TOKEN (none was generated into the state directory)')
}
