/**
 * One canonical form of URL paths, for the access proxy's request paths and its configured
 * prefixes alike. Dependency-free: this layer imports nothing from the rest of the project.
 *
 * Upstreams read a path in many ways (percent-decoding, dot segments, `;` parameters, case
 * folding, trimming of trailing dots and spaces): the proxy must never decide on one reading and
 * forward another. So a path is first made canonical (the form that is matched and forwarded),
 * and what cannot be made canonical is refused. Prefixes are then matched twice, on the canonical
 * path and on a looser "match key" that models the readings of lenient upstreams; the caller
 * takes the stricter outcome.
 */

/** A path that has no canonical form; the message says why (safe to show: no secrets in it). */
export class PathError extends Error {}

const HEX = '0123456789ABCDEF';
const UTF8 = new TextEncoder();

const hexValue = (c: number) =>
  c >= 0x30 && c <= 0x39
    ? c - 0x30
    : c >= 0x41 && c <= 0x46
      ? c - 0x37
      : c >= 0x61 && c <= 0x66
        ? c - 0x57
        : -1;

/** RFC 3986 unreserved: ALPHA DIGIT - . _ ~ */
const isUnreserved = (c: number) =>
  (c >= 0x41 && c <= 0x5a) ||
  (c >= 0x61 && c <= 0x7a) ||
  (c >= 0x30 && c <= 0x39) ||
  c === 0x2d ||
  c === 0x2e ||
  c === 0x5f ||
  c === 0x7e;

/**
 * The canonical form of a path (no query: callers split at "?" first):
 * - percent-escapes of unreserved characters are decoded, every other escape gets upper-case hex;
 * - "." and ".." segments are resolved (also when written "%2e"), never above "/"; empty segments
 *   ("//") are dropped; a trailing "/" is kept;
 * - characters outside ASCII are percent-encoded as UTF-8.
 * Refused (PathError): a path not starting with "/", "\" and "#" and "?" raw, encoded "/" or "\",
 * control characters raw or encoded, spaces raw (encoded, "%20" is kept), malformed escapes,
 * overlong UTF-8 ("%C0%AE", which lenient decoders read as "."), and double encoding ("%25"
 * followed by two hex digits, which an upstream decoding twice reads as another character).
 *
 * A path with none of "%", "\", "#", "?", "/." or "//" and only printable ASCII is returned as
 * it is, after one scan and no allocation (the common case on the proxy's hot path).
 */
export function canonicalPath(raw: string): string {
  if (raw.charCodeAt(0) !== 0x2f) throw new PathError('a path must start with "/"');
  const n = raw.length;
  let i = 0;
  for (; i < n; i++) {
    const c = raw.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f || c === 0x25 || c === 0x5c || c === 0x23 || c === 0x3f) break;
    if (c === 0x2f && i + 1 < n) {
      const d = raw.charCodeAt(i + 1);
      if (d === 0x2f || d === 0x2e) break;
    }
  }
  return i === n ? raw : slowCanonical(raw);
}

function slowCanonical(raw: string): string {
  let text = '';
  const n = raw.length;
  for (let i = 0; i < n; i++) {
    const c = raw.charCodeAt(i);
    if (c === 0x25) {
      const hi = i + 2 < n ? hexValue(raw.charCodeAt(i + 1)) : -1;
      const lo = hi >= 0 ? hexValue(raw.charCodeAt(i + 2)) : -1;
      if (lo < 0) throw new PathError('the path has a malformed percent-escape');
      const v = hi * 16 + lo;
      if (v < 0x20 || v === 0x7f) throw new PathError('control characters are not allowed in paths');
      if (v === 0x2f || v === 0x5c)
        throw new PathError('encoded slashes and backslashes are not allowed in paths');
      if (isOverlongLead(v, raw, i + 3)) throw new PathError('overlong UTF-8 is not allowed in paths');
      text += isUnreserved(v) ? String.fromCharCode(v) : `%${HEX[hi]}${HEX[lo]}`;
      i += 2;
    } else if (c <= 0x20 || c === 0x7f) {
      throw new PathError('control characters and spaces are not allowed in paths');
    } else if (c === 0x5c) {
      throw new PathError('backslashes are not allowed in paths');
    } else if (c === 0x23 || c === 0x3f) {
      throw new PathError('"#" and "?" are not allowed in paths');
    } else if (c > 0x7f) {
      // One code point (a surrogate pair counts as one) to its UTF-8 escapes.
      const cp = raw.codePointAt(i) as number;
      if (cp > 0xffff) i++;
      for (const b of UTF8.encode(String.fromCodePoint(cp))) text += `%${HEX[b >> 4]}${HEX[b & 15]}`;
    } else {
      text += raw[i];
    }
  }
  // Checked on the result, where "%25%41%41" has become "%25AA": an upstream decoding twice would
  // read "%2561" as "a".
  if (text.includes('%25') && /%25[0-9A-Fa-f]{2}/.test(text))
    throw new PathError('double percent-encoding is not allowed in paths');
  return resolveSegments(text.split('/'), (s) => s);
}

/**
 * Is byte `v` (an escape ending before `next`) the start of an overlong UTF-8 sequence? Lenient
 * decoders read "%C0%AE" as "." and "%C0%AF" as "/" ("%E0%80%AE", "%F0%80%80%AE" likewise).
 */
function isOverlongLead(v: number, raw: string, next: number): boolean {
  if (v === 0xc0 || v === 0xc1) return true;
  if (v !== 0xe0 && v !== 0xf0) return false;
  if (raw.charCodeAt(next) !== 0x25) return false;
  const b = hexValue(raw.charCodeAt(next + 1)) * 16 + hexValue(raw.charCodeAt(next + 2));
  return v === 0xe0 ? b >= 0x80 && b < 0xa0 : b >= 0x80 && b < 0x90;
}

/**
 * Joins segments (the first is the empty text before the leading "/") after resolving "." and
 * "..", which `dot` tells apart, and dropping empty segments; keeps a trailing "/".
 */
function resolveSegments(segs: string[], dot: (s: string) => string): string {
  const out: string[] = [];
  let trailing = false;
  for (let k = 1; k < segs.length; k++) {
    const s = dot(segs[k] as string);
    trailing = s === '' || s === '.' || s === '..';
    if (s === '' || s === '.') continue;
    if (s === '..') out.pop();
    else out.push(s);
  }
  return `/${out.join('/')}${trailing && out.length > 0 ? '/' : ''}`;
}

/**
 * The form prefixes are also matched in, to model what lenient upstreams make of a canonical
 * path: every escape decoded, Unicode compatibility forms folded (NFKC) and lower case (servers on
 * case-insensitive file systems or frameworks), `;` parameters cut from each segment (Tomcat and
 * Java servers: "/admin;x" and "/..;/" are "/admin" and "/../"), trailing dots and spaces cut from
 * each segment (Windows: "/admin." is "/admin"), then dot segments resolved again. Only used for
 * matching: the canonical path is what is forwarded. Returns `canonical` itself (no allocation)
 * when none of that changes anything.
 */
export function pathMatchKey(canonical: string): string {
  const n = canonical.length;
  let upper = false;
  let i = 0;
  for (; i < n; i++) {
    const c = canonical.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) upper = true;
    else if (c === 0x25 || c === 0x3b) break;
    else if (c === 0x2e && (i + 1 === n || canonical.charCodeAt(i + 1) === 0x2f)) break;
  }
  // Only upper-case letters to fold (a common path like "/static/App.js"): nothing else changes.
  if (i === n) return upper ? canonical.toLowerCase() : canonical;
  let text = canonical;
  if (text.includes('%')) {
    try {
      text = decodeURIComponent(text);
    } catch {
      // Not UTF-8: byte by byte, as a Latin-1 reading upstream would see it.
      text = text.replace(/%([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
    }
    // biome-ignore lint/suspicious/noControlCharactersInRegex: ASCII check
    if (/[^\u0000-\u007f]/.test(text)) text = text.normalize('NFKC');
  }
  text = text.toLowerCase();
  return resolveSegments(text.replace(/\\/g, '/').split('/'), (seg) => {
    const semi = seg.indexOf(';');
    const s = (semi < 0 ? seg : seg.slice(0, semi)).replace(/\s+$/, '');
    return s === '.' || s === '..' ? s : s.replace(/[.\s]+$/, '');
  });
}

/** Does `prefix` cover `path` on whole segments? Both in the same form (canonical, or match keys). */
export function prefixCovers(prefix: string, path: string): boolean {
  if (prefix === '/') return true;
  return (
    path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 0x2f)
  );
}
