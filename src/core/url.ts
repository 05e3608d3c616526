/** proxy.upstream and the like: an http(s) URL without a user name or password; throws otherwise. */
export function checkHttpUrl(v: string): void {
  // The URL parser drops tabs and newlines silently; the raw text may end up in a header.
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f) throw new Error('must not contain spaces or control characters');
  }
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new Error(`expected an http:// or https:// URL, got ${JSON.stringify(v)}`);
  }
  // Checked first, and the value not quoted: an error message must not print a password.
  if (u.username || u.password) throw new Error('must not carry a user name or password');
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new Error(`expected an http:// or https:// URL, got ${JSON.stringify(v)}`);
}
