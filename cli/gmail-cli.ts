// `hookgate webhooks gmail login|setup|run`: the Gmail helper's commands. They live beside the
// runtime, not in it: they talk to Google on the operator's behalf and reach hookgate only over
// HTTP (the hook URL), so a host that takes no mail never loads any of this.
import { processIO, readCommandArgs } from './commands.js'
import { googleBases, parseOAuthClient } from '../gmail/google.js'
import { HelperConfigError, loadHelperConfig } from '../gmail/config.js'
import { loopbackLogin, storeRefreshToken } from '../gmail/credentials.js'
import { readFileSync } from 'node:fs'

export const EXIT = { ok: 0, refused: 1, usage: 2 } as const

export interface CommandIO { stdout(text: string): void; stderr(text: string): void }

export async function main(command: string, argv: string[], io: CommandIO = processIO): Promise<number> {
  try {
    if (command === 'webhooks gmail login') return await loginCommand(argv, io)
    if (command === 'webhooks gmail setup') return await (await import('../gmail/setup.js')).setupCommand(argv, io)
    if (command === 'webhooks gmail run') return await (await import('../gmail/run.js')).runCommand(argv, io)
  } catch (err) {
    // Config and Google refusals are sentences meant for the operator; anything else is a bug, told without a stack.
    io.stderr(`hookgate ${command}: ${(err as Error).message}\n`)
    return EXIT.refused
  }
  io.stderr(`hookgate ${command}: not available in this build yet\n`)
  return EXIT.usage
}

async function loginCommand(argv: string[], io: CommandIO): Promise<number> {
  const parsed = readCommandArgs('webhooks gmail login', argv, io)
  if (parsed.kind !== 'ok') return parsed.exit!
  const v = parsed.values as { client: string; account?: string; config: string; state?: string; 'timeout-seconds': string }
  const timeout = Number(v['timeout-seconds'])
  if (!Number.isFinite(timeout) || timeout <= 0) {
    io.stderr('hookgate webhooks gmail login: --timeout-seconds takes a positive number\n')
    return EXIT.usage
  }
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
  return EXIT.ok
}
