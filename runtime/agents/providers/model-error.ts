// The one error a model call fails with. It lives in this leaf module so that the providers and
// runtime/agents/models.ts (which re-exports it) can both use it without importing each other.

export class ModelError extends Error {
  override name = 'ModelError'
  /** `retryable`: the cause was transient (rate limit, server error, network), so a later call may succeed */
  constructor(message: string, readonly retryable = false) {
    super(message)
  }
}
