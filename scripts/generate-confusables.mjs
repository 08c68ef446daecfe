// Generates runtime/agents/confusables.generated.ts: how every Unicode code point reads when the envelope
// looks for its markers, built from Unicode's confusables data (UTS #39) so that the runtime needs
// no dependency and no hand-written homoglyph table. Also writes the test fixture
// test/fixtures/envelope/marker-look-alikes.json: every confusables entry whose prototype is a
// letter of the marker words, with its script, so the tests can draw look-alikes from every script.
//
// Source: the npm package `unhomoglyph` (a devDependency), whose data.json is confusables.txt
// (source code point → prototype) as JSON. No npm package ships confusables.txt itself.
// Usage: node scripts/generate-confusables.mjs [--package DIR]
//   DIR (or HOOKGATE_CONFUSABLES_PACKAGE) is an unpacked unhomoglyph package; by default the
//   installed one is used. Normalisation (NFKD) and general categories come from this Node's ICU.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const TABLE_OUT = join(root, 'runtime', 'agents', 'confusables.generated.ts')
const FIXTURE_OUT = join(root, 'test', 'fixtures', 'envelope', 'marker-look-alikes.json')

function packageDir() {
  const flag = process.argv.indexOf('--package')
  if (flag !== -1 && process.argv[flag + 1]) return process.argv[flag + 1]
  if (process.env.HOOKGATE_CONFUSABLES_PACKAGE) return process.env.HOOKGATE_CONFUSABLES_PACKAGE
  try {
    return dirname(createRequire(join(root, 'package.json')).resolve('unhomoglyph/package.json'))
  } catch {
    process.stderr.write('generate-confusables: the devDependency unhomoglyph is not installed; pass --package DIR\n')
    process.exit(2)
  }
}

const dir = packageDir()
const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
if (pkg.name !== 'unhomoglyph') throw new Error(`${dir} holds ${pkg.name}, not unhomoglyph`)
/** @type {Record<string, string>} */
const confusables = JSON.parse(readFileSync(join(dir, 'data.json'), 'utf8'))
const dataVersion = /confusables\.txt\)?,? v?(\d+\.\d+\.\d+)/.exec(readFileSync(join(dir, 'README.md'), 'utf8'))?.[1] ?? 'unknown'
const source = `${pkg.name}@${pkg.version} (confusables.txt ${dataVersion}), NFKD from Unicode ${process.versions.unicode}`

// ---------------------------------------------------------------------------------------------
// How one code point reads. The reading is a string over the marker alphabet: A-Z (case folded;
// the data reads 0 as O and 1 as l), `<`, `>`, `"` (any quote) and `=`; '?' for any other letter
// or digit (it breaks a marker); '\n' for a line break; '' for everything else (spaces, punctuation, symbols, marks,
// format and unassigned code points), which the matcher skips between the marker's letters.
// ---------------------------------------------------------------------------------------------

const LINE_BREAKS = new Set([0x0a, 0x0b, 0x0c, 0x0d, 0x85, 0x2028, 0x2029])

// What confusables.txt leaves out because it maps across case only where shapes agree: the Latin
// small capitals are prototypes of their own (Greek tau maps to ᴛ, not to T), yet read as capitals.
// Beside them, the few letters of the former hand-written table that the data maps to no Latin
// letter at all (Latin Ɛ, Cyrillic п as italic text shows it, Runic ᚱ), so that nothing it caught
// is lost; where the data maps a letter elsewhere (Greek ν to v) the data wins.
const READS_AS = {
  ᴀ: 'A', ʙ: 'B', ᴄ: 'C', ᴅ: 'D', ᴇ: 'E', ꜰ: 'F', ɢ: 'G', ʜ: 'H', ɪ: 'I', ᴊ: 'J', ᴋ: 'K', ʟ: 'L', ᴍ: 'M',
  ɴ: 'N', ᴏ: 'O', ᴘ: 'P', ʀ: 'R', ꜱ: 'S', ᴛ: 'T', ᴜ: 'U', ᴠ: 'V', ᴡ: 'W', ʏ: 'Y', ᴢ: 'Z',
  Ɛ: 'E', п: 'N', ᚱ: 'R',
}
// Angle brackets and quotes that confusables.txt maps to something other than `<`, `>` or a quote
// (or not at all) but that a reader takes for one; they only decide what is swallowed around a
// marker, never whether there is one.
const LEFT_BRACKETS = '<\u2039\u00AB\u3008\u27E8\uFF1C\uFE64\u02C2\u1438\u276E\u27EA\u227A\u2329\u276C\u2770\u300A\u29FC\u2991\u2989\u226A\u22D8\u22D6\u2AA1\u02F1'
const RIGHT_BRACKETS = '>\u203A\u00BB\u3009\u27E9\uFF1E\uFE65\u02C3\u1433\u276F\u27EB\u227B\u232A\u276D\u2771\u300B\u29FD\u2992\u298A\u226B\u22D9\u22D7\u2AA2\u02F2'
const QUOTES = '"\'\u201C\u201D\u201E\u201F\u2018\u2019\u201A\u201B\u2033\u2036\uFF02\uFF07'
const EXPLICIT = new Map()
for (const ch of LEFT_BRACKETS) EXPLICIT.set(ch, '<')
for (const ch of RIGHT_BRACKETS) EXPLICIT.set(ch, '>')
for (const ch of QUOTES) EXPLICIT.set(ch, '"')

const LETTER_OR_DIGIT = /^[\p{L}\p{N}]$/u
const MARK_OR_IGNORABLE = /^[\p{M}\p{Default_Ignorable_Code_Point}]$/u
const UNASSIGNED_OR_PRIVATE = /^[\p{Cn}\p{Co}]$/u

/** UTS #39 mapping of every character of s (NFD first, as the skeleton is defined), then NFKD. */
function skeleton(s) {
  let out = ''
  for (const ch of s.normalize('NFD')) out += confusables[ch] ?? ch
  return out.normalize('NFKD')
}

/** The reading of one character of a skeleton, or undefined if it is a letter outside the alphabet. */
function readAsciiOrSpecial(ch) {
  const cp = ch.codePointAt(0)
  if (EXPLICIT.has(ch)) return EXPLICIT.get(ch)
  if (cp < 0x80) {
    if (/[A-Z]/.test(ch)) return ch
    if (/[a-z]/.test(ch)) return ch.toUpperCase()
    if (/[0-9]/.test(ch)) return '?' // 0 and 1 are O and l by now; no other digit is in a marker
    if (ch === '=') return '='
    return ''
  }
  if (READS_AS[ch]) return READS_AS[ch]
  if (MARK_OR_IGNORABLE.test(ch)) return ''
  if (!LETTER_OR_DIGIT.test(ch)) return ''
  return undefined
}

/** Look-alikes of each prototype, to read a prototype through its case-mapped members. */
const membersOf = new Map()
for (const [lookAlike, prototype] of Object.entries(confusables)) {
  if (!membersOf.has(prototype)) membersOf.set(prototype, [])
  membersOf.get(prototype).push(lookAlike)
}

/** Reading of a skeleton, character by character. A letter outside the alphabet is read through
 *  case: if it, or a look-alike sharing its prototype, has a case partner that reads as Latin
 *  letters, so does it (ε and ɛ share the prototype ꞓ, and ε's capital Ε is E); else it is '?'. */
function readSkeleton(s) {
  let out = ''
  for (const ch of s) {
    const direct = readAsciiOrSpecial(ch)
    if (direct !== undefined) { out += direct; continue }
    out += readThroughCase(ch) ?? '?'
  }
  // Brackets, quotes and `=` matter only where they stand alone (around a marker, in its id
  // attribute); beside letters (ŉ, ǆ-like ligatures, ⩵) they only multiply the readings.
  if (/[A-Z?]/.test(out)) out = out.replace(/["=<>]/g, '')
  else if (/^"+$/.test(out)) out = '"'
  else if (/^=+$/.test(out)) out = '='
  return out.replace(/\?+/g, '?')
}

function readThroughCase(ch) {
  for (const member of [ch, ...(membersOf.get(ch) ?? [])]) {
    for (const partner of [member.toUpperCase(), member.toLowerCase()]) {
      if (partner === member) continue
      let reading = ''
      for (const c of skeleton(partner)) reading += readAsciiOrSpecial(c) ?? '?'
      if (/^[A-Z]+$/.test(reading)) return reading
    }
  }
  return undefined
}

function readingOf(cp) {
  if (LINE_BREAKS.has(cp)) return '\n'
  if (cp >= 0xd800 && cp <= 0xdfff) return '' // a lone surrogate shows as nothing or as a box
  const ch = String.fromCodePoint(cp)
  if (EXPLICIT.has(ch)) return EXPLICIT.get(ch)
  if (READS_AS[ch]) return READS_AS[ch]
  if (UNASSIGNED_OR_PRIVATE.test(ch)) return ''
  // Twice through the mapping: compatibility forms that the data does not list reach it after
  // NFKD. Where the data sends a compatibility form elsewhere (circled R to ®), the plain
  // compatibility decomposition may read as more Latin letters: the reading with more wins.
  let reading = readSkeleton(skeleton(skeleton(ch)))
  const compatibility = readSkeleton(skeleton(ch.normalize('NFKD')))
  if (latinLetters(compatibility) > latinLetters(reading)) reading = compatibility
  // Punctuation and symbols never break a marker, even where their prototype is a letter
  // (the em dash's is the katakana ー): only letters and digits are '?'.
  if (!LETTER_OR_DIGIT.test(ch)) reading = reading.replace(/\?/g, '')
  return reading
}

function latinLetters(reading) {
  return reading.replace(/[^A-Z]/g, '').length
}

// ---------------------------------------------------------------------------------------------
// The table: the distinct readings, and every code point's reading index, run-length encoded.
// ---------------------------------------------------------------------------------------------

const readings = ['', '?', '\n']
const indexOfReading = new Map(readings.map((r, i) => [r, i]))
const runs = []
let runValue = -1
let runLength = 0
for (let cp = 0; cp <= 0x10ffff; cp++) {
  const reading = readingOf(cp)
  let index = indexOfReading.get(reading)
  if (index === undefined) {
    index = readings.length
    readings.push(reading)
    indexOfReading.set(reading, index)
  }
  if (index === runValue) { runLength++; continue }
  if (runLength > 0) runs.push(runValue, runLength)
  runValue = index
  runLength = 1
}
runs.push(runValue, runLength)
if (readings.length > 255) throw new Error(`${readings.length} distinct readings do not fit in a byte`)

// Runs as base-36 "value,length" pairs joined by ';': plain ASCII, so the module stays readable.
const encoded = []
for (let i = 0; i < runs.length; i += 2) encoded.push(`${runs[i].toString(36)},${runs[i + 1].toString(36)}`)

const table = `// GENERATED by scripts/generate-confusables.mjs: do not edit. How each Unicode code point reads
// to the envelope's marker matcher (runtime/agents/envelope.ts), from ${source}.
// READINGS lists the distinct readings: '' is skipped between a marker's letters, '?' is a letter
// outside the marker alphabet, '\\n' a line break. READING_RUNS covers U+0000..U+10FFFF as
// base-36 "reading index,run length" pairs joined by ';'.

export const CONFUSABLES_SOURCE = ${JSON.stringify(source)}

export const READINGS: readonly string[] = ${JSON.stringify(readings)}

export const READING_RUNS = ${JSON.stringify(encoded.join(';'))}
`
writeFileSync(TABLE_OUT, table)

// ---------------------------------------------------------------------------------------------
// The test fixture: every confusables entry whose prototype reads as one letter of the marker
// words, with the ISO 15924 script of the look-alike (found through the regex engine's Script
// property, the only script data Node has: each four-letter code it accepts is a script).
// ---------------------------------------------------------------------------------------------

const MARKER_LETTERS = new Set('ENDXTRALUSCOI')
const scripts = []
for (let a = 65; a <= 90; a++) {
  for (let b = 97; b <= 122; b++) {
    for (let c = 97; c <= 122; c++) {
      for (let d = 97; d <= 122; d++) {
        const code = String.fromCharCode(a, b, c, d)
        try { scripts.push([code, new RegExp(`^\\p{Script=${code}}$`, 'u')]) } catch { /* not a script */ }
      }
    }
  }
}
const scriptOf = (ch) => scripts.find(([, re]) => re.test(ch))?.[0] ?? 'Zzzz'
const lookAlikes = []
for (const [lookAlike, prototype] of Object.entries(confusables)) {
  const letter = prototype.normalize('NFKD').toUpperCase()
  if (letter.length !== 1 || !MARKER_LETTERS.has(letter)) continue
  const cp = lookAlike.codePointAt(0)
  lookAlikes.push([cp, letter, scriptOf(lookAlike)])
}
lookAlikes.sort((x, y) => x[0] - y[0])
const rows = lookAlikes.map(([cp, letter, script]) => JSON.stringify([cp.toString(16).toUpperCase().padStart(4, '0'), letter, script]))
mkdirSync(dirname(FIXTURE_OUT), { recursive: true })
writeFileSync(FIXTURE_OUT, `{"source":${JSON.stringify(source)},\n"columns":["codePoint","letter","script"],\n"lookAlikes":[\n${rows.join(',\n')}\n]}\n`)

process.stderr.write(`generate-confusables: ${readings.length} readings, ${runs.length / 2} runs, ` +
  `${Buffer.byteLength(table)} bytes to ${TABLE_OUT}; ${lookAlikes.length} look-alikes to ${FIXTURE_OUT}\n`)
