import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers.js';
import { type Account, Browser, PW, signIn } from '../kit/index.js';
import {
  authorizationUrl,
  browse,
  type ClientApp,
  hidden,
  makeClient,
  newAccount,
  type OidcService,
  rpConfig,
  signedInJar,
  startOidcService,
} from './rp.js';

/**
 * A real relying party (openid-client) against Gatehouse as OpenID provider, on each backend:
 * code + PKCE with consent on Gatehouse's page, ID token claims (groups, acr, amr), userinfo,
 * refresh with rotation, reuse revoking the family, client credentials, introspection,
 * revocation and RP-initiated logout.
 */
describe.each(backends())('OpenID provider flow (%s)', (backend) => {
  let s: OidcService;
  let app: ClientApp;
  let config: client.Configuration;
  let user: Account;
  let groupId: string;

  beforeAll(async () => {
    s = await startOidcService(backend);
    app = await makeClient(s, { cc: true });
    config = await rpConfig(s, app);
    user = await newAccount(s, { tag: 'oidc' });
    const g = await s.req({ method: 'POST', url: '/groups', payload: { Name: `staff ${Date.now()}` } });
    expect(g.statusCode, g.body).toBe(201);
    groupId = String(g.headers['x-id']);
    const add = await s.req({ method: 'POST', url: `/groups/${groupId}/members/${user.id}` });
    expect(add.statusCode, add.body).toBeLessThan(300);
    const act = await s.req({ method: 'POST', url: `/groups/${groupId}/members/${user.id}/activate` });
    expect(act.statusCode, act.body).toBeLessThan(300);
  });
  afterAll(async () => s?.close());

  it('publishes discovery and a JWKS with the signing key', async () => {
    const meta = config.serverMetadata();
    expect(meta.issuer).toBe(s.issuer);
    expect(meta.authorization_endpoint).toBe(`${s.issuer}/auth`);
    expect(meta.code_challenge_methods_supported).toEqual(['S256']);
    expect(meta.grant_types_supported).toEqual(
      expect.arrayContaining(['authorization_code', 'refresh_token', 'client_credentials']),
    );
    const jwks = (await (await fetch(String(meta.jwks_uri))).json()) as { keys: Record<string, unknown>[] };
    expect(jwks.keys.length).toBeGreaterThanOrEqual(1);
    for (const k of jwks.keys) {
      expect(k.d).toBeUndefined();
      expect(k.alg).toBe('RS256');
    }
  });

  it('signs a person in with code + PKCE: consent, ID token, userinfo, refresh, logout', async () => {
    const jar = await signedInJar(s, user);
    const flow = await authorizationUrl(config, app);
    const back = await browse(jar, flow.url);
    expect(back.origin + back.pathname).toBe(app.redirect);
    const tokens = await client.authorizationCodeGrant(config, back, {
      pkceCodeVerifier: flow.verifier,
      expectedState: flow.state,
      expectedNonce: flow.nonce,
    });
    const claims = tokens.claims();
    expect(claims?.sub).toBe(user.id);
    expect(claims?.email).toBe(user.email);
    expect(claims?.groups).toEqual([groupId]);
    expect(claims?.acr).toBe('urn:gatehouse:level:2');
    expect(claims?.amr).toEqual(['pwd']);
    const info = await client.fetchUserInfo(config, tokens.access_token, user.id);
    expect(info.email).toBe(user.email);
    expect(info.groups).toEqual([groupId]);

    // Introspection (by the client itself).
    const intro = await client.tokenIntrospection(config, tokens.access_token);
    expect(intro.active).toBe(true);
    expect(intro.sub).toBe(user.id);

    // Refresh rotates; the new refresh token works, and using the old one again revokes the family.
    expect(tokens.refresh_token).toBeTruthy();
    const r1 = await client.refreshTokenGrant(config, String(tokens.refresh_token));
    expect(r1.refresh_token).toBeTruthy();
    expect(r1.refresh_token).not.toBe(tokens.refresh_token);
    expect(r1.claims()?.sub).toBe(user.id);
    await expect(client.refreshTokenGrant(config, String(tokens.refresh_token))).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    // The whole family is gone: the rotated refresh token and the access tokens.
    await expect(client.refreshTokenGrant(config, String(r1.refresh_token))).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    expect((await client.tokenIntrospection(config, r1.access_token)).active).toBe(false);
    expect((await client.tokenIntrospection(config, tokens.access_token)).active).toBe(false);

    // A second authorization needs no consent again (the grant is remembered)... but the family
    // revocation removed the grant, so consent is asked again; either way a code comes back.
    const again = await authorizationUrl(config, app);
    const back2 = await browse(jar, again.url);
    const t2 = await client.authorizationCodeGrant(config, back2, {
      pkceCodeVerifier: again.verifier,
      expectedState: again.state,
      expectedNonce: again.nonce,
    });

    // Revocation of the refresh token.
    await client.tokenRevocation(config, String(t2.refresh_token));
    await expect(client.refreshTokenGrant(config, String(t2.refresh_token))).rejects.toMatchObject({
      error: 'invalid_grant',
    });

    // RP-initiated logout: confirmation page, then back to the registered post-logout URI with state,
    // and the Gatehouse session in this browser has ended.
    const end = client.buildEndSessionUrl(config, {
      id_token_hint: String(t2.id_token),
      post_logout_redirect_uri: app.postLogout,
      state: 'bye',
    });
    const page = await jar.follow(end.toString());
    expect(page.res.status).toBe(200);
    const html = await page.res.text();
    expect(html).toContain('id="logout"');
    const out = await jar.follow(`${s.issuer}/session/end/confirm`, {
      method: 'POST',
      form: { xsrf: hidden(html, 'xsrf'), logout: 'yes' },
    });
    expect(out.url).toBe(`${app.postLogout}?state=bye`);
    const me = await jar.fetch('/users/me');
    expect(me.status).toBe(401);
    // Signed out: a new authorization with prompt=none fails with login_required.
    const silent = await authorizationUrl(config, app, { prompt: 'none' });
    const r = await jar.follow(silent.url.toString());
    expect(new URL(r.url).searchParams.get('error')).toBe('login_required');
  });

  it('signs in with the existing session on consent given once; a denied consent returns access_denied', async () => {
    const other = await newAccount(s, { tag: 'oidc2' });
    const jar = await signedInJar(s, other);
    const denied = await authorizationUrl(config, app);
    const back = await browse(jar, denied.url, 'deny');
    expect(back.searchParams.get('error')).toBe('access_denied');
    const first = await authorizationUrl(config, app);
    await browse(jar, first.url);
    // Consent was given: the next authorization goes straight back with a code.
    const second = await authorizationUrl(config, app);
    const { res, url } = await jar.follow(second.url.toString());
    expect(res.status).toBe(303);
    expect(new URL(url).searchParams.get('code')).toBeTruthy();
  });

  it('prompt=login asks the person to sign in again: the session ends, a new sign-in completes the request', async () => {
    const person = await newAccount(s, { tag: 'reauth' });
    const jar = await signedInJar(s, person);
    await browse(jar, (await authorizationUrl(config, app)).url); // consent given once
    await new Promise((r) => setTimeout(r, 1100)); // auth_time has one-second resolution
    const flow = await authorizationUrl(config, app, { prompt: 'login' });
    const started = Math.floor(Date.now() / 1000);
    const page = await jar.follow(flow.url.toString());
    expect(page.res.status).toBe(200);
    const html = await page.res.text();
    expect(html).toContain('id="reauth-card"');
    const out = await jar.fetch(`${new URL(page.url).pathname}/reauth`, {
      method: 'POST',
      form: { token: hidden(html, 'token') },
    });
    expect(out.status).toBe(303);
    const signin = new URL(String(out.headers.get('location')), s.base);
    expect(signin.pathname).toBe('/signin');
    expect((await jar.fetch('/users/me')).status).toBe(401);
    // Sign in again in the same browser, then go back where the sign-in page would.
    const b = new Browser(s, { ip: '127.0.0.1' });
    for (const [k, v] of jar.cookies) b.cookies.set(k, v);
    await signIn(s, person, { password: true }, { browser: b });
    for (const [k, v] of b.cookies) jar.cookies.set(k, v);
    const back = await browse(jar, new URL(String(signin.searchParams.get('return')), s.base));
    const tokens = await client.authorizationCodeGrant(config, back, {
      pkceCodeVerifier: flow.verifier,
      expectedState: flow.state,
      expectedNonce: flow.nonce,
    });
    expect(tokens.claims()?.sub).toBe(person.id);
    expect(Number(tokens.claims()?.auth_time)).toBeGreaterThanOrEqual(started);
  });

  it('grants client credentials to a confidential client, introspectable and revocable', async () => {
    const t = await client.clientCredentialsGrant(config);
    expect(t.access_token).toBeTruthy();
    expect(t.refresh_token).toBeUndefined();
    const intro = await client.tokenIntrospection(config, t.access_token);
    expect(intro.active).toBe(true);
    expect(intro.client_id).toBe(app.id);
    await client.tokenRevocation(config, t.access_token);
    expect((await client.tokenIntrospection(config, t.access_token)).active).toBe(false);
  });

  it('a public client completes code + PKCE without a secret and cannot use client credentials', async () => {
    const pub = await makeClient(s, { public: true, cc: true });
    const pconf = await rpConfig(s, pub);
    const jar = await signedInJar(s, user);
    const flow = await authorizationUrl(pconf, pub);
    const tokens = await client.authorizationCodeGrant(pconf, await browse(jar, flow.url), {
      pkceCodeVerifier: flow.verifier,
      expectedState: flow.state,
      expectedNonce: flow.nonce,
    });
    expect(tokens.claims()?.sub).toBe(user.id);
    const refused = await client.clientCredentialsGrant(pconf).catch((e: client.ResponseBodyError) => e);
    expect(refused).toBeInstanceOf(client.ResponseBodyError);
    expect((refused as client.ResponseBodyError).error_description).toMatch(/grant type is not allowed/);
  });

  it('sends a person without a session to the sign-in page, which returns to the interaction', async () => {
    const jar = new (await import('./rp.js')).Jar(s);
    const flow = await authorizationUrl(config, app);
    const { res, url } = await jar.follow(flow.url.toString());
    expect(res.status).toBe(200);
    const u = new URL(url);
    expect(u.pathname).toBe('/signin');
    expect(u.searchParams.get('return')).toMatch(/^\/oidc\/interaction\/[A-Za-z0-9_-]+$/);
    expect(u.searchParams.get('intent')).toBeTruthy();
    expect(PW).toBeTruthy();
  });
});
