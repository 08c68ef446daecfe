// The compiler fuzzer's target: the compiler as a library (compileFile, in a child process that is
// killed past the time bound: compile-worker.ts) and as the CLI (`hookgate compile --check --format
// json`), run on a case written into a scratch copy of the fixtures' tree (its transforms and the
// file beside them), and the invariants: it never throws or crashes, the CLI exits 0 or 1 (never 2
// with a stack) in agreement with the library, every diagnostic has a known code and a
// file:line:column inside the file it names, and each case stays within time and size bounds.
// The regex side: a match.when regular expression the compiler accepts runs in bounded time on
// texts built to make a backtracking engine backtrack.
import { fork, type ChildProcess } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { fileURLToPath } from 'node:url'
import { DiagnosticCodes } from '../../compiler/diagnostics.js'
import { fixturesDir, repoRoot, tempDir } from '../helpers/paths.js'
import { hookgate } from '../cli/cli-helpers.js'
import type { CompileReply } from './compile-worker.js'
import type { Violation } from './http-target.js'

/** A compile (library or CLI) killed past this counts as a violation: generous, for a busy machine. */
export const CASE_LIMIT_MS = 20_000
/** A bundle (with its transform modules) may be at most this many times its input's size, plus BUNDLE_BASE_BYTES. */
export const BUNDLE_FACTOR = 64
/** What any bundle carries whatever its input (presets, helpers); the repo's hooks.yaml compiles to ~10 KiB. */
export const BUNDLE_BASE_BYTES = 512 * 1024
/** The heap of the compile process: an expansion past it is a crash, counted, not a frozen machine. */
const COMPILE_HEAP_MIB = 768

const CASE_FILE = 'case.yaml'
const STACK = /\n\s+at |\bat [\w.<>$]+ \(/

/** A scratch config tree: the fixtures' transforms (and the file beside them) plus the repo's own. */
export function scratchTree(): string {
  const dir = tempDir('hookgate-fuzz-compile-')
  cpSync(join(fixturesDir, 'diagnostics', 'transforms'), join(dir, 'transforms'), { recursive: true })
  cpSync(join(fixturesDir, 'diagnostics', 'outside.js'), join(dir, 'outside.js'))
  cpSync(join(repoRoot, 'transforms', 'github.ts'), join(dir, 'transforms', 'github.ts'))
  mkdirSync(join(dir, 'out'), { recursive: true })
  return dir
}

type Outcome = CompileReply | { timeout: true } | { crashed: string }

/** The library compiler in a child process, one compile at a time, replaced when it hangs or dies. */
export class CompileWorker {
  private child: ChildProcess | undefined
  private ready: Promise<void> | undefined
  private stderr = ''
  private next = 1

  constructor(private readonly dir: string) {}

  private start(): Promise<void> {
    const script = fileURLToPath(new URL('./compile-worker.js', import.meta.url))
    const child = fork(script, [], { cwd: this.dir, execArgv: [`--max-old-space-size=${COMPILE_HEAP_MIB}`], stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { ...process.env, NO_COLOR: '1' } })
    this.stderr = ''
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { this.stderr = (this.stderr + d).slice(-4000) })
    this.child = child
    const killOnExit = () => child.kill('SIGKILL')
    process.on('exit', killOnExit)
    child.once('exit', () => process.off('exit', killOnExit))
    return new Promise((resolve, reject) => {
      child.once('message', () => resolve())
      child.once('exit', (code, signal) => reject(new Error(`the compile worker exited at start (${code ?? signal}): ${this.stderr}`)))
    })
  }

  async compile(file: string): Promise<{ outcome: Outcome; ms: number }> {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) this.ready = this.start()
    await this.ready
    const child = this.child!
    const id = this.next++
    const started = performance.now()
    const outcome = await new Promise<Outcome>((resolve) => {
      const timer = setTimeout(() => { done(); child.kill('SIGKILL'); resolve({ timeout: true }) }, CASE_LIMIT_MS)
      const onMessage = (m: CompileReply) => { if (m.id === id) { done(); resolve(m) } }
      const onExit = (code: number | null, signal: string | null) => { done(); resolve({ crashed: `exit ${code ?? signal}: ${this.stderr.slice(-1500)}` }) }
      const done = () => { clearTimeout(timer); child.off('message', onMessage); child.off('exit', onExit) }
      child.on('message', onMessage)
      child.on('exit', onExit)
      child.send({ id, file, outDir: join(this.dir, 'out') })
    })
    return { outcome, ms: Math.round(performance.now() - started) }
  }

  close(): void {
    this.child?.kill('SIGKILL')
  }
}

interface Located { code: string; severity: string; message: string; file: string; line: number; column: number; path?: string }

/** Every finding: a known code, a message, and a position inside the file it names. */
function checkDiagnostics(list: readonly Located[], dir: string, via: string): Violation[] {
  const out: Violation[] = []
  const texts = new Map<string, string[] | null>()
  const linesOf = (file: string): string[] | null => {
    if (!texts.has(file)) {
      let lines: string[] | null
      try { lines = readFileSync(join(dir, file), 'utf8').split('\n') } catch { lines = null }
      texts.set(file, lines)
    }
    return texts.get(file)!
  }
  for (const d of list) {
    const shown = `${d.file}:${d.line}:${d.column}: ${d.severity} ${d.code}: ${d.message}`
    if (!(d.code in DiagnosticCodes) && d.code !== 'TOO_MANY_ERRORS') out.push({ kind: `${via}: an unknown diagnostic code`, detail: shown })
    if (typeof d.message !== 'string' || d.message.trim() === '') out.push({ kind: `${via}: a diagnostic without a message`, detail: shown })
    if (STACK.test(d.message)) out.push({ kind: `${via}: a stack trace in a diagnostic`, detail: shown })
    if (d.file !== CASE_FILE && !d.file.startsWith('transforms/')) {
      out.push({ kind: `${via}: a diagnostic names a file outside the config tree`, detail: shown })
      continue
    }
    const lines = linesOf(d.file)
    if (!lines) { out.push({ kind: `${via}: a diagnostic names a file that does not exist`, detail: shown }); continue }
    const ok = Number.isInteger(d.line) && Number.isInteger(d.column) && d.line >= 1 && d.line <= lines.length && d.column >= 1 && d.column <= lines[d.line - 1]!.length + 1
    if (!ok) out.push({ kind: `${via}: a diagnostic position outside its file`, detail: `${shown} (the file has ${lines.length} lines${d.line >= 1 && d.line <= lines.length ? `; that line ${lines[d.line - 1]!.length} characters` : ''})` })
  }
  return out
}

/** Compiles the case with the library (and the CLI when asked) and checks every invariant. */
export async function checkCompile(worker: CompileWorker, dir: string, text: Buffer, viaCli: boolean): Promise<{ violations: Violation[]; ok: boolean | undefined }> {
  writeFileSync(join(dir, CASE_FILE), text)
  const out: Violation[] = []
  const { outcome, ms } = await worker.compile(CASE_FILE)
  let libraryOk: boolean | undefined
  if ('timeout' in outcome) out.push({ kind: 'library: a compile ran past the time bound', detail: `killed after ${CASE_LIMIT_MS / 1000} s` })
  else if ('crashed' in outcome) out.push({ kind: 'library: the compile process died', detail: outcome.crashed })
  else if (outcome.threw !== undefined) out.push({ kind: 'library: the compiler threw', detail: outcome.threw.slice(0, 1500) })
  else {
    libraryOk = outcome.ok
    const diagnostics = outcome.diagnostics ?? []
    const errors = diagnostics.filter((d) => d.severity === 'error').length
    if (outcome.ok && errors > 0) out.push({ kind: 'library: ok with errors', detail: JSON.stringify(diagnostics.slice(0, 3)) })
    if (!outcome.ok && errors === 0) out.push({ kind: 'library: refused without an error', detail: JSON.stringify(diagnostics.slice(0, 3)) })
    out.push(...checkDiagnostics(diagnostics, dir, 'library'))
    const bound = BUNDLE_FACTOR * text.length + BUNDLE_BASE_BYTES
    if (outcome.bundleBytes !== undefined && outcome.bundleBytes > bound) out.push({ kind: 'library: the bundle is out of proportion to its input', detail: `${outcome.bundleBytes} bytes of bundle from ${text.length} bytes of YAML (bound ${bound})` })
  }
  if (viaCli) {
    const started = performance.now()
    const r = await hookgate(['compile', CASE_FILE, '--check', '--format', 'json'], { cwd: dir, timeoutMs: CASE_LIMIT_MS })
    const cliMs = Math.round(performance.now() - started)
    if (r.code === null) out.push({ kind: 'cli: a compile ran past the time bound', detail: `killed (${r.signal}) after ${cliMs} ms` })
    else if (r.code !== 0 && r.code !== 1) out.push({ kind: `cli: exit ${r.code}`, detail: (r.stderr || r.stdout).slice(0, 1500) })
    else {
      if (libraryOk !== undefined && (r.code === 0) !== libraryOk) out.push({ kind: 'cli: the exit code disagrees with the library', detail: `exit ${r.code}, library ok=${libraryOk}` })
      let report: { errors: Located[]; warnings: Located[] } | undefined
      try { report = JSON.parse(r.stdout) } catch { out.push({ kind: 'cli: stdout is not JSON', detail: r.stdout.slice(0, 500) }) }
      if (report) {
        if (!Array.isArray(report.errors) || !Array.isArray(report.warnings)) out.push({ kind: 'cli: the JSON is not {errors, warnings}', detail: r.stdout.slice(0, 500) })
        else {
          if ((report.errors.length > 0) !== (r.code === 1)) out.push({ kind: 'cli: the exit code disagrees with its errors', detail: `exit ${r.code}, ${report.errors.length} errors` })
          out.push(...checkDiagnostics([...report.errors, ...report.warnings], dir, 'cli'))
        }
      }
    }
    if (STACK.test(r.stderr)) out.push({ kind: 'cli: a stack trace on stderr', detail: r.stderr.slice(0, 1500) })
  }
  void ms
  return { violations: out, ok: libraryOk }
}

// ---- regular expressions ---------------------------------------------------------------------------

/** A regex accepted by the compiler must finish on every attack text within this (whole set). */
export const REGEX_LIMIT_MS = 10_000
/** Attack texts are this long: a quarter of the default body limit (a cubic backtracking pattern would take hours on it). */
export const ATTACK_CHARS = 64 * 1024

/**
 * The runtime's own matching, as a request runs it: the pattern compiled by runtime/bundle/regex.ts and
 * tested through the condition helper under a request's work budget (a text past it is refused,
 * 413 condition_text_too_long, which is an answer, not a stall).
 */
const REGEX_WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const ready = Promise.all([import(workerData.regex), import(workerData.conditions), import('re2js')])
parentPort.on('message', async ({ source, flags, inputs }) => {
  const [{ patternCompilerOf }, { conditionHelpers, beginConditionWork, ConditionTooCostly }, { RE2JS }] = await ready
  const re = patternCompilerOf(RE2JS)(source, flags)
  for (const s of inputs) {
    beginConditionWork()
    try { conditionHelpers.test(undefined, 0, s, re) } catch (err) { if (!(err instanceof ConditionTooCostly)) throw err }
  }
  parentPort.postMessage('done')
})`

/** Runs a regex over texts in a worker thread, terminated past the limit (a backtracking loop never yields). */
export class RegexRunner {
  private worker: Worker | undefined

  async run(source: string, flags: string, inputs: string[]): Promise<{ ms: number; finished: boolean }> {
    this.worker ??= new Worker(REGEX_WORKER, { eval: true, workerData: { regex: new URL('../../runtime/bundle/regex.js', import.meta.url).href, conditions: new URL('../../runtime/bundle/conditions.js', import.meta.url).href } })
    const worker = this.worker
    const started = performance.now()
    const finished = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => { done(); void worker.terminate(); this.worker = undefined; resolve(false) }, REGEX_LIMIT_MS)
      const onMessage = () => { done(); resolve(true) }
      const onError = () => { done(); this.worker = undefined; resolve(true) }
      const done = () => { clearTimeout(timer); worker.off('message', onMessage); worker.off('error', onError) }
      worker.on('message', onMessage)
      worker.on('error', onError)
      worker.postMessage({ source, flags, inputs })
    })
    return { ms: Math.round(performance.now() - started), finished }
  }

  close(): void {
    void this.worker?.terminate()
  }
}

/** The config that carries one regex in a match.when. */
export function regexConfig(source: string, flags: string): string {
  return `hooks:
  enabled: true
  token: \${HOOKGATE_TOKEN}
  mappings:
    - id: r
      match:
        path: r
        when: { payload.v: { matches: ${JSON.stringify(source)}${flags ? `, flags: ${flags}` : ''} } }
      action: wake
`
}

/**
 * Texts that make a backtracking engine backtrack: each character the pattern names (and a
 * representative of each class), repeated to ATTACK_CHARS, then a character that fails the match.
 */
export function attackTexts(source: string): string[] {
  const chars = new Set<string>(['a', '0', ' ', '-', '_', '.', 'x', '\n'])
  for (const c of source.replace(/\\[dDwWsSbB]/g, '')) if (/[\w .\-:/]/.test(c)) chars.add(c)
  const texts: string[] = []
  for (const c of chars) {
    for (const tail of ['!', '\u0000', '']) texts.push(c.repeat(ATTACK_CHARS - 1) + tail)
  }
  // pairs: "ab" repeated (alternations that overlap on two characters)
  const list = [...chars].slice(0, 6)
  for (const a of list) for (const b of list) if (a !== b) texts.push((a + b).repeat(ATTACK_CHARS / 2 - 1) + '!')
  return texts
}
