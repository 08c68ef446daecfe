// The operator page in a real browser (Debian's Chromium driven by playwright-core) against the real
// processes: `hookgate serve` and `hookgate admin` on one project in a temp directory. It logs in,
// creates a Trigger through the form, posts to the endpoint the page shows and sees the run arrive
// in the history without a reload; it also holds the page to the 409 on a file changed on disk, a
// finding shown beside the field it names, the CSP (no inline script runs), and a Task's next
// firings. The project is the repo's own hooks.yaml (its github and alerts mappings, the gmail
// preset) plus a workflow Trigger: the page lists every route beside the Triggers, the history names
// each run (a Trigger's name, a step's id) with its duration and times to the millisecond, the
// Reply channel/target controls are as wide as the others, and no request of the page meets a 404
// (the favicon). Each page state is saved as a screenshot into $HOOKGATE_SCREENSHOTS_DIR (default: a temp
// dir); `HOOKGATE_SCREENSHOTS_DIR=docs/screenshots` regenerates the README's.
import { spawn, type ChildProcess } from 'node:child_process'
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { chromium, type Browser, type Page } from 'playwright-core'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgateBin, repoRoot, tempDir } from '../helpers/paths.js'
import { compileProject, setTestToken, spawnServe, until, type Project, type ServeProcess } from '../runtime/http/harness.js'

const CHROMIUM = '/usr/bin/chromium'
const HOOK_TOKEN = setTestToken()
const ADMIN_TOKEN = 'admin-' + HOOK_TOKEN.slice(0, 16).split('').reverse().join('')
const SHOTS = process.env.HOOKGATE_SCREENSHOTS_DIR ? resolve(repoRoot, process.env.HOOKGATE_SCREENSHOTS_DIR) : tempDir('hookgate-screens-')

// The repo's hooks.yaml, with the test's hook token instead of a generated one, and a Trigger
// that runs a workflow (whose steps the history must name by their ids).
const REPO_CONFIG = readFileSync(join(repoRoot, 'hooks.yaml'), 'utf8')
const CONFIG = REPO_CONFIG.replace('token: { generate: true }', 'token: "${HOOKGATE_TEST_TOKEN}"') + `    triggers:
      - name: Triage mail
        path: triage
        target: workflow
        workflow: triage

workflows:
  - id: triage
    description: read, then decide
    steps:
      - id: read
        action: agent
        agentId: main
        messageTemplate: "Read {{payload.subject}}"
`

interface World { project: Project; serve: ServeProcess; admin: ChildProcess; adminUrl: string; browser: Browser; page: Page; violations: () => Promise<string[]>; missing: string[] }
const world = {} as World

function spawnAdmin(project: Project): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [hookgateBin, 'admin', '--config', project.configFile, '--out', project.outDir, '--state', project.stateDir, '--port', '0'], {
    cwd: project.dir,
    env: { ...process.env, HOOKGATE_ADMIN_TOKEN: ADMIN_TOKEN, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  process.on('exit', () => { if (child.exitCode === null) child.kill('SIGKILL') })
  let out = ''
  let err = ''
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d })
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`hookgate admin printed no address within 10 s; stdout:\n${out}\nstderr:\n${err}`)), 10_000)
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d
      const m = /hookgate admin on (http:\/\/\S+?)\/? /.exec(out)
      if (m) { clearTimeout(timer); ok({ child, url: m[1]! }) }
    })
    child.on('exit', (code) => { clearTimeout(timer); fail(new Error(`hookgate admin exited with ${code}; stderr:\n${err}`)) })
  })
}

/** Each page state shown is also held to "every control has a visible label" and "every button reachable by keyboard". */
async function shot(name: string): Promise<void> {
  const unlabelled = await world.page.evaluate(`[...document.querySelectorAll('input, select, textarea')]
    .filter((el) => el.getClientRects().length > 0 && el.type !== 'hidden')
    .filter((el) => ![...(el.labels ?? [])].some((l) => l.getClientRects().length > 0 && l.textContent.trim() !== ''))
    .map((el) => el.outerHTML.slice(0, 120))`) as string[]
  assert.equal(unlabelled, [], `controls without a visible <label> on ${name}`)
  const unreachable = await world.page.evaluate(`[...document.querySelectorAll('button, a, [onclick], [role=button]')]
    .filter((el) => el.getClientRects().length > 0 && (el.tabIndex < 0 || (el.tagName === 'A' && !el.hasAttribute('href'))))
    .map((el) => el.outerHTML.slice(0, 120))`) as string[]
  assert.equal(unreachable, [], `controls the keyboard cannot reach on ${name}`)
  // Focus rings and the blinking caret are not part of the state being shown.
  await world.page.evaluate('document.activeElement?.blur()')
  await world.page.screenshot({ path: `${SHOTS}/${name}.png` })
}

const page = suite('the operator page')

page.before(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: the browser test needs Debian's Chromium (apt-get install chromium)`)
  mkdirSync(SHOTS, { recursive: true })
  assert.ok(CONFIG.includes('token: "${HOOKGATE_TEST_TOKEN}"') && /\n  - id: main\n[^]*heartbeat: \{ every: 30m \}\n    triggers:/.test(CONFIG), 'the repo\'s hooks.yaml is still the shape this test extends')
  world.project = await compileProject(CONFIG, { 'transforms/github.ts': readFileSync(join(repoRoot, 'transforms', 'github.ts'), 'utf8') })
  world.serve = await spawnServe(world.project.outDir, world.project.stateDir)
  const admin = await spawnAdmin(world.project)
  world.admin = admin.child
  world.adminUrl = admin.url
  world.browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] })
  const context = await world.browser.newContext({ viewport: { width: 1100, height: 750 } })
  world.page = await context.newPage()
  world.page.setDefaultTimeout(10_000)
  world.missing = []
  world.page.on('response', (r) => { if (r.status() === 404) world.missing.push(r.url()) })
  await world.page.goto(world.adminUrl + '/')
})

page.after(async () => {
  await world.browser?.close().catch(() => {})
  world.serve?.kill()
  if (world.admin && world.admin.exitCode === null) world.admin.kill('SIGKILL')
})

page('is served with a CSP under which an injected inline script does not run', async () => {
  const r = await fetch(world.adminUrl + '/')
  const csp = r.headers.get('content-security-policy') ?? ''
  assert.match(csp, /script-src 'self'/)
  assert.match(csp, /style-src 'self'/)
  assert.not.match(csp, /unsafe-inline|unsafe-eval/)
  // Page-side code is given as text: this file is type-checked for node, without the DOM's types.
  const directive = await world.page.evaluate(`new Promise((done) => {
    document.addEventListener('securitypolicyviolation', (e) => done(e.effectiveDirective), { once: true })
    const s = document.createElement('script')
    s.textContent = 'window.inlineScriptRan = true'
    document.body.append(s)
  })`)
  assert.match(String(directive), /^script-src/)
  assert.is(await world.page.evaluate('window.inlineScriptRan'), undefined)
})

page('refuses a wrong admin token and logs in with the right one', async () => {
  const p = world.page
  await p.getByLabel('Admin token').fill('not-the-token')
  await p.getByRole('button', { name: 'Log in' }).click()
  await p.getByText('That admin token is not valid').waitFor()
  await p.getByLabel('Admin token').fill(ADMIN_TOKEN)
  await shot('login')
  // by keyboard: Enter in the token field submits
  await p.getByLabel('Admin token').press('Enter')
  await p.getByRole('heading', { name: 'Agents' }).waitFor()
  assert.is(await p.evaluate('document.cookie'), '')
})

page('lists every route of the repo\'s hooks.yaml: its mappings and the gmail preset read-only, beside the Trigger', async () => {
  const p = world.page
  const routes = p.locator('section[aria-labelledby="h-routes"]')
  await routes.getByRole('heading', { name: 'Routes' }).waitFor()
  const row = async (id: string) => routes.locator(`tr[data-route="${id}"]`).innerText()
  const origin = world.serve.origin
  const github = await row('github')
  assert.ok(github.includes(`${origin}/hooks/github`), github)
  assert.match(github, /mapping · signed \(github\)\s+github\s+agent\s+main\s+never\s+hooks\.yaml line \d+/)
  assert.match(await row('alerts'), new RegExp(`${origin}/hooks/alerts\\s+mapping\\s+alerts\\s+wake\\s+main`))
  assert.match(await row('preset:gmail'), new RegExp(`${origin}/hooks/gmail\\s+preset\\s+gmail\\s+agent\\s+main`))
  assert.match(await row('trigger:main:triage-mail'), new RegExp(`${origin}/hooks/triage\\s+Trigger\\s+Triage mail\\s+workflow triage\\s+main`))
  assert.match(await row('wake'), new RegExp(`${origin}/hooks/wake\\s+built-in`))
  // a mapping is read-only (no Edit), a Trigger links to its form
  assert.is(await routes.locator('tr[data-route="github"] a').count(), 0)
  assert.is(await routes.getByRole('link', { name: 'Edit Trigger Triage mail' }).getAttribute('href'), '#/agents/main/triggers/Triage%20mail')
  await shot('routes')
})

page('shows an agent\'s Tasks with Scheduled tasks and Webhook Triggers', async () => {
  const p = world.page
  await p.getByRole('link', { name: 'main', exact: true }).click()
  await p.getByRole('heading', { name: 'Tasks of main' }).waitFor()
  assert.ok(await p.getByRole('heading', { name: 'Scheduled tasks' }).isVisible())
  assert.ok(await p.getByRole('heading', { name: 'Webhook Triggers' }).isVisible())
  assert.is(new URL(p.url()).hash, '#/agents/main/tasks')
  // the mappings and the preset that run for main, beside its Triggers
  const mappings = p.locator('section[aria-labelledby="h-mappings"] tbody tr')
  assert.equal(await mappings.evaluateAll((rows) => rows.map((r) => r.getAttribute('data-route'))), ['github', 'alerts', 'preset:gmail'])
})

page('shows a finding beside Path for an invalid path, and only the fields of the run target', async () => {
  const p = world.page
  await p.getByRole('link', { name: 'New Trigger' }).click()
  await p.getByRole('heading', { name: 'New Trigger' }).waitFor()
  for (const label of ['Name', 'Path', 'Run target', 'Workflow target', 'Delivery', 'Prompt template', 'Timeout', 'Notify', 'Enabled']) {
    assert.is(await p.getByLabel(label, { exact: true }).count(), 1, `one control labelled ${label}`)
  }
  await p.getByLabel('Name', { exact: true }).fill('Deploy finished')
  await p.getByLabel('Path', { exact: true }).fill('a b')
  const finding = p.locator('#f-path-findings li.error')
  await finding.waitFor()
  assert.is(await p.getByLabel('Path', { exact: true }).getAttribute('aria-describedby'), 'f-path-findings')
  assert.is(await p.getByLabel('Path', { exact: true }).getAttribute('aria-invalid'), 'true')
  // Agent prompt: delivery shown, timing and workflow hidden; Heartbeat wake: the other way round.
  assert.ok(await p.getByLabel('Delivery', { exact: true }).isVisible())
  assert.not.ok(await p.getByLabel('Run timing', { exact: true }).isVisible())
  assert.not.ok(await p.getByLabel('Workflow target', { exact: true }).isVisible())
  await shot('trigger-field-error')
  const before = readFileSync(world.project.configFile, 'utf8')
  await p.getByRole('button', { name: 'Save Trigger' }).click()
  await p.locator('#save-result').getByText('does not compile').waitFor()
  assert.is(readFileSync(world.project.configFile, 'utf8'), before, 'a save that does not compile writes nothing')
  await p.getByLabel('Delivery', { exact: true }).selectOption('deliver')
  assert.ok(await p.getByLabel('Channel', { exact: true }).isVisible(), 'Reply channel/target shows for a delivered reply')
  assert.ok(await p.getByLabel('Target (to)').isVisible())
  // as wide as the form's other controls (they were about 18 px wide)
  const width = async (label: string) => (await p.getByLabel(label, { exact: true }).boundingBox())!.width
  const path = await width('Path')
  assert.ok(path > 300, `Path is ${path} px wide`)
  for (const label of ['Channel', 'Target (to)']) {
    const w = await width(label)
    assert.ok(Math.abs(w - path) <= 2, `${label} is ${w} px wide, Path ${path} px`)
  }
  assert.equal(await p.getByRole('group', { name: 'Reply channel/target' }).count(), 1, 'the two controls are one labelled group')
  await shot('trigger-reply')
  await p.getByLabel('Delivery', { exact: true }).selectOption('internal')
  assert.not.ok(await p.getByLabel('Channel', { exact: true }).isVisible())
  await p.getByLabel('Run target', { exact: true }).selectOption('wake')
  assert.ok(await p.getByLabel('Run timing', { exact: true }).isVisible())
  assert.not.ok(await p.getByLabel('Delivery', { exact: true }).isVisible())
  await p.getByLabel('Run target', { exact: true }).selectOption('workflow')
  assert.ok(await p.getByLabel('Workflow target', { exact: true }).isVisible())
  assert.ok(await p.getByRole('option', { name: /triage/ }).count() > 0, 'the saved workflow is offered')
  await p.getByLabel('Run target', { exact: true }).selectOption('agent')
})

page('refuses a save after hooks.yaml changed on disk (409), and saves after Reload', async () => {
  const p = world.page
  await p.getByLabel('Path', { exact: true }).fill('deploys')
  await p.getByLabel('Prompt template', { exact: true }).fill('Deploy of {{payload.service}} finished')
  await p.locator('#f-path-findings li').waitFor({ state: 'detached' })
  appendFileSync(world.project.configFile, '# pulled from git while the form was open\n')
  await p.getByRole('button', { name: 'Save Trigger' }).click()
  await p.getByText('hooks.yaml changed on disk').waitFor()
  assert.not.match(readFileSync(world.project.configFile, 'utf8'), /Deploy finished/)
  await p.getByRole('button', { name: 'Reload' }).click()
  await p.getByText('Reloaded hooks.yaml from disk').waitFor()
  await p.getByRole('button', { name: 'Save Trigger' }).click()
  const url = await p.getByLabel('Endpoint URL').inputValue()
  assert.is(url, `${world.serve.origin}/hooks/deploys`)
  assert.match(await p.getByLabel('curl').inputValue(), /^curl -X POST 'http:\/\/127\.0\.0\.1:\d+\/hooks\/deploys' .*\$HOOKGATE_TEST_TOKEN/)
  await p.getByText(/serves it now/).waitFor()
  const file = readFileSync(world.project.configFile, 'utf8')
  assert.match(file, /# pulled from git while the form was open/)
  assert.match(file, /name: Deploy finished/)
  assert.is(new URL(p.url()).hash, '#/agents/main/triggers/Deploy%20finished')
  await shot('trigger-saved')
  await p.getByRole('button', { name: 'Test' }).click()
  await p.getByText('The runtime would answer 202.').waitFor()
})

page('shows a run posted to the endpoint in the history without a reload, then its detail', async () => {
  const p = world.page
  await p.getByRole('link', { name: 'Run history' }).click()
  await p.getByRole('heading', { name: 'Run history' }).waitFor()
  await p.getByText('No runs match.').waitFor()
  const navigations: string[] = []
  p.on('framenavigated', (f) => { if (f === p.mainFrame()) navigations.push(f.url()) })
  const r = await fetch(`${world.serve.origin}/hooks/deploys`, { method: 'POST', headers: { authorization: `Bearer ${HOOK_TOKEN}`, 'content-type': 'application/json', 'x-deploy-id': '42' }, body: JSON.stringify({ service: 'billing' }) })
  assert.is(r.status, 202)
  const { runId } = await r.json() as { runId: string }
  const row = p.locator(`tr[data-run="${runId}"]`)
  await row.locator('.badge.succeeded').waitFor({ timeout: 15_000 })
  // the Trigger's name (its id only as the cell's title), its duration, the time to the millisecond
  const cells = await row.locator('td').allInnerTexts()
  assert.is(cells[2], 'Deploy finished', cells.join(' | '))
  assert.is(await row.locator('.run-name').getAttribute('title'), 'trigger:main:deploy-finished')
  assert.match(cells[0]!, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$/)
  assert.match(cells[5]!, /^(\d+ ms|\d+\.\d\d s)$/, cells.join(' | '))
  // a workflow run's steps are named by their ids, under the Trigger's name
  const triage = await fetch(`${world.serve.origin}/hooks/triage`, { method: 'POST', headers: { authorization: `Bearer ${HOOK_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ subject: 'invoice' }) })
  assert.is(triage.status, 202)
  const step = p.locator('tr[data-kind="trigger"]', { hasText: 'step read' })
  await step.locator('.badge.succeeded').waitFor({ timeout: 15_000 })
  assert.match(await step.locator('td').nth(2).innerText(), /^step read of Triage mail$/)
  assert.match(await step.locator('td').nth(5).innerText(), /^(\d+ ms|\d+\.\d\d s)$/)
  assert.equal(navigations, [], 'the page did not reload')
  await p.getByLabel('Definition kind').selectOption('trigger')
  await p.getByRole('button', { name: 'Apply filters' }).click()
  await p.waitForURL(/kind=trigger/)
  await row.waitFor()
  await shot('run-history')
  await row.getByRole('link').click()
  await p.getByRole('heading', { name: /^Run / }).waitFor()
  const meta = await p.locator('dl.meta').innerText()
  assert.match(meta, new RegExp(runId))
  assert.match(meta, /Definition\s+Deploy finished \(trigger:main:deploy-finished\)/)
  assert.match(meta, /Duration\s+(\d+ ms|\d+\.\d\d s)/)
  assert.match(meta, /Finished\s+\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}/)
  const headers = p.locator('section[aria-labelledby="h-request"] table')
  assert.match(await headers.innerText(), /x-deploy-id\s+42/)
  assert.match(await headers.innerText(), /authorization\s+\[redacted\]/)
  assert.not.match(await p.locator('main').innerText(), new RegExp(HOOK_TOKEN))
  await shot('run-detail')
})

page('shows a Task\'s next five firing times as its schedule is typed, and saves it', async () => {
  const p = world.page
  await p.goto(`${world.adminUrl}/#/agents/main/tasks/new`)
  await p.getByRole('heading', { name: 'New Task' }).waitFor()
  await p.getByLabel('Name', { exact: true }).fill('Nightly report')
  await p.getByLabel('Schedule (cron)').fill('30 6 * * 1-5')
  await p.getByLabel('Time zone').fill('Europe/Berlin')
  await p.getByLabel('Prompt', { exact: true }).fill('Write the nightly report')
  const times = p.locator('#next-firings time')
  // 06:30 in Berlin is 04:30 or 05:30 UTC, depending on summer time
  // (polled from here: waitForFunction evaluates text in the page, which the CSP forbids)
  const firings = await until('five firings at 06:30 Berlin time', async () => {
    const all = await Promise.all((await times.all()).map((t) => t.getAttribute('datetime')))
    return all.length === 5 && all.every((t) => /T0[45]:30:00\.000Z$/.test(t ?? '')) ? all : undefined
  }, 8000, 100)
  assert.is(new Set(firings).size, 5)
  await shot('task-form')
  await p.getByRole('button', { name: 'Save Task' }).click()
  await p.getByText('Saved to hooks.yaml').waitFor()
  assert.match(readFileSync(world.project.configFile, 'utf8'), /name: Nightly report/)
})

page('lists both definitions on the agent\'s Tasks page with their state and last run', async () => {
  const p = world.page
  await p.getByRole('link', { name: 'Back to Tasks' }).click()
  await p.getByRole('heading', { name: 'Tasks of main' }).waitFor()
  const trigger = p.locator('section[aria-labelledby="h-triggers"] tbody tr', { hasText: 'Deploy finished' })
  assert.match(await trigger.innerText(), /enabled/)
  assert.match(await trigger.innerText(), /succeeded/)
  const task = p.locator('section[aria-labelledby="h-tasks"] tbody tr', { hasText: 'Nightly report' })
  assert.match(await task.innerText(), /30 6 \* \* 1-5/)
  await shot('agent-tasks')
})

page('disables a Trigger (its path then answers 404) and deletes a Task after a confirm step', async () => {
  const p = world.page
  const trigger = p.locator('section[aria-labelledby="h-triggers"] tbody tr', { hasText: 'Deploy finished' })
  await trigger.getByRole('button', { name: 'Disable' }).click()
  await p.getByText('Deploy finished is now disabled.').waitFor()
  assert.match(await trigger.innerText(), /disabled/)
  assert.match(readFileSync(world.project.configFile, 'utf8'), /enabled: false/)
  const r = await until('the runtime to stop serving the disabled Trigger', async () => {
    const res = await fetch(`${world.serve.origin}/hooks/deploys`, { method: 'POST', headers: { authorization: `Bearer ${HOOK_TOKEN}` } })
    return res.status === 404 ? res.status : undefined
  }, 8000, 200)
  assert.is(r, 404)
  const task = p.locator('section[aria-labelledby="h-tasks"] tbody tr', { hasText: 'Nightly report' })
  await task.getByRole('button', { name: 'Delete' }).click()
  assert.match(readFileSync(world.project.configFile, 'utf8'), /Nightly report/, 'nothing is deleted before the confirm')
  const confirm = task.getByRole('button', { name: 'Confirm delete of Nightly report' })
  assert.ok(await confirm.evaluate((el) => el === el.ownerDocument.activeElement), 'focus moves to the confirm button')
  await confirm.click()
  await p.getByText('Nightly report was deleted.').waitFor()
  assert.not.match(readFileSync(world.project.configFile, 'utf8'), /Nightly report/)
})

page('met no 404 on any request, and serves its favicon', async () => {
  assert.equal(world.missing, [], 'requests of the page answered 404')
  for (const path of ['/favicon.ico', '/favicon.svg']) {
    const r = await fetch(world.adminUrl + path)
    assert.is(r.status, 200, path)
    assert.is(r.headers.get('content-type'), 'image/svg+xml')
    assert.match(await r.text(), /^<svg /)
  }
  assert.is(await world.page.locator('link[rel="icon"]').getAttribute('href'), 'favicon.svg')
})

page.run()
