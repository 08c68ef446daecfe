// The notifier as a duty: started, it hears every status a run enters and tells the run's reply
// channel as its notify policy asks (runtime/notify/); stopped, it hears no more and lets the
// notifications being sent finish for a grace, their outcomes written before the store closes.
import type { Notifier } from '../notify/notifier.js'
import { HEALTHY, type Duty } from './duty.js'

export function notifierDuty(notifier: Notifier): Duty {
  return {
    name: 'notifier',
    start: () => notifier.start(),
    stop: () => notifier.stop(),
    health: () => HEALTHY,
  }
}
