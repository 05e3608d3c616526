import type { FastifyInstance, FastifyReply } from 'fastify';
import { tenantDoc } from '../auth/integrity.js';
import type { ServiceContext } from '../store/service.js';
import { assetText } from './bundle.js';
import { MOBILE_MANIFEST } from './mobileui.js';
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
  // A service worker's URL is its scope (/signin/): it keeps this name, and browsers check it for updates.
  const worker = assetText('mobile-sw.js');
  app.get('/signin/mobile-sw.js', { config: { auth: 'none' } }, async (_req, reply) =>
    worker === undefined
      ? reply.code(404).type('text/plain').send('not found')
      : plain(reply, 'text/javascript; charset=utf-8', worker),
  );
  app.get('/signin/mobile.webmanifest', { config: { auth: 'none' } }, async (_req, reply) =>
    plain(reply, 'application/manifest+json', MOBILE_MANIFEST),
  );
}
