// GET /healthz (and HEAD): whether the service can do its work, without a token. 200 with the
// bundle it serves, or 503 "degraded" with the reasons (the store cannot write, a reload failed,
// the backlog is full: the service says which) and Retry-After.
import type { ServerResponse } from 'node:http'
import type { BundleManifest } from '../bundle/format.js'
import { sendJson } from '../http/errors.js'
import type { DirectEndpoint, ServiceFacts } from './endpoint.js'

const RETRY_AFTER = { 'retry-after': '5' }

export const healthz: DirectEndpoint = {
  kind: 'healthz',
  path: '/healthz',
  label: 'healthz',
  methods: ['GET', 'HEAD'],
  // another method: nothing is served at /healthz for it
  allow: undefined,
  token: false,
  answer(res: ServerResponse, facts: ServiceFacts, manifest: BundleManifest): number {
    const reasons = facts.degraded?.() ?? []
    const shown = { bundle: manifest.inputsHash, compilerVersion: manifest.compilerVersion, routes: manifest.routes.length, uptimeSeconds: Math.round((Date.now() - facts.startedAt) / 1000) }
    if (reasons.length > 0) {
      sendJson(res, 503, { ok: false, status: 'degraded', reasons, ...shown }, RETRY_AFTER)
      return 503
    }
    sendJson(res, 200, { ok: true, status: 'ok', ...shown })
    return 200
  },
}
