// The admin token, and the hook token it must never equal. The admin token comes from
// HOOKGATE_ADMIN_TOKEN or is generated into <state>/admin-token (mode 0600) on first start and
// printed once. A page that accepted the hook token would hand every webhook sender the control
// plane, so an admin token equal to the hook token is refused at start.
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { isAbsolute, join, resolve } from 'node:path'
import { GENERATED_TOKEN_FILE, generatedSecret } from '../runtime/secrets.js'
import { tokenDigest } from '../runtime/http/auth.js'

export const ADMIN_TOKEN_ENV = 'HOOKGATE_ADMIN_TOKEN'
export const ADMIN_TOKEN_FILE = 'admin-token'

export class AdminTokenError extends Error {
  override name = 'AdminTokenError'
}

export interface AdminToken {
  digest: Buffer
  /** where it comes from, for the start-up line (never the value) */
  describe: string
  /** set only when this start generated it, to print once */
  generated?: string
}

export function adminToken(stateDir: string, env: NodeJS.ProcessEnv = process.env): AdminToken {
  const fromEnv = env[ADMIN_TOKEN_ENV]
  if (fromEnv !== undefined && fromEnv.trim() !== '') {
    if (fromEnv.trim().length < 16) throw new AdminTokenError(`${ADMIN_TOKEN_ENV} is shorter than 16 characters; use a long random value (openssl rand -base64 24)`)
    return { digest: tokenDigest(fromEnv.trim()), describe: `$${ADMIN_TOKEN_ENV}` }
  }
  const file = join(stateDir, ADMIN_TOKEN_FILE)
  const { value, generated } = generatedSecret(file, () => randomBytes(24).toString('base64url'), 'admin token')
  return { digest: tokenDigest(value), describe: file, ...(generated ? { generated: value } : {}) }
}

/** The hook token hooks.token names, when it can be read here (a generated one that does not exist yet cannot clash). */
export function hookTokenValue(ref: unknown, configDir: string, stateDir: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (typeof ref === 'string') {
    const m = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(ref.trim())
    return m ? env[m[1]!] : ref
  }
  if (typeof ref !== 'object' || ref === null) return undefined
  const r = ref as { env?: unknown; file?: unknown; generate?: unknown }
  const read = (path: string) => {
    try { return readFileSync(path, 'utf8').trim() } catch { return undefined }
  }
  if (typeof r.env === 'string') return env[r.env]
  if (typeof r.file === 'string') return read(isAbsolute(r.file) ? r.file : resolve(configDir, r.file))
  if (r.generate === true) {
    const file = join(stateDir, GENERATED_TOKEN_FILE)
    return existsSync(file) ? read(file) : undefined
  }
  return undefined
}

export function sameToken(digest: Buffer, value: string | undefined): boolean {
  return value !== undefined && value !== '' && timingSafeEqual(tokenDigest(value), digest)
}
