// hooks.yaml as the control plane edits it: one save at a time, checked by the compiler before
// anything is written, refused when the file changed on disk since the editor read it (a `git
// pull`), and written so that the running runtime picks the new bundle up (it watches the bundle).
//
// A save: read the file → compare its hash with the one the editor saw (409 when they differ) →
// apply the edit (definitions.ts) → compile the new text in memory → on any error, 422 and nothing
// on disk changed → generate the hook token when the edit added its reference → write hooks.yaml
// (temp file + rename) → write the bundle (the compiler's own atomic writes).
import { createHash, randomBytes } from 'node:crypto'
import { readFileSync, renameSync, statSync, writeFileSync, chmodSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { compileSource, type CompileOutcome } from '../compiler/index.js'
import { writeBundle } from '../compiler/emit.js'
import { pointer, type PathSegment } from '../compiler/load.js'
import type { Diagnostic } from '../compiler/diagnostics.js'
import { GENERATED_TOKEN_FILE, generatedSecret } from '../runtime/secrets.js'
import { applyEdit, definitionId, EditError, type Edit } from './definitions.js'
import { YamlEditError } from './yaml-edit.js'

export interface ConfigSnapshot {
  text: string
  /** sha256 of the file's bytes: what a save names in If-Match */
  hash: string
}

/** The findings of a check, split by where they point: a field of the edited definition, or elsewhere. */
export interface FieldFindings {
  /** field name → its findings */
  fields: Record<string, Diagnostic[]>
  /** findings about the definition as a whole, or about other parts of the file */
  other: Diagnostic[]
}

export type SaveResult =
  | { ok: true; hash: string; id: string | null; at: PathSegment[] | null; tokenGenerated: string | null; bundleHash: string; routes: number; warnings: Diagnostic[] }
  | { ok: false; status: number; code: string; error: string; hash?: string; findings?: FieldFindings; diagnostics?: Diagnostic[] }

export function hashText(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

export class ConfigFile {
  readonly file: string
  readonly dir: string
  private queue: Promise<unknown> = Promise.resolve()

  constructor(file: string, readonly outDir: string, readonly stateDir: string) {
    this.file = resolve(file)
    this.dir = dirname(this.file)
  }

  read(): ConfigSnapshot {
    const text = readFileSync(this.file, 'utf8')
    return { text, hash: hashText(text) }
  }

  /** Compiles the file with the edit applied, writing nothing: what the form shows as you type. */
  async check(edit: Edit): Promise<{ outcome: CompileOutcome; findings: FieldFindings; at: PathSegment[] | null }> {
    const { text } = this.read()
    const applied = applyEdit(text, edit)
    const outcome = await compileSource(applied.text, this.file, { outDir: this.outDir, check: true })
    return { outcome, findings: splitFindings(outcome.diagnostics, applied.at), at: applied.at }
  }

  /** One save at a time, in the order they came. */
  save(edit: Edit, ifMatch: string | undefined): Promise<SaveResult> {
    const run = this.queue.then(() => this.saveNow(edit, ifMatch))
    this.queue = run.catch(() => {})
    return run
  }

  private async saveNow(edit: Edit, ifMatch: string | undefined): Promise<SaveResult> {
    const before = this.read()
    if (ifMatch !== undefined && ifMatch !== before.hash) {
      return { ok: false, status: 409, code: 'config_changed', error: `${this.file} changed on disk since it was read (someone edited it or pulled from git); reload it and make the edit again`, hash: before.hash }
    }
    let applied
    try {
      applied = applyEdit(before.text, edit)
    } catch (err) {
      if (err instanceof EditError) return { ok: false, status: err.status, code: err.code, error: err.message }
      if (err instanceof YamlEditError) return { ok: false, status: 422, code: 'config_invalid', error: err.message }
      throw err
    }
    const outcome = await compileSource(applied.text, this.file, { outDir: this.outDir, check: true })
    if (!outcome.ok || !outcome.result) {
      const errors = outcome.diagnostics.filter((d) => d.severity === 'error')
      return { ok: false, status: 422, code: 'config_invalid', error: `the edit does not compile (${errors.length} error${errors.length === 1 ? '' : 's'}); nothing was written`, findings: splitFindings(outcome.diagnostics, applied.at), diagnostics: outcome.diagnostics }
    }
    // Between the read above and the rename below the file may have been written again.
    if (hashText(readFileSync(this.file, 'utf8')) !== before.hash) {
      return { ok: false, status: 409, code: 'config_changed', error: `${this.file} changed on disk while the edit was being checked; reload it and make the edit again`, hash: hashText(readFileSync(this.file, 'utf8')) }
    }
    let tokenGenerated: string | null = null
    if (applied.tokenAdded) {
      const file = join(this.stateDir, GENERATED_TOKEN_FILE)
      if (generatedSecret(file, () => randomBytes(24).toString('base64url'), 'token').generated) tokenGenerated = file
    }
    writeAtomically(this.file, applied.text)
    writeBundle(this.outDir, outcome.result)
    return {
      ok: true,
      hash: hashText(applied.text),
      id: edit.definition ? definitionId(edit.kind, edit.agentId, String(edit.definition.name)) : null,
      at: applied.at,
      tokenGenerated,
      bundleHash: outcome.result.manifest.inputsHash,
      routes: outcome.result.manifest.routes.length,
      warnings: outcome.diagnostics.filter((d) => d.severity === 'warning'),
    }
  }
}

/** Findings pointing inside the definition at `at` go to its fields; the rest are shown apart. */
export function splitFindings(diagnostics: readonly Diagnostic[], at: PathSegment[] | null): FieldFindings {
  const fields: Record<string, Diagnostic[]> = {}
  const other: Diagnostic[] = []
  const prefix = at ? pointer(at) + '/' : null
  for (const d of diagnostics) {
    if (prefix && d.path.startsWith(prefix)) {
      const field = d.path.slice(prefix.length).split('/')[0]!
      ;(fields[field] ??= []).push(d)
    } else {
      other.push(d)
    }
  }
  return { fields, other }
}

/** Writes beside the file and renames over it, keeping its mode: a crash leaves the old file or the new one. */
export function writeAtomically(file: string, text: string): void {
  const mode = statSync(file).mode & 0o777
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  writeFileSync(tmp, text, { mode })
  chmodSync(tmp, mode)
  renameSync(tmp, file)
}
