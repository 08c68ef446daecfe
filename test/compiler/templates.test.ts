import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { compileTemplate, type CompiledTemplate, type TemplateError } from '../../compiler/templates.js'
import { templateHelpers, type CompiledRender, type RenderContext } from '../../runtime/bundle/template-helpers.js'

/** A prototype-less record, the way the runtime builds headers and query objects. */
function dict<T>(entries: Record<string, T>): Record<string, T> {
  return Object.assign(Object.create(null) as Record<string, T>, entries)
}

const NOW = '2024-05-06T07:08:09.000Z'

function context(overrides: Partial<RenderContext> = {}): RenderContext {
  const c = Object.create(null) as RenderContext
  c.payload = JSON.parse('{"user":{"name":"Ann","age":41,"admin":false},"items":[{"id":7},{"id":8}],"matrix":[[1,2],[3,4]],"text":"hello","nothing":null}')
  c.headers = dict({ 'x-github-event': 'push', 'content-type': 'application/json' })
  c.query = dict({ q: 'search', page: '2' })
  c.path = 'github'
  c.now = NOW
  return Object.assign(c, overrides)
}

function compile(text: string): CompiledTemplate {
  const result = compileTemplate(text)
  if (!result.ok) throw new Error(`expected ${JSON.stringify(text)} to compile, got ${JSON.stringify(result.errors)}`)
  return result.template
}

/** Evaluates the generated code (tests only) and renders it. */
function render(text: string, overrides: Partial<RenderContext> = {}): string {
  const fn = new Function('return ' + compile(text).code)() as CompiledRender
  const out = fn(context(overrides), templateHelpers)
  assert.type(out, 'string')
  return out
}

function errorsOf(text: string): TemplateError[] {
  const result = compileTemplate(text)
  if (result.ok) throw new Error(`expected ${JSON.stringify(text)} not to compile, got ${result.template.code}`)
  return result.errors
}

/** The code, offset and length of each error, for compact comparisons. */
function spans(text: string): [string, number, number][] {
  return errorsOf(text).map((e) => [e.code, e.offset, e.length])
}

const compileTemplateSuite = suite('compileTemplate')

// --- code shape ------------------------------------------------------------------------------

compileTemplateSuite('compiles the documented example to the documented code shape', () => {
  const t = compile('Hi {{payload.user.name}} at {{now}}')
  assert.is(t.code, '(c, h) => "Hi " + h.text(h.get(c.payload, ["user","name"])) + " at " + c.now')
  assert.equal(t.roots, ['payload', 'now'])
  assert.is(t.constant, false)
})

compileTemplateSuite('compiles each root form to its helper call', () => {
  assert.is(compile('{{payload}}').code, '(c, h) => h.json(c.payload)')
  assert.is(compile('{{headers}}').code, '(c, h) => h.headersJson(c.headers)')
  assert.is(compile('{{headers.x}}').code, '(c, h) => h.header(c.headers, "x")')
  assert.is(compile('{{query}}').code, '(c, h) => h.json(c.query)')
  assert.is(compile('{{query.q}}').code, '(c, h) => h.text(h.get(c.query, ["q"]))')
  assert.is(compile('{{path}}').code, '(c, h) => c.path')
  assert.is(compile('{{now}}').code, '(c, h) => c.now')
  assert.is(compile('{{payload.a[0]["b c"]}}').code, '(c, h) => h.text(h.get(c.payload, ["a",0,"b c"]))')
})

compileTemplateSuite('compiles an empty template to a function returning an empty string', () => {
  const t = compile('')
  assert.is(t.code, '(c, h) => ""')
  assert.is(t.constant, true)
  assert.equal(t.roots, [])
  assert.is(render(''), '')
})

compileTemplateSuite('compiles a template without tags to a constant string literal', () => {
  const t = compile('just text }} here')
  assert.is(t.code, '(c, h) => "just text }} here"')
  assert.is(t.constant, true)
  assert.equal(t.roots, [])
})

compileTemplateSuite('lists the roots a template reads once each in order of first use', () => {
  assert.equal(compile('{{now}} {{body.a}} {{payload}} {{headers.a}} {{query}} {{path}} {{now}}').roots, ['now', 'payload', 'headers', 'query', 'path'])
})

// --- rendering -------------------------------------------------------------------------------

compileTemplateSuite('renders the whole payload as JSON for {{payload}} and {{body}}', () => {
  const payload = JSON.parse('{"a":1,"b":["x"]}')
  assert.is(render('{{payload}}', { payload }), '{"a":1,"b":["x"]}')
  assert.is(render('{{body}}', { payload }), '{"a":1,"b":["x"]}')
  assert.is(render('{{payload}}', { payload: 'str' }), '"str"')
  assert.is(render('{{payload}}', { payload: undefined }), '')
})

compileTemplateSuite('renders nested payload fields by dotted path', () => {
  assert.is(render('{{payload.user.name}} is {{payload.user.age}}'), 'Ann is 41')
  assert.is(render('admin={{payload.user.admin}}'), 'admin=false')
  assert.is(render('{{payload.text}}'), 'hello')
})

compileTemplateSuite('treats body as a synonym of payload', () => {
  assert.is(render('{{body.user.name}}/{{body.items[1].id}}'), 'Ann/8')
  assert.equal(compile('{{body.a}}').roots, ['payload'])
  assert.is(compile('{{body.a}}').code, compile('{{payload.a}}').code)
})

compileTemplateSuite('renders array elements by index including nested arrays', () => {
  assert.is(render('{{payload.items[0].id}},{{payload.items[1].id}}'), '7,8')
  assert.is(render('{{payload.matrix[1][0]}}'), '3')
  assert.is(render('{{payload.items[5].id}}|{{payload.user[0]}}'), '|')
  assert.is(render('{{payload[0]}}', { payload: ['first'] }), 'first')
})

compileTemplateSuite('renders fields addressed by double- and single-quoted keys', () => {
  const payload = JSON.parse('{"a b":{"c.d":"dotted"},"it\'s":"apostrophe","say \\"hi\\"":"quoted","back\\\\slash":"bs","":"empty key","é":"accent"}')
  assert.is(render('{{payload["a b"]["c.d"]}}', { payload }), 'dotted')
  assert.is(render("{{payload['a b']['c.d']}}", { payload }), 'dotted')
  assert.is(render('{{payload["it\'s"]}}', { payload }), 'apostrophe')
  assert.is(render('{{payload["say \\"hi\\""]}}', { payload }), 'quoted')
  assert.is(render('{{payload["back\\\\slash"]}}', { payload }), 'bs')
  assert.is(render('{{payload[""]}}', { payload }), 'empty key')
  assert.is(render('{{payload["\\u00e9"]}}', { payload }), 'accent')
  assert.is(render('{{payload.é}}', { payload }), 'accent')
})

compileTemplateSuite('renders missing fields and null as an empty string', () => {
  assert.is(render('[{{payload.missing}}][{{payload.user.missing.deeper}}][{{payload.nothing}}]'), '[][][]')
  assert.is(render('[{{payload.a}}]', { payload: null }), '[]')
  assert.is(render('[{{query.missing}}][{{headers.x-missing}}]'), '[][]')
})

compileTemplateSuite('renders objects and arrays as JSON and numbers and booleans as text', () => {
  assert.is(render('{{payload.user}}'), '{"name":"Ann","age":41,"admin":false}')
  assert.is(render('{{payload.items}}'), '[{"id":7},{"id":8}]')
  assert.is(render('{{payload.n}} {{payload.f}} {{payload.b}}', { payload: { n: 0, f: -2.5, b: true } }), '0 -2.5 true')
})

compileTemplateSuite('renders all headers as sorted JSON and single headers by lower-cased name', () => {
  const headers = dict({ 'x-github-event': 'push', accept: '*/*' })
  assert.is(render('{{headers}}', { headers }), '{"accept":"*/*","x-github-event":"push"}')
  assert.is(render('{{headers.x-github-event}}', { headers }), 'push')
  assert.is(render('{{headers.X-GitHub-Event}}', { headers }), 'push')
  assert.is(render('{{headers["X-GitHub-Event"]}}', { headers }), 'push')
  assert.is(compile('{{headers.X-GitHub-Event}}').code, '(c, h) => h.header(c.headers, "x-github-event")')
})

compileTemplateSuite('renders all query parameters as JSON and single ones by name', () => {
  assert.is(render('{{query}}'), '{"q":"search","page":"2"}')
  assert.is(render('{{query.q}} p{{query.page}}'), 'search p2')
  assert.is(render('{{query["q"]}}'), 'search')
})

compileTemplateSuite('renders path and now from the context', () => {
  assert.is(render('{{path}} at {{now}}'), `github at ${NOW}`)
  assert.is(render('{{path}}', { path: 'a/b' }), 'a/b')
})

compileTemplateSuite('allows whitespace inside the braces', () => {
  assert.is(render('{{ payload.user.name }}|{{  now}}|{{path  }}|{{\tquery.q\n}}'), `Ann|${NOW}|github|search`)
})

compileTemplateSuite('turns an escaped opener into literal braces and leaves a lone closer alone', () => {
  assert.is(render('\\{{payload.user.name}}'), '{{payload.user.name}}')
  assert.is(render('a \\{{ b }} {{payload.text}} }}'), 'a {{ b }} hello }}')
  assert.is(compile('\\{{payload}}').constant, true)
  assert.is(render('back\\slash {{payload.text}}'), 'back\\slash hello')
})

// --- errors ----------------------------------------------------------------------------------

compileTemplateSuite('reports an unclosed opener at the opener', () => {
  const errors = errorsOf('Hello {{payload.user')
  assert.is(errors.length, 1)
  assert.equal(errors[0], { code: 'TEMPLATE_SYNTAX', message: 'unclosed "{{" (missing "}}")', offset: 6, length: 2 })
  assert.equal(spans('{{'), [['TEMPLATE_SYNTAX', 0, 2]])
  assert.equal(spans('{{payload.a} x'), [['TEMPLATE_SYNTAX', 0, 2]])
})

compileTemplateSuite('reports an opener followed by another tag before its closer as unclosed and still checks the next tag', () => {
  assert.equal(spans('{{payload.a {{nope}}'), [
    ['TEMPLATE_SYNTAX', 0, 2],
    ['TEMPLATE_UNKNOWN_ROOT', 14, 4],
  ])
})

compileTemplateSuite('reports an empty tag over the whole tag', () => {
  assert.equal(spans('x {{}}'), [['TEMPLATE_SYNTAX', 2, 4]])
  assert.equal(spans('{{   }}'), [['TEMPLATE_SYNTAX', 0, 7]])
})

compileTemplateSuite('reports bad path syntax at the offending step', () => {
  assert.equal(spans('{{payload..a}}'), [['TEMPLATE_SYNTAX', 9, 1]])
  assert.equal(spans('{{payload.}}'), [['TEMPLATE_SYNTAX', 9, 1]])
  assert.equal(spans('{{payload[x]}}'), [['TEMPLATE_SYNTAX', 9, 3]])
  assert.equal(spans('{{payload[}}'), [['TEMPLATE_SYNTAX', 9, 1]])
  assert.equal(spans('{{payload[-1]}}'), [['TEMPLATE_SYNTAX', 9, 4]])
  assert.equal(spans('{{payload[1}}'), [['TEMPLATE_SYNTAX', 9, 1]])
  assert.equal(spans('{{payload["a"}}'), [['TEMPLATE_SYNTAX', 9, 4]])
  assert.equal(spans('{{.a}}'), [['TEMPLATE_SYNTAX', 2, 2]])
})

compileTemplateSuite('reports an unterminated quote at the quote', () => {
  assert.equal(spans('{{payload["abc}}'), [['TEMPLATE_SYNTAX', 10, 1]])
  assert.equal(spans("{{payload['abc}} and {{payload.x}}"), [['TEMPLATE_SYNTAX', 10, 1]])
  assert.match(errorsOf('{{payload["abc}}')[0]!.message, 'unterminated')
})

compileTemplateSuite('reports an invalid escape in a double-quoted key', () => {
  assert.equal(spans('{{payload["a\\qb"]}}'), [['TEMPLATE_SYNTAX', 12, 2]])
})

compileTemplateSuite('reports trailing junk after the path up to the closer', () => {
  const errors = errorsOf('{{payload.a b c}}')
  assert.equal(errors.map((e) => [e.code, e.offset, e.length]), [['TEMPLATE_SYNTAX', 12, 3]])
  assert.is(errors[0]!.message, 'unexpected "b c" in template tag')
  assert.equal(spans('{{payload["a"]x}}'), [['TEMPLATE_SYNTAX', 14, 1]])
})

compileTemplateSuite('reports a sub-path on path or now and extra steps on headers or query', () => {
  assert.equal(spans('{{path.x}}'), [['TEMPLATE_SYNTAX', 6, 2]])
  assert.equal(spans('{{now[0]}}'), [['TEMPLATE_SYNTAX', 5, 3]])
  assert.equal(spans('{{headers.a.b}}'), [['TEMPLATE_SYNTAX', 9, 4]])
  assert.equal(spans('{{query[0]}}'), [['TEMPLATE_SYNTAX', 7, 3]])
})

compileTemplateSuite('reports an unknown root with its offset and length', () => {
  const errors = errorsOf('x {{ foo.bar }}')
  assert.is(errors.length, 1)
  assert.is(errors[0]!.code, 'TEMPLATE_UNKNOWN_ROOT')
  assert.is(errors[0]!.message, 'unknown template variable "foo"')
  assert.is(errors[0]!.offset, 5)
  assert.is(errors[0]!.length, 3)
})

compileTemplateSuite('hints that a payload-relative template needs the payload root', () => {
  const [error] = errorsOf('Subject: {{messages[0].subject}}')
  assert.is(error!.code, 'TEMPLATE_UNKNOWN_ROOT')
  assert.is(error!.offset, 11)
  assert.is(error!.length, 8)
  assert.match(error!.hint ?? '', 'did you mean {{payload.messages[0].subject}}')
})

compileTemplateSuite('hints the close known root for a misspelt root and keeps the rest of the path', () => {
  const [error] = errorsOf('{{paylod.x}}')
  assert.is(error!.code, 'TEMPLATE_UNKNOWN_ROOT')
  assert.is(error!.hint, 'did you mean {{payload.x}}?')
  assert.match(errorsOf('{{heders.x-y}}')[0]!.hint ?? '', '{{headers.x-y}}')
  assert.match(errorsOf('{{Query.q}}')[0]!.hint ?? '', '{{query.q}}')
})

compileTemplateSuite('reports forbidden keys in every spelling', () => {
  assert.equal(spans('{{payload.__proto__}}'), [['TEMPLATE_FORBIDDEN_KEY', 10, 9]])
  assert.equal(spans('{{payload.constructor}}'), [['TEMPLATE_FORBIDDEN_KEY', 10, 11]])
  assert.equal(spans('{{payload.a.prototype.b}}'), [['TEMPLATE_FORBIDDEN_KEY', 12, 9]])
  assert.equal(spans('{{body["__proto__"]}}'), [['TEMPLATE_FORBIDDEN_KEY', 6, 13]])
  assert.equal(spans("{{payload['constructor']}}"), [['TEMPLATE_FORBIDDEN_KEY', 9, 15]])
  assert.equal(spans('{{payload["\\u005f_proto__"]}}'), [['TEMPLATE_FORBIDDEN_KEY', 9, 18]])
  assert.equal(spans('{{headers.__PROTO__}}'), [['TEMPLATE_FORBIDDEN_KEY', 10, 9]])
  assert.equal(spans('{{query.constructor}}'), [['TEMPLATE_FORBIDDEN_KEY', 8, 11]])
  assert.equal(spans('{{constructor}}'), [['TEMPLATE_FORBIDDEN_KEY', 2, 11]])
  assert.is(errorsOf('{{payload.__proto__}}')[0]!.message, 'forbidden key "__proto__"')
})

compileTemplateSuite('reports every error of a template in order of offset', () => {
  const text = '{{}} {{payload..a}} {{foo}} {{payload.__proto__}} {{path.x}} {{payload.a.constructor}} {{payload'
  assert.equal(spans(text), [
    ['TEMPLATE_SYNTAX', 0, 4],
    ['TEMPLATE_SYNTAX', 14, 1],
    ['TEMPLATE_UNKNOWN_ROOT', 22, 3],
    ['TEMPLATE_FORBIDDEN_KEY', 38, 9],
    ['TEMPLATE_SYNTAX', 56, 2],
    ['TEMPLATE_FORBIDDEN_KEY', 73, 11],
    ['TEMPLATE_SYNTAX', 87, 2],
  ])
})

compileTemplateSuite('reports each error message in lower case without a final period', () => {
  const text = '{{}} {{payload..a}} {{foo}} {{payload.__proto__}} {{path.x}} {{payload[x]}} {{payload["a}} {{payload'
  for (const error of errorsOf(text)) {
    assert.is(error.message[0], error.message[0]!.toLowerCase(), error.message)
    assert.not.ok(error.message.endsWith('.'), error.message)
  }
})

// --- template injection ----------------------------------------------------------------------

const HOSTILE_TEXTS = [
  'say "hi"',
  "it's",
  'tick `back` tick',
  '${process.exit()}',
  '`${process.exit(1)}`',
  '"; process.exit(1); "',
  "'); process.exit(1); ('",
  '</script><script>alert(1)</script>',
  '/* comment */ */ x',
  '// line comment',
  'line1\nline2\r\nline3',
  'sep\u2028para\u2029end',
  'back\\slash \\n \\u0041 \\\\',
  '\\',
  'tail\\',
  '\0 nul',
  '\ud800 lone surrogate',
  ' + c.payload + ',
  '" + h.json(c.headers) + "',
]

compileTemplateSuite('renders hostile literal text exactly as written', () => {
  for (const hostile of HOSTILE_TEXTS) {
    assert.is(render(hostile), hostile, JSON.stringify(hostile))
    assert.is(render(`${hostile} {{path}} ${hostile}`), `${hostile} github ${hostile}`, JSON.stringify(hostile))
  }
})

compileTemplateSuite('escapes line and paragraph separators in the generated code', () => {
  const code = compile('a\u2028b {{payload["x\u2029y"]}}').code
  assert.not.ok(code.includes('\u2028'))
  assert.not.ok(code.includes('\u2029'))
  assert.ok(code.includes('\\u2028'))
  assert.ok(code.includes('\\u2029'))
  assert.is(render('a\u2028b {{payload["x\u2029y"]}}', { payload: { 'x\u2029y': 'v' } }), 'a\u2028b v')
})

compileTemplateSuite('uses hostile property keys only as data', () => {
  const keys = ['a"b', "a'b", 'a`b', '${process.exit()}', '"]);process.exit(1);//', '</script>', '*/x/*', 'a\\b']
  for (const key of keys) {
    const payload = { [key]: 'safe' }
    const quoted = '{{payload[' + JSON.stringify(key) + ']}}'
    assert.is(render(quoted, { payload }), 'safe', quoted)
  }
  assert.is(render('{{payload.a"b}}|{{payload.$x`}}', { payload: { 'a"b': 1, '$x`': 2 } }), '1|2')
  assert.is(render('{{headers["x-a\\"b"]}}', { headers: dict({ 'x-a"b': 'hv' }) }), 'hv')
})

compileTemplateSuite('renders hostile values from the payload as plain text', () => {
  const payload = { v: '${process.exit()} "); process.exit(1); (" </script> */' }
  assert.is(render('{{payload.v}}', { payload }), payload.v)
})

// --- prototype pollution ---------------------------------------------------------------------

compileTemplateSuite('renders nothing for inherited or non-own properties', () => {
  assert.is(render('[{{payload.toString}}][{{payload.user.hasOwnProperty}}][{{payload.items.map}}]'), '[][][]')
  assert.is(render('[{{payload.text.length}}][{{payload.text[0]}}]'), '[][]')
  assert.is(render('[{{query.toString}}][{{headers.constructor-x}}]', { query: {} as Record<string, string> }), '[][]')
})

compileTemplateSuite('reads no field through an own __proto__ key of a parsed payload', () => {
  const payload = JSON.parse('{"__proto__":{"x":1},"a":{"__proto__":{"x":2}}}')
  assert.is(render('[{{payload.x}}][{{payload.a.x}}]', { payload }), '[][]')
  assert.is(errorsOf('{{payload["__proto__"].x}}')[0]!.code, 'TEMPLATE_FORBIDDEN_KEY')
  assert.is(errorsOf('{{payload.a.__proto__.x}}')[0]!.code, 'TEMPLATE_FORBIDDEN_KEY')
})

compileTemplateSuite('leaves Object.prototype untouched after rendering a hostile payload', () => {
  const payload = JSON.parse('{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}}}')
  render('{{payload}} {{payload.x}}', { payload })
  assert.is(({} as Record<string, unknown>)['polluted'], undefined)
})

// --- redaction -------------------------------------------------------------------------------

const SECRET_HEADERS = dict({
  authorization: 'Bearer sk-1',
  'proxy-authorization': 'Basic cHc=',
  cookie: 'sid=2',
  'set-cookie': 'sid=3',
  'x-hookgate-token': 'hg-4',
  'x-hub-signature-256': 'sha256=5',
  'stripe-signature': 't=6',
  'webhook-signature': 'v1,7',
  'x-gitlab-token': 'gl-8',
  'x-webhook-secret': 's-9',
  'x-api-key': 'k-10',
  'x-apikey': 'k-11',
  'x-password': 'p-12',
  'x-auth-user': 'u-13',
})

compileTemplateSuite('redacts each secret header when read by name', () => {
  for (const name of Object.keys(SECRET_HEADERS)) {
    assert.is(render(`{{headers.${name}}}`, { headers: SECRET_HEADERS }), '[redacted]', name)
    assert.is(render(`{{headers.${name.toUpperCase()}}}`, { headers: SECRET_HEADERS }), '[redacted]', name)
  }
  assert.is(render('{{headers.authorization}}', { headers: dict({}) }), '')
})

compileTemplateSuite('redacts every secret header in {{headers}}', () => {
  const headers = dict({ ...SECRET_HEADERS, 'x-github-event': 'push' })
  const out = render('{{headers}}', { headers })
  const parsed = JSON.parse(out) as Record<string, string>
  for (const name of Object.keys(SECRET_HEADERS)) assert.is(parsed[name], '[redacted]', name)
  assert.is(parsed['x-github-event'], 'push')
  for (const value of Object.values(SECRET_HEADERS)) assert.not.ok(out.includes(value), value)
})

compileTemplateSuite.run()
