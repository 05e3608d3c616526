/**
 * A redirect URI an App registers (App.OIDC.RedirectURIs, PostLogoutRedirectURIs): an absolute
 * http(s) URL in canonical form (as the URL parser writes it back), without a fragment or
 * credentials. Canonical form makes the provider's comparison an exact string match.
 */
export function checkRedirectUri(v: string): string | undefined {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    return 'is not a URL';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return 'must be an http or https URL';
  if (u.username !== '' || u.password !== '') return 'must not carry a user name or password';
  if (u.hash !== '' || v.includes('#')) return 'must not have a fragment';
  if (u.href !== v) return `must be written in canonical form: ${JSON.stringify(u.href)}`;
  return undefined;
}
