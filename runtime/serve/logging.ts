// What `hookgate serve` says, besides what its parts log through the injected logger
// (runtime/observe/log.ts): the request log line, written field by field for speed, and the
// sentences said at start and on a reload. Every line is one JSON object with `t`.
import type { RequestLog } from '../http/exchange.js'
import { isoNow } from '../observe/clock.js'
import type { Logger } from '../observe/log.js'

/**
 * One request's log line, the same JSON as JSON.stringify({ t, level, msg, ...entry }) would give,
 * written field by field: the generic object spread and stringify showed in the profile.
 */
export function requestLine(e: RequestLog): string {
  let line = `{"t":"${isoNow()}","level":"info","msg":"request","method":${JSON.stringify(e.method)},"path":${JSON.stringify(e.path)},"status":${e.status},"ms":${e.ms},"client":${JSON.stringify(e.client)}`
  if (e.runId !== undefined) line += `,"runId":${JSON.stringify(e.runId)}`
  if (e.code !== undefined) line += `,"code":${JSON.stringify(e.code)}`
  if (e.body !== undefined) line += `,"body":${JSON.stringify(e.body)}`
  return line + '}'
}

/** Said at start (and on a reload) so an operator need not guess why every hook is refused. */
export function sayDisabled(log: Logger, basePath: string): void {
  log.info(`hooks are disabled (hooks.enabled is false): ingress is off, every path under ${basePath} answers 404 hooks_disabled`)
}
