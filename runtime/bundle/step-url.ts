// The rule "a value rendered into a URL can never change its structure", for http workflow steps:
// the URL as it will be sent keeps the origin and the path prefix the config wrote before its first
// placeholder, and none of its path segments is a dot-segment. Template values are percent-encoded
// when rendered (so "/", "?", "#", "\", "@" and ":" stay inside their segment or parameter); this
// check holds whatever the rendering did, on the final URL, just before the call. The compiler
// uses dotSegmentIn for the literal text of a url, which is why the rule sits here, with the other
// code both sides share (runtime/workflows/http-step.ts applies it). This module imports nothing.

/** `.` or `..`, either dot raw or as `%2e` (any case): what URL parsers (WHATWG, and many servers) resolve away. */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i

/** The scheme and authority of an absolute URL as written, before its path. */
const ORIGIN_PART = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\\]*/

/** True when the path of `url` (as written, before any normalisation) has a dot-segment. */
export function dotSegmentIn(url: string): boolean {
  const origin = ORIGIN_PART.exec(url)
  let path = origin ? url.slice(origin[0].length) : url
  const end = path.search(/[?#]/)
  if (end >= 0) path = path.slice(0, end)
  // "\" is a path separator to the WHATWG parser in http(s) URLs
  for (const segment of path.split(/[/\\]/)) if (DOT_SEGMENT.test(segment)) return true
  return false
}

export class StepUrlRefused extends Error {}

/**
 * The URL an http step may call: `rendered` parsed the WHATWG way, once it is known to stay inside
 * `scope` (the url's literal text before its first placeholder): the same origin (and no user
 * info), and a path that starts with the scope's path, or equals it when the scope already reached
 * the query or fragment. Throws StepUrlRefused saying why (never a header, so never a secret).
 */
export function scopedStepUrl(rendered: string, scope: string): URL {
  if (dotSegmentIn(rendered)) throw new StepUrlRefused('the url was refused: a value rendered into its path made a "." or ".." segment, which would move the call to another path')
  let url: URL
  let fixed: URL
  try {
    url = new URL(rendered)
    fixed = new URL(scope)
  } catch {
    throw new StepUrlRefused('the url was refused: it is not a valid URL once rendered')
  }
  const pathFixed = /[?#]/.test(scope.slice((ORIGIN_PART.exec(scope)?.[0] ?? '').length))
  const inScope = url.origin === fixed.origin && url.username === fixed.username && url.password === fixed.password &&
    (pathFixed ? url.pathname === fixed.pathname : url.pathname.startsWith(fixed.pathname))
  if (!inScope) throw new StepUrlRefused(`the url was refused: it leaves ${fixed.origin}${fixed.pathname}, where the config fixes the call`)
  return url
}
