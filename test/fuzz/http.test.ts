// The HTTP fuzzer's short run (the long one is `npm run fuzz`): a fixed seed, a few hundred
// generated requests — odd methods, paths, tokens, content types and bodies — each sent over a raw
// socket to the real `hookgate serve` on the file store and on PostgreSQL, with the known defects'
// cases first (HTTP_EXAMPLES). A violation prints the shrunk request as curl and raw bytes, and the
// command that replays it.
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { runFuzz, summarise } from './runner.js'
import { httpProperty } from './http-property.js'

/** Fixed, so that `npm test` runs the same cases every time; `npm run fuzz` picks new seeds. */
const SEED = 2301
const CASES = 150

const fuzz = suite('fuzzing the HTTP handler')
const { property, pair } = await httpProperty()
fuzz.after(async () => { await pair.stop() })

fuzz('a hostile request never gets an undocumented 5xx, a stack trace or a lost acknowledgement, and both stores answer it alike', async () => {
  const lines: string[] = []
  const report = await runFuzz(property, { seed: SEED, numRuns: CASES, maxShrinkSteps: 200, shrinkBudgetMs: 10_000, log: (l) => { lines.push(l) } })
  process.stdout.write(summarise(report) + '\n')
  assert.ok(report.cases >= CASES, `ran ${report.cases} cases`)
  assert.ok(pair.withPostgres || process.env.CI !== 'true', 'PostgreSQL is missing: only the file store was fuzzed')
  assert.is(report.findings.length, 0, lines.join('\n'))
})

fuzz.run()
