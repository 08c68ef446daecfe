// What every endpoint kind implements, and what its `prepare` is given and gives back. An endpoint
// under the base path (wake, agent, each mapped name) is a HookEndpoint: the HTTP core admits the
// request, reads its body and hands it over as a HookRequest; `prepare` parses, validates and
// resolves it into the runs to accept or the answer to give (a Prepared), or throws the HttpError
// to answer. The same `prepare` runs under `serve`, `hookgate try` and the page's Test button,
// which differ only in the HookRequest they pass (a dry run keeps nothing and refuses nothing for
// lack of room). An endpoint outside it (healthz, metrics, the probes to come) is a DirectEndpoint:
// answered from the service's own state, without a body.
import type { IncomingHttpHeaders, ServerResponse } from 'node:http'
import type { BundleConfig, BundleManifest } from '../bundle/format.js'
import type { RowExtra, Submission } from '../agents/acceptor.js'
import type { HookAction, TransformErrorCode, TransformRunner } from './mapping.js'

/** The definition a request matched (a built-in, or the chosen mapping): a failure after it still gets a row. */
export interface MatchedDefinition {
  readonly definitionKind: 'hook' | 'trigger'
  readonly id: string
  readonly action: 'wake' | 'agent' | 'workflow'
}

/** A request to an endpoint under the base path, as its prepare sees it. */
export interface HookRequest {
  readonly config: BundleConfig
  /** the path under the base path, decoded */
  readonly name: string
  readonly payload: unknown
  /** lower-case names */
  readonly headers: IncomingHttpHeaders | Readonly<Record<string, string>>
  readonly query: URLSearchParams
  readonly now: number
  readonly correlationId: string
  /** the body's size: the chosen mapping's own limit is held to it (0 for a dry run) */
  readonly bodyBytes: number
  readonly transforms: TransformRunner | undefined
  /** keep the request as received with each row it writes (serve: for `hookgate runs replay`) */
  readonly keep: boolean
  /** the request target as received (what a kept request records as its path) */
  readonly url: string
  /** the body's JSON text as received, when it is JSON: a large one is kept as these bytes */
  rawJson(): Buffer | undefined
  /** throws the 503 when a run of this kind cannot be accepted now (a dry run accepts any) */
  refuseWhenFull(kind: 'wake' | 'agent' | 'workflow'): void
  /** what every row of this request carries: prepare adds the received request to it */
  trace: RowExtra | undefined
  /** set by prepare as soon as it is known */
  matched: MatchedDefinition | undefined
  /** the metrics' route label (a mapping id or a built-in's name, never the request's path), set by prepare once chosen */
  label: string | undefined
}

/** Runs to accept with one durable write, and how to answer once they are on disk. */
export interface Accept {
  readonly kind: 'accept'
  /** 200 for a wake, 202 for agent and workflow runs */
  readonly status: 200 | 202
  readonly submissions: Submission[]
  /** one run per element (the answer lists every run id) */
  readonly fanOut: boolean
  /** waitForCompletion: how long the answer waits for the runs to finish (0: answer at once) */
  readonly waitSeconds: number
  /** what a dry run shows: the parsed request (built-ins), the chosen route's actions as rendered */
  readonly request: unknown
  readonly actions: readonly HookAction[] | undefined
  readonly external: boolean
}

export type Prepared =
  | Accept
  /** nothing to start (a transform's null, an empty fan-out, a match.when that let it go): a skipped row, 204 */
  | { readonly kind: 'skip'; readonly definition: MatchedDefinition; readonly reason: string | undefined }
  /** the mapping's transform failed: a failed row with `error`, the sender gets 500 with `code` and a generic sentence */
  | { readonly kind: 'failed'; readonly definition: MatchedDefinition; readonly code: TransformErrorCode; readonly error: string }

/** An Accept, every field set in one order (one object shape on the hot path). */
export function accept(status: 200 | 202, submissions: Submission[], fanOut: boolean, waitSeconds: number, request: unknown, actions: readonly HookAction[] | undefined, external: boolean): Accept {
  return { kind: 'accept', status, submissions, fanOut, waitSeconds, request, actions, external }
}

/** An endpoint under the base path: POST, authenticated, its body read, then its prepare. */
export interface HookEndpoint {
  readonly kind: 'wake' | 'agent' | 'mapped'
  /** the path under the base path it is served at */
  readonly name: string
  /** the metrics' route label; undefined while the payload has to choose among several mappings */
  readonly label: string | undefined
  /** starts only agent or workflow runs: refused before its body is read while the backlog is full */
  readonly pendingOnly: boolean
  /** the body is read up to this */
  readonly maxBodyBytes: number
  /** the id of the mapping whose sender signature authenticates it instead of the hook token */
  readonly signedRoute: string | undefined
  prepare(input: HookRequest): Prepared | Promise<Prepared>
}

/**
 * A built-in endpoint under the base path (wake, agent): served at its own name, authenticated by
 * the hook token, its body bounded by server.maxBodyBytes, its prepare given the envelope's source
 * (e.g. 'hook /hooks/wake').
 */
export function builtinEndpoint(kind: 'wake' | 'agent', config: BundleConfig, pendingOnly: boolean, prepare: (input: HookRequest, source: string) => Prepared): HookEndpoint {
  const source = `hook ${config.basePath}/${kind}`
  return { kind, name: kind, label: kind, pendingOnly, signedRoute: undefined, maxBodyBytes: config.server.maxBodyBytes, prepare: (input) => prepare(input, source) }
}

/** What the service tells the endpoints outside the base path. */
export interface ServiceFacts {
  readonly startedAt: number
  /** why the service cannot do its work now (empty when healthy) */
  degraded?(): string[]
  /** the text GET /metrics answers with */
  metrics?(): string
}

/** An endpoint outside the base path, at an exact path, answered without reading a body. */
export interface DirectEndpoint {
  readonly kind: 'healthz' | 'metrics'
  readonly path: string
  readonly label: string
  /** the methods it answers */
  readonly methods: readonly string[]
  /** another method gets 405 with this Allow; undefined: nothing is served there for it (404) */
  readonly allow: string | undefined
  /** behind the hook token, with a hook's query and lock-out rules */
  readonly token: boolean
  /** writes the answer; returns its status */
  answer(res: ServerResponse, facts: ServiceFacts, manifest: BundleManifest): number
}
