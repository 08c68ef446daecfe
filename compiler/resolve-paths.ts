// Paths held inside the config tree: hooks.transformsDir and each transform module found in it, real
// paths compared after every symlink is followed, so nothing outside the config's folder is bundled.
import { existsSync, realpathSync, statSync } from 'node:fs'
import { basename, isAbsolute, join, relative, resolve, sep } from 'node:path'
import type { DiagnosticBag } from './diagnostics.js'
import type { LoadedConfig, PathSegment } from './load.js'

const TRANSFORM_EXTENSIONS = ['.ts', '.mts', '.js', '.mjs']

export function resolveTransformsDir(raw: string, loaded: LoadedConfig, bag: DiagnosticBag): string | undefined {
  const where = loaded.locate(['hooks', 'transformsDir'])
  const configRoot = realpathSync(loaded.dir)
  const wanted = resolve(loaded.dir, raw)
  if (!isInside(wanted, loaded.dir) && !isInside(wanted, configRoot)) {
    bag.error('TRANSFORMS_DIR_ESCAPE', `transformsDir "${raw}" is outside the directory of ${basename(loaded.absFile)}`, where, 'keep transforms in a folder beside hooks.yaml, e.g. transformsDir: transforms')
    return undefined
  }
  if (!existsSync(wanted) || !statSync(wanted).isDirectory()) {
    bag.error('TRANSFORMS_DIR_MISSING', `transformsDir "${raw}" does not exist or is not a directory`, where)
    return undefined
  }
  const real = realpathSync(wanted)
  if (!isInside(real, configRoot)) {
    bag.error('TRANSFORMS_DIR_ESCAPE', `transformsDir "${raw}" resolves through a symlink to a folder outside the directory of ${basename(loaded.absFile)}`, where)
    return undefined
  }
  return real
}

export function resolveTransformModule(raw: string, dir: string, path: PathSegment[], loaded: LoadedConfig, bag: DiagnosticBag): string | undefined {
  const where = loaded.locate(path)
  if (isAbsolute(raw) || /^[A-Za-z]:[\\/]/.test(raw) || raw.startsWith('\\')) {
    bag.error('TRANSFORM_PATH_ESCAPE', `transform "${raw}" is an absolute path; write it relative to transformsDir`, where)
    return undefined
  }
  if (raw.split(/[\\/]/).includes('..')) {
    bag.error('TRANSFORM_PATH_ESCAPE', `transform "${raw}" is outside transformsDir ("..")`, where)
    return undefined
  }
  const candidates = [raw, ...TRANSFORM_EXTENSIONS.map((e) => raw + e)].map((c) => join(dir, c))
  const found = candidates.find((c) => existsSync(c) && statSync(c).isFile())
  if (!found) {
    bag.error('TRANSFORM_NOT_FOUND', `transform "${raw}" does not exist in transformsDir`, where, `looked for ${raw}${extname(raw) ? '' : ` and ${raw}{${TRANSFORM_EXTENSIONS.join(',')}}`}`)
    return undefined
  }
  const real = realpathSync(found)
  if (!isInside(real, dir)) {
    bag.error('TRANSFORM_PATH_ESCAPE', `transform "${raw}" is a symlink to a file outside transformsDir`, where)
    return undefined
  }
  return real
}

function extname(p: string): string {
  const m = /\.[A-Za-z0-9]+$/.exec(p)
  return m ? m[0] : ''
}

/** True when `child` is `parent` or lies below it (both absolute, already real paths where it matters). */
export function isInside(child: string, parent: string): boolean {
  const rel = relative(parent, child)
  return rel === '' || (!rel.startsWith('..' + sep) && rel !== '..' && !isAbsolute(rel))
}
