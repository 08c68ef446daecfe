// hooks.yaml as the control plane edits it: one save at a time, checked by the compiler before
// anything is written, refused when the file changed on disk since the editor read it (a `git
// pull`), and written so that the running runtime picks the new bundle up (it watches the bundle).
//
// saveConfig is the one save path: the operator page, `hookgate trigger|task add|rm` and `hookgate
// webhooks gmail setup` all write hooks.yaml through it (the Gmail helper imports this module only). A save is whole or nothing: compile the
// new text in memory → on any error, 422 and nothing on disk changed → compare the file's hash with
// the one the edit was made on (409 when they differ) → write the new hooks.yaml and every bundle
// file beside their places (a failure here changes nothing) → rename hooks.yaml, then the bundle,
// into place; should the bundle's rename fail, hooks.yaml is put back as it was. A symlinked
// hooks.yaml is edited through the link: its target is replaced, the link stays.
import { createHash, randomBytes } from 'node:crypto'
import { chmodSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { compileSource, type CompileOutcome } from '../compiler/index.js'
import { stageBundle, type EmitResult } from '../compiler/emit.js'
import { pointer, type PathSegment } from '../compiler/load.js'
import type { Diagnostic } from '../compiler/diagnostics.js'
import { GENERATED_TOKEN_FILE, generatedSecret } from '../runtime/bundle/secrets.js'
import { applyEdit, definitionId, EditError, type Edit } from './definitions.js'
import { YamlEditError } from './yaml-edit.js'

// The rest of the library, for a helper outside the control plane that reads and edits hooks.yaml
// (the Gmail helper, DESIGN §1): the config read as the compiler reads it (an alias bomb refused
// before it expands), an edit that keeps the file's comments, a finding as one line of text, and
// what the config says of where things are: the state directory, the base path, this hookgate's
// own address, the hook token. Re-exported here so that such a helper depends on this module alone,
// neither on the control plane's other files nor on the compiler.
export { documentValue } from '../compiler/load.js'
export { formatText } from '../compiler/diagnostics.js'
export { preservingEdit } from './yaml-edit.js'
export { basePathOf, localRuntimeUrl, stateDirOf } from './endpoints.js'
export { hookTokenValue, secretSpecOf } from './tokens.js'

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
    let tokenGenerated: string | null = null
    const saved = await saveConfig({
      file: this.file,
      outDir: this.outDir,
      text: applied.text,
      baseHash: before.hash,
      beforeWrite: () => {
        if (!applied.tokenAdded) return
        const file = join(this.stateDir, GENERATED_TOKEN_FILE)
        if (generatedSecret(file, () => randomBytes(24).toString('base64url'), 'token').generated) tokenGenerated = file
      },
    })
    if (!saved.ok) {
      const { diagnostics, ...refusal } = saved
      return diagnostics ? { ...refusal, findings: splitFindings(diagnostics, applied.at), diagnostics } : refusal
    }
    return {
      ok: true,
      hash: saved.hash,
      id: edit.definition ? definitionId(edit.kind, edit.agentId, String(edit.definition.name)) : null,
      at: applied.at,
      tokenGenerated,
      bundleHash: saved.result.manifest.inputsHash,
      routes: saved.result.manifest.routes.length,
      warnings: saved.diagnostics.filter((d) => d.severity === 'warning'),
    }
  }
}

export interface ConfigSave {
  /** hooks.yaml as named (a symlink is written through: its target is replaced) */
  file: string
  /** where the bundle goes */
  outDir: string
  /** the new text of hooks.yaml */
  text: string
  /** sha256 of the file the edit was made on: the save is refused (409) when the file on disk is no longer that */
  baseHash: string
  /** after every check, before anything is written (the hook token an edit references is generated here) */
  beforeWrite?: () => void
}

export type ConfigSaveResult =
  | { ok: true; hash: string; result: EmitResult; diagnostics: Diagnostic[] }
  | { ok: false; status: number; code: string; error: string; hash?: string; diagnostics?: Diagnostic[] }

/**
 * The one save path for hooks.yaml: compile, check, write the bundle and the file, all or nothing
 * (see the top of this file). A write that fails answers 500 `save_failed`, with both files as they were.
 */
export async function saveConfig(save: ConfigSave): Promise<ConfigSaveResult> {
  const file = resolve(save.file)
  const outcome = await compileSource(save.text, file, { outDir: save.outDir, check: true })
  if (!outcome.ok || !outcome.result) {
    const errors = outcome.diagnostics.filter((d) => d.severity === 'error')
    return { ok: false, status: 422, code: 'config_invalid', error: `the edit does not compile (${errors.length} error${errors.length === 1 ? '' : 's'}); nothing was written`, diagnostics: outcome.diagnostics }
  }
  // The file is the one the edit was made on, up to the moment the new one is staged.
  let target: string
  let previous: Buffer
  try {
    target = realpathSync(file)
    previous = readFileSync(target)
  } catch (err) {
    return { ok: false, status: 500, code: 'save_failed', error: `cannot read ${file} again before writing it: ${(err as Error).message}; nothing was written` }
  }
  // hashed as read() hashes it: the text the editor saw
  const previousHash = hashText(previous.toString('utf8'))
  if (previousHash !== save.baseHash) {
    return { ok: false, status: 409, code: 'config_changed', error: `${file} changed on disk while the edit was being checked; reload it and make the edit again`, hash: previousHash }
  }
  save.beforeWrite?.()
  try {
    writeConfigAndBundle(target, save.text, previous, save.outDir, outcome.result)
  } catch (err) {
    return { ok: false, status: 500, code: 'save_failed', error: `the save could not be written: ${(err as Error).message}` }
  }
  return { ok: true, hash: hashText(save.text), result: outcome.result, diagnostics: outcome.diagnostics }
}

/** Both files staged first, then renamed into place; a failure leaves both as they were, and says so (or says what it could not undo). */
function writeConfigAndBundle(target: string, text: string, previous: Buffer, outDir: string, result: EmitResult): void {
  let configTemp: string
  try {
    configTemp = writeTemp(target, text)
  } catch (err) {
    throw new Error(`cannot write ${target}: ${(err as Error).message}; hooks.yaml and the bundle are unchanged`)
  }
  let bundle
  try {
    bundle = stageBundle(outDir, result)
  } catch (err) {
    rmSync(configTemp, { force: true })
    throw new Error(`cannot write the bundle into ${outDir}: ${(err as Error).message}; hooks.yaml and the bundle are unchanged`)
  }
  try {
    renameSync(configTemp, target)
  } catch (err) {
    rmSync(configTemp, { force: true })
    bundle.discard()
    throw new Error(`cannot replace ${target}: ${(err as Error).message}; hooks.yaml and the bundle are unchanged`)
  }
  try {
    bundle.commit()
  } catch (err) {
    try {
      renameSync(writeTemp(target, previous), target)
    } catch (undo) {
      throw new Error(`cannot write the bundle into ${outDir}: ${(err as Error).message}; and putting hooks.yaml back failed too (${(undo as Error).message}): it has the edit, the bundle does not`)
    }
    throw new Error(`cannot write the bundle into ${outDir}: ${(err as Error).message}; hooks.yaml and the bundle are unchanged`)
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

/** `text` in a new file beside `target`, with its mode; removed again when the write fails. */
function writeTemp(target: string, text: string | Buffer): string {
  const mode = statSync(target).mode & 0o777
  const tmp = `${target}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  try {
    writeFileSync(tmp, text, { mode })
    chmodSync(tmp, mode)
  } catch (err) {
    rmSync(tmp, { force: true })
    throw err
  }
  return tmp
}
