// The supervisor: every background duty (duty.ts) registered in one place, in order, started in
// that order and stopped in reverse, so that a duty never runs without what it depends on (the
// takeover sweep without resuming, the scheduler without the runner its runs go to). Registration
// happens once, in the composition root (runtime/serve/duties.ts); the health of each is collected
// here for /healthz and /readyz.
import type { Logger } from '../observe/log.js'
import type { Duty, DutyHealth } from './duty.js'

export interface DutyReport { name: string; running: boolean; health: DutyHealth }

export class Supervisor {
  private readonly duties: Duty[] = []
  /** the duties started, in order (what stop() stops, in reverse) */
  private readonly started: Duty[] = []
  private state: 'registering' | 'starting' | 'started' | 'stopping' | 'stopped' = 'registering'
  private stopping: Promise<void> | undefined

  constructor(private readonly log: Logger) {}

  /**
   * Registers `duty` after those registered before it: it starts after them and stops before them.
   * One the configuration does not have (a file store has no takeover sweep) is passed as nothing.
   */
  add(duty: Duty | undefined | null): this {
    if (!duty) return this
    if (this.state !== 'registering') throw new Error(`the duty "${duty.name}" was registered after the duties started`)
    if (this.duties.some((d) => d.name === duty.name)) throw new Error(`two duties are named "${duty.name}"`)
    this.duties.push(duty)
    return this
  }

  /**
   * Starts the duties in order. A duty whose start returns nothing is running at once, so a run of
   * those starts within this call, before it returns (before a request can be read). One that
   * fails stops those already started, in reverse, and its error is thrown.
   */
  start(): Promise<void> {
    if (this.state !== 'registering') return Promise.reject(new Error('the duties were started already'))
    this.state = 'starting'
    return this.startFrom(0)
  }

  private async startFrom(i: number): Promise<void> {
    for (; i < this.duties.length; i++) {
      const duty = this.duties[i]!
      if (this.state !== 'starting') return // stop() came first: what is left is not started
      try {
        const started = duty.start()
        if (started) await started
      } catch (err) {
        this.log.error('a background duty could not start', { duty: duty.name, error: (err as Error).message })
        await this.stop()
        throw err
      }
      // stopped while this one was starting: it stops now, after the others already have
      if (this.state !== 'starting') { await duty.stop(); return }
      this.started.push(duty)
    }
    if (this.state === 'starting') this.state = 'started'
  }

  /** Stops the started duties, the last started first; one that fails to stop is logged and the others still stop. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.state = 'stopping'
      for (let duty = this.started.pop(); duty; duty = this.started.pop()) {
        try {
          await duty.stop()
        } catch (err) {
          this.log.error('a background duty did not stop cleanly', { duty: duty.name, error: (err as Error).message })
        }
      }
      this.state = 'stopped'
    })()
    return this.stopping
  }

  /** Every registered duty, in order: whether it runs, and how it is. */
  report(): DutyReport[] {
    return this.duties.map((d) => ({ name: d.name, running: this.started.includes(d), health: this.started.includes(d) ? d.health() : { ok: true } }))
  }

  /** The reasons the running duties give for not being well (empty: all are). */
  unhealthy(): string[] {
    const out: string[] = []
    for (const d of this.started) {
      const h = d.health()
      if (!h.ok) out.push(`${d.name}: ${h.reason}`)
    }
    return out
  }

  /** The names of the duties in start order (logs, tests). */
  get names(): string[] {
    return this.duties.map((d) => d.name)
  }
}
