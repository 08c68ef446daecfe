// Owns the one shape every compiler finding takes, the stable codes, the output formats
// (text, json, github) and the CLI exit codes. Codes never change once released.

export type Severity = 'error' | 'warning'

export interface Diagnostic {
  code: string
  severity: Severity
  message: string
  /** path of the file, as the user named it (relative to the working directory where possible) */
  file: string
  /** 1-based */
  line: number
  /** 1-based */
  column: number
  /** JSON pointer inside the config, '' for the whole document or a non-config file */
  path: string
  hint?: string
}

export interface Location {
  file: string
  line: number
  column: number
  path: string
}

/** Every code the compiler can report, with what it means (docs/diagnostics are generated from this). */
export const DiagnosticCodes = {
  YAML_SYNTAX: 'the file is not valid YAML',
  YAML_UNQUOTED_REFERENCE: 'an unquoted ${…} stands inside a YAML flow collection ({ … } or [ … ]), where { and } are syntax: quote the value',
  YAML_DUPLICATE_KEY: 'a key appears twice in one mapping',
  YAML_ALIAS_EXPANSION: 'YAML aliases would add more than 1 MiB to the config when expanded',
  CONFIG_FILE_UNREADABLE: 'the config file cannot be read',
  SCHEMA_UNKNOWN_KEY: 'a key the schema does not know',
  SCHEMA_MISSING_KEY: 'a required key is missing',
  SCHEMA_TYPE: 'a value has the wrong type',
  SCHEMA_ENUM: 'a value is not one of the allowed values',
  SCHEMA_RANGE: 'a number or length is out of range',
  SCHEMA_FORMAT: 'a string does not have the required form',
  SCHEMA_INVALID: 'a value does not match the schema',
  TOKEN_REQUIRED: 'hooks.token is required when hooks.enabled is true',
  HOOKS_DISABLED: 'hooks.enabled is false: the server answers 404 hooks_disabled on every hook path',
  TOKEN_LITERAL: 'hooks.token is written in the file instead of a secret reference',
  TOKEN_SHORT: 'hooks.token is shorter than 24 characters',
  SECRET_REF_INVALID: 'a secret reference is malformed',
  SECRET_LITERAL: 'a secret other than hooks.token is written in the file',
  URL_CREDENTIALS: 'a URL written in the file carries a credential (user info, a key or token query parameter, a Slack or Discord webhook address)',
  BASE_PATH_INVALID: 'hooks.path is "/" or not a usable URL path',
  BASE_PATH_NORMALISED: 'hooks.path was written in a non-canonical form',
  MATCH_PATH_INVALID: 'a mapping path is empty or not a usable URL path',
  RESERVED_PATH: 'a mapping tries to capture the reserved /wake or /agent',
  DUPLICATE_MAPPING_ID: 'two mappings have the same id',
  DUPLICATE_MATCH: 'two mappings have the same path and the same match',
  UNREACHABLE_MAPPING: 'a mapping can never match because an earlier one catches everything it would',
  PRESET_SHADOWED: 'a user mapping on the same path shadows a preset mapping',
  PRESET_UNKNOWN: 'a preset name hookgate does not ship',
  SESSION_KEY_PREFIX: 'hooks.defaultSessionKey or the sessionKey of an agent mapping does not start with any allowed prefix',
  AGENT_DEFAULT: 'not exactly one default agent',
  AGENT_DUPLICATE_ID: 'two agents have the same id',
  AGENT_UNKNOWN: 'an agentId names no declared agent',
  AGENT_NOT_ALLOWED: 'a mapping routes to an agent that hooks.allowedAgentIds blocks',
  MODEL_INVALID: 'a model is not written as provider/model or names an unknown provider',
  THINKING_UNSUPPORTED: 'thinking is set for a model whose provider has no reasoning setting',
  PROVIDER_DUPLICATE_ID: 'two providers have the same id',
  CHANNEL_DUPLICATE_ID: 'two channels have the same id',
  CHANNEL_UNKNOWN: 'a channel reference names no declared channel',
  CHANNEL_FIELD_MISSING: 'a channel lacks a field its type needs',
  CHANNEL_FIELD_IGNORED: 'a channel sets a field its type does not use',
  WORKFLOW_UNKNOWN: 'a workflow reference names no declared workflow',
  WORKFLOW_MISSING: 'a workflow action has no workflow target',
  WORKFLOW_DUPLICATE_ID: 'two workflows or two steps of one workflow have the same id',
  WORKFLOW_STEP_UNKNOWN: 'a workflow step needs a step that does not exist',
  WORKFLOW_CYCLE: 'the steps of a workflow depend on each other in a cycle',
  WORKFLOW_STEP_FIELD_MISSING: 'a workflow step lacks a field its action needs (url for http, transform for transform, channel for deliver)',
  WORKFLOW_STEP_REF_UNKNOWN: 'a step template reads {{steps.<id>}} of a step that does not exist',
  WORKFLOW_STEP_REF_NOT_NEEDED: 'a step template reads the output of a step it does not need (directly or through other steps)',
  WORKFLOW_HTTP_URL_INVALID: 'an http step\'s url is not an absolute http or https URL, or its literal path has a "." or ".." segment',
  WORKFLOW_HTTP_HOST_TEMPLATED: 'an http step\'s url has a template before its path: the host must be written out',
  ACTION_FIELD_IGNORED: 'a mapping sets a field its action does not use',
  TEMPLATE_SYNTAX: 'a template is malformed',
  TEMPLATE_UNKNOWN_ROOT: 'a template names a variable that does not exist',
  TEMPLATE_FORBIDDEN_KEY: 'a template reads __proto__, prototype or constructor',
  FOR_EACH_INVALID: 'a mapping\'s forEach is not a single {{payload…}} reference to an array',
  CONDITION_INVALID: 'a match.when condition or its operand has the wrong shape (an empty condition, in without a list, exists without true or false)',
  CONDITION_OPERATOR_UNKNOWN: 'a match.when uses an operator other than equals, in, exists, matches, all, any and not',
  CONDITION_PATH_INVALID: 'a match.when path is malformed or does not start with payload, body, headers or query',
  CONDITION_REGEX_INVALID: 'a match.when matches is not a valid regular expression',
  CONDITION_REGEX_UNSUPPORTED: 'a match.when matches uses what RE2 does not have (backreferences, lookahead, lookbehind) or JavaScript-only syntax such as \\u escapes',
  CONDITION_REGEX_UNSAFE: 'the match.when patterns one request on a hook name may run could take too long: their RE2 program sizes times the body limit exceed the work budget',
  SIGNATURE_PATH_SHARED: 'a mapping with a signature shares its path with another mapping (a signed mapping must be alone on its path)',
  SIGNATURE_FIELD_MISSING: 'a signature block lacks a key its scheme needs (hmac without header, {{timestamp}} without timestampHeader)',
  SIGNATURE_FIELD_UNUSED: 'a signature block sets a key its scheme does not read (hmac keys on a named scheme, answerPing off github, toleranceSeconds without a signed timestamp)',
  SIGNATURE_TEMPLATE_INVALID: 'a signature signedString is malformed, names something other than {{timestamp}} and {{body}}, or leaves out {{body}}',
  TRANSFORMS_DIR_ESCAPE: 'hooks.transformsDir is outside the directory tree of hooks.yaml',
  TRANSFORMS_DIR_MISSING: 'hooks.transformsDir does not exist or is not a directory',
  TRANSFORMS_DIR_REQUIRED: 'a mapping has a transform but hooks.transformsDir is not set',
  TRANSFORM_PATH_ESCAPE: 'transform.module is absolute, contains "..", or resolves outside transformsDir',
  TRANSFORM_NOT_FOUND: 'transform.module does not exist',
  TRANSFORM_EXPORT_MISSING: 'the transform module does not export the named function',
  TRANSFORM_ENV_SECRET: 'transform.env lists the variable that holds hooks.token',
  TRANSFORM_BUILD: 'esbuild could not build the transform module',
  CRON_INVALID: 'a task schedule is not a valid five-field cron expression',
  CRON_NEVER_FIRES: 'a task schedule names days that never occur in its months (e.g. 30 2)',
  DEFINITION_DUPLICATE_NAME: 'two Triggers, or two Tasks, of one agent have the same name (their ids are made from it)',
  TASK_SCHEDULE_MISSING: 'a task has neither schedule nor every',
  TASK_SCHEDULE_TWICE: 'a task has both schedule and every',
  TASK_TIMEZONE_WITH_EVERY: 'a task with every also sets timezone, which only applies to schedule',
  EVERY_INVALID: 'a task interval is not a whole number of s, m, h or d',
  TIMEZONE_UNKNOWN: 'a task timezone is not an IANA time zone name this Node knows',
  TOO_MANY_ERRORS: 'more errors were found than --max-errors allows to print',
} as const

export type DiagnosticCode = keyof typeof DiagnosticCodes

/** Collects findings from every phase; phases never throw for config mistakes. */
export class DiagnosticBag {
  readonly items: Diagnostic[] = []

  error(code: DiagnosticCode, message: string, at: Location, hint?: string): void {
    this.add('error', code, message, at, hint)
  }

  warning(code: DiagnosticCode, message: string, at: Location, hint?: string): void {
    this.add('warning', code, message, at, hint)
  }

  get errorCount(): number {
    return this.items.filter((d) => d.severity === 'error').length
  }

  get hasErrors(): boolean {
    return this.items.some((d) => d.severity === 'error')
  }

  /** By file, then position, then code, so that output is stable run to run. */
  sorted(): Diagnostic[] {
    return [...this.items].sort(compareDiagnostics)
  }

  private add(severity: Severity, code: DiagnosticCode, message: string, at: Location, hint?: string): void {
    const d: Diagnostic = { code, severity, message, file: at.file, line: at.line, column: at.column, path: at.path }
    if (hint) d.hint = hint
    // Two phases may find the same thing at the same node (e.g. a type error seen by two schema
    // branches); report it once.
    if (this.items.some((x) => x.code === d.code && x.line === d.line && x.column === d.column && x.file === d.file && x.message === d.message)) return
    this.items.push(d)
  }
}

export function compareDiagnostics(a: Diagnostic, b: Diagnostic): number {
  return a.file < b.file ? -1 : a.file > b.file ? 1
    : a.line - b.line || a.column - b.column || (a.code < b.code ? -1 : a.code > b.code ? 1 : 0) || (a.message < b.message ? -1 : a.message > b.message ? 1 : 0)
}

/** One finding is one line (plus its hint): control characters from user text are escaped. */
export function formatText(d: Diagnostic): string {
  const head = `${oneLine(d.file)}:${d.line}:${d.column}: ${d.severity} ${d.code}: ${oneLine(d.message)}`
  return d.hint ? `${head}\n  hint: ${oneLine(d.hint)}` : head
}

function oneLine(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f\u2028\u2029]/g, (c) => (c === '\n' ? '\\n' : c === '\r' ? '\\r' : c === '\t' ? '\\t' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`))
}

/** GitHub Actions workflow commands; properties and data are escaped as the runner expects. */
export function formatGithub(d: Diagnostic): string {
  const prop = (s: string) => s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A').replace(/:/g, '%3A').replace(/,/g, '%2C')
  const data = (s: string) => s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A')
  const text = d.hint ? `${d.message} (hint: ${d.hint})` : d.message
  return `::${d.severity} file=${prop(d.file)},line=${d.line},col=${d.column},title=${prop(d.code)}::${data(text)}`
}

export function formatJson(list: Diagnostic[]): string {
  return JSON.stringify({
    errors: list.filter((d) => d.severity === 'error'),
    warnings: list.filter((d) => d.severity === 'warning'),
  }, null, 2)
}

/** What `--max-errors` lets through of a sorted list: every warning and the first `maxErrors` errors, in order. */
export function capErrors(list: readonly Diagnostic[], maxErrors: number): { shown: Diagnostic[]; hiddenErrors: number } {
  let errors = 0
  const shown = list.filter((d) => d.severity === 'warning' || ++errors <= maxErrors)
  return { shown, hiddenErrors: Math.max(0, errors - maxErrors) }
}

/** The entry that stands in for the errors `--max-errors` held back, where the output is a list of entries (json, github). */
export function tooManyErrors(hiddenErrors: number, file: string): Diagnostic {
  return { code: 'TOO_MANY_ERRORS', severity: 'error', message: `${hiddenErrors} more error${hiddenErrors === 1 ? '' : 's'} not shown; raise --max-errors to see them`, file, line: 1, column: 1, path: '' }
}

/**
 * Edit distance for "did you mean" hints: insertions, deletions, substitutions and the swap of two
 * neighbouring letters each count one (optimal string alignment), so `agnet` is as near `agent` as `agnt`.
 */
export function editDistance(a: string, b: string): number {
  let before: number[] = []
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      let d = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1)
      row[j] = d
    }
    before = prev
    prev = row
  }
  return prev[b.length]!
}

/** The closest candidate within a distance that scales with the word, or undefined. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined
  let bestScore = Infinity
  const lower = word.toLowerCase()
  for (const c of candidates) {
    const score = c.toLowerCase() === lower ? 0 : editDistance(lower, c.toLowerCase())
    if (score < bestScore) { best = c; bestScore = score }
  }
  const limit = Math.max(1, Math.min(3, Math.floor(word.length / 3)))
  return bestScore <= limit ? best : undefined
}

/** "Did you mean" one of the options that `fits` where the word stands, else the list of all of them. */
export function hintFrom(word: string, options: Set<string>, fits: (option: string) => boolean = () => true): string | undefined {
  const guess = closest(word, [...options].filter(fits))
  if (guess !== undefined) return `did you mean "${guess}"?`
  return options.size > 0 ? `declared: ${[...options].join(', ')}` : undefined
}
