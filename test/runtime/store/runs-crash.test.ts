import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { RunStore } from '../../../runtime/store/file/runs.js'
import { repoRoot, tempDir } from '../../helpers/paths.js'

const ACKED_BEFORE_KILL = 60

/**
 * A child that keeps 8 runs in flight at all times: create, print `created <id>` once create()
 * resolved, move to running, print `running <id>`. It never stops on its own.
 */
function childScript(): string {
  const runsModule = pathToFileURL(join(repoRoot, 'build', 'runtime', 'store', 'file', 'runs.js')).href
  return `
import { RunStore } from ${JSON.stringify(runsModule)}
const store = RunStore.open(process.argv[2])
let n = 0
async function one(k) {
  const row = await store.create({ id: 'run-' + k, definitionKind: 'hook', definitionId: 'github', correlationId: 'corr-' + k, action: 'agent', request: { message: 'payload '.repeat(50) } })
  process.stdout.write('created ' + row.id + '\\n')
  await store.transition(row.id, 'running', { attempts: 1 })
  process.stdout.write('running ' + row.id + '\\n')
}
function next() { one(n++).then(next, (err) => { process.stderr.write(String(err) + '\\n'); process.exit(3) }) }
for (let i = 0; i < 8; i++) next()
`
}

interface ChildResult { lines: string[]; signal: NodeJS.Signals | null; code: number | null; stderr: string }

function runAndKill(dir: string, script: string): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, dir], { stdio: ['ignore', 'pipe', 'pipe'] })
    let buffered = ''
    let stderr = ''
    let created = 0
    const lines: string[] = []
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      buffered += chunk
      let nl
      while ((nl = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, nl)
        buffered = buffered.slice(nl + 1)
        lines.push(line)
        if (line.startsWith('created ') && ++created === ACKED_BEFORE_KILL) child.kill('SIGKILL')
      }
    })
    child.stderr.on('data', (d) => { stderr += d })
    child.on('error', reject)
    // 'close' waits for the pipes to drain: every line the child printed before it died is counted
    child.on('close', (code, signal) => resolve({ lines, signal, code, stderr }))
  })
}

const crash = suite('RunStore after kill -9')

crash('keeps every run whose create() or transition() had resolved when the process was killed', async () => {
  const dir = tempDir('hookgate-crash-')
  const script = join(tempDir('hookgate-crash-script-'), 'child.mjs')
  writeFileSync(script, childScript())
  const result = await runAndKill(dir, script)
  assert.is(result.signal, 'SIGKILL', `the child must die by SIGKILL, not exit (code ${result.code}, stderr: ${result.stderr})`)
  const created = result.lines.filter((l) => l.startsWith('created ')).map((l) => l.slice(8))
  const running = result.lines.filter((l) => l.startsWith('running ')).map((l) => l.slice(8))
  assert.ok(created.length >= ACKED_BEFORE_KILL)

  const store = RunStore.open(dir)
  for (const id of created) assert.ok(store.get(id), `acknowledged run ${id} was lost`)
  for (const id of running) assert.is(store.get(id)!.status, 'running', `acknowledged transition of ${id} was lost`)
  const unfinished = new Set(store.unfinished().map((r) => r.id))
  for (const id of created) assert.ok(unfinished.has(id), `run ${id} is not offered for resume`)
  // the history keeps working after the crash
  await store.create({ id: 'after-crash', definitionKind: 'hook', definitionId: 'github', correlationId: 'c', action: 'wake' })
  await store.close()
  const history = RunStore.readHistory(dir)
  assert.is(history.rows[0]!.id, 'after-crash')
  assert.is(history.corrupt, 0)
})

crash.run()
