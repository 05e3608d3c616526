import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { formOf } from '../auth/factors/factor.js';
import { tenantDoc } from '../auth/integrity.js';
import { checkCsrf } from '../auth/session/authenticator.js';
import { completeSetupLink, linkGone, setupLinkUser } from '../auth/setuplinks.js';
import { ApiError } from '../core/errors.js';
import { esc } from '../core/html.js';
import { User } from '../objects/user.js';
import type { ServiceContext } from '../store/service.js';
import { sendHtml } from './errorpage.js';
import { layout } from './pages.js';

/**
 * The page a one-time sign-in URL opens (/signin/setup?code=<token>: the first start with
 * bootstrap.email, `gatehouse recover`; src/auth/setuplinks.ts). It works without a script: a
 * plain form that posts the code and the new password back here. Opening the page spends
 * nothing (a link scanner may fetch it); only the form's post uses the code up. `code` is a query
 * parameter the request log redacts (src/core/redact.ts), and the page sends no Referer.
 */

const tenantName = async (ctx: ServiceContext) => String((await tenantDoc(ctx)).Name || 'Gatehouse');

function setupPage(tenant: string, code: string, email: string, error = ''): string {
  return layout({
    page: 'setup',
    title: 'Choose your password',
    tenant,
    referrer: 'same-origin',
    main: `
<section class="card" aria-labelledby="h-setup">
  <h1 id="h-setup">Choose your password</h1>
  <p class="lead">for <strong>${esc(email)}</strong>. This link works once; afterwards you sign in with your e-mail address and this password.</p>
  ${error ? `<p class="alert error" id="setup-error" role="alert">${esc(error)}</p>` : ''}
  <form method="post" action="/signin/setup" id="f-setup">
    <input type="hidden" name="code" value="${esc(code)}">
    <label for="setup-password">New password</label>
    <input id="setup-password" name="password" type="password" autocomplete="new-password" minlength="1" required>
    <label for="setup-password2">Repeat the new password</label>
    <input id="setup-password2" name="password2" type="password" autocomplete="new-password" required>
    <button type="submit" class="block">Save password and sign in</button>
  </form>
</section>`,
  });
}

async function emailOf(ctx: ServiceContext, userId: string) {
  const user = await ctx.store.get(User, userId);
  return String(user?.doc.Email || user?.doc.UserName || userId);
}

export function registerSetupPage(app: FastifyInstance, ctx: ServiceContext) {
  app.get('/signin/setup', { config: { auth: 'none' } }, async (req: FastifyRequest, reply: FastifyReply) => {
    const code = String((req.query as Record<string, unknown>).code ?? '');
    const userId = await setupLinkUser(ctx, code);
    if (!userId) throw linkGone();
    return sendHtml(
      reply,
      200,
      setupPage(await tenantName(ctx), code, await emailOf(ctx, userId)),
      'same-origin',
    );
  });

  app.post('/signin/setup', { config: { auth: 'none' } }, async (req, reply) => {
    // A browser's post carries Origin: it must be this service's (login CSRF); tools send none.
    if (req.headers.origin !== undefined) checkCsrf(req);
    const form = formOf(req);
    const one = (name: string) => {
      const v = form[name];
      if (typeof v !== 'string')
        throw new ApiError('BadRequest', `${name} must be given once`, { field: name });
      return v;
    };
    const code = one('code');
    const password = one('password');
    const again = form.password2 === undefined ? password : one('password2');
    const userId = await setupLinkUser(ctx, code);
    if (!userId) throw linkGone();
    const retry = async (message: string) =>
      sendHtml(
        reply,
        400,
        setupPage(await tenantName(ctx), code, await emailOf(ctx, userId), message),
        'same-origin',
      );
    if (password !== again) return retry('The two passwords are not the same. Please type them again.');
    try {
      await completeSetupLink(req, reply, ctx, code, password);
    } catch (e) {
      if (e instanceof ApiError && e.code === 'Invalid Field') return retry(`The ${e.message.slice(4)}.`);
      throw e;
    }
    return reply.redirect('/signin/enroll', 303);
  });
}
