// The contract between the request side and the engine: what a request hands over to be accepted
// (a Submission, with the row fields the request side fixes), and the narrow interface it hands it
// to (Acceptor). The HTTP core, the endpoints and `hookgate try` see this, never the Engine class;
// the engine implements it. Types only: imports nothing at run time.
import type { RenderContext, WakeMode } from '../bundle/format.js'
import type { ReceivedRequest, RunRow, StoreHealth } from '../store/store.js'

export interface Origin {
  definitionKind: 'hook' | 'trigger' | 'task'
  definitionId: string
  correlationId: string
  /** shown as the envelope's source, e.g. 'hook /hooks/github' */
  source: string
  /** false when the mapping set allowUnsafeExternalContent */
  external: boolean
}

export interface WakeInput extends Origin { agentId: string; text: string; mode: 'now' | 'next-heartbeat'; name: string | null }

/** An agent action (from /agent or a mapping) once its agent and session key are settled. */
export interface AgentInput extends Origin, Omit<AgentAction, 'kind' | 'agentId' | 'sessionKey'> {
  agentId: string
  sessionKey: string
}

export interface WorkflowInput extends Origin { agentId: string; workflow: string; name: string | null; context: RenderContext }

/** Fields the HTTP side fixes for the run row: its id, and for Idempotency-Key the key and the answer. */
export interface RowExtra {
  id?: string
  /** a request waits for this run (waitForCompletion): its whole reply is kept for the answer; needs `id` */
  awaited?: boolean
  idempotency?: { key: string; fingerprint: string }
  response?: { status: number; body: Record<string, unknown> }
  /** a mapped request as it arrived (secrets redacted), kept for `hookgate runs replay` */
  received?: ReceivedRequest
  /** the run this request replays */
  replayOf?: string
  /** a task's firing: its slot (the run id is derived from it, so a slot is claimed once) */
  scheduledFor?: string
}

/** One run to accept, as its submit method takes it (submitMany accepts several in one write). */
export type Submission = { kind: 'wake'; input: WakeInput } | { kind: 'agent'; input: AgentInput } | { kind: 'workflow'; input: WorkflowInput }

/** What a request that waited for its run answers with: the final row, and an agent run's whole reply and delivery. */
export interface RunOutcome { row: RunRow; reply?: string; delivery?: string }

/** Why nothing more can be accepted now: the store cannot write, or the backlog is full. */
export interface Refusal { code: 'store_unavailable' | 'too_many_pending_runs'; message: string; retryAfterSeconds: number }

/**
 * What the request side may ask of the engine. Every accept is durable before it resolves (one
 * write for all the submissions of a call); the request side answers only then.
 */
export interface Acceptor {
  /** several runs accepted with one durable write (one run: an array of one); rows in order */
  accept(submissions: readonly Submission[], extras: readonly RowExtra[]): Promise<RunRow[]>
  /** a matching request that started nothing (a skip, a transform's failure, a filter) still gets its row */
  record(origin: Pick<Origin, 'definitionKind' | 'definitionId' | 'correlationId'>, action: 'wake' | 'agent' | 'workflow', status: 'skipped' | 'failed', error?: string, result?: string, extra?: RowExtra): Promise<RunRow>
  /** a run's outcome once final, or null after `timeoutMs` (waiting cancels nothing) */
  whenFinished(runId: string, timeoutMs: number): Promise<RunOutcome | null>
  /** why a run of this kind cannot be accepted now (the store for any; the backlog's bounds for agent and workflow runs); undefined when it can */
  refusal(kind: 'wake' | 'agent' | 'workflow'): Refusal | undefined
  /** whether the store can write now (503 store_unavailable while it cannot) */
  storeHealth(): StoreHealth | { ok: true } | { ok: false; reason: string }
}

// ---- the actions a request resolves into (built by runtime/endpoints/mapping.ts) ----

export interface WakeAction {
  kind: 'wake'
  text: string
  mode: WakeMode
  agentId: string | null
}

export interface AgentAction {
  kind: 'agent'
  message: string
  name: string | null
  agentId: string | null
  sessionKey: string | null
  wakeMode: WakeMode
  deliver: boolean
  channel: string
  to: string | null
  model: string | null
  thinking: string | null
  timeoutSeconds: number | null
}

export interface WorkflowAction {
  kind: 'workflow'
  workflow: string
  name: string | null
  agentId: string | null
  /** the input the workflow's step templates render against */
  text: string
}

export type HookAction = WakeAction | AgentAction | WorkflowAction
