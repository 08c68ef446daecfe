// Everything a bundle needs before it can serve, built once per load (the first and every reload):
// secrets resolved (a missing one is an error naming the reference; signing secrets and http
// steps' secret headers included), model providers and channels created, the transform pool.
import { randomBytes } from 'node:crypto'
import type { TransformInput } from '../bundle/format.js'
import type { LoadedBundle } from '../bundle/load.js'
import { resolveSecretValue, resolveToken } from '../bundle/secrets.js'
import type { EngineWiring } from '../agents/engine.js'
import { createModelRegistry } from '../agents/models.js'
import { createChannels } from '../channels/index.js'
import { AddressMatcher, TokenCheck } from '../http/auth.js'
import type { Serving } from '../http/exchange.js'
import { prepareSignatures } from '../http/signatures.js'
import { TransformPool } from '../transforms/pool.js'

/** A bundle ready to serve: what the handler reads, the transform pool, and what the engine is wired with. */
export type Prepared = Serving & { pool: TransformPool | null; wiring: EngineWiring }

export interface PrepareHooks {
  /** a hook token was generated: where it is saved, and the token (said once, at the first start) */
  generatedToken?(token: string, where: string): void
  /** a mapping's signing secret was generated: where it is saved (shared with the sender by hand) */
  generatedSecret?(routeId: string, file: string): void
  /** a transform pool whose modules do not load within this is abandoned (a reload's deadline) */
  startDeadlineMs?: number
}

export function prepare(bundle: LoadedBundle, stateDir: string, hooks: PrepareHooks = {}): Prepared {
  const wiring: EngineWiring = {
    models: createModelRegistry(bundle.config.providers ?? [], bundle.configDir),
    channels: createChannels(bundle.config.channels ?? [], bundle.configDir),
    routes: [...bundle.routeTable.values()].flat(),
  }
  // With hooks disabled and no token, no presented token can match a random digest.
  const token = bundle.config.token === null && !bundle.config.enabled
    ? { digest: randomBytes(32), describe: 'none' }
    : resolveToken(bundle.config.token, bundle.configDir, stateDir)
  if (token.generated) hooks.generatedToken?.(token.generated, token.describe)
  const signatures = bundle.signed ? prepareSignatures(bundle.routeTable.values(), bundle.configDir, stateDir, (routeId, file) => hooks.generatedSecret?.(routeId, file)) : new Map()
  const pool = TransformPool.forBundle(bundle, hooks.startDeadlineMs !== undefined ? { startDeadlineMs: hooks.startDeadlineMs } : {})
  wiring.transforms = pool && ((caller, input) => pool.run(caller, input as unknown as TransformInput))
  wiring.stepSecrets = resolveStepSecrets(bundle)
  return {
    bundle,
    token: new TokenCheck(token.digest, 'value' in token ? token.value : undefined),
    trusted: new AddressMatcher(bundle.config.server.trustedProxies),
    signatures,
    transforms: pool && ((route, input) => pool.run(route, input)),
    pool,
    wiring,
  }
}

/** http steps' secret headers, read once per load like every other secret (a missing one fails the load, naming it). */
function resolveStepSecrets(bundle: LoadedBundle): Map<string, Record<string, string>> {
  const out = new Map<string, Record<string, string>>()
  for (const wf of bundle.workflows.values()) {
    for (const step of wf.steps) {
      const specs = Object.entries(step.secretHeaders ?? {})
      if (specs.length === 0) continue
      const values: Record<string, string> = {}
      for (const [name, spec] of specs) values[name] = resolveSecretValue(spec, bundle.configDir)
      out.set(`${wf.id}\0${step.id}`, values)
    }
  }
  return out
}
