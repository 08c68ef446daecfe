// Watching the bundle file as a duty: the compiler replaces the file by rename, so the directory
// is watched for the file's name; a change (debounced, 150 ms) asks for a reload, which refuses a
// broken bundle and keeps the old one (runtime/serve/reload.ts).
import { watch, type FSWatcher } from 'node:fs'
import { basename, dirname } from 'node:path'
import { HEALTHY, type Duty } from './duty.js'

export function bundleWatcherDuty(bundleFile: string, changed: () => void): Duty {
  let watcher: FSWatcher | undefined
  let debounce: NodeJS.Timeout | undefined
  return {
    name: 'bundle watcher',
    start() {
      watcher = watch(dirname(bundleFile), (_event, file) => {
        if (file !== basename(bundleFile)) return
        clearTimeout(debounce)
        debounce = setTimeout(changed, 150)
      })
      watcher.unref()
    },
    stop() {
      watcher?.close()
      clearTimeout(debounce)
      watcher = undefined
    },
    health: () => HEALTHY,
  }
}
