// The one table of hookgate's commands: each command's name, summary, arguments and flags. The
// top-level help, every command's --help and usage line, and the flags each CLI parses are all
// generated from it, so a flag cannot be parsed without being documented (a test walks the table).
// Lives under runtime/ because `hookgate serve` must work without the compiler; it imports only
// node:util, and the compiler side may read it too.
import { parseArgs } from 'node:util'

export interface FlagSpec {
  /** long name without the dashes */
  name: string
  /** the value's placeholder (`DIR`, `N`); absent for an on/off flag */
  value?: string
  /** a value given when the flag is absent (also shown in the help) */
  default?: string
  /** may be given more than once */
  multiple?: boolean
  /** must be given (shown without brackets in the usage line) */
  required?: boolean
  description: string
}

/** Which side of the executable runs a command; `unavailable` ones only answer --help. */
export type CommandSide = 'compiler' | 'runtime' | 'import-openclaw' | 'admin' | 'gmail' | 'unavailable'

export interface CommandSpec {
  /** the words typed after `hookgate`, e.g. `compile` or `webhooks gmail setup` */
  name: string
  /** positional arguments as shown in the usage line, e.g. `[hooks.yaml]` */
  args: string
  summary: string
  flags: readonly FlagSpec[]
  side: CommandSide
  /** more lines for its --help, after the flags */
  notes?: readonly string[]
}

/** The flags of every command that edits hooks.yaml and recompiles it (trigger|task add|rm). */
const AGENT_FLAG: FlagSpec = { name: 'agent', value: 'ID', description: 'the agent (default: the default agent)' }
const EDIT_FLAGS: readonly FlagSpec[] = [
  { name: 'config', value: 'FILE', default: 'hooks.yaml', description: 'the config to edit' },
  { name: 'out', value: 'DIR', default: 'dist', description: 'where the recompiled bundle is written (the folder `hookgate serve --bundle` reads)' },
  { name: 'state', value: 'DIR', description: 'the state directory: where a generated hook token is saved (default: server.stateDir, else .hookgate beside the config)' },
]
/** trigger list and task list */
const LIST_FLAGS: readonly FlagSpec[] = [
  { name: 'agent', value: 'ID', description: 'only this agent\'s' },
  { name: 'json', description: 'print them as a JSON array on stdout' },
  { name: 'config', value: 'FILE', default: 'hooks.yaml', description: 'the config to read' },
  { name: 'state', value: 'DIR', description: 'the state directory whose run history shows each last run (default: server.stateDir, else .hookgate beside the config)' },
]
/** webhooks gmail login|setup|run */
const GMAIL_FLAGS: readonly FlagSpec[] = [
  { name: 'config', value: 'FILE', default: 'hooks.yaml', description: 'the config holding hooks.gmail' },
  { name: 'state', value: 'DIR', description: 'the state directory; the helper keeps its cursor, refresh token and push token in <state>/gmail (default: server.stateDir, else .hookgate beside the config)' },
]

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'compile',
    args: '[hooks.yaml]',
    summary: 'compile the config into a bundle (exit 0 good, 1 config errors, 2 usage or internal error)',
    side: 'compiler',
    flags: [
      { name: 'out', value: 'DIR', default: 'dist', description: 'the folder to write the bundle and manifest into' },
      { name: 'check', description: 'check only: write nothing, print nothing on success' },
      { name: 'format', value: 'text|json|github', default: 'text', description: 'findings as text lines on stderr, one JSON document on stdout, or GitHub Actions annotations' },
      { name: 'max-errors', value: 'N', default: '100', description: 'show at most N errors (warnings are always shown)' },
      { name: 'standalone', description: 'also write the runtime as one self-contained file (dist/hookgate-serve.mjs)' },
    ],
  },
  {
    name: 'schema',
    args: '',
    summary: 'print the JSON Schema of hooks.yaml (for editors)',
    side: 'compiler',
    flags: [],
  },
  {
    name: 'try',
    args: '<name>',
    summary: 'show what a mapping, /wake or /agent would answer for a payload, without serving',
    side: 'runtime',
    flags: [
      { name: 'payload', value: 'FILE', required: true, description: 'the request body (JSON) to try' },
      { name: 'bundle', value: 'PATH', default: 'dist', description: 'the compiled bundle: the --out folder or the bundle file in it' },
      { name: 'header', value: 'K:V', multiple: true, description: 'a request header the mapping sees (repeatable)' },
      { name: 'query', value: 'k=v', multiple: true, description: 'a query parameter the mapping sees (repeatable)' },
    ],
    notes: [
      '<name> is a mapping path under the base path, or `wake` / `agent` for the built-in endpoints',
      'exit 0 when the answer would be 2xx, 1 otherwise, 2 on a usage error',
    ],
  },
  {
    name: 'serve',
    args: '',
    summary: 'serve a compiled bundle (SIGHUP or a changed bundle reloads, SIGTERM drains and exits 0)',
    side: 'runtime',
    flags: [
      { name: 'bundle', value: 'PATH', default: 'dist', description: 'the compiled bundle: the --out folder or the bundle file in it' },
      { name: 'host', value: 'HOST', description: 'the address to listen on (default: server.host, else 127.0.0.1)' },
      { name: 'port', value: 'PORT', description: 'the port to listen on, 0 for a free one (default: server.port, else 8787)' },
      { name: 'state', value: 'DIR', description: 'the state directory: run history, sessions, lock (default: server.stateDir, else .hookgate)' },
      { name: 'store', value: 'URL', description: 'keep runs and sessions in PostgreSQL (postgres://…), which several runtimes may share, instead of the state directory (default: server.store in the bundle; the flag wins over it)' },
      { name: 'grace-seconds', value: 'N', default: '10', description: 'on SIGTERM, how long requests and running turns get to finish' },
      { name: 'log-bodies', description: 'log the first 2 KiB of each body (debugging only: bodies can carry secrets)' },
      { name: 'no-fsync', description: 'skip the store\'s fdatasync (benchmarks only: gives up durability)' },
    ],
  },
  {
    name: 'runs',
    args: '',
    summary: 'show the run history, newest first',
    side: 'runtime',
    flags: [
      { name: 'state', value: 'DIR', description: 'the state directory to read (default: .hookgate)' },
      { name: 'store', value: 'URL', description: 'read a PostgreSQL store (postgres://…) instead of the state directory' },
      { name: 'json', description: 'print the rows as a JSON array on stdout' },
      { name: 'limit', value: 'N', default: '50', description: 'show at most the newest N runs' },
      { name: 'kind', value: 'hook|trigger|task', description: 'only runs of this kind of definition' },
      { name: 'status', value: 'S', multiple: true, description: 'only runs in this status: queued, running, succeeded, failed, timed_out, skipped (repeatable, or a comma list)' },
      { name: 'definition', value: 'ID', description: 'only runs of this definition (a mapping, trigger or task id, or wake / agent)' },
      { name: 'since', value: 'DURATION', description: 'only runs created within this long, e.g. 90s, 15m, 2h, 7d' },
    ],
    notes: [
      'the filters combine (all must hold); --limit counts the runs that pass them',
    ],
  },
  {
    name: 'runs show',
    args: 'RUN_ID',
    summary: 'show one run: its row, its workflow steps, the runs sharing its correlation id and its replays',
    side: 'runtime',
    flags: [
      { name: 'state', value: 'DIR', description: 'the state directory to read (default: .hookgate)' },
      { name: 'store', value: 'URL', description: 'read a PostgreSQL store (postgres://…) instead of the state directory' },
      { name: 'json', description: 'print one JSON object {run, steps, correlated, replays} on stdout' },
    ],
    notes: ['exit 0 shown, 1 no run with that id, 2 usage error'],
  },
  {
    name: 'runs replay',
    args: 'RUN_ID',
    summary: 'send a past run\'s stored request again, through the running server and its current bundle, as a new run',
    side: 'runtime',
    flags: [
      { name: 'payload', value: 'FILE', description: 'a JSON body to send instead of the stored payload' },
      { name: 'state', value: 'DIR', description: 'the state directory holding the run history (default: .hookgate)' },
      { name: 'url', value: 'URL', default: 'http://127.0.0.1:8787', description: 'the running server' },
      { name: 'token-file', value: 'FILE', description: 'a file holding the hook token (default: $HOOKGATE_TOKEN, else <state>/token)' },
    ],
    notes: [
      'the new run has replayOf set to RUN_ID; secret headers were stored redacted and are not sent;',
      'a signed mapping takes the replay on the hook token (its signature is not checked again)',
      'exit 0 when the server accepted it (2xx), 1 when it refused it or the run has no stored request, 2 usage error',
    ],
  },
  {
    name: 'tasks',
    args: '',
    summary: 'list the scheduled tasks of a compiled bundle with their next firing times',
    side: 'runtime',
    flags: [
      { name: 'bundle', value: 'PATH', default: 'dist', description: 'the compiled bundle: the --out folder or the bundle file in it' },
      { name: 'state', value: 'DIR', description: 'the state directory whose run history shows each task\'s last firing (default: .hookgate)' },
      { name: 'store', value: 'URL', description: 'read each task\'s last firing from a PostgreSQL store (postgres://…) instead of the state directory (default: the bundle\'s server.store)' },
      { name: 'json', description: 'print the tasks as a JSON array on stdout' },
      { name: 'count', value: 'N', default: '5', description: 'how many next firing times to show per task' },
    ],
    notes: [
      'times are ISO-8601 UTC; a cron schedule is read in its task\'s timezone (default UTC)',
    ],
  },
  {
    name: 'rejects',
    args: '',
    summary: 'show refused requests and why (status, reason code, client, path), newest first',
    side: 'runtime',
    flags: [
      { name: 'state', value: 'DIR', description: 'the state directory to read (default: .hookgate)' },
      { name: 'store', value: 'URL', description: 'read a PostgreSQL store (postgres://…) instead of the state directory' },
      { name: 'json', description: 'print the records as a JSON array on stdout' },
      { name: 'limit', value: 'N', default: '50', description: 'show at most the newest N records' },
      { name: 'since', value: 'DURATION', description: 'only records seen within this long, e.g. 90s, 15m, 2h, 7d' },
    ],
    notes: [
      'identical refusals (same client, path, status and code) within one minute are one record with a count;',
      'the count of the current minute is written when the minute closes or the server stops',
    ],
  },
  {
    name: 'store migrate',
    args: '',
    summary: 'create or update the PostgreSQL store\'s tables (a runtime on that store does it itself at start)',
    side: 'runtime',
    flags: [
      { name: 'store', value: 'URL', description: 'the PostgreSQL store, postgres://user:password@host:port/database (default: $HOOKGATE_STORE_URL)' },
      { name: 'dry-run', description: 'print the migrations it would apply, and change nothing' },
    ],
    notes: [
      'migrations run in one transaction under a transaction-scoped advisory lock, so runtimes starting together migrate once;',
      'the URL is never printed with its password',
      'exit 0 when the schema is current (with --dry-run: when the plan was printed), 1 when the database cannot be reached or refuses it, 2 usage error',
    ],
  },
  {
    name: 'admin',
    args: '',
    summary: 'serve the operator page: Agents, their Tasks and Webhook Triggers, run history',
    side: 'admin',
    flags: [
      { name: 'config', value: 'FILE', default: 'hooks.yaml', description: 'the config the page edits (the source of truth: saves write it, then recompile)' },
      { name: 'out', value: 'DIR', default: 'dist', description: 'where a save writes the recompiled bundle (the folder `hookgate serve --bundle` reads and watches)' },
      { name: 'state', value: 'DIR', description: 'the runtime\'s state directory: run history, the runtime\'s address, tokens (default: server.stateDir, else .hookgate beside the config)' },
      { name: 'store', value: 'URL', description: 'show the run history of a PostgreSQL store (postgres://…) instead of the state directory\'s (default: server.store in the config)' },
      { name: 'host', value: 'HOST', default: '127.0.0.1', description: 'the address to listen on (loopback by default: the page edits the config)' },
      { name: 'port', value: 'PORT', default: '8790', description: 'the port to listen on, 0 for a free one' },
      { name: 'public-url', value: 'URL', description: 'the runtime\'s public URL, for the endpoint URLs the page shows (default: the address the runtime listens on)' },
    ],
    notes: [
      'the admin token is $HOOKGATE_ADMIN_TOKEN, else one generated into <state>/admin-token (mode 0600) and printed once;',
      'it must differ from the hook token. The page sends it as a header; nothing is kept in cookies',
    ],
  },
  {
    name: 'trigger add',
    args: '',
    summary: 'add (or with --replace, change) a Webhook Trigger under an agent in hooks.yaml, then recompile',
    side: 'admin',
    flags: [
      AGENT_FLAG,
      { name: 'name', value: 'NAME', required: true, description: 'Name: the human label; the Trigger\'s id is made from it' },
      { name: 'path', value: 'PATH', required: true, description: 'Path: the endpoint under the base path, e.g. deploys' },
      { name: 'target', value: 'agent|workflow|wake', required: true, description: 'Run target: Agent prompt, Workflow / graph, or Heartbeat wake' },
      { name: 'timing', value: 'now|next-heartbeat', description: 'Run timing of a wake (default now)' },
      { name: 'workflow', value: 'ID', description: 'Workflow target: a saved workflow (target workflow)' },
      { name: 'delivery', value: 'internal|deliver', description: 'Delivery of an agent\'s reply (default internal)' },
      { name: 'prompt', value: 'TEMPLATE', description: 'Prompt template, e.g. "Deploy {{payload.service}} finished"' },
      { name: 'channel', value: 'ID', description: 'Reply channel (delivery deliver; default last)' },
      { name: 'to', value: 'TARGET', description: 'Reply target within the channel' },
      { name: 'timeout', value: 'SECONDS', description: 'Timeout of the run' },
      { name: 'notify', value: 'silent|done|state', description: 'Notify policy of the run history (default done)' },
      { name: 'disabled', description: 'write it disabled: kept in the file, not served' },
      { name: 'replace', description: 'replace the Trigger of that name instead of refusing' },
      ...EDIT_FLAGS,
    ],
    notes: [
      'the edit is compiled before anything is written: a config error prints file:line:col findings and changes nothing (exit 1);',
      'hooks.enabled is set to true, and a hook token is generated into the state directory when hooks.token is missing;',
      'prints the endpoint URL and a curl line. Exit 0 saved, 1 refused (config error, name taken), 2 usage error',
      'or a file that could not be written (hooks.yaml and the bundle are then both left as they were)',
    ],
  },
  {
    name: 'trigger list',
    args: '',
    summary: 'list the Webhook Triggers in hooks.yaml with their endpoint and last run',
    side: 'admin',
    flags: [
      ...LIST_FLAGS,
    ],
  },
  {
    name: 'trigger rm',
    args: 'NAME',
    summary: 'remove a Webhook Trigger from hooks.yaml, then recompile',
    side: 'admin',
    flags: [
      AGENT_FLAG,
      ...EDIT_FLAGS,
    ],
  },
  {
    name: 'task add',
    args: '',
    summary: 'add (or with --replace, change) a scheduled Task under an agent in hooks.yaml, then recompile',
    side: 'admin',
    flags: [
      AGENT_FLAG,
      { name: 'name', value: 'NAME', required: true, description: 'the Task\'s name; its id is made from it' },
      { name: 'schedule', value: 'CRON', description: 'a five-field cron expression or @hourly, @daily, @weekly, @monthly, @yearly' },
      { name: 'every', value: 'INTERVAL', description: 'a fixed interval instead of --schedule, e.g. 90s, 15m, 2h, 1d' },
      { name: 'timezone', value: 'ZONE', description: 'the IANA time zone the schedule is read in (default UTC)' },
      { name: 'catch-up', value: 'once|skip', description: 'a slot missed while the service was down: run it once at start, or skip it (default once)' },
      { name: 'target', value: 'agent|workflow|wake', required: true, description: 'what each firing runs' },
      { name: 'workflow', value: 'ID', description: 'a saved workflow (target workflow)' },
      { name: 'prompt', value: 'TEXT', description: 'the agent prompt or wake text' },
      { name: 'timeout', value: 'SECONDS', description: 'Timeout of each run' },
      { name: 'notify', value: 'silent|done|state', description: 'Notify policy of the run history (default done)' },
      { name: 'disabled', description: 'write it disabled: kept in the file, not scheduled' },
      { name: 'replace', description: 'replace the Task of that name instead of refusing' },
      ...EDIT_FLAGS,
    ],
    notes: [
      'prints the next five firing times. Exit 0 saved, 1 refused (config error, name taken), 2 usage error',
      'or a file that could not be written (hooks.yaml and the bundle are then both left as they were)',
    ],
  },
  {
    name: 'task list',
    args: '',
    summary: 'list the scheduled Tasks in hooks.yaml with their next firing and last run',
    side: 'admin',
    flags: [
      ...LIST_FLAGS,
    ],
  },
  {
    name: 'task rm',
    args: 'NAME',
    summary: 'remove a scheduled Task from hooks.yaml, then recompile',
    side: 'admin',
    flags: [
      AGENT_FLAG,
      ...EDIT_FLAGS,
    ],
  },
  {
    name: 'import openclaw',
    args: 'FILE',
    summary: 'convert an OpenClaw hooks config (JSON5) into a hooks.yaml',
    side: 'import-openclaw',
    flags: [
      { name: 'out', value: 'FILE', default: 'hooks.yaml', description: 'where to write the converted config' },
      { name: 'force', description: 'overwrite --out (and a copied transforms folder) when it exists' },
    ],
    notes: [
      'FILE: the whole OpenClaw config (JSON5, e.g. ~/.openclaw/openclaw.json) or its hooks block alone',
      'exit 0 converted and compiles; 1 written, but keys not carried or compile errors; 2 usage error or unreadable input',
    ],
  },
  {
    name: 'webhooks gmail login',
    args: '',
    summary: 'let hookgate read a Gmail mailbox: Google\'s sign-in in a browser, the refresh token kept in the state directory',
    side: 'gmail',
    flags: [
      { name: 'client', value: 'FILE', required: true, description: 'the OAuth client file (Google Cloud console: APIs & Services → Credentials → OAuth client ID, type Desktop app → Download JSON)' },
      { name: 'account', value: 'EMAIL', description: 'the mailbox to sign in as (default: hooks.gmail.account)' },
      ...GMAIL_FLAGS,
      { name: 'timeout-seconds', value: 'N', default: '300', description: 'how long to wait for the browser' },
    ],
    notes: [
      'prints a URL to open; after the consent, Google redirects to a listener on 127.0.0.1 and the refresh token',
      'is saved in <state>/gmail/refresh-token.json (mode 0600). It is never printed or logged',
    ],
  },
  {
    name: 'webhooks gmail setup',
    args: '',
    summary: 'set up Gmail push: the Pub/Sub topic, its publisher grant, the push subscription, the watch, and hooks.gmail',
    side: 'gmail',
    flags: [
      { name: 'account', value: 'EMAIL', description: 'the mailbox to watch (default: hooks.gmail.account; required the first time)' },
      { name: 'project', value: 'ID', description: 'the Google Cloud project for the topic (default: hooks.gmail.project, else the Pub/Sub key\'s project)' },
      { name: 'topic', value: 'NAME', description: 'the Pub/Sub topic (default: hooks.gmail.topic, else hookgate-gmail)' },
      { name: 'subscription', value: 'NAME', description: 'the push subscription (default: hooks.gmail.subscription, else hookgate-gmail-push)' },
      { name: 'label', value: 'LABEL', multiple: true, description: 'watch only mail with this label (repeatable; default: hooks.gmail.labels, else INBOX)' },
      { name: 'push-endpoint', value: 'URL', description: 'the public https URL Pub/Sub pushes to, reaching the receiver (required the first time)' },
      { name: 'hook-url', value: 'URL', description: 'where the helper posts mail (default: this hookgate\'s /hooks/gmail)' },
      { name: 'receiver-host', value: 'HOST', description: 'the receiver\'s bind address (default 127.0.0.1)' },
      { name: 'receiver-port', value: 'PORT', description: 'the receiver\'s port (default 8788)' },
      { name: 'receiver-path', value: 'PATH', description: 'the receiver\'s path (default /gmail-pubsub)' },
      { name: 'include-body', value: 'yes|no', description: 'send each message\'s body as text, not only its snippet (default yes)' },
      { name: 'max-bytes', value: 'N', description: 'the most body bytes sent per message (default 20000)' },
      { name: 'renew-every-minutes', value: 'N', description: 'how often run renews the watch (default 720; Gmail\'s watch lasts 7 days)' },
      { name: 'pubsub-key', value: 'FILE', description: 'a service-account key file that may administer Pub/Sub in the project (written to hooks.gmail as a { file } reference)' },
      { name: 'oauth-client', value: 'FILE', description: 'the OAuth client file whose refresh token `login` stored (reads the mailbox)' },
      { name: 'gmail-key', value: 'FILE', description: 'instead of --oauth-client: a service-account key with domain-wide delegation' },
      { name: 'subject', value: 'EMAIL', description: 'with --gmail-key: the mailbox it acts as (default: --account)' },
      { name: 'oidc-service-account', value: 'EMAIL', description: 'have Pub/Sub sign each push as this service account, and run check it' },
      { name: 'oidc-audience', value: 'URL', description: 'the audience of those tokens (default: --push-endpoint)' },
      ...GMAIL_FLAGS,
      { name: 'out', value: 'DIR', default: 'dist', description: 'where the recompiled bundle is written when hooks.yaml changes (the folder `hookgate serve --bundle` reads)' },
      { name: 'dry-run', description: 'print the plan and call nothing, write nothing' },
    ],
    notes: [
      'each step is checked first and left alone when it is already right, so running setup again changes nothing;',
      'exit 0 done (or planned), 1 refused by Google or by the config, 2 usage error',
    ],
  },
  {
    name: 'webhooks gmail run',
    args: '',
    summary: 'run the Gmail helper: receive Pub/Sub pushes, fetch the new mail, post it to /hooks/gmail, renew the watch',
    side: 'gmail',
    flags: [
      ...GMAIL_FLAGS,
    ],
    notes: [
      'the receiver listens on hooks.gmail.receiver (default 127.0.0.1:8788, path /gmail-pubsub) and answers GET /healthz;',
      'a push is acknowledged only after the hook accepted its messages; SIGTERM stops it',
    ],
  },
]

const PROGRAM = 'hookgate'

/** The command the words of argv name (the longest match), and the words after it. */
export function findCommand(argv: readonly string[]): { command: CommandSpec; rest: string[] } | undefined {
  let best: CommandSpec | undefined
  for (const c of COMMANDS) {
    const words = c.name.split(' ')
    if (words.every((w, i) => argv[i] === w) && (!best || words.length > best.name.split(' ').length)) best = c
  }
  return best && { command: best, rest: argv.slice(best.name.split(' ').length) }
}

/** Words that only group subcommands (`import`, `webhooks`, `webhooks gmail`), each with its members. */
export function commandGroups(): Map<string, CommandSpec[]> {
  const groups = new Map<string, CommandSpec[]>()
  for (const c of COMMANDS) {
    const words = c.name.split(' ')
    for (let n = 1; n < words.length; n++) {
      const prefix = words.slice(0, n).join(' ')
      groups.set(prefix, [...(groups.get(prefix) ?? []), c])
    }
  }
  return groups
}

export function getCommand(name: string): CommandSpec {
  const c = COMMANDS.find((x) => x.name === name)
  if (!c) throw new Error(`no command "${name}" in the command table`)
  return c
}

function flagSynopsis(f: FlagSpec): string {
  const word = f.value ? `--${f.name} ${f.value}` : `--${f.name}`
  const repeated = f.multiple ? `${word} ...` : word
  return f.required ? repeated : `[${repeated}]`
}

/** `try <name> --payload FILE [--bundle PATH] …`: the command with every flag it takes */
export function synopsis(c: CommandSpec): string {
  return [c.name, c.args, ...c.flags.map(flagSynopsis)].filter(Boolean).join(' ')
}

/** `usage: hookgate try <name> --payload FILE [--bundle PATH] …` */
export function usageLine(c: CommandSpec): string {
  return `usage: ${PROGRAM} ${synopsis(c)}`
}

/** What `hookgate <command> --help` prints: usage, summary, every flag with its description. */
export function commandHelp(c: CommandSpec): string {
  const rows: Array<[string, string]> = c.flags.map((f) => [
    f.value ? `--${f.name} ${f.value}` : `--${f.name}`,
    f.description + (f.default !== undefined ? ` (default: ${f.default})` : '') + (f.required ? ' (required)' : ''),
  ])
  rows.push(['-h, --help', 'show this help'])
  const width = Math.max(...rows.map(([l]) => l.length))
  const lines = [usageLine(c), '', c.summary, '', 'options:', ...rows.map(([l, d]) => `  ${l.padEnd(width)}  ${d}`)]
  if (c.notes?.length) lines.push('', ...c.notes)
  // a command that also groups others (`runs`, `runs show`): its help names them too
  const members = commandGroups().get(c.name)
  if (members) lines.push('', 'commands:', ...members.map((m) => `  ${synopsis(m)}\n      ${m.summary}`))
  if (c.side === 'unavailable') lines.push('', 'not available in this build yet')
  return lines.join('\n') + '\n'
}

/** What `hookgate <group> --help` prints, e.g. for `webhooks gmail`. */
export function groupHelp(group: string): string {
  const members = commandGroups().get(group) ?? []
  return [`usage: ${PROGRAM} ${group} <command> [options]`, '', 'commands:', ...members.map((c) => `  ${synopsis(c)}\n      ${c.summary}`), '', `run \`${PROGRAM} ${group} <command> --help\` for one command's options`].join('\n') + '\n'
}

/** What `hookgate --help` prints: every command with its full usage line and summary. */
export function topLevelHelp(): string {
  return [
    `usage: ${PROGRAM} <command> [options]`,
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${synopsis(c)}\n      ${c.summary}${c.side === 'unavailable' ? ' (not available in this build yet)' : ''}`),
    '',
    '  help [command]',
    "      this help, or one command's",
    '  --version, -v',
    '      print the version',
    '',
    `run \`${PROGRAM} <command> --help\` for a command's options and defaults`,
  ].join('\n') + '\n'
}

/** Whether argv asks for help (before a `--` that ends the options). */
export function wantsHelp(argv: readonly string[]): boolean {
  for (const a of argv) {
    if (a === '--') return false
    if (a === '--help' || a === '-h') return true
  }
  return false
}

export type ParsedCommand =
  | { kind: 'help' }
  | { kind: 'usage-error'; message: string }
  | { kind: 'ok'; values: Record<string, string | boolean | string[] | undefined>; positionals: string[] }

/** Parses argv with exactly the flags the table lists for the command (plus -h/--help). */
export function parseCommandArgs(c: CommandSpec, argv: readonly string[]): ParsedCommand {
  if (wantsHelp(argv)) return { kind: 'help' }
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; default?: string | string[] }> = {}
  for (const f of c.flags) {
    options[f.name] = f.value
      ? { type: 'string', ...(f.multiple ? { multiple: true, default: f.default !== undefined ? [f.default] : [] } : f.default !== undefined ? { default: f.default } : {}) }
      : { type: 'boolean' }
  }
  try {
    const { values, positionals } = parseArgs({ args: [...argv], options, allowPositionals: c.args !== '', strict: true })
    // the table marks them required: the usage line shows them without brackets, and so they are
    const missing = c.flags.filter((f) => f.required && f.default === undefined && (values[f.name] === undefined || values[f.name] === ''))
    if (missing.length > 0) return { kind: 'usage-error', message: `missing ${missing.map((f) => `--${f.name}`).join(', ')}` }
    return { kind: 'ok', values: values as Record<string, string | boolean | string[] | undefined>, positionals }
  } catch (err) {
    return { kind: 'usage-error', message: (err as Error).message }
  }
}

/**
 * The shared front of every command: help on stdout (0), a usage error with the usage line on
 * stderr (2), else the parsed flags. `write` is injectable for commands tested in-process.
 */
export function readCommandArgs(name: string, argv: readonly string[], io: { stdout(text: string): void; stderr(text: string): void } = processIO): ParsedCommand & { exit?: number } {
  const c = getCommand(name)
  const parsed = parseCommandArgs(c, argv)
  if (parsed.kind === 'help') {
    io.stdout(commandHelp(c))
    return { ...parsed, exit: 0 }
  }
  if (parsed.kind === 'usage-error') {
    io.stderr(`${PROGRAM} ${name}: ${parsed.message}\n${usageLine(c)}\n`)
    return { ...parsed, exit: 2 }
  }
  return parsed
}

/** Where a command's output goes: the process's stdout and stderr (tests pass their own). */
export const processIO = {
  stdout: (text: string) => { process.stdout.write(text) },
  stderr: (text: string) => { process.stderr.write(text) },
}
