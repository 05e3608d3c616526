import type { FastifyReply, FastifyRequest } from 'fastify';
import { classify, requiredLevel, tenantDoc } from '../auth/integrity.js';
import type { Principal } from '../auth/principal.js';
import { ownOrigin } from '../auth/session/authenticator.js';
import { ApiError } from '../core/errors.js';
import { esc } from '../core/html.js';
import { signinBase } from '../groups/check.js';
import { actsAsUser } from '../groups/lifecycle.js';
import { iterateObjects } from '../groups/report.js';
import { App } from '../objects/app.js';
import type { ServiceContext } from '../store/service.js';
import { sendHtml } from './errorpage.js';
import { layout } from './pages.js';

/*
 * What the group pages (groups.ts, approvals.ts) share: who is signed in (or the way to sign in),
 * their form fields, their page frame, and errors answered as pages.
 */

export const OPTIONAL = { config: { auth: 'optional' as const } };

/** A page in the sign-in pages' design (src/web/pages.ts), signed in (the top bar says so). */
export async function page(
  ctx: ServiceContext,
  reply: FastifyReply,
  status: number,
  title: string,
  main: string,
  which: 'groups' | 'approvals' = 'groups',
  signedIn = true,
) {
  const tenant = String((await tenantDoc(ctx)).Name || 'Gatehouse');
  // Forms post back here: 'same-origin' keeps the Origin header the CSRF check needs.
  const referrer = 'same-origin';
  return sendHtml(
    reply,
    status,
    layout({ page: which, title, tenant, signedIn, wide: which === 'approvals', main, referrer }),
    referrer,
    { formRedirects: which === 'groups' },
  );
}

/**
 * A time as the reader's clock shows it: the page's script (app.js) rewrites each <time
 * data-local> in the browser's own time zone; without it the UTC time stays, said as such.
 */
export function localTime(iso: unknown): string {
  const ms = Date.parse(String(iso));
  if (!Number.isFinite(ms)) return '';
  const d = new Date(ms).toISOString();
  return `<time datetime="${esc(d)}" data-local>${esc(`${d.slice(0, 10)} ${d.slice(11, 16)} UTC`)}</time>`;
}

export async function returnOrigins(ctx: ServiceContext, req: FastifyRequest): Promise<string[]> {
  const tenant = await tenantDoc(ctx);
  const origins = [ownOrigin(req)];
  if (Array.isArray(tenant.AllowedReturnOrigins)) origins.push(...(tenant.AllowedReturnOrigins as string[]));
  if (typeof tenant.SigninURL === 'string' && tenant.SigninURL !== '') {
    try {
      origins.push(new URL(tenant.SigninURL).origin);
    } catch {
      /* not a URL: allows nothing */
    }
  }
  // The applications registered here (App.URL): the proxy in front of one sends people to these
  // pages with `next` on it, and the sign-in flow already returns there.
  for await (const app of iterateObjects(ctx, App, {})) {
    try {
      if (typeof app.URL === 'string' && app.URL !== '') origins.push(new URL(app.URL).origin);
    } catch {
      /* not a URL: allows nothing */
    }
  }
  return origins;
}

/** The signed-in person, or undefined (then the caller redirects to sign-in). */
export async function signedIn(ctx: ServiceContext, req: FastifyRequest): Promise<Principal | undefined> {
  const p = req.principal;
  if (!p || p.userId === '' || !actsAsUser(p)) return undefined;
  if (p.via === 'session') {
    // These routes take optional auth (to redirect rather than answer 401), so the tenant's
    // integrity levels are applied here.
    const need = requiredLevel(await tenantDoc(ctx), classify(req, p.scopes.has('admin')));
    if ((p.integrityLevel ?? 0) < need) return undefined;
  }
  return p;
}

/**
 * To the sign-in pages, which come back to `back` (a path here). When they are on this service
 * the return is that path: nothing the client sent (Host, X-Forwarded-*) is in the URL. A
 * sign-in site elsewhere (Tenant.SigninURL) needs an absolute URL; it checks it against its
 * allow-list.
 */
export async function toSignin(ctx: ServiceContext, req: FastifyRequest, reply: FastifyReply, back: string) {
  const base = await signinBase(ctx);
  const ret = base.startsWith('/') ? back : `${ownOrigin(req)}${back}`;
  return reply.redirect(`${base}?return=${encodeURIComponent(ret)}`, 303);
}

export const formOf = (req: FastifyRequest): Record<string, string> => {
  const body = (req.body ?? {}) as Record<string, unknown>;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(body)) {
    if (typeof v !== 'string') throw new ApiError('BadRequest', `${k} may be given only once`, { field: k });
    out[k] = v;
  }
  return out;
};

export function reasonField(form: Record<string, string>): string {
  const r = form.reason ?? '';
  if (r.length > 1024)
    throw new ApiError('InvalidField', 'the reason is longer than 1024 characters', { field: 'reason' });
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(r))
    throw new ApiError('InvalidField', 'the reason must not contain control characters', { field: 'reason' });
  return r;
}

/** Renders an ApiError as an HTML page (these are pages, not API responses). */
export async function guarded(ctx: ServiceContext, reply: FastifyReply, fn: () => Promise<unknown>) {
  try {
    return await fn();
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    reply.header('X-Error-Code', e.code);
    return page(
      ctx,
      reply,
      e.status,
      'That did not work',
      `<section class="card" aria-labelledby="h-error"><h1 id="h-error">That did not work</h1>
<p class="alert error" id="error-message">${esc(e.message)}</p><p><a href="/signin/approvals">Access requests</a></p>
<p class="muted">Error ${e.status} · ${esc(e.code)}</p></section>`,
    );
  }
}
