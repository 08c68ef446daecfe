// The operator page: plain DOM code over the admin API (admin/server.ts), routed by the URL hash so
// back and forward work. The admin token lives in sessionStorage and goes out as a Bearer header
// (no cookies). The CSP forbids inline script and style: everything here builds elements and sets
// classes or the `hidden` attribute, never `style`.
// Over 400 lines because it is the whole page (login, agents, the Tasks page, both forms, history,
// a run's detail), one section per view; the forms are what would move to a file of their own next.

type Json = any // eslint-disable-line @typescript-eslint/no-explicit-any
interface Diagnostic { code: string; severity: string; message: string; line: number; column: number; path: string; hint?: string }
interface Findings { fields: Record<string, Diagnostic[]>; other: Diagnostic[] }
interface Answer { status: number; body: Json; headers: Headers }
type Kind = 'trigger' | 'task'

const TOKEN_KEY = 'hookgate-admin-token'
const TRIGGER_FIELDS = ['name', 'path', 'target', 'timing', 'workflow', 'delivery', 'prompt', 'channel', 'to', 'timeoutSeconds', 'notify', 'enabled']
const TASK_FIELDS = ['name', 'schedule', 'every', 'timezone', 'catchUp', 'target', 'workflow', 'prompt', 'timeoutSeconds', 'notify', 'enabled']
const TARGETS: Array<[string, string]> = [['agent', 'Agent prompt'], ['workflow', 'Workflow / graph'], ['wake', 'Heartbeat wake']]
const NOTIFY: Array<[string, string]> = [['silent', 'Silent'], ['done', 'Done only'], ['state', 'State changes']]
const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'timed_out', 'skipped']

const main = document.getElementById('main') as HTMLElement
let overview: Json | null = null
/** Aborted on every navigation: a view's long poll and pending checks end with it. */
let viewAbort = new AbortController()

// ---------------------------------------------------------------- DOM helpers

type Child = Node | string | null | undefined | false | Child[]
function flatten(list: Child[]): Array<Node | string> {
  const out: Array<Node | string> = []
  for (const c of list) if (Array.isArray(c)) out.push(...flatten(c)); else if (c !== null && c !== undefined && c !== false) out.push(c)
  return out
}
function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string | boolean | number | undefined> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue
    if (k === 'class') el.className = String(v)
    else el.setAttribute(k, v === true ? '' : String(v))
  }
  el.append(...flatten(children))
  return el
}

function on<T extends Element>(el: T, event: string, fn: (e: Event) => void): T {
  el.addEventListener(event, fn)
  return el
}

function render(...nodes: Child[]): void {
  main.replaceChildren(...flatten(nodes))
  // Focus moves to the new view's heading so keyboard and screen-reader users start there.
  const heading = main.querySelector('h1')
  if (heading) { heading.tabIndex = -1; heading.focus() } else main.focus()
}

/** Local time to the millisecond, e.g. 2026-11-28 10:52:01.234: runs a few ms apart are told apart. */
function when(iso: string | undefined | null): string {
  if (!iso) return ''
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  const p = (n: number, w = 2) => String(n).padStart(w, '0')
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`
}

/** A run's duration: 840 ms, 2.35 s, 4 min 05 s. */
function duration(ms: number | undefined | null): string {
  if (ms === undefined || ms === null) return ''
  if (ms < 1000) return `${ms} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`
  return `${Math.floor(ms / 60_000)} min ${String(Math.floor((ms % 60_000) / 1000)).padStart(2, '0')} s`
}

/** What a run is shown by: its Trigger's, Task's or mapping's name, and for a workflow step the step's id. */
function runName(run: Json): HTMLElement {
  const definition = run.definitionName ?? run.definitionId
  return h('span', { class: 'run-name', title: run.definitionId },
    run.stepId ? [h('strong', {}, `step ${run.stepId}`), h('span', { class: 'muted' }, ` of ${definition}`)] : h('strong', {}, definition),
    // a mapping's rendered name (e.g. "GitHub push"), when it says more than the definition's
    !run.stepId && run.name && run.name !== definition ? h('span', { class: 'muted' }, ` · ${run.name}`) : null)
}

function badge(text: string): HTMLElement {
  return h('span', { class: `badge ${text}` }, text)
}

function notice(kind: 'error' | 'ok' | 'info', ...children: Child[]): HTMLElement {
  return h('div', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, ...children)
}

function findingList(list: Diagnostic[]): HTMLElement {
  return h('ul', { class: 'findings' }, list.map((d) => h('li', { class: d.severity }, `${d.severity}: ${d.message}`, d.hint ? h('span', { class: 'hint' }, ` (${d.hint})`) : null)))
}

function copyField(label: string, value: string, multiline: boolean): HTMLElement {
  const id = `copy-${label.toLowerCase().replace(/[^a-z]+/g, '-')}`
  const control = multiline
    ? h('textarea', { id, readonly: true, rows: 3, class: 'mono' }, value)
    : h('input', { id, type: 'text', readonly: true, value, class: 'mono' })
  const button = on(h('button', { type: 'button' }, 'Copy'), 'click', () => {
    control.select()
    navigator.clipboard?.writeText(value).then(() => { button.textContent = 'Copied' }, () => { button.textContent = 'Select and copy' })
  })
  return h('div', { class: 'field' }, h('label', { for: id }, label), h('div', { class: 'copy' }, control, button))
}

// ---------------------------------------------------------------- API

function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY)
}

async function api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Answer> {
  const init: RequestInit = { method, headers: { authorization: `Bearer ${token() ?? ''}`, ...headers }, cache: 'no-store' }
  if (signal) init.signal = signal
  if (body !== undefined) {
    init.body = JSON.stringify(body)
    ;(init.headers as Record<string, string>)['content-type'] = 'application/json'
  }
  const r = await fetch(path, init)
  const text = await r.text()
  let parsed: Json = null
  try { parsed = text ? JSON.parse(text) : null } catch { parsed = { ok: false, error: text } }
  if (r.status === 401 && path !== '/api/overview') {
    sessionStorage.removeItem(TOKEN_KEY)
    location.hash = '#/login'
  }
  return { status: r.status, body: parsed, headers: r.headers }
}

async function loadOverview(): Promise<Json | null> {
  const r = await api('GET', '/api/overview')
  if (r.status === 401 || r.status === 429) {
    sessionStorage.removeItem(TOKEN_KEY)
    showLogin(r)
    return null
  }
  if (r.status !== 200) throw new Error(r.body?.error ?? `the overview answered ${r.status}`)
  overview = r.body
  showRuntime()
  return overview
}

function showRuntime(): void {
  const el = document.getElementById('runtime')!
  const rt = overview?.runtime
  el.textContent = rt ? `runtime: ${rt.url ?? 'not running'}${rt.url ? ` (${rt.status})` : ''} · ${overview.config.file}` : ''
}

// ---------------------------------------------------------------- routing

function parseHash(): { parts: string[]; query: URLSearchParams } {
  const raw = location.hash.replace(/^#\/?/, '')
  const [path, q] = raw.split('?') as [string, string | undefined]
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(q ?? '') }
}

async function route(): Promise<void> {
  viewAbort.abort()
  viewAbort = new AbortController()
  const { parts, query } = parseHash()
  const loggedIn = token() !== null
  document.getElementById('nav')!.hidden = !loggedIn
  if (!loggedIn || parts[0] === 'login') {
    if (loggedIn) { location.hash = '#/agents'; return }
    showLogin()
    return
  }
  try {
    if (parts.length === 0 || (parts[0] === 'agents' && parts.length === 1)) return await agentsView()
    if (parts[0] === 'agents' && parts.length === 3 && parts[2] === 'tasks') return await tasksView(parts[1]!)
    if (parts[0] === 'agents' && parts.length === 4 && (parts[2] === 'triggers' || parts[2] === 'tasks')) {
      return await formView(parts[2] === 'triggers' ? 'trigger' : 'task', parts[1]!, parts[3] === 'new' ? null : parts[3]!)
    }
    if (parts[0] === 'runs' && parts.length === 1) return await runsView(query)
    if (parts[0] === 'runs' && parts.length === 2) return await runView(parts[1]!)
    render(h('h1', {}, 'Not found'), h('p', {}, 'Nothing is at this address. ', h('a', { href: '#/agents' }, 'Go to the agents')))
  } catch (err) {
    if ((err as Error).name === 'AbortError') return
    render(h('h1', {}, 'Something went wrong'), notice('error', h('p', {}, (err as Error).message)))
  }
}

// ---------------------------------------------------------------- login

function showLogin(failed?: Answer): void {
  document.getElementById('nav')!.hidden = true
  const input = h('input', { id: 'admin-token', type: 'password', autocomplete: 'current-password', required: true })
  const message = h('div', { id: 'login-message', 'aria-live': 'polite' })
  const show = (r: Answer) => {
    if (r.status === 429) {
      const wait = Number(r.headers.get('retry-after') ?? '60')
      const at = new Date(Date.now() + wait * 1000).toLocaleTimeString()
      message.replaceChildren(notice('error', h('p', {}, `Too many failed logins from this address. Try again in ${wait} s (at ${at}).`)))
    } else if (r.status === 401) {
      message.replaceChildren(notice('error', h('p', {}, 'That admin token is not valid. Use the token hookgate admin printed when it started, or the one in HOOKGATE_ADMIN_TOKEN.')))
    } else {
      message.replaceChildren(notice('error', h('p', {}, r.body?.error ?? `the server answered ${r.status}`)))
    }
    input.setAttribute('aria-invalid', 'true')
    input.setAttribute('aria-describedby', 'login-message')
  }
  const form = on(h('form', { class: 'card login', novalidate: true },
    h('h1', {}, 'Log in'),
    h('p', { class: 'muted' }, 'The admin token is kept in this tab only (sessionStorage) and sent as a header; no cookies.'),
    h('div', { class: 'field' }, h('label', { for: 'admin-token' }, 'Admin token'), h('div', { class: 'control' }, input)),
    message,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Log in'))), 'submit', async (e) => {
    e.preventDefault()
    sessionStorage.setItem(TOKEN_KEY, input.value.trim())
    const r = await api('GET', '/api/overview')
    if (r.status === 200) {
      overview = r.body
      showRuntime()
      // Back to where the operator was going, or to the agents.
      const { parts } = parseHash()
      if (parts.length === 0 || parts[0] === 'login') location.hash = '#/agents'
      else void route()
      return
    }
    sessionStorage.removeItem(TOKEN_KEY)
    show(r)
    input.focus()
  })
  render(form)
  if (failed) show(failed)
  input.focus()
}

// ---------------------------------------------------------------- agents and their Tasks page

async function agentsView(): Promise<void> {
  const o = await loadOverview()
  if (!o) return
  render(
    h('h1', {}, 'Agents'),
    diagnosticsNotice(o),
    h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Agent'), h('th', {}, 'Model'), h('th', {}, 'Webhook Triggers'), h('th', {}, 'Scheduled tasks'))),
      h('tbody', {}, o.agents.map((a: Json) => h('tr', {},
        h('td', {}, h('a', { href: `#/agents/${encodeURIComponent(a.id)}/tasks` }, a.id), a.default ? h('span', { class: 'muted' }, ' (default)') : null),
        h('td', {}, h('code', {}, a.model)),
        h('td', {}, String(a.triggers.length)),
        h('td', {}, String(a.tasks.length)))))),
    h('section', { 'aria-labelledby': 'h-routes' },
      h('h2', { id: 'h-routes' }, 'Routes'),
      h('p', { class: 'muted' }, o.routesFrom === 'bundle'
        ? `Every endpoint the runtime serves from the last bundle that compiled (${o.config.file} does not compile now). `
        : 'Every endpoint the runtime serves. ',
        `Mappings and presets are read-only here: edit them in ${o.config.file}. Triggers are edited on their agent's page.`),
      routeTable(o.routes, true)),
  )
}

const KIND_LABEL: Record<string, string> = { 'built-in': 'built-in', mapping: 'mapping', preset: 'preset', trigger: 'Trigger' }

/** The routes as a table: endpoint, kind, action, agent, last run; a Trigger links to its form, a mapping names its line in hooks.yaml. */
function routeTable(routes: Json[], withAgent: boolean): HTMLElement {
  if (routes.length === 0) return h('p', { class: 'muted' }, 'No routes: hooks.enabled is not true, or the file does not compile.')
  return h('table', { class: 'routes' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Endpoint'), h('th', {}, 'Kind'), h('th', {}, 'Name'), h('th', {}, 'Action'), withAgent ? h('th', {}, 'Agent') : null, h('th', {}, 'Last run'), h('th', {}, 'Defined'))),
    h('tbody', {}, routes.map((r: Json) => h('tr', { 'data-route': r.id, 'data-kind': r.kind },
      h('td', {}, h('code', {}, r.url ?? r.name)),
      h('td', {}, KIND_LABEL[r.kind] ?? r.kind, r.signature ? h('span', { class: 'muted' }, ` · signed (${r.signature})`) : null),
      h('td', {}, r.title),
      h('td', {}, r.action, r.workflow ? h('span', { class: 'muted' }, ` ${r.workflow}`) : null),
      withAgent ? h('td', {}, r.agentId ?? h('span', { class: 'muted' }, 'from the request, else the default')) : null,
      lastRunCell(r.lastRun),
      h('td', {}, r.trigger
        ? h('a', { href: `#/agents/${encodeURIComponent(r.trigger.agentId)}/triggers/${encodeURIComponent(r.trigger.name)}`, 'aria-label': `Edit Trigger ${r.trigger.name}` }, 'Edit')
        : r.line ? h('span', { class: 'muted' }, `hooks.yaml line ${r.line}`) : h('span', { class: 'muted' }, 'built in'))))))
}

function diagnosticsNotice(o: Json): HTMLElement | null {
  const errors = (o.diagnostics as Diagnostic[]).filter((d) => d.severity === 'error')
  if (errors.length === 0) return null
  return notice('error', h('p', {}, `${o.config.file} does not compile as it is on disk:`), findingList(errors))
}

function agentOf(o: Json, agentId: string): Json {
  const agent = o.agents.find((a: Json) => a.id === agentId)
  if (!agent) throw new Error(`no agent "${agentId}" in ${o.config.file}`)
  return agent
}

function lastRunCell(run: Json): HTMLElement {
  if (!run) return h('td', { class: 'muted' }, 'never')
  return h('td', {}, badge(run.status), ' ', h('a', { href: `#/runs/${encodeURIComponent(run.id)}` }, when(run.createdAt)))
}

async function tasksView(agentId: string, flash?: HTMLElement): Promise<void> {
  const o = await loadOverview()
  if (!o) return
  const agent = agentOf(o, agentId)
  const base = `#/agents/${encodeURIComponent(agentId)}`
  const message = h('div', { 'aria-live': 'polite' }, flash ?? null)
  const rowActions = (kind: Kind, def: Json) => {
    const cell = h('div', { class: 'actions' })
    const normal = () => {
      cell.replaceChildren(
        h('a', { class: 'button', href: `${base}/${kind === 'trigger' ? 'triggers' : 'tasks'}/${encodeURIComponent(def.name)}` }, 'Edit'),
        on(h('button', { type: 'button' }, def.enabled ? 'Disable' : 'Enable'), 'click', () => void toggle(kind, def)),
        on(h('button', { type: 'button', class: 'danger' }, 'Delete'), 'click', confirmStep))
    }
    const confirmStep = () => {
      const yes = on(h('button', { type: 'button', class: 'danger' }, `Confirm delete of ${def.name}`), 'click', () => void remove(kind, def))
      cell.replaceChildren(h('span', {}, 'Delete for good? '), yes, on(h('button', { type: 'button' }, 'Cancel'), 'click', () => { normal(); (cell.querySelector('button.danger') as HTMLElement).focus() }))
      yes.focus()
    }
    normal()
    return h('td', {}, cell)
  }
  const toggle = async (kind: Kind, def: Json) => {
    const definition = pick(kind, def)
    definition.enabled = !def.enabled
    const r = await api('PUT', `/api/agents/${encodeURIComponent(agentId)}/${kind}s/${encodeURIComponent(def.name)}`, { definition }, { 'if-match': o.config.hash })
    await afterListEdit(r, `${def.name} is now ${definition.enabled ? 'enabled' : 'disabled'}.`)
  }
  const remove = async (kind: Kind, def: Json) => {
    const r = await api('DELETE', `/api/agents/${encodeURIComponent(agentId)}/${kind}s/${encodeURIComponent(def.name)}`, undefined, { 'if-match': o.config.hash })
    await afterListEdit(r, `${def.name} was deleted.`)
  }
  const afterListEdit = async (r: Answer, done: string) => {
    if (r.status === 200 || r.status === 201) return tasksView(agentId, notice('ok', h('p', {}, done)))
    message.replaceChildren(editFailure(r, () => void tasksView(agentId)))
  }
  render(
    h('p', { class: 'muted' }, h('a', { href: '#/agents' }, 'Agents'), ' › ', agentId),
    h('h1', {}, `Tasks of ${agentId}`),
    diagnosticsNotice(o),
    message,
    h('section', { 'aria-labelledby': 'h-tasks' },
      h('h2', { id: 'h-tasks' }, 'Scheduled tasks'),
      h('div', { class: 'toolbar' }, h('a', { class: 'button', href: `${base}/tasks/new` }, 'New Task')),
      agent.tasks.length === 0 ? h('p', { class: 'muted' }, 'No scheduled tasks yet.') : h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Schedule'), h('th', {}, 'Run target'), h('th', {}, 'State'), h('th', {}, 'Next'), h('th', {}, 'Last run'), h('th', {}, 'Actions'))),
        h('tbody', {}, agent.tasks.map((t: Json) => h('tr', {},
          h('td', {}, t.name),
          h('td', {}, h('code', {}, t.schedule ?? `every ${t.every}`), t.timezone ? h('span', { class: 'muted' }, ` ${t.timezone}`) : null),
          h('td', {}, targetLabel(t.target)),
          h('td', {}, badge(t.enabled ? 'enabled' : 'disabled')),
          h('td', {}, t.next?.[0] ? when(t.next[0]) : '—'),
          lastRunCell(t.lastRun),
          rowActions('task', t)))))),
    h('section', { 'aria-labelledby': 'h-triggers' },
      h('h2', { id: 'h-triggers' }, 'Webhook Triggers'),
      h('div', { class: 'toolbar' }, h('a', { class: 'button', href: `${base}/triggers/new` }, 'New Trigger')),
      agent.triggers.length === 0 ? h('p', { class: 'muted' }, 'No Webhook Triggers yet.') : h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Endpoint'), h('th', {}, 'Run target'), h('th', {}, 'State'), h('th', {}, 'Last run'), h('th', {}, 'Actions'))),
        h('tbody', {}, agent.triggers.map((t: Json) => h('tr', {},
          h('td', {}, t.name),
          h('td', {}, h('code', {}, t.endpoint?.url ?? t.path)),
          h('td', {}, targetLabel(t.target)),
          h('td', {}, badge(t.enabled ? 'enabled' : 'disabled')),
          lastRunCell(t.lastRun),
          rowActions('trigger', t)))))),
    h('section', { 'aria-labelledby': 'h-mappings' },
      h('h2', { id: 'h-mappings' }, 'Mappings and presets'),
      h('p', { class: 'muted' }, `Routes from ${o.config.file} that run for ${agentId}: read-only here, edited in the file.`),
      (() => {
        const mine = (o.routes as Json[]).filter((r) => (r.kind === 'mapping' || r.kind === 'preset') && r.agentId === agentId)
        return mine.length === 0 ? h('p', { class: 'muted' }, 'None.') : routeTable(mine, false)
      })()),
  )
  // After a disable or delete the outcome is where the operator's attention goes next.
  if (flash) { flash.tabIndex = -1; flash.focus() }
}

function targetLabel(target: string): string {
  return TARGETS.find(([v]) => v === target)?.[1] ?? String(target)
}

/** Only the definition's own fields (the overview adds id, lastRun, endpoint, next). */
function pick(kind: Kind, def: Json): Json {
  const out: Json = {}
  for (const k of kind === 'trigger' ? TRIGGER_FIELDS : TASK_FIELDS) if (def[k] !== undefined) out[k] = def[k]
  return out
}

/** 409, 422 and the rest, as one notice; 409 offers Reload. */
function editFailure(r: Answer, reload: () => void): HTMLElement {
  if (r.status === 409) {
    const button = on(h('button', { type: 'button', class: 'primary' }, 'Reload'), 'click', reload)
    const box = notice('error', h('p', {}, 'hooks.yaml changed on disk since this page read it (someone edited it or pulled from git). Nothing was saved.'), h('p', {}, 'Reload it to see the current file, then make the edit again.'), h('div', { class: 'actions' }, button))
    queueMicrotask(() => button.focus())
    return box
  }
  const findings: Findings | undefined = r.body?.findings
  return notice('error', h('p', {}, r.body?.error ?? `the server answered ${r.status}`), findings ? findingList([...findings.other, ...Object.values(findings.fields).flat()]) : null)
}

// ---------------------------------------------------------------- the Trigger and Task forms

interface FieldSpec {
  key: string
  label: string
  control: 'text' | 'number' | 'textarea' | 'select' | 'checkbox'
  options?: () => Array<[string, string]>
  help?: string
  /** shown only for these run targets (all when absent) */
  targets?: string[]
}

function fieldSpecs(kind: Kind): FieldSpec[] {
  const workflows = () => [['', 'Choose a workflow…'] as [string, string], ...((overview?.workflows ?? []) as Json[]).map((w) => [w.id, w.description ? `${w.id} — ${w.description}` : w.id] as [string, string])]
  const common = {
    target: { key: 'target', label: 'Run target', control: 'select', options: () => TARGETS } as FieldSpec,
    workflow: { key: 'workflow', label: 'Workflow target', control: 'select', options: workflows, targets: ['workflow'] } as FieldSpec,
    timeout: { key: 'timeoutSeconds', label: 'Timeout', control: 'number', help: 'seconds; empty for the default' } as FieldSpec,
    notify: { key: 'notify', label: 'Notify', control: 'select', options: () => NOTIFY } as FieldSpec,
    enabled: { key: 'enabled', label: 'Enabled', control: 'checkbox' } as FieldSpec,
  }
  if (kind === 'trigger') {
    return [
      { key: 'name', label: 'Name', control: 'text', help: 'a human label; the Trigger\'s id is made from it' },
      { key: 'path', label: 'Path', control: 'text', help: 'the endpoint under the base path, e.g. deploys' },
      common.target,
      { key: 'timing', label: 'Run timing', control: 'select', options: () => [['now', 'Run now'], ['next-heartbeat', 'Next heartbeat']], targets: ['wake'] },
      common.workflow,
      { key: 'delivery', label: 'Delivery', control: 'select', options: () => [['internal', 'Internal only'], ['deliver', 'Deliver reply']], targets: ['agent'] },
      { key: 'prompt', label: 'Prompt template', control: 'textarea', help: 'e.g. Deploy {{payload.service}} finished; for a wake, the event text; for a workflow, its input message' },
      common.timeout,
      common.notify,
      common.enabled,
    ]
  }
  return [
    { key: 'name', label: 'Name', control: 'text' },
    { key: 'schedule', label: 'Schedule (cron)', control: 'text', help: 'five fields or @hourly, @daily…; leave empty to use Every' },
    { key: 'every', label: 'Every', control: 'text', help: 'a fixed interval instead of a schedule, e.g. 15m, 2h, 1d' },
    { key: 'timezone', label: 'Time zone', control: 'text', help: 'IANA name, e.g. Europe/Berlin; empty for UTC' },
    { key: 'catchUp', label: 'Catch up', control: 'select', options: () => [['once', 'Once (run a missed slot at start)'], ['skip', 'Skip missed slots']] },
    common.target,
    common.workflow,
    { key: 'prompt', label: 'Prompt', control: 'textarea', targets: ['agent', 'workflow', 'wake'] },
    common.timeout,
    common.notify,
    common.enabled,
  ]
}

const DEFAULTS: Record<string, string> = { target: 'agent', timing: 'now', delivery: 'internal', notify: 'done', catchUp: 'once', channel: 'last' }

async function formView(kind: Kind, agentId: string, original: string | null): Promise<void> {
  const o = await loadOverview()
  if (!o) return
  const agent = agentOf(o, agentId)
  const list: Json[] = kind === 'trigger' ? agent.triggers : agent.tasks
  let existing = original === null ? null : list.find((d) => d.name === original)
  if (original !== null && !existing) throw new Error(`agent "${agentId}" has no ${kind === 'trigger' ? 'Trigger' : 'Task'} named "${original}"`)
  const noun = kind === 'trigger' ? 'Trigger' : 'Task'
  const signal = viewAbort.signal
  const controls = new Map<string, HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>()
  const rows = new Map<string, HTMLElement>()
  const messages = new Map<string, HTMLElement>()
  const top = h('div', { id: 'form-findings', 'aria-live': 'polite' })
  const result = h('div', { id: 'save-result', 'aria-live': 'polite' })
  const nextList = h('ol', { class: 'next', id: 'next-firings', 'aria-label': 'Next five firing times' })

  const fieldRow = (spec: FieldSpec): HTMLElement => {
    const id = `f-${spec.key}`
    const msgId = `${id}-findings`
    let control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement
    if (spec.control === 'select') control = h('select', { id, name: spec.key }, spec.options!().map(([v, l]) => h('option', { value: v }, l)))
    else if (spec.control === 'textarea') control = h('textarea', { id, name: spec.key, rows: 3 })
    else if (spec.control === 'checkbox') control = h('input', { id, name: spec.key, type: 'checkbox' })
    else control = h('input', { id, name: spec.key, type: spec.control === 'number' ? 'number' : 'text', ...(spec.control === 'number' ? { min: 1, step: 1 } : {}), autocomplete: 'off' })
    controls.set(spec.key, control)
    const msg = h('div', { id: msgId })
    messages.set(spec.key, msg)
    const row = h('div', { class: `field${spec.control === 'checkbox' ? ' check' : ''}`, 'data-field': spec.key },
      h('label', { for: id }, spec.label),
      h('div', { class: 'control' }, control, spec.help ? h('span', { class: 'muted' }, spec.help) : null, spec.key === 'schedule' ? h('div', {}, h('span', { class: 'muted' }, 'Next five firings:'), nextList) : null, msg))
    rows.set(spec.key, row)
    return row
  }

  // Reply channel/target: one of the spec's fields, two controls (channel id incl. "last", and to).
  const replyRow = (): HTMLElement => {
    const channel = h('select', { id: 'f-channel', name: 'channel' }, h('option', { value: 'last' }, 'last (the main session\'s last route)'), ((overview?.channels ?? []) as Json[]).map((c) => h('option', { value: c.id }, `${c.id} (${c.type})`)))
    const to = h('input', { id: 'f-to', name: 'to', type: 'text', autocomplete: 'off' })
    controls.set('channel', channel)
    controls.set('to', to)
    const msg = h('div', { id: 'f-channel-findings' })
    const msgTo = h('div', { id: 'f-to-findings' })
    messages.set('channel', msg)
    messages.set('to', msgTo)
    // A group labelled by a grid item: a fieldset's <legend> takes no grid cell, which put the
    // controls into the 11rem label column (about 18 px wide each after their own labels).
    const row = h('div', { class: 'field', role: 'group', 'aria-labelledby': 'f-reply-label', 'data-field': 'channel' },
      h('span', { class: 'label', id: 'f-reply-label' }, 'Reply channel/target'),
      h('div', { class: 'control' },
        h('div', { class: 'sub' }, h('label', { for: 'f-channel' }, 'Channel'), channel, h('label', { for: 'f-to' }, 'Target (to)'), to),
        h('span', { class: 'muted' }, 'where a delivered reply goes; to may use templates'), msg, msgTo))
    rows.set('channel', row)
    rows.set('to', row)
    return row
  }

  const specs = fieldSpecs(kind)
  const form = h('form', { class: 'card', novalidate: true, 'aria-describedby': 'form-findings' })
  form.append(top)
  for (const spec of specs) {
    form.append(fieldRow(spec))
    if (kind === 'trigger' && spec.key === 'prompt') form.append(replyRow())
  }

  const fill = (def: Json | null) => {
    for (const [key, control] of controls) {
      if (control instanceof HTMLInputElement && control.type === 'checkbox') control.checked = def ? def.enabled !== false : true
      else control.value = def?.[key] !== undefined ? String(def[key]) : (DEFAULTS[key] ?? '')
    }
  }
  fill(existing)

  const target = () => controls.get('target')!.value
  /** Hidden fields are not sent: they do not apply to the run target chosen. */
  const applies = (key: string): boolean => {
    const spec = specs.find((s) => s.key === key)
    if (key === 'channel' || key === 'to') return target() === 'agent' && controls.get('delivery')!.value === 'deliver'
    return !spec?.targets || spec.targets.includes(target())
  }
  const showApplicable = () => {
    for (const [key, row] of rows) row.hidden = !applies(key)
  }

  const definition = (): Json => {
    const out: Json = {}
    for (const [key, control] of controls) {
      if (!applies(key)) continue
      if (control instanceof HTMLInputElement && control.type === 'checkbox') { out[key] = control.checked; continue }
      const v = control.value
      if (v.trim() === '') continue
      if (key === 'timeoutSeconds') out[key] = Number.isFinite(Number(v)) ? Number(v) : v
      else out[key] = v
    }
    return out
  }

  const showFindings = (findings: Findings | undefined) => {
    const placed = new Set<string>()
    for (const [key, msg] of messages) {
      const list = findings?.fields[key] ?? []
      const control = controls.get(key)!
      if (list.length > 0 && applies(key)) {
        placed.add(key)
        msg.replaceChildren(findingList(list))
        control.setAttribute('aria-describedby', msg.id)
        control.setAttribute('aria-invalid', String(list.some((d) => d.severity === 'error')))
      } else {
        msg.replaceChildren()
        control.removeAttribute('aria-describedby')
        control.removeAttribute('aria-invalid')
      }
    }
    const rest = [...(findings?.other ?? []), ...Object.entries(findings?.fields ?? {}).filter(([k]) => !placed.has(k)).flatMap(([, l]) => l)]
    top.replaceChildren(rest.length > 0 ? notice(rest.some((d) => d.severity === 'error') ? 'error' : 'info', h('p', {}, 'Findings about the file as a whole:'), findingList(rest)) : '')
  }

  let checkSeq = 0
  let timer: number | undefined
  const check = async () => {
    const seq = ++checkSeq
    const r = await api('POST', '/api/check', { kind, agentId, original, definition: definition() }, {}, signal)
    if (seq !== checkSeq) return
    if (r.status !== 200) { top.replaceChildren(notice('error', h('p', {}, r.body?.error ?? `the check answered ${r.status}`))); return }
    showFindings(r.body.findings)
    if (kind === 'task') {
      const next: string[] = r.body.next ?? []
      nextList.replaceChildren(...(next.length ? next.map((t) => h('li', {}, h('time', { datetime: t }, `${when(t)} (${t})`))) : [h('li', { class: 'muted' }, 'none while the schedule does not compile')]))
    }
    form.dataset.checked = String(seq)
  }
  const scheduleCheck = () => {
    window.clearTimeout(timer)
    timer = window.setTimeout(() => { check().catch(() => {}) }, 300)
  }
  on(form, 'input', () => { showApplicable(); scheduleCheck() })
  on(form, 'change', () => { showApplicable(); scheduleCheck() })

  const base = `#/agents/${encodeURIComponent(agentId)}`
  const saveButton = h('button', { type: 'submit', class: 'primary' }, `Save ${noun}`)
  on(form, 'submit', async (e) => {
    e.preventDefault()
    saveButton.disabled = true
    try {
      const path = `/api/agents/${encodeURIComponent(agentId)}/${kind}s${original === null ? '' : `/${encodeURIComponent(original)}`}`
      const def = definition()
      const r = await api(original === null ? 'POST' : 'PUT', path, { definition: def }, { 'if-match': overview.config.hash })
      if (r.status === 200 || r.status === 201) {
        overview.config.hash = r.body.hash
        original = String(def.name)
        existing = def
        // The address now names the saved definition; replaceState does not re-render the view.
        history.replaceState(null, '', `${base}/${kind}s/${encodeURIComponent(original)}`)
        heading.textContent = `${noun} ${original}`
        result.replaceChildren(savedNotice(r.body, kind))
        showFindings(undefined)
        ;(result.querySelector('input, textarea, p') as HTMLElement | null)?.focus()
        return
      }
      if (r.status === 422 && r.body?.findings) showFindings(r.body.findings)
      result.replaceChildren(editFailure(r, async () => {
        // Re-read everything from disk (hash, workflows, channels); the draft in the fields is the
        // operator's own and stays, checked again against the new file.
        await loadOverview()
        result.replaceChildren(notice('info', h('p', {}, 'Reloaded hooks.yaml from disk. Your edits in the form are kept; save again to apply them to the current file.')))
        refreshOptions()
        void check()
        controls.get('name')!.focus()
      }))
    } finally {
      saveButton.disabled = false
    }
  })

  const refreshOptions = () => {
    const wf = controls.get('workflow') as HTMLSelectElement
    const keep = wf.value
    wf.replaceChildren(...fieldSpecs(kind).find((s) => s.key === 'workflow')!.options!().map(([v, l]) => h('option', { value: v }, l)))
    wf.value = keep
  }

  // Test: a dry run of the drafted Trigger against a sample payload (what `hookgate try` does).
  const testBox = kind === 'trigger' ? (() => {
    const sample = h('textarea', { id: 'f-sample', rows: 4 }, '{"hello": "world"}')
    const out = h('div', { id: 'test-result', 'aria-live': 'polite' })
    const run = on(h('button', { type: 'button' }, 'Test'), 'click', async () => {
      let payload: unknown
      try { payload = JSON.parse(sample.value || '{}') } catch (err) {
        out.replaceChildren(notice('error', h('p', {}, `The sample payload is not valid JSON: ${(err as Error).message}`)))
        return
      }
      const r = await api('POST', '/api/try', { agentId, original, definition: definition(), payload })
      if (r.status !== 200) {
        if (r.body?.findings) showFindings(r.body.findings)
        out.replaceChildren(notice('error', h('p', {}, r.body?.error ?? `the dry run answered ${r.status}`)))
        return
      }
      const { status, ...rest } = r.body
      out.replaceChildren(notice(status < 400 ? 'ok' : 'error', h('p', {}, `The runtime would answer ${status}.`), h('pre', {}, JSON.stringify(rest.action ?? rest, null, 2))))
    })
    return h('section', { class: 'card', 'aria-labelledby': 'h-test' },
      h('h2', { id: 'h-test' }, 'Test'),
      h('div', { class: 'field' }, h('label', { for: 'f-sample' }, 'Sample payload (JSON)'), h('div', { class: 'control' }, sample)),
      h('div', { class: 'actions' }, run), out)
  })() : null

  form.append(h('div', { class: 'actions' }, saveButton, h('a', { class: 'button', href: `${base}/tasks` }, 'Back to Tasks')))
  const heading = h('h1', {}, original === null ? `New ${noun}` : `${noun} ${original}`)
  render(
    h('p', { class: 'muted' }, h('a', { href: '#/agents' }, 'Agents'), ' › ', h('a', { href: `${base}/tasks` }, `${agentId} Tasks`)),
    heading,
    result,
    form,
    testBox,
  )
  showApplicable()
  void check().catch(() => {})
}

function savedNotice(body: Json, kind: Kind): HTMLElement {
  const rt = body.runtime
  return notice('ok',
    h('p', {}, `Saved to hooks.yaml and compiled (bundle ${String(body.bundle?.hash ?? '').slice(0, 19)}…, ${body.bundle?.routes} routes).`),
    rt?.serving ? h('p', { id: 'serving' }, `The runtime at ${rt.url} serves it now.`) : h('p', { id: 'serving' }, rt?.url ? `The runtime at ${rt.url} has not picked up the new bundle yet (${rt.status}).` : 'No runtime is running for this state directory; start `hookgate serve` to serve it.'),
    body.tokenGenerated ? h('p', {}, `A hook token was generated into ${body.tokenGenerated}.`) : null,
    kind === 'trigger' && body.endpoint ? [copyField('Endpoint URL', body.endpoint.url, false), copyField('curl', body.endpoint.curl, true)] : null,
    body.warnings?.length ? findingList(body.warnings) : null)
}

// ---------------------------------------------------------------- run history

const FILTERS = ['kind', 'status', 'definition', 'since', 'until'] as const

async function runsView(query: URLSearchParams): Promise<void> {
  const o = overview ?? await loadOverview()
  if (!o) return
  const signal = viewAbort.signal
  const page = Math.max(1, Number(query.get('page') ?? '1') || 1)
  const apiQuery = new URLSearchParams()
  for (const k of FILTERS) if (query.get(k)) apiQuery.set(k, query.get(k)!)
  apiQuery.set('page', String(page))

  const definitions: Array<[string, string]> = [
    ...o.agents.flatMap((a: Json) => [
      ...a.triggers.map((t: Json) => [t.id, `Trigger ${t.name} (${a.id})`]),
      ...a.tasks.map((t: Json) => [t.id, `Task ${t.name} (${a.id})`]),
    ]),
    ...(o.routes as Json[]).filter((r) => r.kind !== 'trigger').map((r) => [r.id, `${KIND_LABEL[r.kind] ?? r.kind} ${r.title}`]),
  ]
  const select = (id: string, label: string, options: Array<[string, string]>) => {
    const s = h('select', { id, name: id }, h('option', { value: '' }, 'any'), options.map(([v, l]) => h('option', { value: v }, l)))
    s.value = query.get(id) ?? ''
    return h('div', {}, h('label', { for: id }, label), s)
  }
  const dateInput = (id: string, label: string) => {
    const input = h('input', { id, name: id, type: 'datetime-local' })
    const v = query.get(id)
    if (v) {
      const d = new Date(v)
      if (!Number.isNaN(d.getTime())) input.value = new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16)
    }
    return h('div', {}, h('label', { for: id }, label), input)
  }
  const filters = on(h('form', { class: 'card filters', 'aria-label': 'Filters' },
    select('kind', 'Definition kind', [['hook', 'hook (mapping)'], ['trigger', 'trigger'], ['task', 'task']]),
    select('status', 'Status', STATUSES.map((s) => [s, s])),
    select('definition', 'Trigger, Task or mapping', definitions),
    dateInput('since', 'Since'),
    dateInput('until', 'Until'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Apply filters'), h('a', { class: 'button', href: '#/runs' }, 'Clear'))), 'submit', (e) => {
    e.preventDefault()
    const q = new URLSearchParams()
    const data = new FormData(e.target as HTMLFormElement)
    for (const k of FILTERS) {
      const v = String(data.get(k) ?? '')
      if (!v) continue
      q.set(k, k === 'since' || k === 'until' ? new Date(v).toISOString() : v)
    }
    location.hash = `#/runs${q.size ? `?${q}` : ''}`
  })

  const tableHolder = h('div', { id: 'runs-table', 'aria-live': 'polite' })
  const pager = h('nav', { class: 'toolbar', 'aria-label': 'Pages' })
  let version = ''
  const fill = async () => {
    const r = await api('GET', `/api/runs?${apiQuery}`, undefined, {}, signal)
    if (r.status !== 200) { tableHolder.replaceChildren(notice('error', h('p', {}, r.body?.error ?? `the history answered ${r.status}`))); return }
    version = r.body.version
    const rows: Json[] = r.body.rows
    tableHolder.dataset.version = version
    tableHolder.replaceChildren(rows.length === 0 ? h('p', { class: 'muted' }, 'No runs match.') : h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Created'), h('th', {}, 'Kind'), h('th', {}, 'Trigger, Task or mapping'), h('th', {}, 'Action'), h('th', {}, 'Status'), h('th', {}, 'Duration'), h('th', {}, 'Error'))),
      h('tbody', {}, rows.map((row) => h('tr', { 'data-kind': row.definitionKind, 'data-run': row.id },
        h('td', {}, h('a', { href: `#/runs/${encodeURIComponent(row.id)}` }, h('time', { datetime: row.createdAt }, when(row.createdAt)))),
        h('td', {}, row.definitionKind),
        h('td', {}, runName(row)),
        h('td', {}, row.action),
        h('td', {}, badge(row.status)),
        h('td', { class: 'duration' }, duration(row.durationMs)),
        h('td', {}, row.error ?? ''))))))
    const to = (p: number) => { const q = new URLSearchParams(query); q.set('page', String(p)); return `#/runs?${q}` }
    pager.replaceChildren(...flatten([
      r.body.page > 1 ? h('a', { class: 'button', href: to(r.body.page - 1) }, 'Newer') : null,
      h('span', { class: 'muted' }, `Page ${r.body.page} of ${r.body.pages} · ${r.body.total} run${r.body.total === 1 ? '' : 's'}, newest first`),
      r.body.page < r.body.pages ? h('a', { class: 'button', href: to(r.body.page + 1) }, 'Older') : null]))
  }
  await fill()
  render(h('h1', {}, 'Run history'), filters, tableHolder, pager)
  // New rows without a manual reload: wait for the history to change, then fetch this page again.
  void (async () => {
    while (!signal.aborted) {
      try {
        const r = await api('GET', `/api/runs/changes?after=${encodeURIComponent(version)}`, undefined, {}, signal)
        if (r.status !== 200) { await sleep(5000, signal); continue }
        if (r.body.version !== version) await fill()
      } catch {
        if (signal.aborted) return
        await sleep(2000, signal)
      }
    }
  })()
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms)
    signal.addEventListener('abort', () => { clearTimeout(t); resolve() }, { once: true })
  })
}

function runTable(caption: string, rows: Json[]): HTMLElement {
  const id = `h-${caption.toLowerCase().replace(/[^a-z]+/g, '-')}`
  return h('section', { 'aria-labelledby': id }, h('h2', { id }, caption), rows.length === 0 ? h('p', { class: 'muted' }, 'None.') : h('table', {},
    h('thead', {}, h('tr', {}, h('th', {}, 'Run'), h('th', {}, 'Kind'), h('th', {}, 'Definition / step'), h('th', {}, 'Status'), h('th', {}, 'Created'), h('th', {}, 'Duration'))),
    h('tbody', {}, rows.map((r) => h('tr', { 'data-run': r.id },
      h('td', {}, h('a', { href: `#/runs/${encodeURIComponent(r.id)}` }, h('code', {}, r.id))),
      h('td', {}, r.definitionKind),
      h('td', {}, runName(r)),
      h('td', {}, badge(r.status)),
      h('td', {}, when(r.createdAt)),
      h('td', { class: 'duration' }, duration(r.durationMs)))))))
}

function json(value: unknown): HTMLElement {
  return h('pre', {}, typeof value === 'string' ? value : JSON.stringify(value, null, 2))
}

async function runView(id: string): Promise<void> {
  const r = await api('GET', `/api/runs/${encodeURIComponent(id)}`)
  if (r.status !== 200) {
    render(h('p', { class: 'muted' }, h('a', { href: '#/runs' }, 'Run history')), h('h1', {}, 'Run not found'), notice('error', h('p', {}, r.body?.error ?? `the server answered ${r.status}`)))
    return
  }
  const { run, steps, correlated, replays, deliveries } = r.body
  const meta: Array<[string, unknown]> = [
    ['Run id', run.id], ['Status', run.status], ['Definition kind', run.definitionKind], ['Definition', run.definitionName ? `${run.definitionName} (${run.definitionId})` : run.definitionId], ['Action', run.action],
    ['Name', run.name], ['Agent', run.agentId], ['Session key', run.sessionKey], ['Correlation id', run.correlationId],
    ['Created', when(run.createdAt)], ['Started', when(run.startedAt)], ['Finished', when(run.finishedAt)], ['Duration', duration(run.durationMs)], ['Attempts', run.attempts],
    ['Scheduled for', when(run.scheduledFor)], ['Replay of', run.replayOf], ['Workflow run', run.parentRunId], ['Step', run.stepId],
  ]
  const headers: Record<string, string> = run.received?.headers ?? {}
  render(
    h('p', { class: 'muted' }, h('a', { href: '#/runs' }, 'Run history'), ' › ', id),
    // a step carries its workflow's rendered name: the step is named by its id
    h('h1', {}, run.stepId ? `Step ${run.stepId} of ${run.definitionName ?? run.name ?? run.definitionId}` : `Run ${run.name ?? run.definitionName ?? run.definitionId}`),
    h('dl', { class: 'meta' }, meta.filter(([, v]) => v !== undefined && v !== '').map(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))])),
    run.error ? notice('error', h('p', {}, `Error: ${run.error}`)) : null,
    h('section', { 'aria-labelledby': 'h-request' }, h('h2', { id: 'h-request' }, 'Request'),
      run.received ? [
        h('p', {}, 'Path ', h('code', {}, String(run.received.path ?? '')), ' (secret headers are redacted when stored)'),
        h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Header'), h('th', {}, 'Value'))), h('tbody', {}, Object.entries(headers).map(([k, v]) => h('tr', {}, h('td', {}, h('code', {}, k)), h('td', {}, h('code', {}, String(v))))))),
        h('h3', {}, 'Payload'), json(run.received.payload ?? null),
      ] : h('p', { class: 'muted' }, 'No request was kept for this run (a task, a step, or a wake without one).')),
    h('section', { 'aria-labelledby': 'h-output' }, h('h2', { id: 'h-output' }, 'Action and output'),
      h('p', {}, `Action: ${run.action}`),
      run.result !== undefined ? [h('h3', {}, 'Result'), json(run.result)] : null,
      run.output !== undefined ? [h('h3', {}, 'Output'), json(run.output)] : null,
      run.result === undefined && run.output === undefined ? h('p', { class: 'muted' }, 'No output recorded.') : null),
    h('section', { 'aria-labelledby': 'h-deliveries' }, h('h2', { id: 'h-deliveries' }, 'Deliveries'),
      deliveries.length === 0 ? h('p', { class: 'muted' }, 'None.') : h('ul', {}, deliveries.map((d: Json) => h('li', {}, `${when(d.at)}: ${d.note}`)))),
    h('section', { 'aria-labelledby': 'h-notifications' }, h('h2', { id: 'h-notifications' }, 'Notifications'),
      !run.notifications?.length ? h('p', { class: 'muted' }, 'None.') : h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'At'), h('th', {}, 'State'), h('th', {}, 'Channel'), h('th', {}, 'Sent'), h('th', {}, 'Attempts'))),
        h('tbody', {}, run.notifications.map((n: Json) => h('tr', {}, h('td', {}, when(n.at)), h('td', {}, n.state), h('td', {}, n.channel), h('td', {}, n.ok ? 'yes' : `no${n.error ? `: ${n.error}` : ''}`), h('td', {}, String(n.attempts))))))),
    runTable('Workflow steps', steps),
    runTable('Correlated runs', correlated),
    replays.length ? runTable('Replays', replays) : null,
  )
}

// ---------------------------------------------------------------- start

on(document.getElementById('logout')!, 'click', () => {
  sessionStorage.removeItem(TOKEN_KEY)
  overview = null
  document.getElementById('runtime')!.textContent = ''
  location.hash = '#/login'
})
window.addEventListener('hashchange', () => void route())
void route()
