import type { FastifyRequest } from 'fastify';
import { ownOrigin } from '../auth/session/authenticator.js';
import { isLocalReturnPath, MAX_RETURN_LENGTH } from '../core/returnurl.js';
import type { Doc } from '../schema/fields.js';

/**
 * The return URL sign-in may send the browser to, or '' when it is not allowed. Allowed: a path
 * on this service that browsers cannot read as another origin (src/core/returnurl.ts, the check
 * the access proxy uses too), or an absolute http(s) URL whose origin is this
 * service's, the tenant's SigninURL's, or listed in Tenant.AllowedReturnOrigins. Never a
 * javascript:, data: or protocol-relative URL, never credentials in the URL.
 */
export function safeReturnUrl(req: FastifyRequest, tenant: Doc, raw: unknown): string {
  if (typeof raw !== 'string' || raw === '' || raw.length > MAX_RETURN_LENGTH) return '';
  if (raw.startsWith('/')) return isLocalReturnPath(raw) ? raw : '';
  // Control characters and whitespace let browsers read a URL differently than we do.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: that is the point
  if (/[\u0000-\u0020\u007f\\]/.test(raw)) return '';
  const own = ownOrigin(req);
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return '';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return '';
  if (u.username !== '' || u.password !== '') return '';
  const allowed = new Set<string>(own ? [own] : []);
  for (const o of Array.isArray(tenant.AllowedReturnOrigins) ? tenant.AllowedReturnOrigins : []) {
    try {
      allowed.add(new URL(String(o)).origin);
    } catch {
      /* a malformed entry allows nothing */
    }
  }
  if (typeof tenant.SigninURL === 'string' && tenant.SigninURL !== '') {
    try {
      allowed.add(new URL(tenant.SigninURL).origin);
    } catch {
      /* ignore */
    }
  }
  return allowed.has(u.origin) ? u.toString() : '';
}

/**
 * Where to send a browser to sign in and come back to `returnTo` (for the access proxy and other
 * pages): {signin_url}?return=<returnTo>[&intent=<signed intent>]. `base` is the sign-in URL
 * (Tenant.SigninURL, server.signinurl, or {base_url}/signin).
 */
export function signinLocation(base: string, returnTo: string, intent?: string): string {
  const u = new URL(base);
  u.searchParams.set('return', returnTo);
  if (intent) u.searchParams.set('intent', intent);
  return u.toString();
}
