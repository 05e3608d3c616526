import * as client from 'openid-client';
import { expect } from 'vitest';
import { type Backend, startTestService, type TestService } from '../helpers.js';
import { type Account, account, Browser, signIn } from '../kit/index.js';
import { freePort } from '../net.js';

/**
 * Shared steps of the OpenID provider tests: the service listening on a real port (openid-client
 * speaks HTTP), Apps registered as clients, a cookie-keeping browser over real HTTP, and the
 * browser's part of the authorization code flow.
 */
export interface OidcService extends TestService {
  base: string;
  issuer: string;
}

export async function startOidcService(backend: Backend, env: NodeJS.ProcessEnv = {}): Promise<OidcService> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const s = await startTestService(backend, { SVC_SERVER_PUBLICURL: base, ...env });
  await s.app.listen({ host: '127.0.0.1', port });
  return Object.assign(s, { base, issuer: `${base}/oidc` });
}

export interface ClientApp {
  id: string;
  secret?: string;
  redirect: string;
  postLogout: string;
}

let apps = 0;
/** An App registered as a client (confidential unless `public`), with its secret when confidential. */
export async function makeClient(
  s: OidcService,
  o: {
    public?: boolean;
    cc?: boolean;
    minLevel?: number;
    redirects?: string[];
    postLogout?: string[];
    name?: string;
  } = {},
): Promise<ClientApp> {
  const n = ++apps;
  const redirect = `https://app${n}.example.com/callback`;
  const postLogout = `https://app${n}.example.com/signed-out`;
  const r = await s.req({
    method: 'POST',
    url: '/apps',
    payload: {
      Name: o.name ?? `App ${n} ${Date.now()}`,
      URL: `https://app${n}.example.com/`,
      OIDC: {
        Enabled: true,
        Public: o.public === true,
        RedirectURIs: o.redirects ?? [redirect],
        PostLogoutRedirectURIs: o.postLogout ?? [postLogout],
        ClientCredentials: o.cc === true,
        MinLevel: o.minLevel ?? 0,
      },
    },
  });
  expect(r.statusCode, r.body).toBe(201);
  const id = String(r.headers['x-id']);
  if (o.public) return { id, redirect, postLogout };
  const sec = await s.req({ method: 'POST', url: `/apps/${id}/oidc/secret` });
  expect(sec.statusCode, sec.body).toBe(201);
  return { id, secret: sec.json().ClientSecret as string, redirect, postLogout };
}

/** openid-client's view of the provider for this client (plain HTTP allowed: a test server). */
export async function rpConfig(s: OidcService, c: ClientApp): Promise<client.Configuration> {
  return client.discovery(
    new URL(s.issuer),
    c.id,
    c.secret ? { client_secret: c.secret } : undefined,
    c.secret ? client.ClientSecretBasic(c.secret) : client.None(),
    { execute: [client.allowInsecureRequests] },
  );
}

/** A browser over real HTTP: keeps cookies (by name), follows nothing by itself. */
export class Jar {
  readonly cookies = new Map<string, string>();
  constructor(readonly s: OidcService) {}

  async fetch(url: string, init: RequestInit & { form?: Record<string, string> } = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookies.size > 0)
      headers.set('cookie', [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    let body = init.body;
    if (init.form) {
      body = new URLSearchParams(init.form).toString();
      headers.set('content-type', 'application/x-www-form-urlencoded');
      if (!headers.has('origin')) headers.set('origin', this.s.base);
    }
    const res = await fetch(new URL(url, this.s.base), { ...init, body, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = (pair ?? '').indexOf('=');
      const name = (pair ?? '').slice(0, i);
      const value = (pair ?? '').slice(i + 1);
      if (value === '' || /Max-Age=0|expires=Thu, 01 Jan 1970/i.test(c)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return res;
  }

  /** Follows redirects on this service; stops at a page (200/4xx) or a redirect elsewhere. */
  async follow(
    url: string,
    init: RequestInit & { form?: Record<string, string> } = {},
  ): Promise<{ res: Response; url: string }> {
    let res = await this.fetch(url, init);
    let at = new URL(url, this.s.base).toString();
    for (let i = 0; i < 20 && res.status >= 300 && res.status < 400; i++) {
      const next = new URL(res.headers.get('location') ?? '', at).toString();
      if (!next.startsWith(this.s.base)) return { res, url: next };
      at = next;
      res = await this.fetch(next);
    }
    return { res, url: at };
  }
}

/** A jar whose Gatehouse session is signed in as the account (password: one factor). */
export async function signedInJar(s: OidcService, a: Account, steps = { password: true }): Promise<Jar> {
  const b = await signIn(s, a, steps, { browser: new Browser(s, { ip: '127.0.0.1' }) });
  const jar = new Jar(s);
  for (const [k, v] of b.cookies) jar.cookies.set(k, v);
  return jar;
}

export const newAccount = (s: OidcService, o: Parameters<typeof account>[1] = {}) => account(s, o);

/** The hidden field of a page's form. */
export function hidden(html: string, name: string): string {
  const m = new RegExp(`name="${name}" value="([^"]*)"`).exec(html);
  if (!m?.[1]) throw new Error(`no ${name} in the page: ${html.slice(0, 400)}`);
  return m[1];
}

export interface CodeFlow {
  verifier: string;
  state: string;
  nonce: string;
  url: URL;
}

export async function authorizationUrl(
  config: client.Configuration,
  c: ClientApp,
  extra: Record<string, string> = {},
): Promise<CodeFlow> {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: c.redirect,
    scope: 'openid email profile groups',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...extra,
  });
  return { verifier, state, nonce, url };
}

/**
 * The browser's part: open the authorization URL, consent when asked, and return the URL the
 * provider finally sends the browser to (the client's redirect URI with code or error).
 */
export async function browse(jar: Jar, url: URL, consent: 'allow' | 'deny' = 'allow'): Promise<URL> {
  let { res, url: at } = await jar.follow(url.toString());
  if (res.status === 200 && at.includes('/oidc/interaction/')) {
    const html = await res.text();
    expect(html).toContain('id="consent"');
    ({ res, url: at } = await jar.follow(`${new URL(at).pathname}/confirm`, {
      method: 'POST',
      form: { token: hidden(html, 'token'), decision: consent },
    }));
  }
  expect(res.status, `stopped at ${at}: ${res.status}`).toBeGreaterThanOrEqual(300);
  return new URL(at);
}
