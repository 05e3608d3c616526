import type { FastifyInstance, FastifyReply } from 'fastify';
import { tenantDoc } from '../auth/integrity.js';
import type { ServiceContext } from '../store/context.js';
import { MOBILE_MANIFEST, MOBILE_SW } from './mobileui.js';
import { mobilePage } from './pages.js';

/** The routes of the approvals web app (/signin/mobile, its service worker and manifest). */
/** The app page needs its manifest and service worker, which the sign-in pages' CSP does not allow. */
const APP_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "manifest-src 'self'; worker-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const plain = (reply: FastifyReply, type: string, body: string) =>
  reply.header('X-Content-Type-Options', 'nosniff').header('Cache-Control', 'no-cache').type(type).send(body);

export function registerMobilePages(app: FastifyInstance, ctx: ServiceContext) {
  app.get('/signin/mobile', { config: { auth: 'optional' } }, async (_req, reply) =>
    reply
      .header('Content-Security-Policy', APP_CSP)
      .header('X-Content-Type-Options', 'nosniff')
      .header('X-Frame-Options', 'DENY')
      .header('Referrer-Policy', 'no-referrer')
      .header('Cache-Control', 'no-store')
      .type('text/html; charset=utf-8')
      .send(mobilePage(String((await tenantDoc(ctx)).Name || 'Gatehouse'))),
  );
  app.get('/signin/mobile-sw.js', { config: { auth: 'none' } }, async (_req, reply) =>
    plain(reply, 'text/javascript; charset=utf-8', MOBILE_SW),
  );
  app.get('/signin/mobile.webmanifest', { config: { auth: 'none' } }, async (_req, reply) =>
    plain(reply, 'application/manifest+json', MOBILE_MANIFEST),
  );
}
