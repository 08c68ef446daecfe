// Skips the noisy events and names the run after the repository; everything else comes from
// the mapping's templates in hooks.yaml.
interface Input {
  payload: { repository?: { full_name?: string }; zen?: string }
  headers: Record<string, string>
}

export default function github({ payload, headers }: Input) {
  const event = headers['x-github-event']
  if (event === 'ping' || payload.zen !== undefined) return null // GitHub's hello when a hook is created
  if (event === 'push' || event === 'pull_request' || event === 'issues' || event === 'workflow_run') {
    return { name: `GitHub ${event} on ${payload.repository?.full_name ?? 'unknown repo'}` }
  }
  return null
}
