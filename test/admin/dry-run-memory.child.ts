// Run by dry-runs.test.ts as `node --expose-gc`: the operator page in this process, on a temp
// project, answering `runs` POST /api/try calls of a Trigger with a `promptBytes` prompt over real
// HTTP; prints what the process holds after a warm-up and after the runs, each after a full GC.
import { randomBytes } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { startAdmin } from '../../admin/server.js'
import { tokenDigest } from '../../runtime/http/auth.js'
import { compileProject } from '../runtime/http/harness.js'

const [runs, promptBytes, warmUp] = process.argv.slice(2).map(Number) as [number, number, number]
const gc = (globalThis as { gc?: () => void }).gc
if (!gc) throw new Error('run me with --expose-gc')

const token = randomBytes(24).toString('base64url')
process.env.HOOKGATE_TEST_TOKEN = randomBytes(24).toString('hex')
const project = await compileProject('hooks:\n  enabled: true\n  token: ${HOOKGATE_TEST_TOKEN}\nagents:\n  - id: main\n    default: true\n    model: builtin/echo\n')
mkdirSync(project.stateDir, { recursive: true })
const admin = await startAdmin({ config: project.configFile, outDir: project.outDir, stateDir: project.stateDir, host: '127.0.0.1', port: 0, token: { digest: tokenDigest(token), describe: 'test' }, log: () => {} })

const body = JSON.stringify({ agentId: 'main', definition: { name: 'Big', path: 'big', target: 'wake', prompt: `${'p'.repeat(promptBytes)} {{payload.n}}` }, payload: { n: 7 } })
const statuses = new Map<string, number>()
async function tryOnce(): Promise<void> {
  const r = await fetch(`${admin.url}/api/try`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body })
  const answer = await r.json() as { status?: number; action?: { kind?: string; text?: string } }
  const key = `${r.status} ${answer.status} ${answer.action?.kind} ${answer.action?.text?.includes('p 7') === true}`
  statuses.set(key, (statuses.get(key) ?? 0) + 1)
}

async function held(): Promise<{ heap: number; rss: number }> {
  // a few rounds: what a worker ended a moment ago frees is collected once it is gone
  for (let i = 0; i < 3; i++) {
    gc!()
    await new Promise((r) => setTimeout(r, 50))
  }
  const m = process.memoryUsage()
  return { heap: m.heapUsed + m.external, rss: m.rss }
}

for (let i = 0; i < warmUp; i++) await tryOnce()
const before = await held()
for (let i = 0; i < runs; i++) await tryOnce()
const after = await held()
await admin.close()
process.stdout.write(JSON.stringify({ before, after, statuses: Object.fromEntries(statuses) }) + '\n')
