/**
 * Real upstream identity providers for the relying-party tests, in the test process:
 * panva's oidc-provider as an OpenID Connect provider, and a GitHub-style plain OAuth 2.0 server
 * (authorize, token, /user) written here. Both listen on 127.0.0.1 (the service allows plain HTTP
 * to loopback providers only).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { decodeJwt, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import Provider, { type KoaContextWithOIDC } from 'oidc-provider';
import { freePort } from '../../net.js';

export interface UpstreamAccount {
  sub: string;
  email?: string;
  email_verified?: boolean;
  name?: string;
}

/** How the next sign-in at the upstream goes: who signs in, and what acr/amr it reports. */
export interface NextLogin {
  account: string;
  amr?: string[];
  acr?: string;
}

async function readBody(req: IncomingMessage): Promise<URLSearchParams> {
  let s = '';
  for await (const c of req) s += c;
  return new URLSearchParams(s);
}

async function listen(server: Server, port: number) {
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
}

export interface UpstreamOP {
  issuer: string;
  accounts: Map<string, UpstreamAccount>;
  /** Set: the interaction signs this account in without a page. Unset: a sign-in form is shown. */
  next: NextLogin | undefined;
  provider: Provider;
  /**
   * Set: every ID token the token endpoint issues is rewritten by it and signed again, with the
   * provider's own key (`foreignKey: false`) or a key the provider never published.
   */
  tamper: ((claims: JWTPayload) => JWTPayload) | undefined;
  foreignKey: boolean;
  close(): Promise<void>;
}

/**
 * An OpenID Connect provider (oidc-provider 8) with the given clients. The interaction is ours:
 * a small form (for the browser tests) or an automatic sign-in as `next` (API tests); consent is
 * pre-granted, as for a company's own IdP.
 */
export async function startUpstreamOP(
  clients: { client_id: string; client_secret?: string; redirect_uris: string[] }[],
): Promise<UpstreamOP> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const accounts = new Map<string, UpstreamAccount>();
  const op: UpstreamOP = {
    issuer,
    accounts,
    next: undefined,
    provider: undefined as unknown as Provider,
    tamper: undefined,
    foreignKey: false,
    close: async () => undefined,
  };
  const own = await generateKeyPair('RS256', { extractable: true });
  const foreign = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(own.privateKey)), kid: 'op-key-1', alg: 'RS256', use: 'sig' };
  const provider = new Provider(issuer, {
    clients: clients.map((c) => ({
      ...c,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: c.client_secret ? 'client_secret_basic' : 'none',
    })),
    claims: {
      acr: null,
      amr: null,
      auth_time: null,
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name'],
    },
    scopes: ['openid', 'email', 'profile'],
    features: { devInteractions: { enabled: false }, claimsParameter: { enabled: true } },
    pkce: { required: () => true },
    cookies: { keys: [randomBytes(16).toString('hex')] },
    jwks: { keys: [jwk] },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(_ctx, sub) {
      const a = accounts.get(sub);
      if (!a) return undefined;
      return { accountId: sub, claims: async () => ({ ...a }) };
    },
    async loadExistingGrant(ctx: KoaContextWithOIDC) {
      const clientId = ctx.oidc.client?.clientId ?? '';
      const accountId = ctx.oidc.session?.accountId ?? '';
      const grant = new ctx.oidc.provider.Grant({ clientId, accountId });
      grant.addOIDCScope('openid email profile');
      await grant.save();
      return grant;
    },
  });
  provider.use(async (ctx, next) => {
    if (ctx.path !== '/token') return next();
    await next();
    const body = ctx.body as { id_token?: string } | undefined;
    if (!op.tamper || !body?.id_token) return;
    const claims = op.tamper(decodeJwt(body.id_token));
    body.id_token = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: 'op-key-1' })
      .sign(op.foreignKey ? foreign.privateKey : own.privateKey);
  });
  provider.use(async (ctx, next) => {
    const m = /^\/interaction\/([^/]+)$/.exec(ctx.path);
    if (!m) return next();
    const finish = async (login: NextLogin) => {
      const result = { login: { accountId: login.account, amr: login.amr, acr: login.acr } };
      const to = await provider.interactionResult(ctx.req, ctx.res, result, {
        mergeWithLastSubmission: false,
      });
      ctx.status = 303;
      ctx.redirect(to);
    };
    if (ctx.method === 'GET' && op.next) return finish(op.next);
    if (ctx.method === 'GET') {
      ctx.type = 'html';
      ctx.body = `<!doctype html><title>Upstream IdP</title><h1>Upstream IdP</h1><form method="post"><label>Account <input name="login" id="login"></label><button id="upstream-signin">Sign in</button></form>`;
      return;
    }
    const form = await readBody(ctx.req);
    return finish({ account: form.get('login') ?? '' });
  });
  const server = createServer(provider.callback());
  await listen(server, port);
  op.provider = provider;
  op.close = () => new Promise<void>((r) => server.close(() => r()));
  return op;
}

export interface FakeGitHub {
  origin: string;
  clientId: string;
  clientSecret: string;
  /** GitHub users by login: id (a number, as GitHub's), name, e-mail (null when private). */
  users: Map<string, { id: number; login: string; name: string; email: string | null }>;
  /** Set: authorize approves as this login at once. Unset: a page with a button. */
  next: string | undefined;
  /** Codes issued (with what they were issued for), to inspect in tests. */
  codes: Map<string, { login: string; redirectUri: string; challenge: string }>;
  close(): Promise<void>;
}

/**
 * A GitHub-style OAuth 2.0 server: /login/oauth/authorize, /login/oauth/access_token (checks the
 * client secret, the redirect URI, PKCE S256, single-use codes) and /user (bearer token). No ID
 * token, no issuer parameter, the user ID is a number in `id`, as GitHub's.
 */
export async function startFakeGitHub(): Promise<FakeGitHub> {
  const { createHash } = await import('node:crypto');
  const port = await freePort();
  const gh: FakeGitHub = {
    origin: `http://127.0.0.1:${port}`,
    clientId: 'Iv1.gatehouse-test',
    clientSecret: randomBytes(20).toString('hex'),
    users: new Map(),
    next: undefined,
    codes: new Map(),
    close: async () => undefined,
  };
  const tokens = new Map<string, string>();
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', gh.origin);
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (url.pathname === '/login/oauth/authorize') {
      const p = url.searchParams;
      const approve = (login: string) => {
        const code = randomBytes(10).toString('hex');
        gh.codes.set(code, {
          login,
          redirectUri: p.get('redirect_uri') ?? '',
          challenge: p.get('code_challenge') ?? '',
        });
        const to = new URL(p.get('redirect_uri') ?? '');
        to.searchParams.set('code', code);
        to.searchParams.set('state', p.get('state') ?? '');
        res.writeHead(302, { location: to.href });
        res.end();
      };
      if (p.get('client_id') !== gh.clientId) return json(400, { error: 'unknown client' });
      if (req.method === 'POST') return approve((await readBody(req)).get('login') ?? '');
      if (gh.next) return approve(gh.next);
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(
        `<!doctype html><title>GitHub (fake)</title><h1>Authorize Gatehouse</h1><form method="post" action="${url.pathname}${url.search.replace(/"/g, '&quot;')}"><label>Login <input name="login" id="gh-login"></label><button id="gh-authorize">Authorize</button></form>`,
      );
      return;
    }
    if (url.pathname === '/login/oauth/access_token' && req.method === 'POST') {
      const f = await readBody(req);
      const code = f.get('code') ?? '';
      const c = gh.codes.get(code);
      gh.codes.delete(code);
      const challenge = createHash('sha256')
        .update(f.get('code_verifier') ?? '')
        .digest('base64url');
      if (
        !c ||
        f.get('client_id') !== gh.clientId ||
        f.get('client_secret') !== gh.clientSecret ||
        f.get('redirect_uri') !== c.redirectUri ||
        challenge !== c.challenge
      )
        return json(400, { error: 'bad_verification_code' });
      const token = `gho_${randomBytes(16).toString('hex')}`;
      tokens.set(token, c.login);
      return json(200, { access_token: token, token_type: 'bearer', scope: 'read:user' });
    }
    if (url.pathname === '/user') {
      const login = tokens.get((req.headers.authorization ?? '').replace(/^Bearer /i, ''));
      const u = login ? gh.users.get(login) : undefined;
      if (!u) return json(401, { message: 'Bad credentials' });
      return json(200, u);
    }
    json(404, { message: 'Not Found' });
  });
  await listen(server, port);
  gh.close = () => new Promise<void>((r) => server.close(() => r()));
  return gh;
}
