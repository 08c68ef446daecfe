// Identity JWTs leak: the JWTs a fronting proxy adds (Cloudflare Access, Google IAP, AWS ALB's
// OIDC data, WSO2's x-jwt-assertion), and a JWT under any other header name, never reach a
// rendered {{headers}} or {{headers.name}}, a transform, the stored request of a run, or (the named
// ones) the rejected-request log. Values merely shaped a little like one stay readable.
import { generateKeyPairSync, sign } from 'node:crypto'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgate, stdoutJson } from '../../cli/cli-helpers.js'
import { compileProject, rowOf, runReaches, send, serveProject, setTestToken } from './harness.js'
import { isJwtValue } from '../../../runtime/bundle/template-helpers.js'
import { storeArgs } from '../../helpers/stores.js'

const TOKEN = setTestToken()
const { privateKey } = generateKeyPairSync('ed25519')
const b64url = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url')

/** A real EdDSA-signed JWT for `sub`. */
function jwt(sub: string, header: Record<string, unknown> = { alg: 'EdDSA', typ: 'JWT', kid: 'k1' }): string {
  const signing = `${b64url(header)}.${b64url({ sub, email: `${sub}@example.com`, iat: 1700000000 })}`
  return `${signing}.${sign(null, Buffer.from(signing), privateKey).toString('base64url')}`
}

// Fronting proxies' identity headers, each with a token of its own.
const PROXY_HEADERS: Record<string, string> = {
  'cf-access-jwt-assertion': jwt('cf-user'),
  'x-goog-iap-jwt-assertion': jwt('iap-user', { alg: 'ES256', typ: 'JWT', kid: 'iap' }),
  'x-amzn-oidc-data': jwt('alb-user', { alg: 'ES256', kid: 'alb', signer: 'arn:aws:elasticloadbalancing:x', iss: 'https://idp', client: 'c', exp: 1 }),
  'x-jwt-assertion': jwt('wso2-user', { alg: 'RS256', x5t: 'abc' }),
}
// A JWT under a name nothing would guess; one after an auth scheme word; an encrypted one (JWE), whose header is pretty-printed.
const ANY_NAME_HEADERS: Record<string, string> = {
  'x-user-context': jwt('ctx-user'),
  'x-forwarded-access': `Bearer ${jwt('bearer-user')}`,
  'x-encrypted-identity': `${Buffer.from('{\n  "alg": "dir",\n  "enc": "A256GCM"\n}').toString('base64url')}..aXY.Y2lwaGVydGV4dA.dGFn`,
}
// Not JWTs: left as they are.
const PLAIN_HEADERS: Record<string, string> = {
  'x-trace': 'abc.def.ghi',
  'x-version': 'eyes.1.2',
  'x-not-a-header': `${b64url({ typ: 'JWT' })}.e30.c2ln`,
  'x-json-array': `${b64url(['alg'])}.e30.c2ln`,
}
/** The longest segment of a JWT: what its presence anywhere shows by. */
const longestSegment = (token: string) => token.split(/[. ]/).sort((a, b) => b.length - a.length)[0]!

const ALL = { ...PROXY_HEADERS, ...ANY_NAME_HEADERS, ...PLAIN_HEADERS }
const SECRETS = Object.values({ ...PROXY_HEADERS, ...ANY_NAME_HEADERS })

const CONFIG = `
hooks:
  enabled: true
  token: "\${HOOKGATE_TEST_TOKEN}"
  transformsDir: transforms
  mappings:
    - id: headers
      match: { path: headers }
      action: agent
      messageTemplate: "all={{headers}} one={{headers.x-user-context}} cf={{headers.cf-access-jwt-assertion}} trace={{headers.x-trace}}"
    - id: seen
      match: { path: seen }
      action: agent
      messageTemplate: "x"
      transform: { module: seen.mjs }
    - id: flow
      match: { path: flow }
      action: workflow
      workflow: flow
workflows:
  - id: flow
    steps:
      - { id: look, action: agent, messageTemplate: "look {{headers}}" }
`

const leaks = suite('identity JWTs in request headers')

leaks('a proxy\'s identity JWT, or a JWT under any header name, is redacted from {{headers}}, transforms, the run history and the rejected-request log', async () => {
  const project = await compileProject(CONFIG, { 'transforms/seen.mjs': 'export default ({ headers }) => ({ message: JSON.stringify(headers) })\n' })
  const h = await serveProject(project)
  const stored: string[] = []
  try {
    const rendered = await send(h.origin, '/hooks/headers', { token: TOKEN, body: {}, headers: ALL })
    assert.is(rendered.status, 202, rendered.text)
    const message = String(((await rowOf(h.stateDir, rendered.json.runId))?.request as { message?: string }).message)
    for (const name of Object.keys({ ...PROXY_HEADERS, ...ANY_NAME_HEADERS })) assert.match(message, `"${name}":"[redacted]"`)
    for (const [name, value] of Object.entries(PLAIN_HEADERS)) assert.match(message, `"${name}":${JSON.stringify(value)}`)
    assert.match(message, 'one=[redacted] cf=[redacted] trace=abc.def.ghi')

    const seen = await send(h.origin, '/hooks/seen', { token: TOKEN, body: {}, headers: ALL })
    assert.is(seen.status, 202, seen.text)
    const transformed = JSON.parse(String(((await rowOf(h.stateDir, seen.json.runId))?.request as { message?: string }).message)) as Record<string, string>
    for (const name of Object.keys({ ...PROXY_HEADERS, ...ANY_NAME_HEADERS })) assert.is(transformed[name], '[redacted]', name)
    assert.is(transformed['x-trace'], 'abc.def.ghi')

    const flow = await send(h.origin, '/hooks/flow', { token: TOKEN, body: {}, headers: ALL })
    assert.is(flow.status, 202, flow.text)
    await runReaches(h.stateDir, flow.json.runId, 'succeeded', 15_000)
    stored.push(JSON.stringify((await rowOf(h.stateDir, rendered.json.runId))), JSON.stringify((await rowOf(h.stateDir, seen.json.runId))), JSON.stringify((await rowOf(h.stateDir, flow.json.runId))))
    const runs = await hookgate(['runs', '--json', '--state', h.stateDir, ...storeArgs(h.stateDir), '--limit', '50'], { cwd: h.dir })
    stored.push(runs.stdout)

    // refused (a wrong token): the rejected-request log keeps the headers, the identity ones redacted
    const refused = await send(h.origin, '/hooks/headers', { token: 'wrong', body: {}, headers: { ...PROXY_HEADERS, ...ANY_NAME_HEADERS } })
    assert.is(refused.status, 401)
  } finally {
    await h.close()
  }
  const rejects = await hookgate(['rejects', '--json', '--state', project.stateDir, ...storeArgs(project.stateDir)], { cwd: project.dir })
  const records = stdoutJson<Array<{ code: string; headers: Record<string, string> }>>(rejects)
  const unauthorized = records.find((r) => r.code === 'unauthorized')
  assert.ok(unauthorized, rejects.stdout)
  for (const name of Object.keys({ ...PROXY_HEADERS, ...ANY_NAME_HEADERS })) assert.is(unauthorized!.headers[name], '[redacted]', name)
  for (const text of stored) {
    assert.ok(text.length > 0)
    for (const secret of SECRETS) assert.not.ok(text.includes(longestSegment(secret)), `a JWT reached the history: ${secret.slice(0, 24)}…`)
  }
  assert.ok(stored[3]!.includes('abc.def.ghi'), 'a plain header was redacted too')
})

const shape = suite('isJwtValue')

shape('tells a JWT by its shape and its header\'s alg, not by its name', () => {
  for (const v of [...SECRETS, `DPoP   ${jwt('x')}`, `${b64url({ alg: 'none' })}.${b64url({})}.`]) assert.ok(isJwtValue(v), v)
  for (const v of [...Object.values(PLAIN_HEADERS), '', 'e', 'ey', 'eyJ', 'eyJhbGciOiJub25lIn0', 'application/json', 'Mozilla/5.0 (X11; Linux x86_64)', 'Bearer abc', `${b64url({ alg: 1 })}.e30.c2ln`, `${b64url({ alg: 'x' })}.e30.c2ln.x`, `${b64url({ alg: 'x' })}.e3+0.c2ln`, `${b64url({ alg: 'x' })}.e30.c2ln tail`]) {
    assert.not.ok(isJwtValue(v), v)
  }
})

leaks.run()
shape.run()
