// Two small gates the engine runs isolated turns through: a semaphore (at most `limit` tasks at
// once, the rest waiting in order; server.concurrency) and a keyed lock (one task at a time per
// key: turns on one session key never overlap).
import { Fifo } from './fifo.js'

/** At most `limit` tasks at once; the rest wait in order. */
export class Semaphore {
  private active = 0
  private readonly waiting = new Fifo<() => void>()

  constructor(private limit: number) {}

  setLimit(limit: number): void {
    this.limit = Math.max(1, limit)
    while (this.active < this.limit && this.waiting.length) { this.active++; this.waiting.shift()!() }
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.waiting.push(r))
    else this.active++
    try {
      return await task()
    } finally {
      const next = this.waiting.shift()
      if (next) next()
      else this.active--
    }
  }
}

/** One task at a time per key. */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>()

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve()
    const next = prev.then(task, task)
    const tail = next.catch(() => {})
    this.tails.set(key, tail)
    void tail.then(() => { if (this.tails.get(key) === tail) this.tails.delete(key) })
    return next
  }
}
