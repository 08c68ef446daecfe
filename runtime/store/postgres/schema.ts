// The PostgreSQL store's schema, as numbered migrations. The runtime applies the missing ones itself
// at start, in one transaction under a transaction-scoped advisory lock (so several runtimes
// starting together migrate once, and it works behind pgbouncer in transaction mode, where a
// session lock would not hold); `hookgate store migrate --dry-run` prints what it would run.
//
// Tables are prefixed `hookgate_` so the store can share a database with other applications.
// Soft state that may be lost in a database crash (leases, lock-out counters) is UNLOGGED: cheaper
// to write, and what it holds is rebuilt or re-earned within seconds.

export interface Migration {
  version: number
  /** what it does, one line (shown by --dry-run) */
  title: string
  sql: string
}

/** The key of the transaction-scoped advisory lock migrations run under ('hookgate' as bytes). */
export const MIGRATION_LOCK_KEY = 0x686f6f6b67617465n

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    title: 'runs, idempotency keys, record logs, hosts, session leases, lock-out counters, rejected requests',
    sql: `
CREATE TABLE hookgate_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());

-- One row per run. The columns are what queries filter and claim on; the row as the runtime
-- sees it is in row (jsonb), with request (for a resume) and received (for a replay) beside it so
-- that a listing does not read them.
CREATE TABLE hookgate_runs (
  id text PRIMARY KEY,
  status text NOT NULL,
  action text NOT NULL,
  definition_kind text NOT NULL,
  definition_id text NOT NULL,
  correlation_id text NOT NULL,
  agent_id text,
  parent_run_id text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  -- the runtime that runs it, and a counter bumped whenever another takes it over: a write that
  -- names an older fence is from a runtime that lost the run and changes nothing
  owner text NOT NULL,
  fence bigint NOT NULL DEFAULT 1,
  row jsonb NOT NULL,
  request jsonb,
  received jsonb
);
CREATE INDEX hookgate_runs_created ON hookgate_runs (created_at DESC, id DESC);
CREATE INDEX hookgate_runs_unfinished ON hookgate_runs (owner) WHERE status IN ('queued', 'running');
CREATE INDEX hookgate_runs_parent ON hookgate_runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE INDEX hookgate_runs_correlation ON hookgate_runs (correlation_id);

-- Idempotency-Key → the run it started and the answer it got. Written in the same statement as
-- the run, so a key has at most one run across every runtime; a concurrent duplicate waits on the
-- unique key for the first one's commit. A key past the window may be taken again.
CREATE TABLE hookgate_idempotency (
  key text PRIMARY KEY,
  fingerprint text NOT NULL,
  run_id text NOT NULL,
  response jsonb NOT NULL,
  created_at timestamptz NOT NULL
);

-- Record logs (an agent's main session, the isolated transcripts), in append order.
CREATE TABLE hookgate_logs (
  log text NOT NULL,
  seq bigserial,
  record jsonb NOT NULL,
  PRIMARY KEY (log, seq)
);

-- The runtimes sharing the database: each renews its row; one whose row expired is dead, and
-- the others take over its unfinished runs.
CREATE UNLOGGED TABLE hookgate_hosts (
  id text PRIMARY KEY,
  started_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);

-- One heartbeat turn per agent session at a time: the owner's lease, fenced.
CREATE UNLOGGED TABLE hookgate_session_leases (
  agent_id text PRIMARY KEY,
  owner text NOT NULL,
  fence bigint NOT NULL,
  expires_at timestamptz NOT NULL
);

-- Failed logins per client address, merged from every runtime's local counters.
CREATE UNLOGGED TABLE hookgate_auth_failures (
  client text PRIMARY KEY,
  failures integer NOT NULL,
  window_start timestamptz NOT NULL,
  locked_until timestamptz
);

-- The rejected-request log: one row per bucket (client, path, status, code, minute).
CREATE TABLE hookgate_rejects (
  id text PRIMARY KEY,
  last_at timestamptz NOT NULL,
  record jsonb NOT NULL
);
CREATE INDEX hookgate_rejects_last ON hookgate_rejects (last_at DESC);
`,
  },
  {
    version: 2,
    title: 'several runtimes: logged host and session leases, the session inbox, indexes for takeover and wake pulls',
    sql: `
-- A crash of the database empties an UNLOGGED table: every live runtime would look dead to the
-- others (its runs taken over for nothing), and a session lease's fence would start again at 1,
-- so that a runtime paused past its lease could commit a turn under a fence reissued to another.
-- Both tables are small and written every few seconds: logging them costs little.
ALTER TABLE hookgate_hosts SET LOGGED;
ALTER TABLE hookgate_session_leases SET LOGGED;

-- Events for an agent's main session queued by any runtime (an isolated run's summary, a workflow
-- step's event): the session's owner moves them into the session's log, in one statement, and
-- queues them for its next turn. The key makes a second queueing of one event (a run resumed
-- after a crash) a no-op.
CREATE TABLE hookgate_session_inbox (
  log text NOT NULL,
  id text NOT NULL,
  record jsonb NOT NULL,
  -- the event asks for a turn at once (an isolated run's summary with wakeMode now)
  now boolean NOT NULL DEFAULT false,
  queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (log, id)
);

-- Each agent's last delivery route (channel: last), whichever runtime delivered: every runtime
-- reads them with its lease renewal, so a reply delivered by one goes where another last delivered.
CREATE TABLE hookgate_routes (
  agent_id text PRIMARY KEY,
  route jsonb NOT NULL,
  at timestamptz NOT NULL
);

-- The wakes a session owner pulls: queued wake rows of its agents accepted elsewhere.
CREATE INDEX hookgate_runs_queued_wakes ON hookgate_runs (agent_id) WHERE action = 'wake' AND status = 'queued';

-- A run taken over needs its transcript records (a reply already asked for is not asked again).
CREATE INDEX hookgate_logs_isolated_run ON hookgate_logs ((record->>'runId')) WHERE log = 'isolated';

-- The rejected-request log is a record log (hookgate_logs, log 'rejects'): this table was never written.
DROP TABLE hookgate_rejects;

-- Nothing queries by correlation id (the history is read whole and filtered), and every insert and
-- status change of a run paid for the index.
DROP INDEX hookgate_runs_correlation;
`,
  },
  {
    version: 3,
    title: 'lock-out counters: an index on locked_until, for the clients locked out now that every flush reads back',
    sql: `
CREATE INDEX hookgate_auth_failures_locked ON hookgate_auth_failures (locked_until) WHERE locked_until IS NOT NULL;
`,
  },
  {
    version: 4,
    title: 'what requests, models and transforms produce is kept as json (as sent: a \\u0000 or a lone surrogate included); what queries select by gets columns of its own',
    sql: `
-- jsonb refuses \\u0000 and unpaired surrogate escapes, which JSON allows and the file store keeps:
-- one such payload failed the whole commit it shared with other senders' writes. json keeps the
-- text as it was given (checking only its syntax), so a value round-trips exactly. No query may
-- look inside these columns (every json function de-escapes, and fails on \\u0000): what queries
-- select by is copied into columns beside them, written by the runtime with the record.
ALTER TABLE hookgate_runs ADD COLUMN scheduled_for text;
UPDATE hookgate_runs SET scheduled_for = row->>'scheduledFor' WHERE row ? 'scheduledFor';
-- A fan-out's runs share the request they came from, kept by one of them (receivedIn names it).
ALTER TABLE hookgate_runs ADD COLUMN received_in text;
ALTER TABLE hookgate_runs
  ALTER COLUMN row TYPE json USING row::json,
  ALTER COLUMN request TYPE json USING request::json,
  ALTER COLUMN received TYPE json USING received::json;
ALTER TABLE hookgate_idempotency ALTER COLUMN response TYPE json USING response::json;

-- A record's type, its reference (an isolated record's run, a session record's id) and a turn's
-- events: what takeover and pruning select by.
ALTER TABLE hookgate_logs ADD COLUMN kind text, ADD COLUMN ref text, ADD COLUMN refs text[];
UPDATE hookgate_logs SET
  kind = record->>'type',
  ref = CASE WHEN log = 'isolated' THEN record->>'runId' ELSE record->>'id' END,
  refs = CASE WHEN record->>'type' = 'turn' AND jsonb_typeof(record->'events') = 'array'
    THEN ARRAY(SELECT jsonb_array_elements_text(record->'events')) END;
DROP INDEX hookgate_logs_isolated_run;
ALTER TABLE hookgate_logs ALTER COLUMN record TYPE json USING record::json;
CREATE INDEX hookgate_logs_isolated_run ON hookgate_logs (ref) WHERE log = 'isolated';

ALTER TABLE hookgate_session_inbox ALTER COLUMN record TYPE json USING record::json;
ALTER TABLE hookgate_routes ALTER COLUMN route TYPE json USING route::json;
`,
  },
  {
    version: 5,
    title: 'several runtimes: one isolated turn per session key at a time, by lease',
    sql: `
-- The runtime running an isolated turn under a session key holds the key's lease (its own runtime
-- orders the turns it has in memory) and renews it while the turn runs; the others wait until it
-- lets go, or until the lease runs out (a runtime that died). The key is a hash of the session key
-- (a session key may be long, or hold what a text column cannot). Logged, as the session leases:
-- a database crash must not hand a key to a second runtime while the first one's turn runs.
-- A runtime that finds the key held marks itself its waiter (renewed while it waits): the holder
-- then lets the key go to it instead of taking it again for its own next turn, so that runtimes
-- take turns on a busy key and none waits for ever.
CREATE TABLE hookgate_key_leases (
  key text PRIMARY KEY,
  owner text NOT NULL,
  run_id text NOT NULL,
  expires_at timestamptz NOT NULL,
  waiter text,
  waiter_until timestamptz
);
`,
  },
]

/** The newest schema version this runtime knows. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version

/** The migrations a database at `current` (0: empty) still needs, in order. */
export function pendingMigrations(current: number): Migration[] {
  return MIGRATIONS.filter((m) => m.version > current)
}
