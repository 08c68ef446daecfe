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
