/**
 * Removes secrets from a request target before it is logged, by the service and by the proxy.
 *
 * A pattern over the raw text is not enough: the query parser decodes names and values, so
 * `access%5Ftoken=<key>` authenticates as `access_token=<key>` while a raw-text pattern does not
 * see it. So the query is split the way the parser splits it (on `&`, the name up to the first
 * `=`), every name and value is decoded as the parser decodes it (percent escapes in any case,
 * `+` as a space), and again, as an upstream might, and what is found is redacted whole:
 *   - the value of any parameter whose decoded name is `access_token` or `code` (in any letter
 *     case): `code` carries the proxy's one-time sign-in code, still good if its exchange failed;
 *   - any query component or path segment that, decoded, holds an API key (`gv` + 54) or a
 *     proxy token (`gp.<id>.<43>`), whatever its name.
 * Requests without `%` and without anything shaped like a secret pass through untouched.
 */
const SECRET = /gv[A-Za-z0-9]{54}|gp\.[a-z0-9]{1,64}\.[A-Za-z0-9_-]{43}/;
/** Something that might become a secret once decoded: a key's prefix with an escape after it. */
const MAYBE = /%|gv|gp/i;
export const REDACTED = '[REDACTED]';
/** access_token: an API key (docs/api.md); code: the proxy's one-time sign-in code (/.gatehouse/callback). */
const SECRET_PARAMS = new Set(['access_token', 'code']);

/**
 * Percent escapes decoded byte by byte, never throwing: a malformed escape ("%zz", a lone "%",
 * invalid UTF-8) must not stop the decoding (decodeURIComponent would throw, leaving the rest as
 * it was). Secrets are ASCII, so bytes are enough to find them.
 */
const decodeBytes = (s: string) =>
  s.replace(/%([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));

/** The text and its decodings, as far as they go (at most 3 layers of encoding). */
function decodings(s: string, plus: boolean): string[] {
  const out = [s];
  let cur = plus ? s.replace(/\+/g, ' ') : s;
  if (cur !== s) out.push(cur);
  for (let i = 0; i < 3 && cur.includes('%'); i++) {
    const next = decodeBytes(cur);
    if (next === cur) break;
    out.push(next);
    cur = next;
  }
  return out;
}

/** The shortest secret (a proxy token: "gp." + 1 + "." + 43): decoding never makes text longer. */
const SHORTEST = 48;

/** Does the text, decoded as far as it goes, hold an API key or a proxy token? */
export const holdsSecret = (s: string, plus: boolean) =>
  s.length >= SHORTEST && MAYBE.test(s) && decodings(s, plus).some((d) => SECRET.test(d));

const namesSecretParam = (name: string) =>
  /[%+]/.test(name)
    ? decodings(name, true).some((d) => SECRET_PARAMS.has(d.trim().toLowerCase()))
    : SECRET_PARAMS.has(name.trim().toLowerCase());

function redactQuery(query: string): string {
  return query
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq < 0 ? pair : pair.slice(0, eq);
      const value = eq < 0 ? '' : pair.slice(eq + 1);
      if (holdsSecret(name, true)) return REDACTED;
      if (value !== '' && (namesSecretParam(name) || holdsSecret(value, true))) return `${name}=${REDACTED}`;
      return pair;
    })
    .join('&');
}

function redactPath(path: string): string {
  if (!holdsSecret(path, false)) return path;
  return path
    .split('/')
    .map((seg) => (holdsSecret(seg, false) ? REDACTED : seg))
    .join('/');
}

/** The request target (path and query) with every secret replaced by [REDACTED]. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return redactPath(url);
  return `${redactPath(url.slice(0, q))}?${redactQuery(url.slice(q + 1))}`;
}
