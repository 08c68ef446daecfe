// Secrets as hooks.yaml writes them (${ENV}, { env }, { file }, { generate: true }) turned into the
// references the runtime resolves at start (runtime/bundle/secrets.ts); a secret written into the
// file is an error, except the hook token, whose literal reaches the bundle only as its SHA-256.
import { createHash } from 'node:crypto'
import type { DiagnosticBag } from './diagnostics.js'
import type { LoadedConfig, PathSegment } from './load.js'
import type { SecretRefConfig, TokenRefConfig } from './schema.js'
import type { SecretSpec } from '../runtime/bundle/format.js'

/** `${NAME}`, the one form of an environment reference written as a string. */
export const ENV_REF = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/

export function resolveToken(ref: TokenRefConfig, path: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag): SecretSpec | undefined {
  if (typeof ref === 'object' && 'generate' in ref) return { kind: 'generate' }
  if (typeof ref === 'string' && !ENV_REF.test(ref) && !ref.includes('${')) {
    const where = loaded.locate(path)
    bag.warning('TOKEN_LITERAL', 'hooks.token is written in the file; anyone who can read the repo can call the hooks', where, 'use token: ${HOOKGATE_TOKEN} or token: { file: /run/secrets/hook-token }; only a SHA-256 of the literal reaches the bundle')
    if (ref.length < 24) bag.warning('TOKEN_SHORT', `hooks.token has ${ref.length} characters; use at least 24 random ones`, where, 'e.g. openssl rand -hex 24')
    return { kind: 'digest', sha256: createHash('sha256').update(ref).digest('hex') }
  }
  return resolveSecret(ref, path, loaded, bag)
}

/** `variable`: the environment variable the hint names for this secret (by default one named after its key). */
export function resolveSecret(ref: SecretRefConfig | { generate: true }, path: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag, variable = envNameOf(String(path[path.length - 1]))): SecretSpec | undefined {
  if (typeof ref === 'object') {
    if ('env' in ref) return { kind: 'env', name: ref.env }
    // Only where the schema allows it (a signing secret): made in the state directory at start.
    if ('generate' in ref) return { kind: 'generate' }
    return { kind: 'file', path: ref.file }
  }
  const m = ENV_REF.exec(ref)
  if (m) return { kind: 'env', name: m[1]! }
  if (ref.includes('${')) {
    bag.error('SECRET_REF_INVALID', `"${ref}" is not a secret reference: write \${NAME} with letters, digits and _ only, and nothing around it`, loaded.locate(path))
    return undefined
  }
  bag.error('SECRET_LITERAL', `${path.join('.')} must be a reference, not the secret itself`, loaded.locate(path), `write ${String(path[path.length - 1])}: \${${variable}} (or { file: path })`)
  return undefined
}

/** `pushToken` → `PUSH_TOKEN`, `ops-box` → `OPS_BOX`: an environment variable name for a hint. */
export function envNameOf(words: string): string {
  const name = words.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/[^A-Za-z0-9]+/g, '_').replace(/^_+|_+$/g, '').toUpperCase()
  return /^[A-Z_]/.test(name) ? name : `_${name}`
}
