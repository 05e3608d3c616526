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

/**
 * An https URL, or plain http to this machine (loopback), where a developer's or a test's server
 * runs: what the service accepts for an upstream identity provider's endpoints.
 */
export function httpsOrLoopback(raw: string): boolean {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return false;
  }
  if (u.protocol === 'https:') return true;
  return u.protocol === 'http:' && ['127.0.0.1', '[::1]', 'localhost'].includes(u.hostname);
}
