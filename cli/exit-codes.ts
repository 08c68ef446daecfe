// The exit codes of every hookgate command, defined once (STYLE: "exit codes are named constants and
// tested against the real CLI"). Three outcomes, whatever the command:
//   0 it did what was asked (or, for a dry run, showed what it would do);
//   1 it ran, and the answer is no: config errors, a refused edit, no run with that id, a request
//     the server refused, a history or store that cannot be read, a server that cannot start;
//   2 it was not run as asked: a usage error (a wrong flag or value, with the usage line), or an
//     internal error, or a file that could not be written (nothing was changed).
// bin/hookgate.js writes 2 itself only when build/, where this module lives, is missing.
export const ExitCode = {
  ok: 0,
  refused: 1,
  usage: 2,
  internal: 2,
} as const

export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

/** What each exit code means, for the CLI reference (docs/reference/cli.md, scripts/docs.mjs). */
export const EXIT_CODE_MEANINGS: Readonly<Record<ExitCode, string>> = {
  0: 'it did what was asked (or, for a dry run, showed what it would do)',
  1: 'it ran, and the answer is no: config errors, a refused edit, no run with that id, a request the server refused, a history or store that cannot be read, a server that cannot start',
  2: 'it was not run as asked: a usage error (a wrong flag or value, with the usage line), an internal error, or a file that could not be written (nothing was changed)',
}
