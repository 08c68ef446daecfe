// `hookgate import openclaw` through the real executable: a realistic OpenClaw config (JSON5 with
// comments and trailing commas, hooks inside the bigger config) converts into a hooks.yaml that
// compiles with no literal secret in it; keys hookgate cannot carry are listed with reasons and
// exit 1; usage errors exit 2. Each distinct command line runs once, shared by the tests reading it.
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { parse } from 'yaml'
import { describeRun, startIn } from './cli-helpers.js'

const TOKEN = 'oc-hook-token-7f3a9c1e5b2d8f4a6c0e'
const PUSH_TOKEN = 'gmail-push-secret-0b1c2d3e'

/** What `~/.openclaw/openclaw.json` looks like with webhooks set up: hooks sits among the gateway's own sections. */
const OPENCLAW = `// ~/.openclaw/openclaw.json
{
  agents: {
    defaults: { model: { primary: "anthropic/claude-sonnet-4-5" }, workspace: "~/.openclaw/workspace" },
    list: [{ id: "main", default: true }, { id: "ops" },],
  },
  channels: { telegram: { botToken: "123:abc", dmPolicy: "pairing" } },
  hooks: {
    enabled: true,
    token: "${TOKEN}", // shared with every sender
    path: "/hooks",
    allowedAgentIds: ["main", "ops"],
    allowRequestSessionKey: false,
    defaultSessionKey: "hook:ingress",
    allowedSessionKeyPrefixes: ["hook:"],
    presets: ["gmail"],
    gmail: {
      account: "me@example.com",
      label: "INBOX",
      topic: "projects/acme/topics/gog-gmail-watch",
      subscription: "gog-gmail-watch-push",
      pushToken: "${PUSH_TOKEN}",
      hookUrl: "http://127.0.0.1:18789/hooks/gmail",
      includeBody: true,
      maxBytes: 20000,
      renewEveryMinutes: 720,
    },
    mappings: [
      {
        id: "github",
        match: { path: "/github" },
        action: "agent",
        wakeMode: "now",
        name: "GitHub",
        agentId: "ops",
        sessionKey: "hook:github:{{repository.full_name}}",
        messageTemplate: "{{ sender.login }} pushed to {{repository.full_name}} ({{headers.X-GitHub-Event}})",
        deliver: true,
        channel: "last",
        model: "anthropic/claude-sonnet-4-5",
        thinking: "low",
        timeoutSeconds: 120,
        allowUnsafeExternalContent: false,
        transform: { module: "github.js", export: "transform" },
      },
      {
        id: "alerts",
        match: { path: "alerts", source: "alertmanager" },
        action: "wake",
        wakeMode: "next-heartbeat",
        textTemplate: "Alert {{status}}: {{commonLabels.alertname}}",
      },
    ],
  },
}
`
const TRANSFORM = `export function transform(ctx) {
  return ctx.payload.zen ? null : { name: 'GitHub ' + String(ctx.headers['x-github-event']) }
}
`

const realistic = startIn({ 'openclaw.json': OPENCLAW, 'hooks/transforms/github.js': TRANSFORM }, ['import', 'openclaw', 'openclaw.json'])

/** Keys OpenClaw has and hookgate cannot carry: forEach, signature, a WhatsApp channel, Tailscale, an unknown preset. */
const UNCARRIABLE = `{
  hooks: {
    enabled: true,
    token: "\${OPENCLAW_HOOKS_TOKEN}",
    presets: ["gmail", "calendar"],
    gmail: { account: "me@example.com", tailscale: { mode: "funnel" }, },
    sessionRetention: "24h",
    mappings: [
      { id: "batch", match: { path: "batch" }, action: "wake", textTemplate: "{{id}}", forEach: "items", },
      { id: "wa", match: { path: "wa" }, messageTemplate: "{{text}}", channel: "whatsapp", to: "+15551234567", signature: { header: "x-sig" }, },
      { id: "any", action: "wake", textTemplate: "anything", },
    ],
  },
}
`
const uncarriable = startIn({ 'openclaw.json5': UNCARRIABLE }, ['import', 'openclaw', 'openclaw.json5', '--out', 'config/hooks.yaml'])

const existing = startIn({ 'openclaw.json': OPENCLAW, 'hooks.yaml': 'hooks: {}\n' }, ['import', 'openclaw', 'openclaw.json'])
const broken = startIn({ 'openclaw.json': `{ hooks: { token: "${TOKEN}", mappings: [ } }` }, ['import', 'openclaw', 'openclaw.json'])

const main = suite('import openclaw')

main('converts a real OpenClaw config with mappings, a transform, the gmail preset and a token into a hooks.yaml that compiles', async () => {
  const { dir, result } = realistic
  const r = await result
  assert.is(r.code, 0, describeRun(r))
  assert.match(r.stderr, /hooks\.yaml compiles/)
  const config = parse(readFileSync(join(dir, 'hooks.yaml'), 'utf8'))
  assert.is(config.hooks.token, '${HOOKGATE_TOKEN}')
  assert.equal(config.hooks.presets, ['gmail'])
  assert.is(config.hooks.gmail.pushToken, '${HOOKGATE_GMAIL_PUSH_TOKEN}')
  assert.is(config.hooks.gmail.renewEveryMinutes, 720)
  assert.is(config.hooks.transformsDir, 'hooks/transforms')
  assert.equal(config.hooks.allowedSessionKeyPrefixes, ['hook:'])
  const [github, alerts] = config.hooks.mappings
  assert.equal(github.transform, { module: 'github.js', export: 'transform' })
  assert.equal(github.match, { path: 'github' })
  assert.is(github.agentId, 'ops')
  assert.is(github.thinking, 'low')
  assert.is(github.messageTemplate, '{{payload.sender.login}} pushed to {{payload.repository.full_name}} ({{headers.x-github-event}})')
  assert.equal(alerts.match, { path: 'alerts', source: 'alertmanager' })
  assert.is(alerts.textTemplate, 'Alert {{payload.status}}: {{payload.commonLabels.alertname}}')
  assert.equal(config.agents.map((a: { id: string }) => a.id), ['main', 'ops'])
  assert.is(config.agents[0].model, 'anthropic/claude-sonnet-4-5')
})

main('never writes or prints a literal token from the OpenClaw file', async () => {
  const { dir, result } = realistic
  const r = await result
  const written = readFileSync(join(dir, 'hooks.yaml'), 'utf8')
  for (const secret of [TOKEN, PUSH_TOKEN]) {
    assert.not.ok(written.includes(secret), `${secret} reached hooks.yaml`)
    assert.not.ok(r.stderr.includes(secret) || r.stdout.includes(secret), `${secret} was printed`)
  }
})

main('names the environment variables to set for the token and the gmail push token', async () => {
  const r = await realistic.result
  assert.match(r.stderr, /set before `hookgate serve`:\n\s+HOOKGATE_TOKEN: the hook token \(hooks\.token in openclaw\.json\)/)
  assert.match(r.stderr, /HOOKGATE_GMAIL_PUSH_TOKEN: the Gmail push token/)
})

main('lists every key it cannot carry with its reason and exits 1', async () => {
  const { dir, result } = uncarriable
  const r = await result
  assert.is(r.code, 1, describeRun(r))
  const expected: Array<[string, RegExp]> = [
    ['hooks.presets[1]', /no "calendar" preset/],
    ['hooks.gmail.tailscale', /does not drive Tailscale/],
    ['hooks.sessionRetention', /no pruning setting/],
    ['hooks.mappings[0].forEach', /hookgate has no forEach yet/],
    ['hooks.mappings[1].channel', /no "whatsapp" channel/],
    ['hooks.mappings[1].to', /channel that was not carried/],
    ['hooks.mappings[1].signature', /no per-mapping sender signature yet/],
    ['hooks.mappings[2]', /no match\.path/],
  ]
  assert.match(r.stderr, `not carried (${expected.length}):`)
  for (const [key, reason] of expected) {
    const line = r.stderr.split('\n').find((l) => l.trim().startsWith(`${key}:`))
    assert.ok(line, `${key} is not listed\n${describeRun(r)}`)
    assert.match(line!, reason)
  }
  // What could be carried was written, compiles, and keeps the variable OpenClaw already used.
  assert.match(r.stderr, /config\/hooks\.yaml compiles/)
  const written = readFileSync(join(dir, 'config', 'hooks.yaml'), 'utf8')
  assert.is(parse(written).hooks.token, '${OPENCLAW_HOOKS_TOKEN}')
  assert.match(r.stderr, /OPENCLAW_HOOKS_TOKEN: the hook token/)
  assert.match(written, /# Not carried over:\n#\s+hooks\.presets\[1\]/)
})

main('refuses to overwrite an existing output without --force (exit 2)', async () => {
  const { dir, result } = existing
  const r = await result
  assert.is(r.code, 2, describeRun(r))
  assert.match(r.stderr, /hooks\.yaml exists; pass --force/)
  assert.is(readFileSync(join(dir, 'hooks.yaml'), 'utf8'), 'hooks: {}\n')
})

main('answers a file that is not JSON5 with its position, exit 2, and without quoting the token', async () => {
  const { dir, result } = broken
  const r = await result
  assert.is(r.code, 2, describeRun(r))
  assert.match(r.stderr, /openclaw\.json:1:\d+: not JSON5/)
  assert.not.ok(r.stderr.includes(TOKEN))
  assert.not.ok(existsSync(join(dir, 'hooks.yaml')))
})

main.run()
