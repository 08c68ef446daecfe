// The one logger of the runtime: every line is one JSON object with the time (`t`, ISO 8601 UTC), a
// level and a message, plus the fields given. It is injected (the composition root makes one over
// where the CLI says lines go: stdout, gathered per event-loop turn, and stderr for failures) into
// everything that logs; nothing in the
// runtime writes to stderr or stdout by itself (test/runtime/log-writes.test.ts). The request log
// line (serve/logging.ts requestLine) has the same shape, written field by field for speed.
import { isoNow } from './clock.js'

export type LogLevel = 'info' | 'warn' | 'error'

export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void
  warn(msg: string, fields?: Record<string, unknown>): void
  error(msg: string, fields?: Record<string, unknown>): void
}

/** A logger writing one JSON line per call through `write` (which adds the line break). */
export function createLogger(write: (line: string) => void): Logger {
  const log = (level: LogLevel, msg: string, fields?: Record<string, unknown>): void => {
    write(JSON.stringify(fields === undefined ? { t: isoNow(), level, msg } : { t: isoNow(), level, msg, ...fields }))
  }
  return {
    info: (msg, fields) => log('info', msg, fields),
    warn: (msg, fields) => log('warn', msg, fields),
    error: (msg, fields) => log('error', msg, fields),
  }
}

/** A logger that drops everything (tests and tools that do not log). */
export const silentLogger: Logger = { info() {}, warn() {}, error() {} }
