// The store conformance suite (cases.ts) on the file store: a state directory per case.
import { storeConformance } from './cases.js'
import { scratchDir } from '../../../helpers/paths.js'
import { openStore } from '../../../../runtime/store/open.js'

storeConformance({
  name: 'the file store',
  fresh: async () => ({ stateDir: scratchDir('conformance-') }),
  open: async (place, options) => openStore(place.stateDir, options),
  crashOptions: {},
  // what it folded back from its files: a start resumes the unfinished ones
  resumed: async (store) => store.runs.unfinished(),
  done: async () => {},
})
