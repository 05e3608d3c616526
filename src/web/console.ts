/**
 * The admin console at /console (docs/console.md): the page shell, its refusal page and its
 * bundled assets. The console itself is browser code in src/console/, bundled at `npm run build`
 * by scripts/build-console.mjs into dist/console/ with content-hashed names; everything it shows
 * and does goes through the public API with the browser session, so this file only decides who
 * gets the shell: administrators (at any level: the console asks for the step-up in place),
 * a refusal for other signed-in people, and a redirect to sign in for everyone else.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { requiredLevel, tenantDoc } from '../auth/integrity.js';
import { esc } from '../core/html.js';
import { signinBase } from '../groups/check.js';
import { User } from '../objects/user.js';
import type { ServiceContext } from '../store/service.js';
import { assetUrl, serveBuiltFiles } from './bundle.js';
import { ICON_LINKS } from './favicon.js';
import { signinLocation } from './returnurl.js';
import { PAGE_CSP } from './routes.js';

/** src/web/ and dist/web/ are both two levels below the package: the bundle is in dist/console/. */
const BUNDLE_DIR = new URL('../../dist/console/', import.meta.url);

interface Manifest {
  js: string;
  css: string;
}

/** The bundle's file names (manifest.json, written by the build), or undefined when not built. */
function readManifest(): Manifest | undefined {
  try {
    const m = JSON.parse(readFileSync(new URL('manifest.json', BUNDLE_DIR), 'utf8')) as Partial<Manifest>;
    return typeof m.js === 'string' && typeof m.css === 'string' ? { js: m.js, css: m.css } : undefined;
  } catch {
    return undefined;
  }
}

function securityHeaders(reply: FastifyReply) {
  reply.header('Content-Security-Policy', PAGE_CSP);
  reply.header('X-Content-Type-Options', 'nosniff');
  reply.header('X-Frame-Options', 'DENY');
  reply.header('Referrer-Policy', 'no-referrer');
  reply.header('Cross-Origin-Opener-Policy', 'same-origin');
  reply.header('Cross-Origin-Resource-Policy', 'same-origin');
}

const page = (title: string, tenant: string, head: string, body: string, data = '') => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${esc(title)} · ${esc(tenant)}</title>
${ICON_LINKS}
<link rel="stylesheet" href="${assetUrl('style.css')}">
${head}
</head>
<body${data}>
${body}
</body>
</html>
`;

/** Only paths the console draws, so a return URL never carries anything else back. */
const CONSOLE_PATH = /^\/console(?:\/[A-Za-z0-9._~-]+)*\/?$/;

export function registerConsoleRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const manifest = readManifest();
  const assets = new Set(manifest ? [manifest.js, manifest.css] : []);

  serveBuiltFiles(app, '/console/assets/', BUNDLE_DIR, assets);

  const shell = async (req: FastifyRequest, reply: FastifyReply) => {
    const tenant = await tenantDoc(ctx);
    const name = String(tenant.Name || 'Gatehouse');
    const path = req.url.split('?')[0] ?? '/console';
    securityHeaders(reply);
    reply.header('Cache-Control', 'no-store');
    const p = req.principal;
    if (p?.via !== 'session' || p.userId === '') {
      const back = CONSOLE_PATH.test(path) ? path : '/console';
      const base = await signinBase(ctx);
      const to = base.startsWith('/')
        ? `${base}?return=${encodeURIComponent(back)}`
        : signinLocation(base, back);
      return reply.code(303).header('Location', to).send();
    }
    const user = await ctx.store.get(User, p.userId);
    if (user?.doc.Admin !== true) {
      const who = esc(String(user?.doc.Email || user?.doc.UserName || 'this account'));
      return reply
        .code(403)
        .type('text/html; charset=utf-8')
        .send(
          page(
            'Not an administrator',
            name,
            '',
            `<header class="top"><span class="logo" aria-hidden="true"></span><span class="name">${esc(name)}</span></header>
<main><div class="card"><h1>The console is for administrators</h1>
<p class="lead">You are signed in as ${who}, which is not an administrator of ${esc(name)}.
Ask an administrator if you need access.</p>
<p><a href="/signin/enroll">Your security settings</a> · <a href="/signin/signout">Sign out</a></p></div></main>`,
          ),
        );
    }
    if (!manifest) {
      return reply
        .code(503)
        .type('text/html; charset=utf-8')
        .send(
          page(
            'Console not built',
            name,
            '',
            '<main><div class="card"><h1>The console is not built</h1><p class="lead">Run <code>npm run build</code> and restart the service.</p></div></main>',
          ),
        );
    }
    // What the console needs before its first call: the level the admin API asks for and the
    // session's, so it asks for the step-up at once instead of first drawing a refusal.
    const data =
      ` data-tenant="${esc(name)}" data-need="${requiredLevel(tenant, 'admin')}"` +
      ` data-level="${p.integrityLevel ?? 0}" data-user="${esc(p.userId)}"`;
    return reply
      .type('text/html; charset=utf-8')
      .send(
        page(
          'Console',
          name,
          `<link rel="stylesheet" href="/console/assets/${manifest.css}">\n<script src="/console/assets/${manifest.js}" defer></script>`,
          '<div id="console"><p class="loading">Loading the console…</p></div>',
          data,
        ),
      );
  };
  const OPTIONAL = { config: { auth: 'optional' as const } };
  app.get('/console', OPTIONAL, shell);
  app.get('/console/*', OPTIONAL, shell);
}
