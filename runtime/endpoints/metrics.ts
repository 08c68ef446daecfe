// GET /metrics: the Prometheus text format, behind the hook token (a scraper sends it as a Bearer
// token), with the same query, method and lock-out rules as a hook. Served when the service gives
// a renderer (`hookgate serve` always does).
import type { ServerResponse } from 'node:http'
import { EXPOSITION_CONTENT_TYPE } from '../observe/metrics.js'
import type { DirectEndpoint, ServiceFacts } from './endpoint.js'

export const metrics: DirectEndpoint = {
  kind: 'metrics',
  path: '/metrics',
  label: 'metrics',
  methods: ['GET'],
  allow: 'GET',
  token: true,
  answer(res: ServerResponse, facts: ServiceFacts): number {
    const text = facts.metrics!()
    res.writeHead(200, { 'content-type': EXPOSITION_CONTENT_TYPE, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' })
    res.end(text)
    return 200
  },
}
