// `hookgate trigger add|list|rm` and `hookgate task add|list|rm` through the real executable:
// exit 0 saved, 1 refused (a config error, a name taken, an unknown name), 2 usage; a refused
// edit prints file:line:col findings and changes nothing on disk.
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { BUNDLE_FILE } from '../../runtime/bundle/format.js'
import { mountSmallDisk } from '../helpers/full-disk.js'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { describeRun, hookgate, scratchDir, stdoutJson, writeTree, type CliResult } from './cli-helpers.js'
import { post, spawnServe, until } from '../runtime/http/harness.js'

const CONFIG = `# a config edited from the command line
hooks:
  enabled: true
  token: \${HOOKGATE_TOKEN}   # a reference, never the value
  path: /hooks

workflows:
  - id: deploy-check
    steps:
      - { id: note, action: agent, messageTemplate: "deploy {{payload.service}}" }

agents:
  - id: main
    default: true
    model: builtin/echo
    triggers:
      - name: Deploy finished
        path: deploys
        target: agent
        prompt: "Deploy {{payload.service}} finished"
  - id: ops
    model: builtin/echo
`

function project(text = CONFIG): string {
  const dir = scratchDir('definitions-')
  writeTree(dir, { 'hooks.yaml': text })
  return dir
}

function run(dir: string, args: string[]): Promise<CliResult> {
  return hookgate(args, { cwd: dir, timeoutMs: 15_000 })
}

const configOf = (dir: string) => readFileSync(join(dir, 'hooks.yaml'), 'utf8')

// ---------------------------------------------------------------------------------------------

const triggers = suite('hookgate trigger add|list|rm')

triggers('add writes the Trigger, compiles, and prints the endpoint and a curl line (exit 0)', async () => {
  const dir = project()
  const r = await run(dir, ['trigger', 'add', '--name', 'Build done', '--path', 'builds', '--target', 'wake', '--prompt', 'build {{payload.id}}', '--timeout', '30'])
  assert.is(r.code, 0, describeRun(r))
  const [url, curl] = r.stdout.trim().split('\n')
  assert.is(url, 'http://127.0.0.1:8787/hooks/builds')
  assert.match(curl!, /^curl -X POST 'http:\/\/127\.0\.0\.1:8787\/hooks\/builds' .*\$HOOKGATE_TOKEN/)
  assert.match(r.stderr, /added Trigger "Build done" \(trigger:main:build-done\)/)
  const text = configOf(dir)
  assert.ok(text.startsWith(CONFIG.slice(0, CONFIG.indexOf('  - id: ops'))), text)
  assert.match(text, /- name: Build done\n\s+path: builds\n\s+target: wake\n\s+prompt: build \{\{payload.id\}\}\n\s+timeoutSeconds: 30\n/)
  const manifest = JSON.parse(readFileSync(join(dir, 'dist', 'manifest.json'), 'utf8'))
  assert.ok(manifest.routes.some((route: any) => route.id === 'trigger:main:build-done'), JSON.stringify(manifest.routes))
})

triggers('a config error prints file:line:col: error CODE: and changes nothing (exit 1)', async () => {
  const dir = project()
  const r = await run(dir, ['trigger', 'add', '--name', 'Bad', '--path', 'bad path', '--target', 'wake'])
  assert.is(r.code, 1, describeRun(r))
  assert.match(r.stderr, /nothing was written/)
  assert.match(r.stderr, /^hooks\.yaml:\d+:\d+: error MATCH_PATH_INVALID: /m)
  assert.is(r.stdout, '')
  assert.is(configOf(dir), CONFIG)
  assert.not.ok(existsSync(join(dir, 'dist')), 'a bundle was written')
})

triggers('an unknown workflow is refused with its finding (exit 1)', async () => {
  const dir = project()
  const r = await run(dir, ['trigger', 'add', '--name', 'Flow', '--path', 'flow', '--target', 'workflow', '--workflow', 'nope'])
  assert.is(r.code, 1, describeRun(r))
  assert.match(r.stderr, /^hooks\.yaml:\d+:\d+: error [A-Z_]+: .*nope/m)
  assert.is(configOf(dir), CONFIG)
})

triggers('a taken name is refused without --replace (exit 1) and replaced with it', async () => {
  const dir = project()
  const taken = await run(dir, ['trigger', 'add', '--name', 'deploy finished', '--path', 'other', '--target', 'wake'])
  assert.is(taken.code, 1, describeRun(taken))
  assert.match(taken.stderr, /already has a Trigger named "Deploy finished"; add --replace/)
  assert.is(configOf(dir), CONFIG)
  const replaced = await run(dir, ['trigger', 'add', '--name', 'Deploy finished', '--path', 'deploys', '--target', 'wake', '--disabled', '--replace'])
  assert.is(replaced.code, 0, describeRun(replaced))
  assert.match(replaced.stderr, /replaced Trigger "Deploy finished"/)
  const text = configOf(dir)
  assert.match(text, /- name: Deploy finished\n\s+path: deploys\n\s+target: wake\n\s+enabled: false\n/)
  assert.not.match(text, /prompt: "Deploy/)
  assert.is(text.match(/name: Deploy finished/g)!.length, 1)
})

triggers('--agent puts the Trigger under that agent; an unknown agent is refused (exit 1)', async () => {
  const dir = project()
  const r = await run(dir, ['trigger', 'add', '--agent', 'ops', '--name', 'Pager', '--path', 'pager', '--target', 'wake'])
  assert.is(r.code, 0, describeRun(r))
  assert.match(r.stderr, /trigger:ops:pager/)
  const unknown = await run(dir, ['trigger', 'add', '--agent', 'nobody', '--name', 'X', '--path', 'x', '--target', 'wake'])
  assert.is(unknown.code, 1, describeRun(unknown))
  assert.match(unknown.stderr, /no agent "nobody"/)
})

triggers('a Trigger path with an empty segment (a//b) is refused at file:line:col, not printed as a URL the runtime answers 404 to', async () => {
  const dir = project()
  const r = await run(dir, ['trigger', 'add', '--name', 'Doubled', '--path', 'builds//done', '--target', 'wake'])
  assert.is(r.code, 1, describeRun(r))
  assert.match(r.stderr, /^hooks\.yaml:\d+:\d+: error MATCH_PATH_INVALID: path "builds\/\/done" has an empty segment/m)
  assert.match(r.stderr, /hint: write path: builds\/done/)
  assert.is(r.stdout, '')
  assert.is(configOf(dir), CONFIG)
  // One written by hand is listed without a URL rather than with a wrong one.
  const hand = project(CONFIG.replace('path: deploys', 'path: deploys//done'))
  const list = await run(hand, ['trigger', 'list', '--json'])
  assert.is(list.code, 0, describeRun(list))
  assert.is((stdoutJson(list) as Array<{ endpoint: unknown }>)[0]!.endpoint, null)
})

triggers('the printed endpoint URL is the one the runtime serves, for a path written with slashes around it', async () => {
  const dir = project()
  process.env.HOOKGATE_TOKEN ??= 'a-test-hook-token-of-enough-length'
  const compiled = await run(dir, ['compile', 'hooks.yaml', '--out', 'dist'])
  assert.is(compiled.code, 0, describeRun(compiled))
  const server = await spawnServe(join(dir, 'dist'), join(dir, '.hookgate'))
  try {
    const r = await run(dir, ['trigger', 'add', '--name', 'Build done', '--path', '/builds/done/', '--target', 'wake', '--prompt', 'build {{payload.id}}'])
    assert.is(r.code, 0, describeRun(r))
    const url = r.stdout.trim().split('\n')[0]!
    assert.is(url, `${server.origin}/hooks/builds/done`)
    // the runtime reloads the bundle it watches; then the printed URL answers the wake
    const reply = await until('the printed URL to answer', async () => {
      const res = await post(server.origin, new URL(url).pathname, process.env.HOOKGATE_TOKEN!, { id: 7 })
      return res.status === 404 ? undefined : res
    }, 10_000)
    assert.is(reply.status, 200, reply.text)
    assert.is(reply.json.action, 'wake')
  } finally {
    server.kill()
    await server.exited
  }
})

triggers('list --json prints every Trigger with its agent, id, enabled, endpoint and last run', async () => {
  const dir = project()
  const r = await run(dir, ['trigger', 'list', '--json'])
  assert.is(r.code, 0, describeRun(r))
  assert.equal(stdoutJson(r), [{
    agentId: 'main',
    name: 'Deploy finished',
    path: 'deploys',
    target: 'agent',
    prompt: 'Deploy {{payload.service}} finished',
    id: 'trigger:main:deploy-finished',
    enabled: true,
    endpoint: 'http://127.0.0.1:8787/hooks/deploys',
    lastRun: null,
  }])
  const none = await run(dir, ['trigger', 'list', '--json', '--agent', 'ops'])
  assert.is(none.code, 0, describeRun(none))
  assert.equal(stdoutJson(none), [])
  const unknown = await run(dir, ['trigger', 'list', '--agent', 'nobody'])
  assert.is(unknown.code, 1, describeRun(unknown))
})

triggers('rm removes a Trigger (exit 0) and gives back the file without it; an unknown name exits 1', async () => {
  const dir = project()
  const added = await run(dir, ['trigger', 'add', '--name', 'Temp', '--path', 'temp', '--target', 'wake'])
  assert.is(added.code, 0, describeRun(added))
  const removed = await run(dir, ['trigger', 'rm', 'Temp'])
  assert.is(removed.code, 0, describeRun(removed))
  assert.match(removed.stderr, /removed Trigger "Temp"/)
  assert.is(configOf(dir), CONFIG)
  const unknown = await run(dir, ['trigger', 'rm', 'Temp'])
  assert.is(unknown.code, 1, describeRun(unknown))
  assert.match(unknown.stderr, /has no Trigger named "Temp"/)
  assert.is(configOf(dir), CONFIG)
})

triggers('a missing required flag is a usage error (exit 2), no longer a compile error (exit 1); so are an unknown flag and rm without a name', async () => {
  const dir = project()
  const missing = await run(dir, ['trigger', 'add', '--name', 'X'])
  assert.is(missing.code, 2, describeRun(missing))
  assert.match(missing.stderr, /--path/)
  assert.match(missing.stderr, /usage: hookgate trigger add/)
  const unknownFlag = await run(dir, ['trigger', 'list', '--colour'])
  assert.is(unknownFlag.code, 2, describeRun(unknownFlag))
  const noName = await run(dir, ['trigger', 'rm'])
  assert.is(noName.code, 2, describeRun(noName))
  assert.is(configOf(dir), CONFIG)
})

triggers('the first Trigger in a config without a token turns hooks on and generates <state>/token (0600), written as a reference only', async () => {
  const bare = '# bare\nhooks:\n  enabled: false\nagents:\n  - id: main\n    model: builtin/echo\n'
  const dir = project(bare)
  const r = await run(dir, ['trigger', 'add', '--name', 'First', '--path', 'first', '--target', 'wake'])
  assert.is(r.code, 0, describeRun(r))
  const tokenFile = join(dir, '.hookgate', 'token')
  assert.is(statSync(tokenFile).mode & 0o777, 0o600)
  const token = readFileSync(tokenFile, 'utf8').trim()
  const text = configOf(dir)
  assert.not.ok(text.includes(token))
  assert.not.ok((r.stdout + r.stderr).includes(token))
  assert.match(text, /\n {2}enabled: true\n/)
  assert.match(text, /\n {2}token: \{ ?generate: true ?\}\n/)
  assert.match(r.stderr, /generated a hook token into \.hookgate\/token/)
  assert.match(r.stdout, /\$\(cat \.hookgate\/token\)/)
})

for (const sub of ['add', 'list', 'rm']) {
  triggers(`trigger ${sub} --help prints its usage (exit 0) and changes nothing`, async () => {
    const dir = project()
    const r = await run(dir, ['trigger', sub, '--help'])
    assert.is(r.code, 0, describeRun(r))
    assert.match(r.stdout, new RegExp(`^usage: hookgate trigger ${sub}`))
    assert.is(configOf(dir), CONFIG)
  })
}

// ---- a save is whole or nothing: hooks.yaml and the bundle change together or not at all -----

/** Every file under `dir` (names relative to it), for "nothing left behind" checks. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => relative(dir, join(e.parentPath ?? e.path, e.name))).sort()
}

triggers('a bundle that cannot be written (a file where the out dir should be) leaves hooks.yaml as it was (exit 2)', async () => {
  const dir = project()
  writeFileSync(join(dir, 'dist'), 'not a directory\n')
  const before = filesUnder(dir)
  const r = await run(dir, ['trigger', 'add', '--name', 'Build done', '--path', 'builds', '--target', 'wake'])
  assert.is(r.code, 2, describeRun(r))
  assert.match(r.stderr, /cannot write the bundle into dist: .*hooks\.yaml and the bundle are unchanged/)
  assert.is(r.stdout, '')
  assert.is(configOf(dir), CONFIG)
  assert.is(readFileSync(join(dir, 'dist'), 'utf8'), 'not a directory\n')
  assert.equal(filesUnder(dir), before, 'a temp file was left behind')
})

triggers('a bundle that cannot be put in place (a directory where the bundle file goes) puts hooks.yaml and manifest.json back (exit 2)', async () => {
  const dir = project()
  const compiled = await run(dir, ['compile', 'hooks.yaml', '--out', 'dist'])
  assert.is(compiled.code, 0, describeRun(compiled))
  const manifest = readFileSync(join(dir, 'dist', 'manifest.json'))
  rmSync(join(dir, 'dist', BUNDLE_FILE))
  mkdirSync(join(dir, 'dist', BUNDLE_FILE, 'in-the-way'), { recursive: true })
  const before = filesUnder(dir)
  const r = await run(dir, ['trigger', 'add', '--name', 'Build done', '--path', 'builds', '--target', 'wake'])
  assert.is(r.code, 2, describeRun(r))
  assert.match(r.stderr, /hooks\.yaml and the bundle are unchanged/)
  assert.is(configOf(dir), CONFIG)
  assert.equal(readFileSync(join(dir, 'dist', 'manifest.json')), manifest)
  assert.equal(filesUnder(dir), before, 'a temp file was left behind')
})

triggers('hooks.yaml that cannot be written (its disk full) leaves the bundle as it was and no temp file (exit 2)', async () => {
  const disk = mountSmallDisk(256)
  if (!disk) {
    console.log('  (skipped: this process may not mount a tmpfs)')
    return
  }
  try {
    const out = scratchDir('definitions-out-')
    writeTree(disk.dir, { 'hooks.yaml': CONFIG })
    const args = ['--config', join(disk.dir, 'hooks.yaml'), '--out', join(out, 'dist'), '--state', join(out, 'state')]
    const compiled = await run(out, ['compile', join(disk.dir, 'hooks.yaml'), '--out', join(out, 'dist')])
    assert.is(compiled.code, 0, describeRun(compiled))
    const bundle = readFileSync(join(out, 'dist', BUNDLE_FILE))
    const manifest = readFileSync(join(out, 'dist', 'manifest.json'))
    disk.fill()
    const before = filesUnder(disk.dir)
    const r = await run(out, ['trigger', 'add', '--name', 'Build done', '--path', 'builds', '--target', 'wake', ...args])
    assert.is(r.code, 2, describeRun(r))
    assert.match(r.stderr, /hookgate trigger add: the save could not be written: cannot write .*hooks\.yaml: .*ENOSPC.*; hooks\.yaml and the bundle are unchanged/)
    assert.is(readFileSync(join(disk.dir, 'hooks.yaml'), 'utf8'), CONFIG)
    assert.equal(readFileSync(join(out, 'dist', BUNDLE_FILE)), bundle)
    assert.equal(readFileSync(join(out, 'dist', 'manifest.json')), manifest)
    assert.equal(filesUnder(disk.dir), before, 'a temp file was left behind')
    assert.equal(filesUnder(join(out, 'dist')), ['hookgate.bundle.mjs', 'manifest.json'])
  } finally {
    disk.unmount()
  }
})

triggers('a symlinked hooks.yaml is edited through the link: the link stays, its target gets the edit with its mode', async () => {
  const dir = scratchDir('definitions-link-')
  writeTree(dir, { 'configs/real.yaml': CONFIG })
  chmodSync(join(dir, 'configs/real.yaml'), 0o640)
  symlinkSync('configs/real.yaml', join(dir, 'hooks.yaml'))
  const r = await run(dir, ['trigger', 'add', '--name', 'Build done', '--path', 'builds', '--target', 'wake'])
  assert.is(r.code, 0, describeRun(r))
  assert.ok(lstatSync(join(dir, 'hooks.yaml')).isSymbolicLink(), 'the link was replaced by a plain file')
  assert.is(readlinkSync(join(dir, 'hooks.yaml')), 'configs/real.yaml')
  assert.match(readFileSync(join(dir, 'configs/real.yaml'), 'utf8'), /- name: Build done\n\s+path: builds\n/)
  assert.is(statSync(join(dir, 'configs/real.yaml')).mode & 0o777, 0o640)
  assert.equal(filesUnder(join(dir, 'configs')), ['real.yaml'])
})

triggers.run()

// ---------------------------------------------------------------------------------------------

const tasks = suite('hookgate task add|list|rm')

tasks('add writes the Task and prints its next five firings (exit 0)', async () => {
  const dir = project()
  const r = await run(dir, ['task', 'add', '--name', 'Morning', '--schedule', '0 8 * * *', '--timezone', 'Europe/Berlin', '--target', 'wake', '--prompt', 'good morning'])
  assert.is(r.code, 0, describeRun(r))
  const lines = r.stdout.trim().split('\n')
  assert.is(lines[0], 'next firings:')
  assert.is(lines.length, 6)
  for (const l of lines.slice(1)) assert.match(l, /^ {2}\d{4}-\d{2}-\d{2}T0[67]:00:00\.000Z$/)
  assert.match(configOf(dir), /tasks:\n\s+- name: Morning\n\s+schedule: 0 8 \* \* \*\n\s+timezone: Europe\/Berlin\n\s+target: wake\n\s+prompt: good morning\n/)
})

tasks('a broken cron prints file:line:col: error CODE: and changes nothing (exit 1)', async () => {
  const dir = project()
  const r = await run(dir, ['task', 'add', '--name', 'Broken', '--schedule', '61 * * * *', '--target', 'wake'])
  assert.is(r.code, 1, describeRun(r))
  assert.match(r.stderr, /^hooks\.yaml:\d+:\d+: error [A-Z_]+: /m)
  assert.is(configOf(dir), CONFIG)
})

tasks('a taken name is refused without --replace and replaced with it; list --json shows next firings; rm removes it', async () => {
  const dir = project()
  assert.is((await run(dir, ['task', 'add', '--name', 'Tick', '--every', '1h', '--target', 'wake'])).code, 0)
  const taken = await run(dir, ['task', 'add', '--name', 'tick', '--every', '2h', '--target', 'wake'])
  assert.is(taken.code, 1, describeRun(taken))
  assert.match(taken.stderr, /already has a Task named "Tick"; add --replace/)
  const replaced = await run(dir, ['task', 'add', '--name', 'Tick', '--every', '2h', '--target', 'wake', '--replace'])
  assert.is(replaced.code, 0, describeRun(replaced))
  const list = await run(dir, ['task', 'list', '--json'])
  assert.is(list.code, 0, describeRun(list))
  const rows = stdoutJson<any[]>(list)
  assert.is(rows.length, 1)
  const { next, ...row } = rows[0]
  assert.equal(row, { agentId: 'main', name: 'Tick', every: '2h', target: 'wake', id: 'task:main:tick', enabled: true, lastRun: null })
  assert.is(next.length, 5)
  for (let i = 1; i < 5; i++) assert.is(Date.parse(next[i]) - Date.parse(next[i - 1]), 2 * 3600_000)
  const removed = await run(dir, ['task', 'rm', 'Tick'])
  assert.is(removed.code, 0, describeRun(removed))
  assert.is(configOf(dir), CONFIG)
  const unknown = await run(dir, ['task', 'rm', 'Tick'])
  assert.is(unknown.code, 1, describeRun(unknown))
})

tasks('a disabled Task is listed with no next firings', async () => {
  const dir = project()
  const r = await run(dir, ['task', 'add', '--name', 'Off', '--every', '1h', '--target', 'wake', '--disabled'])
  assert.is(r.code, 0, describeRun(r))
  assert.is(r.stdout, '')
  const list = stdoutJson<any[]>(await run(dir, ['task', 'list', '--json']))
  assert.is(list[0].enabled, false)
  assert.equal(list[0].next, [])
})

tasks('a missing --target is a usage error (exit 2), no longer a compile error (exit 1); so is rm without a name', async () => {
  const dir = project()
  const missing = await run(dir, ['task', 'add', '--name', 'X', '--every', '1h'])
  assert.is(missing.code, 2, describeRun(missing))
  assert.match(missing.stderr, /--target/)
  const noName = await run(dir, ['task', 'rm'])
  assert.is(noName.code, 2, describeRun(noName))
  assert.is(configOf(dir), CONFIG)
})

for (const sub of ['add', 'list', 'rm']) {
  tasks(`task ${sub} --help prints its usage (exit 0)`, async () => {
    const dir = project()
    const r = await run(dir, ['task', sub, '--help'])
    assert.is(r.code, 0, describeRun(r))
    assert.match(r.stdout, new RegExp(`^usage: hookgate task ${sub}`))
  })
}

tasks.run()
