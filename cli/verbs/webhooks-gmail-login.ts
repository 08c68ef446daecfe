// `hookgate webhooks gmail login`: Google's sign-in in a browser, for the Gmail helper to read a
// mailbox; the refresh token is kept in <state>/gmail (gmail/credentials.ts), never printed.
import { readFileSync } from 'node:fs'
import { ExitCode } from '../exit-codes.js'
import { GMAIL_FLAGS, processIO, readCommandArgs, sayingRefusals, type CommandIO, type CommandSpec } from '../flags.js'

export const spec: CommandSpec = {
  name: 'webhooks gmail login',
  args: '',
  summary: 'let hookgate read a Gmail mailbox: Google\'s sign-in in a browser, the refresh token kept in the state directory',
  flags: [
    { name: 'client', value: 'FILE', required: true, description: 'the OAuth client file (Google Cloud console: APIs & Services → Credentials → OAuth client ID, type Desktop app → Download JSON)' },
    { name: 'account', value: 'EMAIL', description: 'the mailbox to sign in as (default: hooks.gmail.account)' },
    ...GMAIL_FLAGS,
    { name: 'timeout-seconds', value: 'N', default: '300', description: 'how long to wait for the browser' },
  ],
  notes: [
    'prints a URL to open; after the consent, Google redirects to a listener on 127.0.0.1 and the refresh token',
    'is saved in <state>/gmail/refresh-token.json (mode 0600). It is never printed or logged',
  ],
}

export async function run(argv: string[], io: CommandIO = processIO): Promise<number> {
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const v = parsed.values as { client: string; account?: string; config: string; state?: string; 'timeout-seconds': string }
  const timeout = Number(v['timeout-seconds'])
  if (!Number.isFinite(timeout) || timeout <= 0) {
    io.stderr('hookgate webhooks gmail login: --timeout-seconds takes a positive number\n')
    return ExitCode.usage
  }
  return sayingRefusals(spec, io, () => login(v, timeout, io))
}

async function login(v: { client: string; account?: string; config: string; state?: string }, timeout: number, io: CommandIO): Promise<number> {
  const { HelperConfigError, loadHelperConfig } = await import('../../gmail/config.js')
  const { googleBases, parseOAuthClient } = await import('../../gmail/google.js')
  const { loopbackLogin, storeRefreshToken } = await import('../../gmail/credentials.js')
  const config = loadHelperConfig(v.config, v.state)
  const account = v.account ?? config.gmail.account
  if (!account) throw new HelperConfigError('name the mailbox: --account EMAIL (or set hooks.gmail.account)')
  let clientText: string
  try {
    clientText = readFileSync(v.client, 'utf8')
  } catch (err) {
    throw new HelperConfigError(`cannot read ${v.client} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  const client = parseOAuthClient(clientText, v.client)
  const bases = googleBases()
  const { refreshToken, scope } = await loopbackLogin({
    client,
    account,
    bases,
    timeoutMs: timeout * 1000,
    show: (url) => io.stdout(`Open this URL in a browser, sign in as ${account} and allow hookgate to read mail:\n\n  ${url}\n\nWaiting for Google's answer on 127.0.0.1 …\n`),
  })
  const file = storeRefreshToken(config.helperDir, { mailbox: account, client_id: client.client_id, refresh_token: refreshToken, ...(scope ? { scope } : {}), createdAt: new Date().toISOString() })
  io.stdout(`signed in: the refresh token for ${account} is saved in ${file} (mode 0600).\nnext: hookgate webhooks gmail setup --account ${account} --oauth-client ${v.client} --pubsub-key FILE --project ID --push-endpoint URL\n`)
  return ExitCode.ok
}
