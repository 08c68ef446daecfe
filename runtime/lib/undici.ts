// undici, loaded the first time something calls out (a model provider or an HTTP channel): its
// import costs about 80 ms and 20 MB, which a runtime whose agents are builtin/echo and whose
// channels are files never needs to pay. A static import would also put it in every start of the
// standalone runtime (dist/hookgate-serve.mjs), where esbuild keeps a dynamic import lazy.
let loading: Promise<typeof import('undici')> | undefined

export function loadUndici(): Promise<typeof import('undici')> {
  return (loading ??= import('undici'))
}
