// The worker thread behind the page's Test button (admin/dry-runs.ts): imports one scratch bundle per
// dry run and answers what the server would, through `hookgate try`'s dry run (the endpoint's own
// prepare, runtime/endpoints/try.ts). Node never frees an imported module, so the bundles pile up
// here, in a thread the page ends and replaces, never in the admin process's own heap.
import { parentPort } from 'node:worker_threads'
import { loadBundle } from '../runtime/bundle/load.js'
import { dryRun } from '../runtime/endpoints/try.js'

export interface DryRunRequest {
  id: number
  /** the scratch out dir holding the compiled bundle */
  bundleDir: string
  name: string
  payload: unknown
  headers: Record<string, string>
}

export type DryRunReply = { id: number; ok: true; status: number; body: Record<string, unknown> } | { id: number; ok: false; error: string }

parentPort!.on('message', (request: DryRunRequest) => {
  void (async () => {
    try {
      const bundle = await loadBundle(request.bundleDir)
      const answer = await dryRun(bundle, request.name, request.payload, { headers: request.headers, query: {} })
      parentPort!.postMessage({ id: request.id, ok: true, status: answer.status, body: answer.body } satisfies DryRunReply)
    } catch (err) {
      parentPort!.postMessage({ id: request.id, ok: false, error: (err as Error).message } satisfies DryRunReply)
    }
  })()
})
