import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { factorsOf } from '../auth/factors/index.js';
import { listProviders } from '../auth/factors/oauth2rp/provider.js';
import { relyingParty } from '../auth/factors/u2f/credentials.js';
import { tenantDoc } from '../auth/integrity.js';
import type { ServiceContext } from '../store/service.js';
import { registerPageAssets } from './bundle.js';
import { destinationName } from './destination.js';
import { sendHtml } from './errorpage.js';
import { registerHomeRoutes } from './home.js';
import { registerMobilePages } from './mobile.js';
import { debugPage, enrollPage, otpLinkPage, signinPage, signoutPage } from './pages.js';
import { safeReturnUrl } from './returnurl.js';
import { registerSetupPage } from './setup.js';
import { registerVouchPages } from './vouch.js';

export { PAGE_CSP } from './errorpage.js';

const OPTIONAL = { config: { auth: 'optional' as const } };

const sendPage = (reply: FastifyReply, html: string) => sendHtml(reply, 200, html);

/** Services (by their store) whose log already has the hint below: once per service, not per page. */
// module-state: a side table on each service's store (whether its log has the hint); gone with the store.
const hinted = new WeakSet<object>();

/**
 * Can security keys and passkeys work here? Only with a relying party (a configured sign-in URL
 * with a host name: src/auth/factors/u2f/credentials.ts). Without one the pages do not offer
 * them, and the operator (not the person signing in) is told how to turn them on, in the log.
 */
async function passkeysOffered(ctx: ServiceContext): Promise<boolean> {
  try {
    await relyingParty(ctx);
    return true;
  } catch (e) {
    if (!hinted.has(ctx.store)) {
      hinted.add(ctx.store);
      ctx.logger.warn(
        { reason: (e as Error).message },
        'security keys and passkeys are not offered on the sign-in pages: set server.signinurl (or Tenant.SigninURL) to the https URL of the sign-in pages, with a host name',
      );
    }
    return false;
  }
}

/** A session good enough for the pages (the tenant's read level): the top bar offers "Sign out". */
const signedIn = (req: FastifyRequest) => req.principal?.via === 'session' && req.principal.userId !== '';

function query(req: FastifyRequest, name: string): string {
  const v = (req.query as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : '';
}

/** The sign-in pages at /signin: sign-in, security settings (enrollment), sign-out, /signin/debug. */
export function registerWebRoutes(app: FastifyInstance, ctx: ServiceContext) {
  registerHomeRoutes(app, ctx); // GET / and the icon
  registerVouchPages(app, ctx); // /signin/vouch, /signin/vouch/:id
  registerSetupPage(app, ctx); // /signin/setup: one-time sign-in URLs
  registerPageAssets(app, ctx.logger); // /signin/assets/<name>-<hash>.js|css: src/web/bundle.ts

  app.get('/signin', OPTIONAL, async (req, reply) => {
    const tenant = await tenantDoc(ctx);
    const raw = query(req, 'return');
    const ret = safeReturnUrl(req, tenant, raw);
    const intent = query(req, 'intent').slice(0, 4096);
    const name = String(tenant.Name || 'Gatehouse');
    const destination = await destinationName(ctx, req, tenant, ret, name);
    return sendPage(
      reply,
      signinPage(
        name,
        ret,
        intent,
        raw !== '' && ret === '',
        destination,
        signedIn(req),
        await listProviders(ctx),
        await passkeysOffered(ctx),
        factorsOf(ctx),
      ),
    );
  });
  app.get('/signin/enroll', OPTIONAL, async (req, reply) =>
    sendPage(
      reply,
      enrollPage(
        String((await tenantDoc(ctx)).Name || 'Gatehouse'),
        signedIn(req),
        await listProviders(ctx),
        await passkeysOffered(ctx),
        factorsOf(ctx),
      ),
    ),
  );
  app.get('/signin/signout', OPTIONAL, async (req, reply) =>
    sendPage(reply, signoutPage(String((await tenantDoc(ctx)).Name || 'Gatehouse'), signedIn(req))),
  );
  app.get('/signin/debug', OPTIONAL, async (req, reply) =>
    sendPage(reply, debugPage(String((await tenantDoc(ctx)).Name || 'Gatehouse'), signedIn(req))),
  );
  registerMobilePages(app, ctx);
  app.get('/signin/otp', OPTIONAL, async (_req, reply) =>
    sendPage(reply, otpLinkPage(String((await tenantDoc(ctx)).Name || 'Gatehouse'))),
  );
}
