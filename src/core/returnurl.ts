/**
 * The one check of "return to" paths for the whole project (the service's sign-in pages and the
 * access proxy). Dependency-free: this layer imports nothing from the rest of the project.
 *
 * A return value is used as a Location header, so what matters is how a browser reads it, not
 * how we do: browsers drop tabs and newlines inside URLs ("/\t/evil.example" is "//evil.example"),
 * read "\" as "/", and decode nothing in the authority position. Hence the rule: a local path is
 * accepted only when it is plain text a browser cannot read another way, and when the browser's
 * own URL parsing (WHATWG, `new URL`) of it keeps the origin it is resolved against.
 */

/** The longest return value accepted (a Location header, a cookie). */
export const MAX_RETURN_LENGTH = 2048;

/** Any origin: only used to see whether resolving a path can leave the origin it starts from. */
const PROBE = 'http://origin.invalid';

/**
 * Whether `v` is a path on the current origin that every browser reads as such: starts with a
 * single "/", is printable ASCII without "\", none of those (nor "/") encoded
 * where they could be decoded before or after the authority ("/%09/x", "/%2f/x", "/%5cx"), and
 * resolves, by the WHATWG URL parser, to a URL on the same origin.
 */
export function isLocalReturnPath(v: string): boolean {
  if (v.length === 0 || v.length > MAX_RETURN_LENGTH) return false;
  if (v.charCodeAt(0) !== 0x2f) return false;
  const second = v.charCodeAt(1);
  // "//host" and "/\host" are scheme-relative in browsers.
  if (second === 0x2f || second === 0x5c) return false;
  // Printable ASCII only: browsers strip or rewrite controls, whitespace (tabs and newlines inside
  // a URL vanish: "/\t/evil" is "//evil") and some non-ASCII characters, and read "\" as "/".
  // A Location header cannot carry non-ASCII text either.
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f || c === 0x5c) return false;
  }
  // Encoded controls, "/", "\" or "%" in the path: a server or browser that decodes once (or
  // twice) turns "/%2f/evil" or "/%09/evil" into a scheme-relative URL. ("%20" stays: a space
  // inside a path is kept by URL parsers, so "/docs/my%20file" is fine.)
  const q = v.search(/[?#]/);
  const path = q < 0 ? v : v.slice(0, q);
  if (/%(?:[01][0-9a-f]|7f|2f|5c|25)/i.test(path)) return false;
  let u: URL;
  try {
    u = new URL(v, PROBE);
  } catch {
    return false;
  }
  return u.origin === PROBE && u.username === '' && u.password === '';
}

/** `v` when it is a local return path (isLocalReturnPath), else `fallback`. */
export function localReturnPath(v: unknown, fallback: string): string {
  return typeof v === 'string' && isLocalReturnPath(v) ? v : fallback;
}
