// The turn slots' and transform pool's waiting queue: first in, first out, and taking from it
// costs the same however long it is (Array.prototype.shift moved the whole backlog every time).
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { Fifo } from '../../runtime/lib/fifo.js'

const fifo = suite('Fifo')

fifo('gives items back in the order they came, interleaved with pushes, and undefined when empty', () => {
  const q = new Fifo<number>()
  assert.is(q.shift(), undefined)
  const out: number[] = []
  let next = 0
  for (let round = 0; round < 5000; round++) {
    q.push(next++)
    q.push(next++)
    out.push(q.shift()!)
  }
  while (q.length > 0) {
    const first = q.peek()
    assert.is(q.shift(), first, 'peek shows the item shift takes')
    out.push(first!)
  }
  assert.equal(out, Array.from({ length: next }, (_, i) => i))
  assert.is(q.peek(), undefined)
  assert.is(q.shift(), undefined)
  assert.is(q.length, 0)
})

fifo('the slots of taken items are given back as it drains: memory follows what is queued', () => {
  const q = new Fifo<number>()
  for (let i = 0; i < 200_000; i++) q.push(i)
  const slots = () => (q as unknown as { items: unknown[] }).items.length
  for (let i = 0; i < 150_000; i++) assert.is(q.shift(), i)
  assert.is(q.length, 50_000)
  assert.ok(slots() <= 2 * q.length + 1024, `holds ${slots()} slots for ${q.length} items`)
  for (let i = 150_000; i < 200_000; i++) assert.is(q.shift(), i)
  assert.ok(slots() <= 2048, `holds ${slots()} slots when empty`)
})

fifo.run()
