// `npm run fuzz`: the fuzz properties for a while, by hand.
//   npm run fuzz -- [--minutes N] [--seed S] [--only http|compiler|regex] [--path P] [--runs N]
// --minutes is per property (default 5); --seed defaults to the time; --only with --seed and --path
// replays one printed counterexample. Progress every 30 s; each violation is printed when found,
// shrunk, with its reproduction and the command that replays it. Exit 1 when anything was found.
import { parseArgs } from 'node:util'
import { runFuzz, summarise, type FuzzProperty, type FuzzReport } from './runner.js'
import { httpProperty } from './http-property.js'
import { compilerProperties } from './compiler-property.js'

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '5' },
    seed: { type: 'string' },
    only: { type: 'string' },
    path: { type: 'string' },
    runs: { type: 'string' },
  },
})
const seed = values.seed !== undefined ? Number(values.seed) : Date.now() % 2 ** 31
const minutes = Number(values.minutes)
const names = values.only ? values.only.split(',') : ['http', 'compiler', 'regex']
const log = (line: string) => process.stdout.write(line + '\n')
log(`hookgate fuzz: ${names.join(', ')}, seed ${seed}, ${values.path !== undefined ? `replaying path ${values.path}` : values.runs ? `${values.runs} cases each` : `${minutes} min each`}`)

const reports: FuzzReport[] = []
async function run<T>(property: FuzzProperty<T>): Promise<void> {
  reports.push(await runFuzz(property, {
    seed,
    ...(values.runs ? { numRuns: Number(values.runs) } : values.path !== undefined ? {} : { minutes }),
    ...(values.path !== undefined ? { path: values.path } : {}),
    progressEverySeconds: 30,
    log,
  }))
  log(summarise(reports.at(-1)!))
}

for (const name of names) {
  if (name === 'http') {
    const { property, pair } = await httpProperty()
    log(`[http] serving the fuzz config on the file store${pair.withPostgres ? ' and PostgreSQL' : ' only (no PostgreSQL server binaries here)'}`)
    try { await run(property) } finally { await pair.stop() }
  } else if (name === 'compiler' || name === 'regex') {
    const { compiler, regex, close } = await compilerProperties()
    try { if (name === 'compiler') await run(compiler); else await run(regex) } finally { await close() }
  } else {
    log(`unknown property ${name}: http, compiler or regex`)
    process.exitCode = 2
  }
}
log('\n' + reports.map(summarise).join('\n'))
const found = reports.reduce((n, r) => n + r.findings.length, 0)
log(`${found} finding${found === 1 ? '' : 's'}; seed ${seed}`)
if (found > 0 && process.exitCode === undefined) process.exitCode = 1
// the servers' and workers' handles are closed; anything left (a pg pool's timer) must not hold the exit
process.exit()
