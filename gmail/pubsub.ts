// The Pub/Sub side of the Gmail helper's setup, each step idempotent: a topic that exists is kept,
// Gmail's push service account is added to the topic's publishers by a read-modify-write of the
// IAM policy (other bindings kept, a concurrent change retried by its etag), and the push
// subscription is created, or patched only where it differs.
import { callGoogle, GoogleError, type GoogleBases, type TokenSource } from './google.js'

/** The service account Gmail publishes notifications as (Google's documentation for users.watch). */
export const GMAIL_PUSH_MEMBER = 'serviceAccount:gmail-api-push@system.gserviceaccount.com'
export const PUBLISHER_ROLE = 'roles/pubsub.publisher'

/** What a step found and did: 'created', 'updated' or 'unchanged'. */
export type StepResult = 'created' | 'updated' | 'unchanged'

export function topicName(project: string, topic: string): string {
  return topic.startsWith('projects/') ? topic : `projects/${project}/topics/${topic}`
}

export function subscriptionName(project: string, subscription: string): string {
  return subscription.startsWith('projects/') ? subscription : `projects/${project}/subscriptions/${subscription}`
}

export async function ensureTopic(tokens: TokenSource, bases: GoogleBases, name: string): Promise<StepResult> {
  try {
    await callGoogle(tokens, `${bases.pubsubUrl}/v1/${name}`)
    return 'unchanged'
  } catch (err) {
    if (!(err instanceof GoogleError) || err.status !== 404) throw err
  }
  try {
    await callGoogle(tokens, `${bases.pubsubUrl}/v1/${name}`, { method: 'PUT', body: {} })
    return 'created'
  } catch (err) {
    // made by someone else between the two calls: it exists, which is all that was wanted
    if (err instanceof GoogleError && err.status === 409) return 'unchanged'
    throw err
  }
}

interface Policy { version?: number; etag?: string; bindings?: Array<{ role: string; members: string[]; condition?: unknown }> }

/** Gives Gmail's push service account publish rights on the topic, keeping every other binding. */
export async function ensurePublisher(tokens: TokenSource, bases: GoogleBases, topic: string): Promise<StepResult> {
  for (let attempt = 1; ; attempt++) {
    const policy = await callGoogle<Policy>(tokens, `${bases.pubsubUrl}/v1/${topic}:getIamPolicy`, { method: 'POST', body: {} })
    const bindings = policy.bindings ?? []
    // A conditional binding grants only under its condition: it does not count as the grant.
    const binding = bindings.find((b) => b.role === PUBLISHER_ROLE && b.condition === undefined)
    if (binding?.members.includes(GMAIL_PUSH_MEMBER)) return 'unchanged'
    const next: Policy = {
      ...policy,
      bindings: binding
        ? bindings.map((b) => (b === binding ? { ...b, members: [...b.members, GMAIL_PUSH_MEMBER] } : b))
        : [...bindings, { role: PUBLISHER_ROLE, members: [GMAIL_PUSH_MEMBER] }],
    }
    try {
      await callGoogle(tokens, `${bases.pubsubUrl}/v1/${topic}:setIamPolicy`, { method: 'POST', body: { policy: next } })
      return 'updated'
    } catch (err) {
      // the policy changed since it was read (its etag no longer matches): read it again
      if (err instanceof GoogleError && (err.status === 409 || err.reason === 'ABORTED') && attempt < 5) continue
      throw err
    }
  }
}

export interface PushSubscription {
  name: string
  topic: string
  pushEndpoint: string
  oidc?: { serviceAccountEmail: string; audience: string }
  ackDeadlineSeconds: number
}

/** Creates the push subscription, or brings an existing one's push config and deadline to what is asked. */
export async function ensureSubscription(tokens: TokenSource, bases: GoogleBases, want: PushSubscription): Promise<StepResult> {
  const url = `${bases.pubsubUrl}/v1/${want.name}`
  const pushConfig = { pushEndpoint: want.pushEndpoint, ...(want.oidc ? { oidcToken: want.oidc } : {}) }
  let current: any
  try {
    current = await callGoogle(tokens, url)
  } catch (err) {
    if (!(err instanceof GoogleError) || err.status !== 404) throw err
    await callGoogle(tokens, url, { method: 'PUT', body: { topic: want.topic, pushConfig, ackDeadlineSeconds: want.ackDeadlineSeconds } })
    return 'created'
  }
  if (current.topic !== want.topic) {
    throw new GoogleError(409, 'FAILED_PRECONDITION', `subscription ${want.name} exists but is attached to ${String(current.topic)}, not ${want.topic}; a subscription's topic cannot change: choose another --subscription name or delete that one`)
  }
  const have = current.pushConfig ?? {}
  const sameOidc = (have.oidcToken?.serviceAccountEmail ?? null) === (want.oidc?.serviceAccountEmail ?? null) && (have.oidcToken?.audience ?? null) === (want.oidc?.audience ?? null)
  const mask: string[] = []
  if (have.pushEndpoint !== want.pushEndpoint || !sameOidc) mask.push('pushConfig')
  if (Number(current.ackDeadlineSeconds) !== want.ackDeadlineSeconds) mask.push('ackDeadlineSeconds')
  if (mask.length === 0) return 'unchanged'
  await callGoogle(tokens, url, { method: 'PATCH', body: { subscription: { pushConfig, ackDeadlineSeconds: want.ackDeadlineSeconds }, updateMask: mask.join(',') } })
  return 'updated'
}
