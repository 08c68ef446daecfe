// preservingEdit and diffLines: an edit of hooks.yaml changes only its own lines, and adding then
// deleting a definition gives back the file byte for byte (comments, spacing, flow maps and all).
import { readFileSync, readdirSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { suite } from 'uvu'
import * as assert from 'uvu/assert'
import { parseDocument } from 'yaml'
import { diffLines, preservingEdit, YamlEditError } from '../../admin/yaml-edit.js'
import { applyEdit, type Edit } from '../../admin/definitions.js'
import { repoRoot } from '../helpers/paths.js'

const ODD = `# a file written by hand, indented by four
hooks:
    enabled:   true      # three spaces before the value
    token: "\${HOOKGATE_TOKEN}"    # quoted
    path: /hooks
    mappings:
        - id: a
          match: {path: a}
          action: wake

# the agents
agents:
    - id: main          # the only one
      model: builtin/echo
      triggers:
          - { name: Existing, path: existing, target: wake }   # flow style, padded

      tasks:
          - name: nightly
            schedule: "0 3 * * *"   # at three
            target: wake
# trailing comment
`

/** List items indented differently from one list to the next: no printer setting imitates it. */
const MIXED = `hooks:
  enabled: true
  token: "\${HOOKGATE_TOKEN}"
agents:
    -   id: main   # dash, then three spaces
        model: builtin/echo
        tasks:
        - name: nightly   # flush with its key
          schedule: "0 3 * * *"
          target: wake
`

const TRIGGER = { name: 'Deploy finished', path: 'deploys', target: 'agent', prompt: 'Deploy {{payload.service}} finished' }
const TASK = { name: 'Morning check', schedule: '0 8 * * 1-5', timezone: 'Europe/Berlin', target: 'wake', prompt: 'good morning' }

function configs(): Array<[string, string]> {
  const out: Array<[string, string]> = [['hooks.yaml', readFileSync(join(repoRoot, 'hooks.yaml'), 'utf8')], ['odd spacing and comments', ODD]]
  for (const name of readdirSync(join(repoRoot, 'examples'))) {
    const file = join(repoRoot, 'examples', name, 'hooks.yaml')
    if (existsSync(file)) out.push([`examples/${name}/hooks.yaml`, readFileSync(file, 'utf8')])
  }
  return out
}

function agentOf(text: string): string {
  const agents = parseDocument(text).toJS()?.agents
  return Array.isArray(agents) && agents.length > 0 ? String(agents[0].id) : 'main'
}

/** The lines of `after` that are not in `before` (as a multiset). */
function addedLines(before: string, after: string): string[] {
  const hunks = diffLines(before.split('\n'), after.split('\n'))
  return hunks.flatMap((h) => after.split('\n').slice(h.newStart, h.newEnd))
}

// ---------------------------------------------------------------------------------------------

const roundTrip = suite('preservingEdit: add then delete')

for (const [label, text] of configs()) {
  for (const [kind, definition] of [['trigger', TRIGGER], ['task', TASK]] as const) {
    roundTrip(`adding then deleting a ${kind} in ${label} gives back the identical bytes`, () => {
      // hooks.enabled and the token reference are part of a Trigger's save: start from a file that has them
      const agentId = agentOf(text)
      const added = applyEdit(text, { kind, agentId, original: null, definition: { ...definition } })
      assert.ok(added.text.includes(definition.name), 'the definition was written')
      const removed = applyEdit(added.text, { kind, agentId, original: definition.name, definition: null })
      const expected = added.tokenAdded || !text.includes('enabled: true') ? null : text
      if (expected !== null) assert.is(removed.text, expected)
      else {
        // only the lines the save itself added (hooks.enabled, token) may remain
        const left = addedLines(text, removed.text)
        for (const line of left) assert.match(line, /enabled: true|token: \{ ?generate: true ?\}|^hooks:$/, `unexpected line left: ${line}`)
      }
    })
  }
}

roundTrip('a four-space file with a comment after its last line is no longer reprinted whole by an add and a delete', () => {
  const a = applyEdit(ODD, { kind: 'trigger', agentId: 'main', original: null, definition: { ...TRIGGER } })
  assert.is(a.tokenAdded, false)
  const b = applyEdit(a.text, { kind: 'trigger', agentId: 'main', original: TRIGGER.name, definition: null })
  assert.is(b.text, ODD)
  const c = applyEdit(ODD, { kind: 'task', agentId: 'main', original: null, definition: { ...TASK } })
  const d = applyEdit(c.text, { kind: 'task', agentId: 'main', original: TASK.name, definition: null })
  assert.is(d.text, ODD)
})

roundTrip.run()

// ---------------------------------------------------------------------------------------------

const ownLines = suite('preservingEdit: an edit touches only its own lines')

ownLines('adding a Trigger to the odd file adds lines and changes none of the others', () => {
  const after = applyEdit(ODD, { kind: 'trigger', agentId: 'main', original: null, definition: { ...TRIGGER } }).text
  const hunks = diffLines(ODD.split('\n'), after.split('\n'))
  for (const h of hunks) assert.is(h.end - h.start, 0, `an old line was changed: ${JSON.stringify(h)}`)
  const added = addedLines(ODD, after)
  assert.ok(added.some((l) => l.includes('name: Deploy finished')))
  assert.ok(added.every((l) => /name:|path:|target:|prompt:/.test(l)), added.join('\n'))
})

ownLines('replacing one field of a block Task changes that one line', () => {
  const after = applyEdit(ODD, { kind: 'task', agentId: 'main', original: 'nightly', definition: { name: 'nightly', schedule: '0 4 * * *', target: 'wake' } }).text
  const a = ODD.split('\n')
  const b = after.split('\n')
  const hunks = diffLines(a, b)
  assert.is(hunks.length, 1, after)
  assert.is(hunks[0]!.end - hunks[0]!.start, 1)
  assert.is(hunks[0]!.newEnd - hunks[0]!.newStart, 1)
  assert.match(b[hunks[0]!.newStart]!, /schedule: "?0 4 \* \* \*"?/)
})

ownLines('a definition in flow style can be replaced, and only its line changes', () => {
  const after = applyEdit(ODD, { kind: 'trigger', agentId: 'main', original: 'Existing', definition: { name: 'Existing', path: 'renamed', target: 'wake' } }).text
  const hunks = diffLines(ODD.split('\n'), after.split('\n'))
  assert.is(hunks.length, 1, after)
  const line = after.split('\n')[hunks[0]!.newStart]!
  assert.match(line, /path: renamed/)
  assert.match(line, /# flow style, padded/)
  assert.equal(parseDocument(after).toJS().agents[0].triggers[0], { name: 'Existing', path: 'renamed', target: 'wake' })
})

ownLines('a config with no agents gets the default agent written out', () => {
  const text = 'hooks:\n  enabled: true\n  token: ${HOOKGATE_TOKEN}\n'
  const after = applyEdit(text, { kind: 'trigger', agentId: 'main', original: null, definition: { ...TRIGGER } }).text
  assert.ok(after.startsWith(text), after)
  const agents = parseDocument(after).toJS().agents
  assert.is(agents.length, 1)
  assert.is(agents[0].id, 'main')
  assert.is(agents[0].default, true)
  assert.is(agents[0].model, 'builtin/echo')
  assert.is(agents[0].triggers[0].name, TRIGGER.name)
})

ownLines('list items indented unlike the printer no longer get an edit at the wrong nesting', () => {
  const after = applyEdit(MIXED, { kind: 'trigger', agentId: 'main', original: null, definition: { ...TRIGGER } }).text
  const value = parseDocument(after).toJS()
  assert.equal(value.agents[0].triggers, [TRIGGER])
  assert.equal(value.agents[0].tasks, [{ name: 'nightly', schedule: '0 3 * * *', target: 'wake' }])
  assert.match(after, /# dash, then three spaces/)
  assert.match(after, /# flush with its key/)
})

ownLines('invalid YAML is refused with YamlEditError', () => {
  assert.throws(() => preservingEdit('hooks:\n  enabled: [true\n', () => {}), (err: unknown) => err instanceof YamlEditError && /not valid YAML/.test((err as Error).message))
  const edit: Edit = { kind: 'trigger', agentId: 'main', original: null, definition: { ...TRIGGER } }
  assert.throws(() => applyEdit('agents: {\n', edit), (err: unknown) => err instanceof YamlEditError)
})

ownLines('an edit that changes nothing gives back the same bytes', () => {
  assert.is(preservingEdit(ODD, () => {}), ODD)
})

ownLines('a value changed in place keeps the spacing before its comment, which the printer would shrink to one space', () => {
  const text = 'hooks:\n  enabled: false      # turned on later\n  token: ${T}  # a reference\n'
  const after = preservingEdit(text, (doc) => { doc.setIn(['hooks', 'enabled'], true) })
  assert.is(after, 'hooks:\n  enabled: true      # turned on later\n  token: ${T}  # a reference\n')
})

ownLines.run()

// ---------------------------------------------------------------------------------------------

const diff = suite('diffLines')

diff('equal lists have no hunks', () => {
  assert.equal(diffLines(['a', 'b'], ['a', 'b']), [])
  assert.equal(diffLines([], []), [])
})

diff('an insertion is an empty old range', () => {
  assert.equal(diffLines(['a', 'c'], ['a', 'b', 'c']), [{ start: 1, end: 1, newStart: 1, newEnd: 2 }])
})

diff('a deletion is an empty new range', () => {
  assert.equal(diffLines(['a', 'b', 'c'], ['a', 'c']), [{ start: 1, end: 2, newStart: 1, newEnd: 1 }])
})

diff('a change in the middle and one at the end are two hunks', () => {
  assert.equal(diffLines(['a', 'b', 'c', 'd'], ['a', 'B', 'c', 'D']), [
    { start: 1, end: 2, newStart: 1, newEnd: 2 },
    { start: 3, end: 4, newStart: 3, newEnd: 4 },
  ])
})

diff('applying the hunks to the old lines gives the new lines', () => {
  const a = 'x a b c x d e x'.split(' ')
  const b = 'x b c y x d x z'.split(' ')
  const out: string[] = []
  let i = 0
  for (const h of diffLines(a, b)) {
    out.push(...a.slice(i, h.start), ...b.slice(h.newStart, h.newEnd))
    i = h.end
  }
  out.push(...a.slice(i))
  assert.equal(out, b)
})

diff.run()
