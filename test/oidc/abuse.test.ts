import { createHash } from 'node:crypto';
import fc from 'fast-check';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers.js';
import type { Account } from '../kit/index.js';
import {
  authorizationUrl,
  browse,
  type ClientApp,
  hidden,
  type Jar,
  makeClient,
  newAccount,
  type OidcService,
  rpConfig,
  signedInJar,
  startOidcService,
} from './rp.js';

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

/** Someone trying to break the provider: every attempt must fail, and fail closed. */
describe.each(backends())('OpenID provider abuse (%s)', (backend) => {
  let s: OidcService;
  let app: ClientApp;
  let other: ClientApp;
  let pub: ClientApp;
  let config: client.Configuration;
  let user: Account;
  let jar: Jar;

  beforeAll(async () => {
    s = await startOidcService(backend);
    app = await makeClient(s, { cc: true });
    other = await makeClient(s, { cc: true });
    pub = await makeClient(s, { public: true });
    config = await rpConfig(s, app);
    user = await newAccount(s, { tag: 'abuse' });
    jar = await signedInJar(s, user);
    // Consent once, so later authorizations answer at once.
    await browse(jar, (await authorizationUrl(config, app)).url);
  });
  afterAll(async () => s?.close());

  /** A code for `app`, obtained by the browser. */
  async function code(c: ClientApp = app, conf = config) {
    const flow = await authorizationUrl(conf, c);
    const back = await browse(jar, flow.url);
    const got = back.searchParams.get('code');
    expect(got, back.toString()).toBeTruthy();
    return { ...flow, code: String(got), back };
  }

  async function token(form: Record<string, string>, auth?: string) {
    const res = await fetch(`${s.issuer}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(auth ? { authorization: auth } : {}),
      },
      body: new URLSearchParams(form),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  it('refuses every redirect URI but the registered one, and never redirects to it', async () => {
    const variants = fc.constantFrom(
      `${app.redirect}/`,
      `${app.redirect}x`,
      `${app.redirect}?x=1`,
      `${app.redirect}#frag`,
      app.redirect.replace('https:', 'http:'),
      app.redirect.replace('.example.com', '.example.com:8443'),
      app.redirect.replace('app', 'evil-app'),
      app.redirect.replace('https://', 'https://evil.example@'),
      app.redirect.replace('/callback', '/%63allback'),
      app.redirect.replace('/callback', '/callback/../callback'),
      app.redirect.replace('/callback', '//evil.example/callback'),
      `${app.redirect}%00`,
      app.redirect.toUpperCase(),
      other.redirect,
      'https://evil.example/callback',
    );
    await fc.assert(
      fc.asyncProperty(variants, fc.string({ maxLength: 8 }), async (uri, junk) => {
        const flow = await authorizationUrl(config, app, {
          redirect_uri: uri + (junk ? encodeURIComponent(junk) : ''),
        });
        const res = await jar.fetch(flow.url.toString());
        // An error page here, never a redirect anywhere.
        expect(res.status).toBe(400);
        expect(res.headers.get('location')).toBeNull();
        expect(await res.text()).toContain('redirect_uri');
      }),
      { numRuns: 25 },
    );
  });

  it('requires PKCE (S256) of every client, and the verifier of the challenge', async () => {
    for (const c of [app, pub]) {
      const conf = c === app ? config : await rpConfig(s, pub);
      const url = client.buildAuthorizationUrl(conf, {
        redirect_uri: c.redirect,
        scope: 'openid',
        state: 'x',
      });
      const { url: at } = await jar.follow(url.toString());
      const back = new URL(at);
      expect(back.searchParams.get('error')).toBe('invalid_request');
      expect(back.searchParams.get('error_description')).toMatch(/PKCE/);
      // plain is not offered.
      const plain = client.buildAuthorizationUrl(conf, {
        redirect_uri: c.redirect,
        scope: 'openid',
        code_challenge: 'a'.repeat(43),
        code_challenge_method: 'plain',
      });
      expect(new URL((await jar.follow(plain.toString())).url).searchParams.get('error')).toBe(
        'invalid_request',
      );
    }
    // Downgrade at the token endpoint: without the verifier, or with another one.
    const c1 = await code();
    const none = await token(
      { grant_type: 'authorization_code', code: c1.code, redirect_uri: app.redirect },
      basic(app.id, String(app.secret)),
    );
    expect(none.body.error).toBe('invalid_grant');
    const c2 = await code();
    const wrong = await token(
      {
        grant_type: 'authorization_code',
        code: c2.code,
        redirect_uri: app.redirect,
        code_verifier: client.randomPKCECodeVerifier(),
      },
      basic(app.id, String(app.secret)),
    );
    expect(wrong.body.error).toBe('invalid_grant');
  });

  it('a code works once: replaying it fails and revokes what the first use issued', async () => {
    const c = await code();
    const form = {
      grant_type: 'authorization_code',
      code: c.code,
      redirect_uri: app.redirect,
      code_verifier: c.verifier,
    };
    const first = await token(form, basic(app.id, String(app.secret)));
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const replay = await token(form, basic(app.id, String(app.secret)));
    expect(replay.body.error).toBe('invalid_grant');
    expect((await client.tokenIntrospection(config, String(first.body.access_token))).active).toBe(false);
    await expect(client.refreshTokenGrant(config, String(first.body.refresh_token))).rejects.toMatchObject({
      error: 'invalid_grant',
    });
  });

  it('a refresh token presented twice at once yields at most one new token, and the family dies', async () => {
    const c = await code();
    const t = await client.authorizationCodeGrant(config, c.back, {
      pkceCodeVerifier: c.verifier,
      expectedState: c.state,
      expectedNonce: c.nonce,
    });
    const form = { grant_type: 'refresh_token', refresh_token: String(t.refresh_token) };
    const results = await Promise.all([1, 2, 3].map(() => token(form, basic(app.id, String(app.secret)))));
    expect(results.filter((r) => r.status === 200).length).toBeLessThanOrEqual(1);
    // Whatever the race gave out is dead now, as is the first access token.
    for (const r of results.filter((x) => x.status === 200))
      await expect(client.refreshTokenGrant(config, String(r.body.refresh_token))).rejects.toMatchObject({
        error: 'invalid_grant',
      });
    expect((await client.tokenIntrospection(config, t.access_token)).active).toBe(false);
  });

  it("one client cannot redeem another's code, guess a secret, or pass as a public client", async () => {
    const c = await code();
    const form = {
      grant_type: 'authorization_code',
      code: c.code,
      redirect_uri: app.redirect,
      code_verifier: c.verifier,
    };
    // Another registered client with its own valid secret.
    const stolen = await token(form, basic(other.id, String(other.secret)));
    expect(stolen.body.error).toBe('invalid_grant');
    // The right client ID with a wrong secret, or no secret at all.
    expect((await token(form, basic(app.id, `${app.secret}x`))).status).toBe(401);
    expect((await token(form, basic(app.id, String(other.secret)))).status).toBe(401);
    expect((await token({ ...form, client_id: app.id })).status).toBe(401);
    // A public client's ID cannot take client credentials.
    const pcc = await token({ grant_type: 'client_credentials', client_id: pub.id });
    expect(pcc.status).toBeGreaterThanOrEqual(400);
    // Client credentials with another client's secret.
    expect(
      (await token({ grant_type: 'client_credentials' }, basic(app.id, String(other.secret)))).status,
    ).toBe(401);
    // After all that, the code still works for its own client (failed authentications do not burn it).
    const ok = await token(form, basic(app.id, String(app.secret)));
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
  });

  it("a client can neither introspect nor revoke another client's tokens", async () => {
    const c = await code();
    const t = await client.authorizationCodeGrant(config, c.back, {
      pkceCodeVerifier: c.verifier,
      expectedState: c.state,
      expectedNonce: c.nonce,
    });
    const otherConf = await rpConfig(s, other);
    const seen = await client.tokenIntrospection(otherConf, t.access_token);
    expect(seen.active).toBe(false);
    expect(seen.sub).toBeUndefined();
    await client.tokenRevocation(otherConf, String(t.refresh_token)).catch(() => undefined);
    await client.tokenRevocation(otherConf, t.access_token).catch(() => undefined);
    expect((await client.tokenIntrospection(config, t.access_token)).active).toBe(true);
    const fresh = await client.refreshTokenGrant(config, String(t.refresh_token));
    expect(fresh.access_token).toBeTruthy();
  });

  it('browsers may call the token endpoint from the client’s redirect origin only', async () => {
    const pconf = await rpConfig(s, pub);
    const exchange = async (origin: string) => {
      const c = await code(pub, pconf);
      const res = await fetch(`${s.issuer}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code: c.code,
          redirect_uri: pub.redirect,
          code_verifier: c.verifier,
          client_id: pub.id,
        }),
      });
      return { status: res.status, acao: res.headers.get('access-control-allow-origin') };
    };
    const own = new URL(pub.redirect).origin;
    expect(await exchange(own)).toEqual({ status: 200, acao: own });
    for (const origin of [
      'https://evil.example',
      new URL(app.redirect).origin,
      own.replace('https:', 'http:'),
      'null',
    ]) {
      const r = await exchange(origin);
      expect(r.status, origin).toBe(400);
      expect(r.acao).toBeNull();
    }
  });

  it('a disabled App stops being a client at once', async () => {
    const c = await makeClient(s, { cc: true });
    const ok = await token({ grant_type: 'client_credentials' }, basic(c.id, String(c.secret)));
    expect(ok.status).toBe(200);
    const got = await s.req({ method: 'GET', url: `/apps/${c.id}` });
    const doc = got.json();
    const put = await s.req({
      method: 'PUT',
      url: `/apps/${c.id}`,
      headers: { 'if-match': String(got.headers.etag) },
      payload: { ...doc, OIDC: { ...doc.OIDC, Enabled: false } },
    });
    expect(put.statusCode, put.body).toBe(204);
    expect((await token({ grant_type: 'client_credentials' }, basic(c.id, String(c.secret)))).status).toBe(
      401,
    );
  });

  it('RP-initiated logout never redirects to an unregistered post_logout_redirect_uri', async () => {
    const t = await code();
    const tokens = await client.authorizationCodeGrant(config, t.back, {
      pkceCodeVerifier: t.verifier,
      expectedState: t.state,
      expectedNonce: t.nonce,
    });
    for (const target of [
      'https://evil.example/',
      `${app.postLogout}/x`,
      `${app.postLogout}?next=https://evil.example`,
      other.postLogout,
      app.redirect,
    ]) {
      const url = client.buildEndSessionUrl(config, {
        id_token_hint: String(tokens.id_token),
        post_logout_redirect_uri: target,
      });
      const res = await jar.fetch(url.toString());
      expect(res.status, `${target}: ${(await res.text()).slice(0, 300)}`).toBe(400);
      expect(res.headers.get('location')).toBeNull();
    }
    // Without an id_token_hint or client_id, even a registered post_logout_redirect_uri is not
    // honoured: the sign-out ends on the provider's own page.
    const bare = await jar.fetch(
      `${s.issuer}/session/end?post_logout_redirect_uri=${encodeURIComponent(app.postLogout)}`,
    );
    if (bare.status === 200) {
      const out = await jar.fetch(`${s.issuer}/session/end/confirm`, {
        method: 'POST',
        form: { xsrf: hidden(await bare.text(), 'xsrf') },
      });
      expect(out.headers.get('location')).toBe(`${s.issuer}/session/end/success`);
    } else expect(bare.status).toBe(400);
  });

  it('the consent form refuses another origin, another session and a forged token', async () => {
    const fresh = await newAccount(s, { tag: 'consent' });
    const j = await signedInJar(s, fresh);
    const flow = await authorizationUrl(config, app);
    const { res, url } = await j.follow(flow.url.toString());
    const html = await res.text();
    expect(html).toContain('id="consent"');
    const path = `${new URL(url).pathname}/confirm`;
    const token = hidden(html, 'token');
    const cross = await j.fetch(path, {
      method: 'POST',
      headers: { origin: 'https://evil.example' },
      form: { token, decision: 'allow' },
    });
    expect(cross.status).toBe(403);
    const forged = await j.fetch(path, {
      method: 'POST',
      form: { token: createHash('sha256').update('x').digest('base64url'), decision: 'allow' },
    });
    expect(forged.status).toBe(403);
    // Another person's browser with the victim's form token and path.
    const attacker = await signedInJar(s, user);
    const theirs = await attacker.fetch(path, { method: 'POST', form: { token, decision: 'allow' } });
    expect(theirs.status).toBeGreaterThanOrEqual(400);
    expect(theirs.headers.get('location')).toBeNull();
  });

  it('only an administrator issues client secrets, and no secret or token reaches the log', async () => {
    const userKey = await s.keyFor(['user'], user.id);
    for (const key of [userKey, await s.keyFor(['sync']), await s.keyFor(['audit'])]) {
      const r = await s.req({ method: 'POST', url: `/apps/${app.id}/oidc/secret`, key });
      expect(r.statusCode).toBe(403);
    }
    const c = await code();
    const t = await client.authorizationCodeGrant(config, c.back, {
      pkceCodeVerifier: c.verifier,
      expectedState: c.state,
      expectedNonce: c.nonce,
    });
    await client.refreshTokenGrant(config, String(t.refresh_token));
    const log = s.logs.join('\n');
    for (const secret of [app.secret, other.secret, t.refresh_token, t.access_token, c.code, c.verifier])
      expect(log).not.toContain(String(secret));
  });

  it('a disabled user loses refresh and userinfo at once', async () => {
    const victim = await newAccount(s, { tag: 'disabled' });
    const j = await signedInJar(s, victim);
    const flow = await authorizationUrl(config, app);
    const t = await client.authorizationCodeGrant(config, await browse(j, flow.url), {
      pkceCodeVerifier: flow.verifier,
      expectedState: flow.state,
      expectedNonce: flow.nonce,
    });
    const got = await s.req({ method: 'GET', url: `/users/${victim.id}` });
    const d = await s.req({
      method: 'PUT',
      url: `/users/${victim.id}`,
      headers: { 'if-match': String(got.headers.etag) },
      payload: { ...(got.json() as Record<string, unknown>), Disabled: true },
    });
    expect(d.statusCode, d.body).toBe(204);
    await expect(client.refreshTokenGrant(config, String(t.refresh_token))).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    await expect(client.fetchUserInfo(config, t.access_token, victim.id)).rejects.toBeDefined();
  });

  it('ignores Host and X-Forwarded-* when building its URLs', async () => {
    const res = await fetch(`${s.issuer}/.well-known/openid-configuration`, {
      headers: { host: 'evil.example', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' },
    });
    const text = await res.text();
    expect(text).not.toContain('evil.example');
    expect(JSON.parse(text).token_endpoint).toBe(`${s.issuer}/token`);
  });

  it('a session below the App’s level is sent to sign in for more, not signed in', async () => {
    const strict = await makeClient(s, { minLevel: 3 });
    const conf = await rpConfig(s, strict);
    const flow = await authorizationUrl(conf, strict);
    const { url } = await jar.follow(flow.url.toString());
    const u = new URL(url);
    expect(u.pathname).toBe('/signin');
    expect(u.searchParams.get('intent')).toBeTruthy();
    // And silently: login_required.
    const silent = await authorizationUrl(conf, strict, { prompt: 'none' });
    const r = await jar.follow(silent.url.toString());
    expect(new URL(r.url).searchParams.get('error')).toBe('login_required');
  });
});
