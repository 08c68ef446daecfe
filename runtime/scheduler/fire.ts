// What a Task's firing starts: the same targets as a Trigger (an agent prompt, a workflow, a
// heartbeat wake) handed to the acceptor (runtime/agents/acceptor.ts) as a request's runs are, with
// a run id derived from the task and its slot. The run store refuses a second row with that id, so
// writing the row is the claim.
import { createHash } from 'node:crypto'
import type { BundleTask } from '../bundle/format.js'
import type { Acceptor, Submission } from '../agents/acceptor.js'
import { RunStoreError, type RunRow } from '../store/store.js'

/** A UUID-shaped id that is the same for the same (task, slot) in every process. */
export function taskRunId(taskId: string, scheduledFor: string): string {
  const h = createHash('sha256').update(`${taskId}\n${scheduledFor}`).digest('hex')
  // version 8 (custom), RFC 9562 variant
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`
}

/** Starts the task's run for `slotMs`; false when that slot already has its row. */
export async function fireTask(acceptor: Pick<Acceptor, 'accept'>, task: BundleTask, slotMs: number): Promise<boolean> {
  const scheduledFor = new Date(slotMs).toISOString()
  const id = taskRunId(task.id, scheduledFor)
  const origin = { definitionKind: 'task' as const, definitionId: task.id, correlationId: id, source: `task ${task.name}`, external: false }
  const text = task.prompt ?? `Scheduled task "${task.name}" for ${scheduledFor}`
  const extra = { id, scheduledFor }
  let submission: Submission
  if (task.target === 'wake') {
    submission = { kind: 'wake', input: { ...origin, agentId: task.agentId, text, mode: 'now', name: task.name } }
  } else if (task.target === 'agent') {
    submission = { kind: 'agent', input: {
      ...origin, agentId: task.agentId, sessionKey: `${task.id}:${scheduledFor}`, message: text, name: task.name,
      wakeMode: 'now', deliver: false, channel: 'last', to: null, model: null, thinking: null, timeoutSeconds: task.timeoutSeconds ?? null,
    } }
  } else {
    const context = { payload: { task: { id: task.id, name: task.name }, scheduledFor }, headers: {}, query: {}, path: '', now: scheduledFor }
    submission = { kind: 'workflow', input: { ...origin, agentId: task.agentId, workflow: task.workflow ?? '', name: task.name, context } }
  }
  try {
    await acceptor.accept([submission], [extra])
    return true
  } catch (err) {
    if (err instanceof RunStoreError && err.code === 'duplicate_run') return false
    throw err
  }
}

/** Per task id, the latest slot in the history (rows without scheduledFor are not firings). */
export function lastFiredSlots(rows: Iterable<RunRow>): Map<string, number> {
  const out = new Map<string, number>()
  for (const r of rows) {
    if (r.definitionKind !== 'task' || r.scheduledFor === undefined) continue
    const at = Date.parse(r.scheduledFor)
    if (Number.isFinite(at) && at > (out.get(r.definitionId) ?? -Infinity)) out.set(r.definitionId, at)
  }
  return out
}
