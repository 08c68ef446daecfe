// Shared by the CLI tests: runs the real `hookgate` executable (bin/hookgate.js) in a child
// process, without a shell, and writes small config trees into temp directories.
import { spawn } from 'node:child_process'
import { hookgateBin } from '../helpers/paths.js'

export interface CliResult {
  /** exit code, or null when the process was killed */
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

export interface CliOptions {
  /** working directory of the child (always a temp directory in these tests) */
  cwd: string
  /** the child is killed after this long; a test then sees code null */
  timeoutMs?: number
}

/** Child processes this test file runs at once (the compiler side takes ~0.7 s of CPU to start). */
const MAX_PARALLEL = 3
let running = 0
const waiting: Array<() => void> = []

async function slot<T>(work: () => Promise<T>): Promise<T> {
  if (running >= MAX_PARALLEL) await new Promise<void>((wake) => waiting.push(wake))
  running++
  try {
    return await work()
  } finally {
    running--
    waiting.shift()?.()
  }
}

/**
 * Runs `hookgate ...args` with the Node that runs the tests and collects everything it prints.
 * Never rejects (a spawn failure comes back as code null with the reason on stderr), so runs may be
 * started early and awaited later by the tests that need them.
 */
export function hookgate(args: readonly string[], options: CliOptions): Promise<CliResult> {
  return runNode([hookgateBin, ...args], options)
}

/** Runs `node ...args` (e.g. a standalone runtime in dist/) the same way as `hookgate`. */
export function runNode(args: readonly string[], options: CliOptions & { env?: NodeJS.ProcessEnv }): Promise<CliResult> {
  return slot(() => new Promise<CliResult>((resolve) => {
    const child = spawn(process.execPath, args, {
      cwd: options.cwd,
      env: { ...(options.env ?? process.env), NO_COLOR: '1', FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d })
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 10_000)
    child.on('error', (err) => { clearTimeout(timer); resolve({ code: null, signal: null, stdout, stderr: stderr + `spawn failed: ${err.message}\n` }) })
    child.on('close', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stdout, stderr }) })
  }))
}

import { scratchDir, writeTree } from '../helpers/paths.js'
export { scratchDir, writeTree }

export interface StartedRun {
  /** the directory the config was written to and the command ran in */
  dir: string
  result: Promise<CliResult>
}

/** Writes `files` into a fresh directory and starts `hookgate ...args` there at once. */
export function startIn(files: Record<string, string>, args: readonly string[]): StartedRun {
  const dir = scratchDir()
  writeTree(dir, files)
  return { dir, result: hookgate(args, { cwd: dir }) }
}

/** A readable dump of a run, for assertion messages. */
export function describeRun(r: CliResult): string {
  return `exit ${r.code ?? r.signal}\n--- stdout ---\n${r.stdout}\n--- stderr ---\n${r.stderr}`
}

/** Parses stdout as JSON, failing with the whole run in the message when it is not. */
export function stdoutJson<T = unknown>(r: CliResult): T {
  try {
    return JSON.parse(r.stdout) as T
  } catch (err) {
    throw new Error(`stdout is not JSON (${(err as Error).message})\n${describeRun(r)}`)
  }
}
