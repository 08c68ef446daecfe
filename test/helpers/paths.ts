// Where things are, seen from a test running out of build/test/…: the repo root and its fixtures.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

function findRoot(from: string): string {
  let dir = from
  while (!existsSync(join(dir, 'package.json')) || existsSync(join(dir, 'build', 'package.json'))) {
    const up = dirname(dir)
    if (up === dir) throw new Error('cannot find the hookgate repo root')
    dir = up
  }
  return dir
}

export const repoRoot = findRoot(dirname(fileURLToPath(import.meta.url)))
export const fixturesDir = join(repoRoot, 'test', 'fixtures')
export const hookgateBin = join(repoRoot, 'bin', 'hookgate.js')

/** A fresh temp directory, removed when the process exits. */
export function tempDir(prefix = 'hookgate-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
  return dir
}

let scratchRoot: string | undefined

/** A fresh directory inside one temp root per test process (removed at exit with the root). */
export function scratchDir(prefix = 'case-'): string {
  scratchRoot ??= tempDir('hookgate-scratch-')
  return mkdtempSync(join(scratchRoot, prefix))
}

/** Writes `files` (relative path → content) under `dir`, creating folders as needed. */
export function writeTree(dir: string, files: Record<string, string>): void {
  for (const [rel, content] of Object.entries(files)) {
    const full = join(dir, rel)
    mkdirSync(dirname(full), { recursive: true })
    writeFileSync(full, content)
  }
}
