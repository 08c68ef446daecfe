// The admin token, and the hook token it must never equal. The admin token comes from
// HOOKGATE_ADMIN_TOKEN or is generated into <state>/admin-token (mode 0600) on first start and
// printed once. A page that accepted the hook token would hand every webhook sender the control
// plane, so an admin token equal to the hook token is refused at start.
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { GENERATED_TOKEN_FILE, generatedSecret, resolveSecretValue, tokenDigest } from '../runtime/bundle/secrets.js'
import type { SecretSpec } from '../runtime/bundle/format.js'

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

/**
 * A secret reference as hooks.yaml writes it (`${ENV}`, { env }, { file }, { generate: true }, or
 * a literal string) in the runtime's own terms, so that it is read as the runtime reads it.
 */
export function secretSpecOf(ref: unknown): SecretSpec | undefined {
  if (typeof ref === 'string') {
    const m = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(ref.trim())
    return m ? { kind: 'env', name: m[1]! } : { kind: 'value', value: ref }
  }
  if (typeof ref !== 'object' || ref === null) return undefined
  const r = ref as { env?: unknown; file?: unknown; generate?: unknown }
  if (typeof r.env === 'string') return { kind: 'env', name: r.env }
  if (typeof r.file === 'string') return { kind: 'file', path: r.file }
  if (r.generate === true) return { kind: 'generate' }
  return undefined
}

/** The hook token hooks.token names, when it can be read here (a generated one that does not exist yet cannot clash). */
export function hookTokenValue(ref: unknown, configDir: string, stateDir: string): string | undefined {
  const spec = secretSpecOf(ref)
  if (spec === undefined) return undefined
  if (spec.kind === 'generate') {
    const file = join(stateDir, GENERATED_TOKEN_FILE)
    return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined
  }
  try {
    return resolveSecretValue(spec, configDir)
  } catch {
    return undefined
  }
}

export function sameToken(digest: Buffer, value: string | undefined): boolean {
  return value !== undefined && value !== '' && timingSafeEqual(tokenDigest(value), digest)
}
