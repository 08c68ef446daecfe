// The backlog and what it weighs: agent and workflow runs accepted and not finished yet hold their request
// in memory until they end, so the HTTP side bounds them in bytes as well as in runs
// (server.maxPendingBytes beside server.maxPendingRuns; past either, 503 too_many_pending_runs). A
// bound on how many, without a bound on how big, is no bound: 10,000 pending runs of 255 KiB held
// 5.5 GiB before the count refused anything.
//
// What a pending run holds, measured on Node 20 (x64, 64-bit pointers) with a model that never
// answers (test/bench/pending-bytes.mjs prints the figures again):
// - its request as the engine keeps it: an agent run's rendered message and fields, a workflow
//   run's render context with the parsed payload (which the runs of one fan-out share);
// - a fixed part: the row, promises, the turn waiting for a slot, about 5-6 KB for an agent run;
//   about 40 KB for a workflow run, whose step holds its model call open meanwhile.
// heldBytes weighs a value as V8 lays it out, in one walk, from sizes measured with
// process.memoryUsage() around many parsed values: a string 16 bytes and 1 byte per character (2
// when any character is past U+00FF), an array 48 and 8 per element, an object 24 and 8 per key
// (56 when empty; past 128 keys a dictionary, 32 and 40 per key), a fractional or large number
// held in an object 16 more. So `[{},{},…]` counts its 64 bytes per element, not the 3 of its
// JSON text, and a 255 KiB message 255 KiB.

/**
 * The backlog as the engine counts it: agent and workflow runs accepted and not finished yet, and
 * what they hold in memory meanwhile. The refusal the request side asks for is read off these.
 */
export class Backlog {
  /** agent and workflow runs accepted and not yet finished */
  runs = 0
  /** what those runs hold in memory meanwhile, in bytes */
  bytes = 0

  /**
   * Counts `bytes` for `runs` runs accepted together; each calls the function it gets once it
   * ends, and the bytes go with the last (what they share lives until then).
   */
  hold(bytes: number, runs: number): () => void {
    this.bytes += bytes
    let left = runs
    return () => { if (--left === 0) this.bytes -= bytes }
  }
}

/** Beside its request, what a pending agent run holds (measured 5.1-5.8 KB). */
export const PENDING_AGENT_RUN_BYTES = 6 * 1024
/** Beside its request, what a pending workflow run holds, its step's model call open (measured 40 KB). */
export const PENDING_WORKFLOW_RUN_BYTES = 40 * 1024

const STRING_BYTES = 16
const ARRAY_BYTES = 48
const OBJECT_BYTES = 24
const EMPTY_OBJECT_BYTES = 56
const SLOT_BYTES = 8
const DICTIONARY_KEYS = 128
const DICTIONARY_BYTES = 32
const DICTIONARY_ENTRY_BYTES = 40
const HEAP_NUMBER_BYTES = 16
/** Any character past U+00FF makes V8 keep the whole string at two bytes a character. */
const TWO_BYTE = /[^\u0000-\u00ff]/

/**
 * The bytes `values` hold in memory between them, each object or array counted once however often
 * it is reached (the runs of a fan-out share their payload, and an element is part of it). Walks
 * with a stack of its own: a payload nested 100,000 deep is weighed, not a stack overflow.
 */
export function heldBytes(values: readonly unknown[]): number {
  let bytes = 0
  const seen = new Set<object>()
  const stack: unknown[] = [...values]
  while (stack.length > 0) {
    const v = stack.pop()
    if (typeof v === 'string') {
      bytes += STRING_BYTES + (TWO_BYTE.test(v) ? 2 * v.length : v.length)
      continue
    }
    if (typeof v === 'number') {
      // a small integer lives in its slot; other numbers are boxed (in an array too, at worst)
      if (!(Number.isInteger(v) && Math.abs(v) < 2 ** 30)) bytes += HEAP_NUMBER_BYTES
      continue
    }
    if (v === null || typeof v !== 'object' || seen.has(v)) continue
    seen.add(v)
    if (Array.isArray(v)) {
      bytes += ARRAY_BYTES + SLOT_BYTES * v.length
      for (const x of v) if (x !== null && typeof x === 'object' ? !seen.has(x) : typeof x === 'string' || typeof x === 'number') stack.push(x)
      continue
    }
    let keys = 0
    const record = v as Record<string, unknown>
    for (const k in record) {
      keys++
      const x = record[k]
      if (x !== null && typeof x === 'object' ? !seen.has(x) : typeof x === 'string' || typeof x === 'number') stack.push(x)
    }
    bytes += keys === 0 ? EMPTY_OBJECT_BYTES : keys > DICTIONARY_KEYS ? DICTIONARY_BYTES + DICTIONARY_ENTRY_BYTES * keys : OBJECT_BYTES + SLOT_BYTES * keys
  }
  return bytes
}
