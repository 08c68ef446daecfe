// Where `hookgate serve` writes its log lines: stdout, gathered and written together once per turn
// of the event loop (a write call per request line showed in the profile); a long burst is written
// every 256 lines. The runtime never writes to stdout itself: it is handed `write` (ServeOptions).
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
