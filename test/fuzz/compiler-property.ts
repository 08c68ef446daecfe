// The compiler properties: `compiler` (mutated real configs through the library and the CLI) and
// `regex` (match.when regular expressions from a small grammar: one the compiler accepts runs in
// bounded time on texts made to make it backtrack; the others are refused with a diagnostic).
import fc from 'fast-check'
import type { FuzzProperty } from './runner.js'
import { applyCase, compilerCase, seedConfigs, showCase, type CompilerCase } from './compiler-cases.js'
import { ATTACK_CHARS, attackTexts, checkCompile, CompileWorker, REGEX_LIMIT_MS, regexConfig, RegexRunner, scratchTree } from './compiler-target.js'

export interface RegexCase { source: string; flags: string }

/** Patterns from pieces that backtracking engines trip over: classes, repetitions, groups, alternations. */
const regexSource: fc.Arbitrary<string> = fc.letrec<{ node: string }>((tie) => {
  const quantifier = fc.constantFrom('', '', '*', '+', '?', '{2}', '{1,3}', '{2,}', '*?', '+?', '{0,5}')
  const atom = fc.constantFrom('a', 'b', 'x', '-', '.', '\\d', '\\w', '\\s', '\\S', '\\W', '[a-z]', '[ab]', '[^a]', '[a-c0-9]', '\\.', '^', '$', '\\b', '(?=a)', '(?!b)', '\\1')
  return {
    node: fc.oneof(
      { depthSize: 'small' },
      fc.tuple(atom, quantifier).map(([a, q]) => (/^[\^$]|\\b|\(\?/.test(a) ? a : a + q)),
      fc.array(tie('node'), { minLength: 2, maxLength: 4 }).map((items) => items.join('')),
      fc.tuple(fc.constantFrom('(', '(?:'), fc.array(tie('node'), { minLength: 1, maxLength: 3 }), quantifier).map(([open, alts, q]) => `${open}${alts.join('|')})${q}`),
    ),
  }
}).node

export const regexCase: fc.Arbitrary<RegexCase> = fc.record({
  source: regexSource.filter((s) => s.length > 0 && s.length <= 80 && isValid(s)),
  flags: fc.subarray(['i', 'm', 's', 'u']).map((f) => f.join('')),
}).filter((c) => isValid(c.source, c.flags))

function isValid(source: string, flags = ''): boolean {
  try { new RegExp(source, flags); return true } catch { return false }
}

/**
 * Issue 23's defects' cases, run first in every run: a YAML alias amplifier (one 20,000-character
 * anchored string aliased by 1,000 mappings), and a match.when pattern that backtracked cubically
 * on V8's engine (2 s on 2 KiB) before patterns ran on RE2.
 */
export const COMPILER_EXAMPLES: CompilerCase[] = [
  { seed: 'examples/minimal/hooks.yaml', mutations: [{ op: 'alias-fanout', at: 0, copies: 1000, length: 20_000 }], bytes: [], viaCli: false },
]
export const REGEX_EXAMPLES: RegexCase[] = [{ source: 'a*a*b', flags: '' }]

export async function compilerProperties(): Promise<{ compiler: FuzzProperty<CompilerCase>; regex: FuzzProperty<RegexCase>; close(): Promise<void> }> {
  const seeds = seedConfigs()
  const dir = scratchTree()
  const worker = new CompileWorker(dir)
  const regexDir = scratchTree()
  const regexWorker = new CompileWorker(regexDir)
  const runner = new RegexRunner()

  const compiler: FuzzProperty<CompilerCase> = {
    name: 'compiler',
    arbitrary: compilerCase([...seeds.keys()]),
    check: async (c) => (await checkCompile(worker, dir, applyCase(c, seeds), c.viaCli)).violations,
    show: (c) => showCase(c, applyCase(c, seeds)),
    examples: COMPILER_EXAMPLES,
  }

  const regex: FuzzProperty<RegexCase> = {
    name: 'regex',
    arbitrary: regexCase,
    async check(c) {
      const text = Buffer.from(regexConfig(c.source, c.flags))
      // the compile's own invariants hold here too
      const { violations: out, ok } = await checkCompile(regexWorker, regexDir, text, false)
      if (ok !== true) return out
      const run = await runner.run(c.source, c.flags, attackTexts(c.source))
      if (!run.finished) out.push({ kind: 'regex: an accepted match.when pattern backtracks past the time bound', detail: `/${c.source}/${c.flags} did not finish its ${ATTACK_CHARS}-character attack texts within ${REGEX_LIMIT_MS / 1000} s` })
      return out
    },
    examples: REGEX_EXAMPLES,
    show: (c) => `  match.when: { payload.v: { matches: ${JSON.stringify(c.source)}${c.flags ? `, flags: ${c.flags}` : ''} } }\n${regexConfig(c.source, c.flags).split('\n').map((l) => '  | ' + l).join('\n')}`,
  }

  return {
    compiler,
    regex,
    async close() { worker.close(); regexWorker.close(); runner.close() },
  }
}
