import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  authorizationCodeGrant,
  buildAuthorizationUrl,
  calculatePKCECodeChallenge,
  fetchProtectedResource,
  fetchUserInfo,
  randomNonce,
  randomPKCECodeVerifier,
  randomState,
} from 'openid-client';
import { ApiError, isApiError } from '../../../core/errors.js';
import { esc } from '../../../core/html.js';
import { isLocalReturnPath } from '../../../core/returnurl.js';
import { decide } from '../../../policy/decide.js';
import type { Doc } from '../../../schema/fields.js';
import type { ServiceContext } from '../../../store/service.js';
import { ownOrigin } from '../../session/authenticator.js';
import { completeSignIn } from '../../session/complete.js';
import {
  ensureSession,
  mutateRequestSession,
  replaceSession,
  requestSession,
} from '../../session/sessions.js';
import { type Factor, FLOW, field, formIntent, formOf } from '../factor.js';
import { credentialChange, credentialChanged } from '../stepup.js';
import { type ProviderIdentity, resolveUser, usableUser } from './account.js';
import { sealClientSecrets } from './clientsecret.js';
import { listProviders, loadProvider, type Provider, providerError } from './provider.js';
import {
  DELETE_AUTH_OAUTH2RP_LINKS_ID,
  GET_AUTH_OAUTH2RP,
  GET_AUTH_OAUTH2RP_ID_CALLBACK,
  GET_AUTH_OAUTH2RP_LINKS,
  POST_AUTH_OAUTH2RP_ID,
} from './schemas.js';
import { deleteLink, saveFlow, takeFlow, userLinks } from './store.js';

/** The name recorded on sessions that signed in through a provider. */
export const FACTOR = 'oauth2rp';
/** User-info answers larger than this are refused (a provider's answer is a small JSON object). */
const MAX_USERINFO = 64 * 1024;

const str = (v: unknown) => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : '');

/**
 * The `next` form field: a return URL (as for /signin?return=), given as the URL itself or as a
 * BrowserLocation JSON object {"URL": "..."}. Only a local path is kept here; an absolute URL is
 * handed to the sign-in page, which checks it against the allowed return origins.
 */
function nextOf(raw: string | undefined): string {
  if (!raw) return '';
  let v = raw;
  if (raw.startsWith('{')) {
    try {
      v = str((JSON.parse(raw) as Doc).URL);
    } catch {
      throw new ApiError('InvalidField', 'next must be a URL or {"URL": "..."}', { field: 'next' });
    }
  }
  if (v.startsWith('/')) return isLocalReturnPath(v) ? v : '';
  return /^https?:\/\/[^\s\\]+$/.test(v) ? v : '';
}

/** The claims of a provider's answer as a provider identity (the mapped names; App.OAuth2.Claims). */
function identityOf(
  p: Provider,
  issuer: string,
  subject: string,
  claims: Doc,
  idToken?: Doc,
): ProviderIdentity {
  const verified = claims[p.claims.EmailVerified];
  let level = p.level;
  if (idToken) {
    const amr = Array.isArray(idToken.amr) ? idToken.amr.map(str) : [];
    const acr = str(idToken.acr);
    if ((acr !== '' && p.multiFactorACR.includes(acr)) || amr.some((a) => p.multiFactorAMR.includes(a)))
      level = Math.max(level, 3);
  }
  return {
    issuer,
    subject,
    email: str(claims[p.claims.Email]).trim().toLowerCase().slice(0, 254),
    emailVerified: verified === true || verified === 'true',
    name: str(claims[p.claims.Name]).trim(),
    level,
  };
}

/** Token exchange and the checks of the answer: who signed in at the provider. */
async function providerIdentity(p: Provider, currentUrl: URL, flow: { nonce: string; verifier: string }) {
  let tokens: Awaited<ReturnType<typeof authorizationCodeGrant>>;
  try {
    tokens = await authorizationCodeGrant(p.config, currentUrl, {
      pkceCodeVerifier: flow.verifier,
      expectedState: currentUrl.searchParams.get('state') ?? '',
      ...(p.oidc ? { expectedNonce: flow.nonce, idTokenExpected: true } : {}),
    });
  } catch (e) {
    throw providerError(e, 'token');
  }
  if (p.oidc) {
    // iss, aud, exp, nonce and the signature were checked by openid-client (provider.ts).
    const id = tokens.claims();
    if (!id) throw new ApiError('FederationFailed', 'the provider sent no ID token');
    let claims: Doc = { ...id };
    if (p.config.serverMetadata().userinfo_endpoint && tokens.access_token) {
      try {
        claims = { ...(await fetchUserInfo(p.config, tokens.access_token, id.sub)), ...id };
      } catch (e) {
        throw providerError(e, 'userinfo');
      }
    }
    return identityOf(p, id.iss, id.sub, claims, id as Doc);
  }
  let claims: Doc;
  try {
    const res = await fetchProtectedResource(
      p.config,
      tokens.access_token,
      new URL(p.userInfoURL),
      'GET',
      undefined,
      new Headers({ accept: 'application/json' }),
    );
    const text = await res.text();
    if (!res.ok || text.length > MAX_USERINFO) throw new Error(`user info answered ${res.status}`);
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new Error('user info is not a JSON object');
    claims = parsed as Doc;
  } catch (e) {
    throw providerError(e, 'userinfo');
  }
  // The issuer of a plain OAuth 2.0 identity is the endpoint that named it.
  return identityOf(p, p.userInfoURL, str(claims[p.claims.Subject]), claims);
}

/** The callback answers a browser: errors are a short page (with the usual X-Error-Code). */
function errorPage(reply: FastifyReply, e: ApiError) {
  reply.header('X-Error-Code', e.code);
  reply.header('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'");
  reply.header('Cache-Control', 'no-store');
  reply.header('Referrer-Policy', 'no-referrer');
  return reply
    .code(e.status)
    .type('text/html; charset=utf-8')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign-in failed</title></head><body><h1>Sign-in failed</h1><p>${esc(e.message)}</p><p><a href="/signin">Back to sign-in</a></p></body></html>`,
    );
}

async function callback(req: FastifyRequest, reply: FastifyReply, ctx: ServiceContext, appId: string) {
  const q = (req.query ?? {}) as Record<string, unknown>;
  const state = typeof q.state === 'string' ? q.state : '';
  if (state === '' || state.length > 512) throw new ApiError('FederationFailed', 'the state is missing');
  const flow = await takeFlow(ctx, state);
  // Only the provider this flow was started with may answer it (mix-up between providers).
  if (!flow || flow.appId !== appId)
    throw new ApiError('FederationFailed', 'unknown, expired or already used state');
  // Only the browser session that started the flow may finish it (login CSRF, code injection).
  const { session } = await requestSession(req, ctx);
  if (!session || session.id !== flow.sessionId)
    throw new ApiError('FederationFailed', 'this sign-in was started in another browser session');
  if (flow.linkUser !== '' && session.userId !== flow.linkUser)
    throw new ApiError('FederationFailed', 'the session changed user since the link was asked for');
  const p = await loadProvider(ctx, appId);
  const current = new URL(flow.data.redirectUri);
  current.search = new URL(req.url, 'http://x').search;
  const who = await providerIdentity(p, current, flow.data);
  if (who.subject === '' || who.subject.length > 255)
    throw new ApiError('FederationFailed', 'the provider named no user (subject claim missing)');
  const userId = await resolveUser(ctx, appId, who, flow.linkUser, p.createUsers);
  await usableUser(ctx, userId);
  const s =
    session.userId === '' || session.userId === userId
      ? session
      : await replaceSession(req, reply, ctx, userId);
  // The one sign-in completion, for the session as this sign-in leaves it.
  const same = s.userId === userId;
  const checked = await completeSignIn(
    ctx,
    { ...s, userId, factors: same ? s.factors : [] },
    {
      factor: FACTOR,
      floor: { FederatedLevel: Math.max(same ? (s.data.FederatedLevel ?? 0) : 0, who.level) },
      client: { address: req.ip, userAgent: String(req.headers['user-agent'] ?? '') },
    },
  );
  await mutateRequestSession(req, reply, ctx, s.id, (cur) => ({
    ...cur,
    userId,
    factors:
      cur.userId === userId && cur.factors.includes(FACTOR)
        ? cur.factors
        : [...(cur.userId === userId ? cur.factors : []), FACTOR],
    data: {
      ...cur.data,
      ...checked,
      FederatedLevel: Math.max(cur.userId === userId ? (cur.data.FederatedLevel ?? 0) : 0, who.level),
    },
  }));
  // The sign-in page finishes: activation, the factors the intent's level or the user's own
  // factors still ask for, then `next` (which it checks against the allowed return origins).
  const to = new URLSearchParams();
  if (flow.data.next) to.set('return', flow.data.next);
  if (flow.data.intent) to.set('intent', flow.data.intent);
  reply.header('Cache-Control', 'no-store');
  return reply.redirect(to.size ? `/signin?${to}` : '/signin', 303);
}

/**
 * Sign-in through other identity providers (docs/federation.md): an App with OAuth2 settings is
 * an upstream provider, OpenID Connect by discovery or plain OAuth 2.0 with a user-info endpoint.
 * Code flow with PKCE, state and nonce; users are linked by the provider's issuer and subject.
 */
export const oauth2rpFactor: Factor = {
  name: FACTOR,
  words: { label: 'your identity provider', proof: 'your identity provider' },
  register(app, ctx) {
    sealClientSecrets(app, ctx);
    // The providers the sign-in page offers (anyone may ask: names and IDs only).
    app.get('/auth/oauth2rp', { ...FLOW, schema: GET_AUTH_OAUTH2RP }, async (_req, reply) =>
      reply.header('Cache-Control', 'no-store').send(await listProviders(ctx)),
    );

    app.post<{ Params: { appID: string } }>(
      '/auth/oauth2rp/:appID',
      { ...FLOW, schema: POST_AUTH_OAUTH2RP_ID },
      async (req, reply) => {
        const form = formOf(req);
        const session = await ensureSession(req, reply, ctx);
        const intent = await formIntent(ctx, form, session);
        const next = nextOf(field(form, 'next', { max: 2048 }));
        const link = field(form, 'link', { max: 8 });
        if (link !== undefined && link !== 'true' && link !== 'false')
          throw new ApiError('InvalidField', 'link must be true or false', { field: 'link' });
        let linkUser = '';
        if (link === 'true') {
          // Linking adds a way to sign in to this account: a credential change (step-up rules).
          const change = await credentialChange(req, ctx, FACTOR, 'set');
          if (change.reset)
            throw new ApiError('Forbidden', 'people link providers to their own account only');
          linkUser = change.userId;
        }
        const p = await loadProvider(ctx, req.params.appID);
        const state = randomState();
        const nonce = randomNonce();
        const verifier = randomPKCECodeVerifier();
        // Each provider has its own callback: a response is only ever taken for the provider asked.
        // server.publicurl when set (never the request's Host then), else this request's origin.
        // Either way the callback only works where this browser's session cookie lives.
        const pub = ctx.config.server.publicurl;
        const origin = pub ? new URL(pub).origin : ownOrigin(req);
        if (origin === '') throw new ApiError('BadRequest', 'the Host header does not name a host');
        const redirectUri = `${origin}/auth/oauth2rp/${encodeURIComponent(p.app.id)}/callback`;
        await saveFlow(
          ctx,
          state,
          { appId: p.app.id, sessionId: session.id, linkUser },
          { nonce, verifier, redirectUri, next, intent: intent ? (field(form, 'intent') ?? '') : '' },
        );
        const params: Record<string, string> = {
          redirect_uri: redirectUri,
          scope: (p.scopes.length ? p.scopes : p.oidc ? ['openid', 'email', 'profile'] : []).join(' '),
          state,
          code_challenge: await calculatePKCECodeChallenge(verifier),
          code_challenge_method: 'S256',
        };
        if (p.oidc) {
          params.nonce = nonce;
          // Ask for acr and amr in the ID token when they may raise the level (OpenID Connect 5.5).
          if (
            (p.multiFactorACR.length > 0 || p.multiFactorAMR.length > 0) &&
            p.config.serverMetadata().claims_parameter_supported === true
          )
            params.claims = JSON.stringify({ id_token: { acr: null, amr: null } });
          if (!params.scope?.split(' ').includes('openid')) params.scope = `openid ${params.scope}`.trim();
        }
        if (params.scope === '') delete params.scope;
        const url = buildAuthorizationUrl(p.config, params);
        return reply.header('Cache-Control', 'no-store').send({ URL: url.href });
      },
    );

    app.get<{ Params: { appID: string } }>(
      '/auth/oauth2rp/:appID/callback',
      { ...FLOW, schema: GET_AUTH_OAUTH2RP_ID_CALLBACK },
      async (req, reply) => {
        try {
          return await callback(req, reply, ctx, req.params.appID);
        } catch (e) {
          if (!isApiError(e)) throw e;
          req.log.info({ code: e.code, app: req.params.appID }, `provider sign-in refused: ${e.message}`);
          return errorPage(reply, e);
        }
      },
    );

    // The caller's links (administrators: ?user=<id>). A link is a way to sign in: never secret,
    // but only its owner and administrators see it.
    app.get('/auth/oauth2rp/links', { ...FLOW, schema: GET_AUTH_OAUTH2RP_LINKS }, async (req, reply) => {
      const p = req.principal;
      if (!p) throw new ApiError('Unauthenticated', 'authentication required');
      const named = ((req.query ?? {}) as Record<string, unknown>).user;
      const userId = typeof named === 'string' && named !== '' ? named : p.userId;
      const may = await decide(ctx, p, 'User.links', { kind: 'User', id: userId, userId });
      if (!may.Allowed)
        throw new ApiError('Forbidden', "only administrators may list another user's links", {
          rule: may.Rule,
        });
      const rows = await userLinks(ctx, userId);
      return reply.header('Cache-Control', 'no-store').send(
        rows.map((r) => ({
          ID: r.id,
          AppID: r.app_id,
          Issuer: r.issuer,
          Subject: r.subject,
          Email: r.email,
          CreateTime: new Date(Number(r.create_time)).toISOString(),
          LastUsed: new Date(Number(r.last_used)).toISOString(),
        })),
      );
    });

    app.delete<{ Params: { id: string } }>(
      '/auth/oauth2rp/links/:id',
      { ...FLOW, schema: DELETE_AUTH_OAUTH2RP_LINKS_ID },
      async (req, reply) => {
        const change = await credentialChange(req, ctx, FACTOR, 'remove');
        if (!(await deleteLink(ctx, req.params.id, change.userId)))
          throw new ApiError('NotFound', `link ${req.params.id} does not exist`);
        await credentialChanged(req, reply, ctx, change, FACTOR);
        return reply.code(204).send();
      },
    );
  },
};
