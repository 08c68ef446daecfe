// What bin/hookgate.js loads for `hookgate serve`: the serve verb and the runtime in one module
// graph, which scripts/build.mjs bundles into build/serve/hookgate-serve.mjs (beside it the
// transform process's module, where the pool looks for it). Reading ~50 small modules one by one cost
// about 25 ms of every start; one file costs the parse alone. undici stays a lazy, external import.
export { spec, run } from './verbs/serve.js'
