// The two principals Google requires, built from hooks.gmail.credentials: one that may administer
// Pub/Sub in the project (a service-account key file), and one that may read the mailbox (an OAuth
// client plus the refresh token `hookgate webhooks gmail login` stored in <state>/gmail, or a
// service account with domain-wide delegation acting as `subject`). And the login itself: Google's
// installed-app loopback flow with PKCE, the redirect caught on 127.0.0.1.
import { createHash, randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { GoogleError, SCOPES, parseOAuthClient, parseServiceAccountKey, refreshTokens, serviceAccountTokens, tokenGrant, type GoogleBases, type OAuthClient, type TokenSource } from './google.js'
import { HelperConfigError, REFRESH_TOKEN_FILE, readJsonFile, readRef, writeSecretFile, type HelperConfig, type Ref } from './config.js'

export interface StoredRefreshToken { mailbox: string; client_id: string; refresh_token: string; scope?: string; createdAt: string }

export function pubsubTokens(config: HelperConfig, bases: GoogleBases): TokenSource {
  const ref = config.gmail.credentials.pubsub
  if (!ref) throw new HelperConfigError('hooks.gmail.credentials.pubsub is not set: give setup --pubsub-key FILE (a service-account key that may administer Pub/Sub in the project)')
  const key = parseServiceAccountKey(readRef(ref, config.dir, 'hooks.gmail.credentials.pubsub'), describe(ref))
  return serviceAccountTokens(key, [SCOPES.pubsub], bases)
}

export function mailboxTokens(config: HelperConfig, bases: GoogleBases): TokenSource {
  const g = config.gmail.credentials.gmail
  const account = config.gmail.account
  if (!account) throw new HelperConfigError('hooks.gmail.account is not set: give setup --account EMAIL')
  if (g?.serviceAccount) {
    const key = parseServiceAccountKey(readRef(g.serviceAccount, config.dir, 'hooks.gmail.credentials.gmail.serviceAccount'), describe(g.serviceAccount))
    return serviceAccountTokens(key, [SCOPES.gmailRead], bases, { subject: g.subject ?? account })
  }
  if (g?.oauthClient) {
    const client = parseOAuthClient(readRef(g.oauthClient, config.dir, 'hooks.gmail.credentials.gmail.oauthClient'), describe(g.oauthClient))
    const stored = readJsonFile<StoredRefreshToken>(join(config.helperDir, REFRESH_TOKEN_FILE))
    if (!stored || stored.mailbox.toLowerCase() !== account.toLowerCase() || stored.client_id !== client.client_id) {
      throw new HelperConfigError(`no refresh token for ${account} with this OAuth client in ${join(config.helperDir, REFRESH_TOKEN_FILE)}: run \`hookgate webhooks gmail login --client FILE --account ${account}\` first`)
    }
    return refreshTokens(client, stored.refresh_token, account, bases)
  }
  throw new HelperConfigError('hooks.gmail.credentials.gmail is not set: give setup --oauth-client FILE (then run login) or --gmail-key FILE --subject EMAIL (domain-wide delegation)')
}

function describe(ref: Ref): string {
  return typeof ref === 'string' ? ref : 'file' in ref ? ref.file : `$${ref.env}`
}

export interface LoginOptions {
  client: OAuthClient
  /** the mailbox the consent is expected for (login_hint) */
  account?: string
  bases: GoogleBases
  /** told the URL to open in a browser */
  show(url: string): void
  timeoutMs?: number
}

/**
 * Google's installed-app flow: a loopback listener on 127.0.0.1, a consent URL with PKCE (S256)
 * and a state nonce, the code from the redirect exchanged for a refresh token.
 */
export async function loopbackLogin(options: LoginOptions): Promise<{ refreshToken: string; scope?: string }> {
  const verifier = randomBytes(32).toString('base64url')
  const challenge = createHash('sha256').update(verifier).digest('base64url')
  const state = randomBytes(16).toString('base64url')
  let settle!: (v: { code: string } | { error: string }) => void
  const result = new Promise<{ code: string } | { error: string }>((r) => { settle = r })
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1')
    if (url.pathname !== '/') { res.writeHead(404).end(); return }
    const error = url.searchParams.get('error')
    const code = url.searchParams.get('code')
    if (url.searchParams.get('state') !== state) {
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end('This sign-in answer does not belong to the login that is waiting; start it again.\n')
      return
    }
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(error ? `Google said: ${error}. You can close this tab.\n` : 'hookgate has the Gmail consent. You can close this tab.\n')
    settle(error ? { error } : code ? { code } : { error: 'no code in the redirect' })
  })
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok))
  const redirectUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const q = new URLSearchParams({
    client_id: options.client.client_id,
    redirect_uri: redirectUri,
    response_type: 'code',
    scope: SCOPES.gmailRead,
    access_type: 'offline',
    prompt: 'consent',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
    ...(options.account ? { login_hint: options.account } : {}),
  })
  options.show(`${options.bases.authUrl}?${q}`)
  const timer = setTimeout(() => settle({ error: 'no answer from the browser within the time allowed' }), options.timeoutMs ?? 300_000)
  try {
    const answer = await result
    if ('error' in answer) throw new GoogleError(0, 'consent_refused', `the login did not complete: ${answer.error}`)
    const grant = await tokenGrant(options.bases.tokenUrl, {
      grant_type: 'authorization_code',
      code: answer.code,
      client_id: options.client.client_id,
      client_secret: options.client.client_secret,
      redirect_uri: redirectUri,
      code_verifier: verifier,
    }, options.account ?? 'the mailbox')
    if (!grant.refreshToken) throw new GoogleError(0, 'no_refresh_token', 'Google gave no refresh token (revoke hookgate\'s access at myaccount.google.com/permissions and log in again)')
    return { refreshToken: grant.refreshToken, ...(grant.scope ? { scope: grant.scope } : {}) }
  } finally {
    clearTimeout(timer)
    server.closeAllConnections()
    server.close()
  }
}

export function storeRefreshToken(helperDir: string, value: StoredRefreshToken): string {
  const file = join(helperDir, REFRESH_TOKEN_FILE)
  writeSecretFile(file, JSON.stringify(value, null, 2) + '\n')
  return file
}
