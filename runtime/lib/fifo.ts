// A first-in, first-out queue whose take is O(1). Array.prototype.shift moves every element left:
// with a backlog of accepted runs waiting for a turn slot (tens of thousands under load) that made
// each turn's start cost grow with the backlog, and it was the largest cost in the agent path.
export class Fifo<T> {
  private items: (T | undefined)[] = []
  private head = 0

  get length(): number {
    return this.items.length - this.head
  }

  push(item: T): void {
    this.items.push(item)
  }

  /** The oldest item, left in place; undefined when empty. */
  peek(): T | undefined {
    return this.head < this.items.length ? this.items[this.head] : undefined
  }

  /** The oldest item, or undefined when empty. */
  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items[this.head]
    this.items[this.head++] = undefined
    // Drop the taken slots once they are most of the array: amortised O(1), bounded memory.
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }
}
