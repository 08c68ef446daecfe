// Small async helpers the unit tests share.

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * What `promise` rejects with; throws when it resolves instead. With `type`, the rejection must
 * also be an instance of that error class.
 */
export async function rejectionOf<E extends Error = Error>(promise: Promise<unknown>, type?: abstract new (...args: never[]) => E): Promise<E> {
  try {
    await promise
  } catch (err) {
    if (type && !(err instanceof type)) throw new Error(`expected a ${type.name}, got ${String(err)}`)
    return err as E
  }
  throw new Error('expected the promise to reject, but it resolved')
}
