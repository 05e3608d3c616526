import { hkdfSync } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Provider, {
  type Configuration,
  type errors,
  interactionPolicy,
  type KoaContextWithOIDC,
} from 'oidc-provider';
import { userUsable } from '../auth/apikeys.js';
import { requiredLevel, tenantDoc } from '../auth/integrity.js';
import { clearSessionCookie } from '../auth/session/cookies.js';
import { secretsKey } from '../auth/session/keys.js';
import { deleteSession, requestSession } from '../auth/session/sessions.js';
import type { ServiceConfig } from '../config/index.js';
import { parseListen } from '../config/setting.js';
import { App } from '../objects/app.js';
import { User } from '../objects/user.js';
import { appIdServesUser } from '../policy/apps.js';
import { perService, type ServiceContext, stateOf } from '../store/service.js';
import { ACR_VALUES, findAccountFor, levelOfAcr } from './account.js';
import { StoreAdapter } from './adapter.js';
import { clientOf, oidcSettings } from './clients.js';
import { type KeyTimes, loadKeySet, SIGNING_ALG } from './keys.js';

/** Where the provider is mounted under the service's base URL. */
export const OIDC_PREFIX = '/oidc';
/** Lifetimes, in seconds. */
export const TTL = {
  AccessToken: 600,
  ClientCredentials: 600,
  AuthorizationCode: 60,
  IdToken: 3600,
  RefreshToken: 14 * 86400,
  Grant: 14 * 86400,
  Interaction: 600,
  Session: 14 * 86400,
};
export const KEY_TIMES: KeyTimes = {
  rotateAfterMs: 30 * 86400_000,
  // An ID token lives an hour; keep a replaced key an hour more (logout's id_token_hint, clock skew).
  publishAfterMs: 2 * TTL.IdToken * 1000,
};
/** How often an instance looks for keys another instance created (rotation, first start). */
const KEYS_RECHECK_MS = 60_000;

/** The service's public base URL: server.publicurl, else the listen address. */
export function baseUrl(config: ServiceConfig): string {
  if (config.server.publicurl) return config.server.publicurl.replace(/\/+$/, '');
  const { host, port } = parseListen(config.server.listen);
  const scheme = config.server.cert ? 'https' : 'http';
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
export const issuerOf = (config: ServiceConfig) => `${baseUrl(config)}${OIDC_PREFIX}`;

/** The Fastify request and reply behind a raw request handed to the provider. */
// module-state: a per-request side table (the Fastify request behind a raw one); gone with the request.
export const fastifyOf = new WeakMap<IncomingMessage, { req: FastifyRequest; reply: FastifyReply }>();

export const tenantName = async (ctx: ServiceContext) => String((await tenantDoc(ctx)).Name || 'Gatehouse');

/** The HTML the provider renders itself, supplied by the pages layer (src/web/oidcpages.ts). */
export interface ProviderPages {
  logout(tenant: string, form: string, clientName: string): string;
  loggedOut(tenant: string, clientName: string): string;
  error(tenant: string, error: string, description: string): string;
}

/**
 * The level a person must have reached to sign in to this client: the App's MinLevel (0: the
 * tenant's IntegrityRead), raised by the acr_values the client asks for.
 */
export async function levelNeeded(
  ctx: ServiceContext,
  clientId: string,
  acrValues: unknown,
): Promise<number> {
  const app = await ctx.store.get(App, clientId);
  const min = app ? oidcSettings(app.doc).MinLevel : 0;
  let need = min > 0 ? min : requiredLevel(await tenantDoc(ctx), 'read');
  for (const v of String(acrValues ?? '').split(' ')) need = Math.max(need, levelOfAcr(v) ?? 0);
  return need;
}

/**
 * The provider's own sign-in state is a convenience; Gatehouse's session is the truth. Before any
 * authorization is answered from a provider session, the browser's Gatehouse session must still
 * exist, belong to the same user, that user must still be usable and served by the client's App,
 * and its level must reach the client's; otherwise the login prompt runs again (and prompt=none fails with login_required).
 */
function gatehouseSessionCheck(ctx: ServiceContext) {
  return new interactionPolicy.Check(
    'gatehouse_session',
    'the Gatehouse session ended, changed user or lacks the integrity level',
    'login_required',
    async (kctx: KoaContextWithOIDC) => {
      const { oidc } = kctx;
      if (!oidc.session?.accountId) return interactionPolicy.Check.NO_NEED_TO_PROMPT;
      const f = fastifyOf.get(kctx.req);
      if (!f) return interactionPolicy.Check.REQUEST_PROMPT;
      const s = (await requestSession(f.req, ctx)).session;
      if (!s || s.userId !== oidc.session.accountId || s.expireTime <= Date.now())
        return interactionPolicy.Check.REQUEST_PROMPT;
      const user = await ctx.store.get(User, s.userId);
      if (!user || !userUsable(user.doc)) return interactionPolicy.Check.REQUEST_PROMPT;
      const need = await levelNeeded(ctx, oidc.client?.clientId ?? '', oidc.params?.acr_values);
      if (s.level < need) return interactionPolicy.Check.REQUEST_PROMPT;
      // The App must still serve the user (src/policy/apps.ts); the interaction then refuses.
      const served = await appIdServesUser(ctx, oidc.client?.clientId ?? '', s.userId, {
        level: s.level,
        ...(s.data.Location ? { location: s.data.Location } : {}),
      });
      if (!served.Allowed) return interactionPolicy.Check.REQUEST_PROMPT;
      // The provider session says what its login proved: a client that needs more needs a new login.
      if ((levelOfAcr(oidc.session.acr) ?? 0) < need) return interactionPolicy.Check.REQUEST_PROMPT;
      return interactionPolicy.Check.NO_NEED_TO_PROMPT;
    },
  );
}

async function configuration(
  ctx: ServiceContext,
  keys: object[],
  pages: ProviderPages,
): Promise<Configuration> {
  const cookieKey = Buffer.from(
    hkdfSync('sha256', await secretsKey(ctx), Buffer.alloc(0), 'gatehouse oidc cookies', 32),
  ).toString('base64url');
  const policy = interactionPolicy.base();
  policy.get('login')?.checks.add(gatehouseSessionCheck(ctx));
  const html = (kctx: KoaContextWithOIDC, body: string) => {
    kctx.type = 'html';
    // The logout form redirects to the client's (registered, already checked) post-logout URI.
    const then = URL.parse(String(kctx.oidc?.params?.post_logout_redirect_uri ?? ''))?.origin;
    const formAction = then && then !== 'null' ? `'self' ${then}` : "'self'";
    kctx.set(
      'Content-Security-Policy',
      `default-src 'none'; style-src 'self'; img-src 'self' data:; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`,
    );
    kctx.set('X-Frame-Options', 'DENY');
    kctx.set('Referrer-Policy', 'no-referrer');
    kctx.set('Cache-Control', 'no-store');
    kctx.body = body;
  };
  return {
    adapter: (name: string) => new StoreAdapter(ctx, name),
    findAccount: findAccountFor(ctx),
    jwks: { keys: keys as never },
    cookies: {
      keys: [cookieKey],
      names: { session: 'gh_oidc_session', interaction: 'gh_oidc_interaction', resume: 'gh_oidc_resume' },
      long: { signed: true, httpOnly: true, sameSite: 'lax' },
      short: { signed: true, httpOnly: true, sameSite: 'lax' },
    },
    claims: {
      acr: null,
      amr: null,
      auth_time: null,
      sid: null,
      iss: null,
      // Every ID token says how the person signed in (the session's level and factors).
      openid: ['sub', 'acr', 'amr', 'auth_time'],
      email: ['email'],
      profile: ['name', 'given_name', 'family_name', 'preferred_username'],
      groups: ['groups'],
    },
    scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
    // Claims of the granted scopes go into the ID token too (the groups, for one).
    conformIdTokenClaims: false,
    acrValues: ACR_VALUES,
    features: {
      devInteractions: { enabled: false },
      // A client learns about its own tokens only (the library lets any confidential client
      // introspect every token; Gatehouse has no separate resource servers to need that).
      introspection: {
        enabled: true,
        allowedPolicy: (_kctx, client, token) => token.clientId === client.clientId,
      },
      revocation: { enabled: true },
      userinfo: { enabled: true },
      clientCredentials: { enabled: true },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: async (kctx, form) =>
          html(kctx, pages.logout(await tenantName(ctx), form, kctx.oidc.client?.clientName ?? '')),
        postLogoutSuccessSource: async (kctx) =>
          html(kctx, pages.loggedOut(await tenantName(ctx), kctx.oidc.client?.clientName ?? '')),
      },
    },
    renderError: async (kctx, out) =>
      html(kctx, pages.error(await tenantName(ctx), String(out.error), String(out.error_description ?? ''))),
    pkce: { methods: ['S256'], required: () => true },
    rotateRefreshToken: true,
    // Refresh tokens for every client allowed the grant (no offline_access dance); they die with
    // the grant (revocation, reuse, logout of a grant without offline_access).
    issueRefreshToken: (_kctx, client) => client.grantTypeAllowed('refresh_token'),
    extraTokenClaims: (kctx) => {
      const acr = kctx.oidc.entities.AuthorizationCode?.acr ?? kctx.oidc.entities.RefreshToken?.acr;
      return acr ? { acr } : undefined;
    },
    ttl: TTL,
    // Browsers may call the token, userinfo, introspection and revocation endpoints from the
    // origins of the client's registered redirect URIs (a single-page app), and from no other.
    clientBasedCORS: (_kctx, origin, client) =>
      client.redirectUris?.some((u) => URL.parse(u)?.origin === origin) === true,
    clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'none'],
    enabledJWA: {
      idTokenSigningAlgValues: [SIGNING_ALG],
      userinfoSigningAlgValues: [SIGNING_ALG],
      introspectionSigningAlgValues: [SIGNING_ALG],
      requestObjectSigningAlgValues: [SIGNING_ALG],
      authorizationSigningAlgValues: [SIGNING_ALG],
    },
    responseTypes: ['code'],
    interactions: {
      policy,
      url: (_kctx, interaction) => `${OIDC_PREFIX}/interaction/${interaction.uid}`,
    },
  } satisfies Configuration;
}

interface Holder {
  provider: Promise<Provider>;
  version: string;
  checked: number;
  /** A published key begins to sign then: the keys are loaded again from that moment. */
  nextChange?: number;
}
/** The service's provider, once built (src/store/service.ts). */
const PROVIDER = perService<{ holder?: Holder }>('OpenID Connect provider', () => ({}));

async function build(ctx: ServiceContext, pages: ProviderPages, keys: object[]): Promise<Provider> {
  const conf = await configuration(ctx, keys, pages);
  // Clients are the Apps (clients.ts), read per request: an App's change applies at once.
  conf.adapter = (name: string) => {
    const a = new StoreAdapter(ctx, name);
    if (name === 'Client') a.find = (id: string) => clientOf(ctx, id) as never;
    return a;
  };
  const provider = new Provider(issuerOf(ctx.config), conf);
  // Redirect URIs match as strings, exactly (OAuth 2.0 Security BCP): the library compares them
  // after URL parsing, which lets ".../cb/../cb" or a default port through. Registered URIs are
  // canonical (App.OIDC, checkRedirectUri), so an exact match is also the normalized one.
  const proto = provider.Client.prototype as {
    redirectUriAllowed(v: string): boolean;
    postLogoutRedirectUriAllowed(v: string): boolean;
    redirectUris?: string[];
    postLogoutRedirectUris?: string[];
  };
  proto.redirectUriAllowed = function (this: typeof proto, v: string) {
    return typeof v === 'string' && (this.redirectUris ?? []).includes(v);
  };
  proto.postLogoutRedirectUriAllowed = function (this: typeof proto, v: string) {
    return typeof v === 'string' && (this.postLogoutRedirectUris ?? []).includes(v);
  };
  // The service decides the client's address and scheme (server.trustproxy); the handler sets
  // X-Forwarded-* from what Fastify established before handing a request over (api/oidc.ts).
  provider.proxy = true;
  // "Sign out" on the logout page ends the Gatehouse session in this browser too (single sign-out).
  provider.use(async (kctx, next) => {
    await next();
    if (kctx.oidc?.route !== 'end_session_confirm' || kctx.status !== 303 || !kctx.oidc.params?.logout)
      return;
    const f = fastifyOf.get(kctx.req);
    if (!f) return;
    const st = await requestSession(f.req, ctx);
    if (st.session) await deleteSession(ctx, st.session.id);
    st.session = undefined;
    clearSessionCookie(f.req, f.reply);
    const cookies = f.reply.getHeader('set-cookie');
    if (cookies !== undefined)
      kctx.append('Set-Cookie', (Array.isArray(cookies) ? cookies : [cookies]).map(String));
  });
  provider.on('server_error', (_kctx: unknown, err: Error) =>
    ctx.logger.error({ err }, 'oidc provider error'),
  );
  return provider;
}

/**
 * The provider of this service (one per database handle), built on first use and rebuilt when
 * the published signing keys change (rotation here, or seen from another instance within
 * KEYS_RECHECK_MS).
 */
export async function providerOf(
  ctx: ServiceContext,
  pages: ProviderPages,
  force = false,
): Promise<Provider> {
  const now = Date.now();
  const slot = stateOf(ctx, PROVIDER);
  let h = slot.holder;
  if (
    h &&
    !force &&
    now - h.checked < KEYS_RECHECK_MS &&
    !(h.nextChange !== undefined && now >= h.nextChange)
  )
    return h.provider;
  const set = await loadKeySet(ctx, KEY_TIMES);
  if (h && h.version === set.version) {
    h.checked = now;
    h.nextChange = set.nextChange;
    return h.provider;
  }
  const provider = build(ctx, pages, set.keys);
  h = { provider, version: set.version, checked: now, nextChange: set.nextChange };
  const mine = h;
  slot.holder = mine;
  provider.catch(() => {
    if (slot.holder === mine) slot.holder = undefined;
  });
  return provider;
}

export type OidcError = errors.OIDCProviderError;
