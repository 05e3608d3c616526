/**
 * The service's root and its icon: `GET /` sends a browser to the sign-in pages (303) and tells
 * any other client, in a small JSON index, what this is and where to start; `/favicon.svg` and
 * `/favicon.ico` are the pages' icon. None of them needs credentials.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { signinBase } from '../groups/check.js';
import type { ServiceContext } from '../store/service.js';
import { etagOf, FAVICON_ICO, FAVICON_SVG } from './favicon.js';

/** The package's version (src/web/ and dist/web/ are both two levels below package.json). */
export const SERVICE_VERSION: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    return typeof pkg.version === 'string' ? pkg.version : '';
  } catch {
    return '';
  }
})();

/** A day: the icon changes only with a release, and a stale one harms nobody. */
const ICON_CACHE = 'public, max-age=86400';
/** The SVG is an image, never a document that may run anything, even when opened by itself. */
const ICON_CSP = "default-src 'none'; frame-ancestors 'none'";

/** Browsers say they want HTML; API clients (curl, fetch, SDKs) do not. The proxy's rule too. */
const wantsHtml = (req: FastifyRequest) => /text\/html/i.test(req.headers.accept ?? '');

function sendIcon(type: string, body: string | Buffer) {
  const etag = etagOf(body);
  return async (req: FastifyRequest, reply: FastifyReply) => {
    reply.header('Cache-Control', ICON_CACHE);
    reply.header('ETag', etag);
    reply.header('X-Content-Type-Options', 'nosniff');
    reply.header('Content-Security-Policy', ICON_CSP);
    const match = req.headers['if-none-match'];
    if (match?.split(',').some((t) => t.trim().replace(/^W\//, '') === etag)) return reply.code(304).send();
    return reply.type(type).send(body);
  };
}

export function registerHomeRoutes(app: FastifyInstance, ctx: ServiceContext) {
  app.get('/', { config: { auth: 'none' } }, async (req, reply) => {
    const signin = await signinBase(ctx);
    // The answer depends on Accept: caches must keep the two apart.
    reply.header('Vary', 'Accept');
    reply.header('Cache-Control', 'no-cache');
    reply.header('X-Content-Type-Options', 'nosniff');
    if (wantsHtml(req)) return reply.code(303).header('Location', signin).send();
    return reply.type('application/json; charset=utf-8').send(
      JSON.stringify({
        Name: 'Gatehouse',
        Description: 'Identity and access management service',
        Version: SERVICE_VERSION,
        Links: {
          SignIn: signin,
          APIExplorer: '/signin/debug',
          OpenAPI: '/openapi.json',
          Health: '/healthz',
        },
      }),
    );
  });
  app.get('/favicon.svg', { config: { auth: 'none' } }, sendIcon('image/svg+xml', FAVICON_SVG));
  app.get('/favicon.ico', { config: { auth: 'none' } }, sendIcon('image/x-icon', FAVICON_ICO));
}
