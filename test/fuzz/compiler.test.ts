// The compiler fuzzer's short run (the long one is `npm run fuzz`): a fixed seed, mutations of the
// golden fixtures, the repo's hooks.yaml and the examples through the library and (a share of
// them) the CLI, then match.when patterns from a small grammar, with the known defects' cases
// first. A violation prints the shrunk YAML and the command that replays it.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { runFuzz, summarise } from './runner.js'
import { compilerProperties } from './compiler-property.js'

const SEED = 2302
const fuzz = suite('fuzzing the compiler')
const { compiler, regex, close } = await compilerProperties()
fuzz.after(async () => { await close() })

fuzz('a mutated config never crashes or hangs the compiler, and every finding points inside the file', async () => {
  const lines: string[] = []
  const report = await runFuzz(compiler, { seed: SEED, numRuns: 120, maxShrinkSteps: 150, shrinkBudgetMs: 10_000, log: (l) => { lines.push(l) } })
  process.stdout.write(summarise(report) + '\n')
  assert.is(report.findings.length, 0, lines.join('\n'))
})

fuzz('a match.when pattern the compiler accepts does not backtrack for seconds on a 2 KiB field', async () => {
  const lines: string[] = []
  const report = await runFuzz(regex, { seed: SEED, numRuns: 150, maxShrinkSteps: 100, shrinkBudgetMs: 10_000, log: (l) => { lines.push(l) } })
  process.stdout.write(summarise(report) + '\n')
  assert.is(report.findings.length, 0, lines.join('\n'))
})

fuzz.run()
