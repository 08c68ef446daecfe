// Group commit for the PostgreSQL store, with a commit function standing in for the database: a
// write added right after the one before it resolved (while the flush that committed it is still
// winding down) is committed too, not left waiting; writes of one moment share a commit.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { GroupCommit } from '../../../../runtime/store/postgres/group-commit.js'
import { within } from '../../http/harness.js'

const group = suite('group commit')

group('a write added as soon as the previous one resolved is committed as well', async () => {
  const committed: string[][] = []
  const g = new GroupCommit<string>(async (batch) => { committed.push([...batch]); return new Map() }, () => true)
  await g.add('first')
  // the loop that committed 'first' has seen an empty queue but not yet let go of its turn
  const second = await within(g.add('second').then(() => 'committed'), 1000, 'still waiting')
  assert.is(second, 'committed')
  assert.equal(committed, [['first'], ['second']])
})

group('the writes of one moment share one commit', async () => {
  const committed: string[][] = []
  const g = new GroupCommit<string>(async (batch) => { committed.push([...batch]); return new Map() }, () => true)
  await Promise.all(['a', 'b', 'c'].map((w) => g.add(w)))
  assert.equal(committed, [['a'], ['b', 'c']])
})

group.run()
