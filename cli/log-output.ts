// Where `hookgate serve` writes its log lines: stdout, gathered and written together once per turn
// of the event loop (a write call per request line showed in the profile); a long burst is written
// every 256 lines. The runtime never writes to stdout itself: it is handed `write` (ServeOptions).
import { createLogger, type LogLevel } from '../runtime/observe/log.js'

export function batchedStdout(): { write(line: string): void; flush(): void } {
  let lines: string[] = []
  let scheduled = false
  const flush = (): void => {
    scheduled = false
    if (lines.length === 0) return
    const text = lines.join('')
    lines = []
    process.stdout.write(text)
  }
  return {
    write(line: string): void {
      lines.push(line + '\n')
      if (lines.length >= 256) flush()
      else if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    },
    flush,
  }
}

/**
 * One log line of the runtime's shape (runtime/observe/log.ts: JSON with `t`, `level`, `msg`), with
 * its line break, for the lines a server verb writes itself: serve's and admin's start-up failures,
 * admin's address and generated token. Every line a server writes is such a line.
 */
export function logLine(level: LogLevel, msg: string, fields?: Record<string, unknown>): string {
  let line = ''
  createLogger((l) => { line = l })[level](msg, fields)
  return line + '\n'
}
