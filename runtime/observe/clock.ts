// The current time as ISO 8601 text, made once per millisecond: a burst of requests (log lines,
// run rows) shares one string instead of formatting a Date each (it showed in the profile).
let lastMs = -1
let lastIso = ''

export function isoNow(): string {
  const ms = Date.now()
  if (ms !== lastMs) {
    lastMs = ms
    lastIso = new Date(ms).toISOString()
  }
  return lastIso
}

/**
 * `90s`, `15m`, `2h`, `7d` in milliseconds; undefined when the text is none of those (a whole
 * number of at least 1 and one unit).
 */
export function parseDuration(text: string): number | undefined {
  const m = /^([1-9][0-9]{0,8})(s|m|h|d)$/.exec(text)
  if (!m) return undefined
  return Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd']
}
