// `hookgate store migrate`: the PostgreSQL store's schema, created or brought up to date by hand
// (a runtime on that store does the same at start), or with --dry-run only shown.
import { getCommand, readCommandArgs, usageLine, processIO } from './commands.js'
import { isPostgresUrl, migrateStore, shownStoreUrl } from '../runtime/store/open.js'
import type { CommandIO } from './runs.js'

const EXIT = { ok: 0, failed: 1, usage: 2 } as const

export async function storeMigrateCommand(argv: string[], defaults: { env: NodeJS.ProcessEnv }, io: CommandIO = processIO): Promise<number> {
  const usage = usageLine(getCommand('store migrate'))
  const parsed = readCommandArgs('store migrate', argv, io)
  if (parsed.kind !== 'ok') return parsed.exit!
  const values = parsed.values as { store?: string; 'dry-run'?: boolean }
  if (parsed.positionals.length > 0) {
    io.stderr(`hookgate store migrate: takes no arguments\n${usage}\n`)
    return EXIT.usage
  }
  const url = values.store ?? defaults.env.HOOKGATE_STORE_URL
  if (url === undefined || url === '') {
    io.stderr(`hookgate store migrate: name the store with --store postgres://… or $HOOKGATE_STORE_URL\n${usage}\n`)
    return EXIT.usage
  }
  if (!isPostgresUrl(url)) {
    io.stderr(`hookgate store migrate: the store must be a postgres:// (or postgresql://) URL; the file store needs no migration\n${usage}\n`)
    return EXIT.usage
  }
  const shown = shownStoreUrl(url)
  let plan
  try {
    plan = await migrateStore(url, { dryRun: values['dry-run'] === true })
  } catch (err) {
    io.stderr(`hookgate store migrate: ${shown}: ${(err as Error).message}\n`)
    return EXIT.failed
  }
  const list = plan.migrations.map((m) => `  ${m.version}: ${m.title}\n`).join('')
  if (plan.migrations.length === 0) io.stdout(`${shown}: the schema is at version ${plan.from}, current; nothing to do\n`)
  else if (values['dry-run']) io.stdout(`${shown}: the schema is at version ${plan.from}; would apply ${plan.migrations.length} ${plan.migrations.length === 1 ? 'migration' : 'migrations'} (nothing was changed):\n${list}`)
  else io.stdout(`${shown}: applied ${plan.migrations.length} ${plan.migrations.length === 1 ? 'migration' : 'migrations'}, the schema is at version ${plan.to}:\n${list}`)
  return EXIT.ok
}
