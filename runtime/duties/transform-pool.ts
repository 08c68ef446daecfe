// The transform processes as a duty: they start at the first call that needs one (started at once
// they competed with the first requests for the CPU, in a server that may never run a transform),
// so starting does nothing; stopping ends the processes of the bundle being served, before the
// runs under way are drained (a reload closes the pool it replaces itself, once idle).
import { HEALTHY, type Duty } from './duty.js'

export function transformPoolDuty(current: () => { close(): Promise<void> } | null): Duty {
  return {
    name: 'transform processes',
    start() {},
    stop: () => current()?.close(),
    health: () => HEALTHY,
  }
}
