// A reader that closes the pipe early (`hookgate schema | head -3`) ends a command quietly: exit 0,
// no stack trace on stderr (Node's default for an EPIPE on stdout is an unhandled 'error' event).
import { spawn } from 'node:child_process'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { hookgateBin } from '../helpers/paths.js'

test('hookgate schema whose reader closes the pipe before reading it all exits 0 with nothing on stderr', async () => {
  const child = spawn(process.execPath, [hookgateBin, 'schema'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d })
  // go away before reading, as `head` does once it has its lines (75 KB do not fit a pipe's buffer)
  child.stdout.destroy()
  const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)))
  assert.is(stderr, '')
  assert.is(code, 0)
})

test.run()
