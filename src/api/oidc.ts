import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { InteractionResults, Provider } from 'oidc-provider';
import { signIntent } from '../auth/intents.js';
import { intentDevice } from '../auth/session/authenticator.js';
import { signingInFor } from '../auth/session/complete.js';
import { setSessionCookie } from '../auth/session/cookies.js';
import { endRequestSession, pendingCookies, requestSession } from '../auth/session/sessions.js';
import { ApiError } from '../core/errors.js';
import { err, jsonObject, pathParams, type RouteSchema } from '../core/routeschema.js';
import { signinBase } from '../groups/check.js';
import { App } from '../objects/app.js';
import { issueClientSecret } from '../oidc/clientsecret.js';
import { checkFormToken, formToken, grantConsent, nextStep } from '../oidc/interaction.js';
import { addSigningKey } from '../oidc/keys.js';
import {
  baseUrl,
  fastifyOf,
  issuerOf,
  levelNeeded,
  OIDC_PREFIX,
  providerOf,
  tenantName,
} from '../oidc/provider.js';
import { enforce } from '../policy/decide.js';
import type { ServiceContext } from '../store/service.js';
import { consentPage, messagePage, providerPages, reauthPage } from '../web/oidcpages.js';
import { PAGE_CSP } from '../web/routes.js';
import { principalOf } from './objects.js';

const NONE = { config: { auth: 'none' as const } };
// module-state: a side table on each service's Provider object (its request handler, made once); gone with the provider.
const callbacks = new WeakMap<Provider, ReturnType<Provider['callback']>>();

/**
 * What the provider sees of a request: the scheme and host of the issuer (never the client's
 * Host or X-Forwarded-* headers), the client address Fastify established (server.trustproxy),
 * and the path below the mount point.
 */
function handOver(req: FastifyRequest, reply: FastifyReply, ctx: ServiceContext): IncomingMessage {
  const raw = req.raw;
  const issuer = new URL(issuerOf(ctx.config));
  for (const h of [
    'forwarded',
    'x-forwarded-host',
    'x-forwarded-proto',
    'x-forwarded-for',
    'x-forwarded-port',
  ])
    delete raw.headers[h];
  raw.headers['x-forwarded-host'] = issuer.host;
  raw.headers['x-forwarded-proto'] = issuer.protocol.slice(0, -1);
  raw.headers['x-forwarded-for'] = req.ip;
  fastifyOf.set(raw, { req, reply });
  return raw;
}

/**
 * `then`: where the page's form ends up after the service's redirects (the client's registered
 * redirect URI): CSP form-action covers redirects after a form post, so its origin is allowed too.
 */
function sendPage(reply: FastifyReply, status: number, html: string, then?: string) {
  let csp = PAGE_CSP;
  const origin = then ? URL.parse(then)?.origin : undefined;
  if (origin && origin !== 'null') csp = csp.replace("form-action 'self'", `form-action 'self' ${origin}`);
  reply.header('Content-Security-Policy', csp);
  reply.header('X-Content-Type-Options', 'nosniff');
  reply.header('X-Frame-Options', 'DENY');
  // same-origin, not no-referrer: with no-referrer browsers send "Origin: null" on the page's own
  // form posts, and sameOrigin() needs the real one.
  reply.header('Referrer-Policy', 'same-origin');
  reply.header('Cache-Control', 'no-store');
  return reply.code(status).type('text/html; charset=utf-8').send(html);
}

/** A state-changing form post must come from a page of this service (Origin is set by browsers). */
function sameOrigin(req: FastifyRequest, ctx: ServiceContext): boolean {
  return req.headers.origin === new URL(baseUrl(ctx.config)).origin;
}

/**
 * Gatehouse as an OpenID Connect provider (docs/federation.md): panva's oidc-provider mounted
 * at /oidc (discovery at /oidc/.well-known/openid-configuration), the interaction pages that hand
 * sign-in to Gatehouse's own pages and ask for consent, the client secret of an App, and signing
 * key rotation.
 */
export async function registerOidcRoutes(app: FastifyInstance, ctx: ServiceContext) {
  await registerProviderEndpoints(app, ctx);
  registerInteractionPage(app, ctx);
  registerInteractionForms(app, ctx);
  registerOidcAdministration(app, ctx);
}

/**
 * The provider's own endpoints (the OpenID Connect protocol, described by its discovery document,
 * not by /openapi.json): it reads the body itself (its own 56 kB limit), so this scope parses nothing.
 */
async function registerProviderEndpoints(app: FastifyInstance, ctx: ServiceContext) {
  const provider = () => providerOf(ctx, providerPages);
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
    const pass = async (req: FastifyRequest, reply: FastifyReply) => {
      const p = await provider();
      let cb = callbacks.get(p);
      if (!cb) {
        cb = p.callback();
        callbacks.set(p, cb);
      }
      const raw = handOver(req, reply, ctx);
      // A session token rotated while the provider looks at the session goes out with its answer.
      await requestSession(req, ctx);
      const token = pendingCookies.get(req);
      if (token) {
        pendingCookies.delete(req);
        setSessionCookie(req, reply, token);
        const c = reply.getHeader('set-cookie');
        if (c !== undefined) reply.raw.setHeader('Set-Cookie', (Array.isArray(c) ? c : [c]).map(String));
      }
      const original = raw.url ?? '/';
      (raw as IncomingMessage & { originalUrl?: string }).originalUrl = original;
      raw.url = original.slice(OIDC_PREFIX.length) || '/';
      reply.hijack();
      await cb(raw, reply.raw);
    };
    scope.all(OIDC_PREFIX, NONE, pass);
    scope.all(`${OIDC_PREFIX}/*`, NONE, pass);
  });
}

const interactionPath = (uid: string) => `${OIDC_PREFIX}/interaction/${encodeURIComponent(uid)}`;

/** The interaction of this browser, or a page saying the request is gone. */
async function interaction(ctx: ServiceContext, req: FastifyRequest, reply: FastifyReply) {
  const { uid } = req.params as { uid: string };
  const p = await providerOf(ctx, providerPages);
  try {
    const details = await p.interactionDetails(handOver(req, reply, ctx), reply.raw);
    if (details.uid === uid) return { p, details, uid };
  } catch {
    /* expired, unknown, or another browser's */
  }
  await sendPage(
    reply,
    400,
    messagePage(
      await tenantName(ctx),
      'This sign-in request has expired',
      'Go back to the application and sign in again.',
    ),
  );
  return undefined;
}

const finish = async (reply: FastifyReply, p: Provider, req: FastifyRequest, result: InteractionResults) =>
  reply.redirect(
    await p.interactionResult(req.raw, reply.raw, result, { mergeWithLastSubmission: false }),
    303,
  );

/** The interaction page: on to the sign-in pages, a consent or re-authentication page, or back to the App. */
function registerInteractionPage(app: FastifyInstance, ctx: ServiceContext) {
  app.get(`${OIDC_PREFIX}/interaction/:uid`, NONE, async (req, reply) => {
    const it = await interaction(ctx, req, reply);
    if (!it) return reply;
    const { p, details, uid } = it;
    const clientId = String(details.params.client_id);
    const s = (await requestSession(req, ctx)).session;
    const need = await levelNeeded(ctx, clientId, details.params.acr_values);
    const step = await nextStep(ctx, details, s, need);
    const tenant = await tenantName(ctx);
    switch (step.kind) {
      case 'signin': {
        // Every step of this sign-in applies the App's AccessGroups (the one sign-in completion).
        const signing = await signingInFor(req, reply, ctx, clientId);
        const intent = await signIntent(ctx, {
          sid: signing.id,
          did: intentDevice(signing.deviceId),
          uid: signing.userId,
          method: 'GET',
          path: interactionPath(uid),
          lvl: step.need,
        });
        const base = await signinBase(ctx);
        const to = `${base}${base.includes('?') ? '&' : '?'}return=${encodeURIComponent(interactionPath(uid))}&intent=${encodeURIComponent(intent)}`;
        return reply.redirect(to, 303);
      }
      case 'login':
        return finish(reply, p, req, step.result);
      case 'reauth':
        return sendPage(
          reply,
          200,
          reauthPage(tenant, interactionPath(uid), await formToken(ctx, uid, s?.id ?? '')),
        );
      case 'consent': {
        const appDoc = (await ctx.store.get(App, clientId))?.doc ?? {};
        return sendPage(
          reply,
          200,
          consentPage({
            tenant,
            appName: String(appDoc.Name || clientId),
            appUrl: String(appDoc.URL ?? ''),
            userEmail: String(step.user.Email ?? ''),
            scopes: step.scopes,
            action: `${interactionPath(uid)}/confirm`,
            token: await formToken(ctx, uid, s?.id ?? ''),
          }),
          String(details.params.redirect_uri ?? ''),
        );
      }
      case 'refused':
        return finish(reply, p, req, {
          error: 'access_denied',
          error_description: 'this application is not open to the signed-in user',
        });
      default:
        return finish(reply, p, req, {
          error: 'access_denied',
          error_description: 'the signed-in user changed during sign-in',
        });
    }
  });
}

/** Checks a form post of the interaction pages: same origin, this browser's session, its token. */
async function formPost(ctx: ServiceContext, req: FastifyRequest, reply: FastifyReply) {
  if (!sameOrigin(req, ctx))
    throw new ApiError('CsrfCheckFailed', 'this form must be sent from its own page');
  const it = await interaction(ctx, req, reply);
  if (!it) return undefined;
  const s = (await requestSession(req, ctx)).session;
  const body = (req.body ?? {}) as Record<string, unknown>;
  if (!s || !(await checkFormToken(ctx, it.uid, s.id, body.token)))
    throw new ApiError('CsrfCheckFailed', 'the form token does not belong to this session and request');
  return { ...it, s, body };
}

/** The consent and re-authentication forms of the interaction pages. */
function registerInteractionForms(app: FastifyInstance, ctx: ServiceContext) {
  app.post(`${OIDC_PREFIX}/interaction/:uid/confirm`, NONE, async (req, reply) => {
    const f = await formPost(ctx, req, reply);
    if (!f) return reply;
    const { p, details, s, body } = f;
    if (details.prompt.name !== 'consent' || details.session?.accountId !== s.userId)
      return reply.redirect(interactionPath(f.uid), 303);
    if (body.decision !== 'allow')
      return finish(reply, p, req, {
        error: 'access_denied',
        error_description: 'the user denied the request',
      });
    const result = await grantConsent(p, details);
    return reply.redirect(
      await p.interactionResult(req.raw, reply.raw, result, { mergeWithLastSubmission: true }),
      303,
    );
  });

  app.post(`${OIDC_PREFIX}/interaction/:uid/reauth`, NONE, async (req, reply) => {
    const f = await formPost(ctx, req, reply);
    if (!f) return reply;
    await endRequestSession(req, reply, ctx);
    const base = await signinBase(ctx);
    return reply.redirect(
      `${base}${base.includes('?') ? '&' : '?'}return=${encodeURIComponent(interactionPath(f.uid))}`,
      303,
    );
  });
}

/** An App's client secret and the signing keys (admin). */
function registerOidcAdministration(app: FastifyInstance, ctx: ServiceContext) {
  // Admin: issue (or replace) an App's client secret. Shown once; kept encrypted (the provider
  // compares it in constant time, so it needs the secret itself, not a hash).
  app.post('/apps/:id/oidc/secret', { schema: CLIENT_SECRET }, async (req, reply) => {
    const { id } = req.params as { id: string };
    const secret = await issueClientSecret(ctx, principalOf(req), id);
    reply.header('Cache-Control', 'no-store');
    return reply
      .code(201)
      .type('application/json')
      .send(JSON.stringify({ ClientID: id, ClientSecret: secret }));
  });

  // Admin: a new signing key, published at once by this instance and within a minute by the others,
  // signs once every instance publishes it (PUBLISH_LEAD_MS); the old ones stay published until their tokens expire.
  app.post(`${OIDC_PREFIX}/keys/rotate`, { schema: ROTATE_KEYS }, async (req, reply) => {
    await enforce(ctx, principalOf(req), 'OIDC.rotate-keys', { kind: 'Policy', id: '' });
    const kid = await addSigningKey(ctx);
    await providerOf(ctx, providerPages, true);
    reply.header('Cache-Control', 'no-store');
    return reply
      .code(201)
      .type('application/json')
      .send(JSON.stringify({ KeyID: kid }));
  });
}

const CLIENT_SECRET: RouteSchema = {
  tags: ['OpenID Connect'],
  summary: 'Issue (or replace) an App’s OpenID Connect client secret (admin); shown once',
  params: pathParams('id'),
  response: {
    201: jsonObject('The client credentials', {
      ClientID: { type: 'string' },
      ClientSecret: { type: 'string' },
    }),
    403: err('Not allowed for these credentials'),
    404: err('No such App'),
  },
};

const ROTATE_KEYS: RouteSchema = {
  tags: ['OpenID Connect'],
  summary: 'A new signing key: published at once, used once every instance publishes it (admin)',
  response: {
    201: jsonObject('The new key', { KeyID: { type: 'string' } }),
    403: err('Not allowed for these credentials'),
  },
};
