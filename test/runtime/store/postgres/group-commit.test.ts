// Group commit for the PostgreSQL store, with a commit function standing in for the database: a
// write added right after the one before it resolved (while the flush that committed it is still
// winding down) is committed too, not left waiting; writes of one moment share a commit; a batch
// the database refuses is split until the writes it refuses are alone, and only they fail.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { GroupCommit } from '../../../../runtime/store/postgres/group-commit.js'
import { RunStoreError } from '../../../../runtime/store/store.js'
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

group('a write the database refuses fails alone: the other writes of its batch commit', async () => {
  const committed: string[] = []
  let commits = 0
  // a statement error (not a lost connection) whenever a poisoned write is in the batch: nothing of it is written
  const g = new GroupCommit<string>(async (batch) => {
    commits++
    if (batch.some((w) => w.startsWith('poison'))) throw Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' })
    committed.push(...batch)
    return new Map()
  }, () => true)
  const writes = ['first', ...Array.from({ length: 62 }, (_, i) => (i === 20 || i === 41 ? `poison-${i}` : `clean-${i}`))]
  const outcomes = await Promise.all(writes.map((w) => g.add(w).then(() => 'ok', (err: RunStoreError) => `${err.code}: ${err.message}`)))
  assert.equal(outcomes.filter((o) => o !== 'ok'), [
    'store_refused: the database refused the write: unsupported Unicode escape sequence',
    'store_refused: the database refused the write: unsupported Unicode escape sequence',
  ])
  assert.equal(writes.filter((_, i) => outcomes[i] !== 'ok'), ['poison-20', 'poison-41'])
  assert.equal(committed.sort(), writes.filter((w) => !w.startsWith('poison')).sort(), 'every other write committed, once')
  // the first alone, then 62 writes with two bad ones: about 2·log2(62) commits more, not 62
  assert.ok(commits <= 1 + 1 + 4 * Math.ceil(Math.log2(62)), `${commits} commits`)
})

group.run()
