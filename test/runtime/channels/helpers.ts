// Shared by the channel tests: a bundle channel with defaults, a delivery, a sleep that records the
// waits instead of waiting, a clock the test moves, and a way to catch the DeliveryError.
import { Agent } from 'undici'
import * as assert from 'uvu/assert'
import type { BundleChannel } from '../../../runtime/bundle/format.js'
import { createChannels, DeliveryError, type Channel, type Delivery } from '../../../runtime/channels/index.js'

/** 2024-01-02T03:04:05.000Z */
export const T0 = Date.UTC(2024, 0, 2, 3, 4, 5)

/** A Standard Webhooks secret (24 bytes) used by the tests, and another one. */
export const WHSEC = 'whsec_' + Buffer.from('hookgate-test-signing-key-0123456789').toString('base64')
export const OTHER_WHSEC = 'whsec_' + Buffer.from('another-receivers-signing-key-xyz').toString('base64')

export function bundleChannel(c: Pick<BundleChannel, 'id' | 'type'> & Partial<BundleChannel>): BundleChannel {
  return { url: null, secret: null, botToken: null, chatId: null, apiBaseUrl: 'https://api.telegram.org', path: null, maxAttempts: 3, timeoutMs: 2000, ...c }
}

export const value = (v: string) => ({ kind: 'value' as const, value: v })
export const env = (name: string) => ({ kind: 'env' as const, name })

export function delivery(over: Partial<Delivery> = {}): Delivery {
  return { runId: 'run-1', agentId: 'main', text: 'The build is green.', to: null, name: null, correlationId: 'corr-1', ...over }
}

/** A clock that moves only when told, and a sleep that records each wait and moves the clock by it. */
export function testClock(start = T0) {
  const waits: number[] = []
  const clock = {
    ms: start,
    waits,
    now: () => clock.ms,
    sleep: async (ms: number) => { waits.push(ms); clock.ms += ms },
  }
  return clock
}

export const dispatcher = new Agent({ keepAliveTimeout: 10, keepAliveMaxTimeout: 10 })

/** The single channel createChannels builds from `c`, with the test clock and dispatcher. */
export function makeChannel(c: BundleChannel, clock = testClock(), configDir = process.cwd()): Channel {
  const channels = createChannels([c], configDir, { dispatcher, now: clock.now, sleep: clock.sleep })
  const ch = channels.get(c.id)
  assert.ok(ch, `channel ${c.id} was not built`)
  return ch
}

/** The DeliveryError a promise rejects with (fails the test when it resolves or rejects otherwise). */
export async function deliveryError(p: Promise<unknown>): Promise<DeliveryError> {
  try {
    const r = await p
    assert.unreachable(`expected a DeliveryError, got ${JSON.stringify(r)}`)
  } catch (err) {
    if (!(err instanceof DeliveryError)) throw err
    return err
  }
  throw new Error('unreachable')
}

/** The error a function throws. */
export function thrown(fn: () => unknown): Error {
  try {
    fn()
  } catch (err) {
    return err as Error
  }
  assert.unreachable('expected a throw')
  throw new Error('unreachable')
}

/** asserts that none of `secrets` appears in `text` */
export function assertNoSecret(text: string, secrets: string[]): void {
  for (const s of secrets) assert.not.ok(text.includes(s), `"${s}" appears in: ${text}`)
}
