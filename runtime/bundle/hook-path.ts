// What a hook's path is: the one rule for the base path (hooks.path) and for the name under it (a
// mapping's match.path, a Trigger's path), followed by the compiler when it builds the route
// table, by `hookgate try` when it looks a name up, and by every endpoint URL the operator page and
// the command line print, so that a printed URL is always one the runtime serves.
//
// A name is its segments joined by single slashes: slashes before and after it are dropped
// (`/github/` is `github`), and an empty segment inside it (`a//b`) is refused, as `.`, `..` and
// characters outside the segment alphabet are: the runtime looks the request path up as sent, so
// `/hooks/a//b` could never reach a route named `a/b`. This file imports nothing.

/** The characters of one path segment: RFC 3986 pchar, without percent-escapes. */
export const PATH_SEGMENT = /^[A-Za-z0-9._~:@!$&'()*+,;=-]+$/

/** 'github', '/github/' → 'github'; 'a/b' stays; undefined when it cannot be a name ('', 'a//b', 'a/../b', 'a b'). */
export function hookName(raw: string): string | undefined {
  const trimmed = raw.replace(/^\/+|\/+$/g, '')
  const segments = trimmed.split('/')
  if (trimmed === '' || segments.some((s) => s === '' || s === '.' || s === '..' || !PATH_SEGMENT.test(s))) return undefined
  return segments.join('/')
}

/**
 * hooks.path as served: '/hooks/' and '//hooks' → '/hooks' (the compiler warns that it was
 * normalised); 'root' when it has no segment, 'invalid' when a segment is not plain.
 */
export function normaliseBasePath(raw: string): string | 'root' | 'invalid' {
  const segments = raw.split('/').filter((s) => s.length > 0)
  if (segments.length === 0) return 'root'
  if (segments.some((s) => s === '.' || s === '..' || !PATH_SEGMENT.test(s))) return 'invalid'
  return '/' + segments.join('/')
}
