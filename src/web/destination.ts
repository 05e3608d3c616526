import type { FastifyRequest } from 'fastify';
import { ownOrigin } from '../auth/session/authenticator.js';
import { App } from '../objects/app.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { BACKCHANNEL } from '../wire/proxy.js';

/** The proxy's way in: the back channel's browser step (src/api/backchannel.ts) with ?app=<App ID>. */
const PROXY_SIGNIN = `${BACKCHANNEL}/signin`;

/**
 * What the sign-in page names as the place the person continues to ("to continue to …"), from a
 * return URL that `safeReturnUrl()` already allowed:
 * - the access proxy's sign-in step on this service (`/proxy/v1/signin?app=<id>`): the App's Name,
 *   when the App exists, has a proxy (as the back channel itself requires) and has a name;
 * - another origin: its host (what the browser will show next);
 * - otherwise (a page of this service, or no return URL): the tenant's name.
 * Display only: where the browser goes is decided by the return URL and, for the proxy, by the
 * back channel's own checks, never by this name.
 */
export async function destinationName(
  ctx: ServiceContext,
  req: FastifyRequest,
  tenant: Doc,
  returnUrl: string,
  tenantName: string,
): Promise<string> {
  if (returnUrl === '') return tenantName;
  let u: URL;
  let own: string;
  try {
    // Through URL: "http://host:80" as the Host header may spell it is the origin "http://host".
    own = new URL(ownOrigin(req)).origin;
    u = new URL(returnUrl, own);
  } catch {
    return tenantName;
  }
  const here = new Set([own]);
  if (typeof tenant.SigninURL === 'string' && tenant.SigninURL !== '') {
    try {
      here.add(new URL(tenant.SigninURL).origin);
    } catch {
      /* a malformed SigninURL names no origin */
    }
  }
  if (!here.has(u.origin)) return u.host;
  if (u.pathname === PROXY_SIGNIN) {
    const id = u.searchParams.get('app') ?? '';
    const app = /^[a-z0-9]{1,64}$/.test(id) ? await ctx.store.get(App, id) : undefined;
    const name = typeof app?.doc.Name === 'string' ? app.doc.Name.trim() : '';
    if (app?.doc.HaveProxyToken === true && name !== '') return name;
  }
  return tenantName;
}
