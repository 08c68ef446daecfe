// `hookgate store migrate`: the PostgreSQL store's schema, created or brought up to date by hand
// (a runtime on that store does the same at start), or with --dry-run only shown; --json prints the
// plan as one object ({store, dryRun, from, to, migrations}) instead of the sentence.
import { ExitCode } from '../exit-codes.js'
import { jsonFlag, processIO, readCommandArgs, usageLine, type CommandIO, type CommandSpec, type VerbContext } from '../flags.js'
import { isPostgresUrl, migrateStore, shownStoreUrl } from '../../runtime/store/open.js'

export const spec: CommandSpec = {
  name: 'store migrate',
  readsState: true,
  args: '',
  summary: 'create or update the PostgreSQL store\'s tables (a runtime on that store does it itself at start)',
  flags: [
    { name: 'store', value: 'URL', description: 'the PostgreSQL store, postgres://user:password@host:port/database (default: $HOOKGATE_STORE_URL)' },
    { name: 'dry-run', description: 'print the migrations it would apply, and change nothing' },
    jsonFlag('{store, dryRun, from, to, migrations} (the schema\'s version before and after, each migration applied or, with --dry-run, to apply)'),
  ],
  notes: [
    'migrations run in one transaction under a transaction-scoped advisory lock, so runtimes starting together migrate once;',
    'the URL is never printed with its password',
    'exit 0 when the schema is current (with --dry-run: when the plan was printed), 1 when the database cannot be reached or refuses it, 2 usage error',
  ],
}

export async function run(argv: string[], io: CommandIO = processIO, context: VerbContext = {}): Promise<number> {
  const usage = usageLine(spec)
  const parsed = readCommandArgs(spec, argv, io)
  if (parsed.kind !== 'ok') return parsed.exit
  const values = parsed.values as { store?: string; 'dry-run'?: boolean; json?: boolean }
  if (parsed.positionals.length > 0) {
    io.stderr(`hookgate store migrate: takes no arguments\n${usage}\n`)
    return ExitCode.usage
  }
  const url = values.store ?? (context.env ?? process.env).HOOKGATE_STORE_URL
  if (url === undefined || url === '') {
    io.stderr(`hookgate store migrate: name the store with --store postgres://… or $HOOKGATE_STORE_URL\n${usage}\n`)
    return ExitCode.usage
  }
  if (!isPostgresUrl(url)) {
    io.stderr(`hookgate store migrate: the store must be a postgres:// (or postgresql://) URL; the file store needs no migration\n${usage}\n`)
    return ExitCode.usage
  }
  const shown = shownStoreUrl(url)
  const dryRun = values['dry-run'] === true
  let plan
  try {
    plan = await migrateStore(url, { dryRun })
  } catch (err) {
    io.stderr(`hookgate store migrate: ${shown}: ${(err as Error).message}\n`)
    return ExitCode.refused
  }
  if (values.json) {
    io.stdout(`${JSON.stringify({ store: shown, dryRun, from: plan.from, to: plan.to, migrations: plan.migrations }, null, 2)}\n`)
    return ExitCode.ok
  }
  const list = plan.migrations.map((m) => `  ${m.version}: ${m.title}\n`).join('')
  if (plan.migrations.length === 0) io.stdout(`${shown}: the schema is at version ${plan.from}, current; nothing to do\n`)
  else if (dryRun) io.stdout(`${shown}: the schema is at version ${plan.from}; would apply ${plan.migrations.length} ${plan.migrations.length === 1 ? 'migration' : 'migrations'} (nothing was changed):\n${list}`)
  else io.stdout(`${shown}: applied ${plan.migrations.length} ${plan.migrations.length === 1 ? 'migration' : 'migrations'}, the schema is at version ${plan.to}:\n${list}`)
  return ExitCode.ok
}
