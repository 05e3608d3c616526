import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { App } from '../../../src/objects/app.js';
import { backends, startTestService, type TestService } from '../../helpers.js';
import { Browser, deleteUser, makeUser, PW, provisionTotp, setTenant } from '../../kit/index.js';
import {
  atProvider,
  callbackUri,
  createProviderApp,
  deliver,
  setOAuth2,
  signInWith,
  start,
  whoAmI,
} from './drive.js';
import { type FakeGitHub, startFakeGitHub, startUpstreamOP, type UpstreamOP } from './upstream.js';

/*
 * The relying party (src/auth/factors/oauth2rp) against two real upstream OpenID providers and a
 * GitHub-style OAuth 2.0 server: sign-in, linking, user creation, the level, and every refusal
 * (state, nonce, audience, issuer, expiry, signature, mix-up, login CSRF, code injection, open
 * redirects). Longer than ~400 lines on purpose: the cases share three upstream servers that are
 * slow to start, and each case reads on its own.
 */

const SECRET_A = 'upstream-client-secret-A-0123456789';

describe.each(backends())('relying party: sign in through other providers (%s)', (backend) => {
  let s: TestService;
  let opA: UpstreamOP;
  let opB: UpstreamOP;
  let gh: FakeGitHub;
  let appA: string;
  let appB: string;
  let appGH: string;

  beforeAll(async () => {
    s = await startTestService(backend);
    appA = await createProviderApp(s, 'Corp IdP', { ClientID: 'gatehouse' }, SECRET_A);
    appB = await createProviderApp(s, 'Partner IdP', { ClientID: 'gatehouse' });
    appGH = await createProviderApp(s, 'GitHub', { ClientID: 'x' });
    opA = await startUpstreamOP([
      { client_id: 'gatehouse', client_secret: SECRET_A, redirect_uris: [callbackUri(appA)] },
      {
        client_id: 'other-app',
        client_secret: 'other-secret-0123456789',
        redirect_uris: ['http://127.0.0.1:9/cb'],
      },
    ]);
    opB = await startUpstreamOP([{ client_id: 'gatehouse', redirect_uris: [callbackUri(appB)] }]);
    gh = await startFakeGitHub();
    await setOAuth2(s, appA, { Issuer: opA.issuer, MultiFactorAMR: ['mfa'] });
    await setOAuth2(s, appB, { Issuer: opB.issuer, CreateUsers: true });
    const g = await s.req({
      method: 'PUT',
      url: `/apps/${appGH}`,
      headers: { 'if-match': String((await s.req({ url: `/apps/${appGH}` })).headers.etag) },
      payload: {
        Name: 'GitHub',
        OAuth2ClientSecret: gh.clientSecret,
        OAuth2: {
          ClientID: gh.clientId,
          AuthorizeURL: `${gh.origin}/login/oauth/authorize`,
          TokenURL: `${gh.origin}/login/oauth/access_token`,
          UserInfoURL: `${gh.origin}/user`,
          Scopes: ['read:user', 'user:email'],
          Claims: { Subject: 'id', Email: 'email', Name: 'name' },
          CreateUsers: true,
        },
      },
    });
    expect(g.statusCode, g.body).toBe(204);
  }, 60_000);
  afterAll(async () => {
    await opA?.close();
    await opB?.close();
    await gh?.close();
    await s?.close();
  });

  /** An account at provider A linked to a new Gatehouse user (linked by signing in first). */
  async function linkedAtA(tag: string) {
    const email = `${tag}@example.com`;
    const userId = await makeUser(s, { email, password: PW });
    opA.accounts.set(`a-${tag}`, { sub: `a-${tag}`, email, email_verified: true, name: tag });
    const b = new Browser(s);
    expect((await b.post('/auth/password', { email, password: PW })).statusCode).toBe(204);
    opA.next = { account: `a-${tag}` };
    const r = await signInWith(b, appA, { link: 'true' });
    expect(r.statusCode, r.body).toBe(303);
    return { userId, email, sub: `a-${tag}` };
  }

  it('lists the providers, never the client secret; the secret is write-only', async () => {
    const list = await new Browser(s).req({ url: '/auth/oauth2rp' });
    expect(list.statusCode).toBe(200);
    const names = (list.json() as { ID: string; Name: string }[]).map((p) => p.Name).sort();
    expect(names).toEqual(['Corp IdP', 'GitHub', 'Partner IdP']);
    const app = await s.req({ url: `/apps/${appA}` });
    expect(app.body).not.toContain(SECRET_A);
    expect(app.json().OAuth2.HaveClientSecret).toBe(true);
    expect((await s.req({ url: `/apps/${appB}` })).json().OAuth2.HaveClientSecret).toBe(false);
    expect((await s.req({ url: '/apps' })).body).not.toContain(SECRET_A);
  });

  it('keeps client secrets encrypted at rest: neither the hidden state nor any table holds them in clear', async () => {
    for (const [id, secret] of [
      [appA, SECRET_A],
      [appGH, gh.clientSecret],
    ] as const) {
      const hidden = await s.store.getSecret(App, id);
      expect(typeof hidden.OAuth2ClientSecret).toBe('string');
      expect(hidden.OAuth2ClientSecret).not.toContain(secret);
      expect(hidden.OAuth2ClientSecret).toMatch(/^v1\./);
    }
    const rows = await sql<{ t: string }>`SELECT data || coalesce(secret, '') AS t FROM objects`.execute(
      s.db.kysely,
    );
    expect(rows.rows.filter((r) => r.t.includes(SECRET_A) || r.t.includes(gh.clientSecret))).toEqual([]);
    const changes = await sql<{ t: string }>`SELECT coalesce(data, '') AS t FROM changes`.execute(
      s.db.kysely,
    );
    expect(changes.rows.filter((r) => r.t.includes(SECRET_A) || r.t.includes(gh.clientSecret))).toEqual([]);
    // Too long a secret is refused before it is sealed.
    const etag = String((await s.req({ url: `/apps/${appB}` })).headers.etag);
    const long = await s.req({
      method: 'PUT',
      url: `/apps/${appB}`,
      headers: { 'if-match': etag },
      payload: {
        ...((await s.req({ url: `/apps/${appB}` })).json() as object),
        OAuth2ClientSecret: 'x'.repeat(1025),
      },
    });
    expect(long.statusCode).toBe(400);
    expect(long.headers['x-error-code']).toBe('Invalid Field');
  });

  it('the authorization URL carries PKCE S256, state and nonce, and the per-provider callback', async () => {
    const u = await start(new Browser(s), appA);
    expect(u.origin).toBe(opA.issuer);
    const p = u.searchParams;
    expect(p.get('code_challenge_method')).toBe('S256');
    expect(p.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(p.get('state')).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(p.get('nonce')).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(p.get('redirect_uri')).toBe(callbackUri(appA));
    expect(p.get('scope')?.split(' ')).toContain('openid');
    expect(p.get('client_id')).toBe('gatehouse');
  });

  it('a Host that is not a host name starts nothing (the callback URL is built from it)', async () => {
    const r = await new Browser(s).req({
      method: 'POST',
      url: `/auth/oauth2rp/${appA}`,
      form: {},
      headers: { host: 'evil.example/@x' },
    });
    expect(r.statusCode).toBe(400);
    expect(r.json().Message).toMatch(/Host/);
  });

  it('with server.publicurl set, the callback URL is built from it, never from the Host', async () => {
    const pub = await startTestService(backend, { SVC_SERVER_PUBLICURL: 'https://id.example.test' });
    try {
      const id = await createProviderApp(pub, 'Corp IdP', { ClientID: 'gatehouse', Issuer: opA.issuer });
      const r = await new Browser(pub).req({
        method: 'POST',
        url: `/auth/oauth2rp/${id}`,
        form: {},
        headers: { host: 'evil.example' },
      });
      expect(r.statusCode, r.body).toBe(200);
      expect(new URL(r.json().URL as string).searchParams.get('redirect_uri')).toBe(
        `https://id.example.test/auth/oauth2rp/${id}/callback`,
      );
    } finally {
      await pub.close();
    }
  });

  it('an App that is not a provider, or does not exist, is 404', async () => {
    const plain = await s.req({ method: 'POST', url: '/apps', payload: { Name: 'Plain app' } });
    const b = new Browser(s);
    expect((await b.post(`/auth/oauth2rp/${plain.headers['x-id']}`)).statusCode).toBe(404);
    expect((await b.post('/auth/oauth2rp/nosuchapp123456')).statusCode).toBe(404);
  });

  it('links an account after its own sign-in, then signs in through the provider alone', async () => {
    const { userId, sub } = await linkedAtA('linda');
    const b = new Browser(s);
    opA.next = { account: sub };
    const r = await signInWith(b, appA, { next: '/signin/enroll' });
    expect(r.statusCode, r.body).toBe(303);
    expect(r.headers.location).toBe(`/signin?return=${encodeURIComponent('/signin/enroll')}`);
    const me = await whoAmI(b);
    expect(me.UserID).toBe(userId);
    expect(me.IntegrityLevel).toBe(2);
    expect(me.Proven).toContain('oauth2rp');
    const links = await b.req({ url: '/auth/oauth2rp/links' });
    expect(links.statusCode, links.body).toBe(200);
    expect(links.json()).toMatchObject([{ AppID: appA, Issuer: opA.issuer, Subject: sub }]);
  });

  it('carries the intent it was started with on to the sign-in page', async () => {
    const { sub } = await linkedAtA('intent');
    const b = new Browser(s);
    const refused = await b.req({ url: '/users/me' });
    expect(refused.statusCode).toBe(401);
    const intent = String(refused.headers['x-service-intent']);
    opA.next = { account: sub };
    const r = await signInWith(b, appA, { intent, next: '/users/me' });
    expect(r.statusCode, r.body).toBe(303);
    const to = new URL(String(r.headers.location), 'http://localhost');
    expect(to.pathname).toBe('/signin');
    expect(to.searchParams.get('intent')).toBe(intent);
    expect(to.searchParams.get('return')).toBe('/users/me');
    // An altered intent is refused before anything starts.
    expect((await b.post(`/auth/oauth2rp/${appA}`, { intent: `${intent}x` })).statusCode).toBe(400);
  });

  it('the level is the App’s; an amr the App lists as multi-factor raises it to 3', async () => {
    const { userId, sub } = await linkedAtA('mfa');
    const b = new Browser(s);
    opA.next = { account: sub, amr: ['pwd', 'mfa'] };
    expect((await signInWith(b, appA)).statusCode).toBe(303);
    expect(await whoAmI(b)).toMatchObject({ UserID: userId, IntegrityLevel: 3 });
    const c = new Browser(s);
    opA.next = { account: sub, amr: ['pwd'] };
    expect((await signInWith(c, appA)).statusCode).toBe(303);
    expect((await whoAmI(c)).IntegrityLevel).toBe(2);
  });

  it('linking needs the account’s own sign-in: anonymous sessions cannot ask to link', async () => {
    const b = new Browser(s);
    const r = await b.post(`/auth/oauth2rp/${appA}`, { link: 'true' });
    expect(r.statusCode).toBe(401);
  });

  it('a session that proved less than the user’s own factors reach cannot link another provider', async () => {
    // Tom has a password and TOTP (level 3) and a link to provider A: A's sign-in gives level 2,
    // which may not add a second way in (step-up), though it signs Tom in.
    const { userId, sub } = await linkedAtA('tom');
    await provisionTotp(s, userId);
    const b = new Browser(s);
    opA.next = { account: sub };
    expect((await signInWith(b, appA)).statusCode).toBe(303);
    expect(await whoAmI(b)).toMatchObject({ UserID: userId, IntegrityLevel: 2 });
    const r = await b.post(`/auth/oauth2rp/${appB}`, { link: 'true' });
    expect(r.statusCode).toBe(401);
    expect(r.headers['x-error-code']).toBe('Insufficient Integrity');
  });

  it('an identity linked to one user cannot be linked to another (409), and signs in as the first', async () => {
    const first = await linkedAtA('first');
    const otherEmail = 'second@example.com';
    await makeUser(s, { email: otherEmail, password: PW });
    const b = new Browser(s);
    expect((await b.post('/auth/password', { email: otherEmail, password: PW })).statusCode).toBe(204);
    opA.next = { account: first.sub };
    const r = await signInWith(b, appA, { link: 'true' });
    expect(r.statusCode).toBe(409);
    const c = new Browser(s);
    expect((await signInWith(c, appA)).statusCode).toBe(303);
    expect((await whoAmI(c)).UserID).toBe(first.userId);
  });

  it('never links by e-mail alone: an existing address is refused unless the tenant allows it and the provider verified it', async () => {
    const email = 'emma@example.com';
    const userId = await makeUser(s, { email, password: PW });
    opA.accounts.set('a-emma', { sub: 'a-emma', email, email_verified: false });
    opA.next = { account: 'a-emma' };
    const b = new Browser(s);
    let r = await signInWith(b, appA);
    expect(r.statusCode).toBe(403);
    expect(r.headers['x-error-code']).toBe('Account Not Linked');
    expect((await whoAmI(b)).UserID).toBe('');
    await setTenant(s, { FederationLinkByEmail: true });
    try {
      r = await signInWith(b, appA); // still unverified
      expect(r.statusCode).toBe(403);
      opA.accounts.set('a-emma', { sub: 'a-emma', email, email_verified: true });
      r = await signInWith(b, appA);
      expect(r.statusCode, r.body).toBe(303);
      expect((await whoAmI(b)).UserID).toBe(userId);
    } finally {
      await setTenant(s, { FederationLinkByEmail: false });
    }
  });

  it('creates users only when the App allows it', async () => {
    opA.accounts.set('a-nobody', { sub: 'a-nobody', email: 'nobody@example.com', email_verified: true });
    opA.next = { account: 'a-nobody' };
    const r = await signInWith(new Browser(s), appA);
    expect(r.statusCode).toBe(403);
    expect(r.headers['x-error-code']).toBe('Account Not Linked');
    expect((await s.req({ url: '/users?filter=Email%20%3D%20%22nobody%40example.com%22' })).body).toBe('');

    opB.accounts.set('b-newbie', {
      sub: 'b-newbie',
      email: 'newbie@example.com',
      email_verified: true,
      name: 'New Bie',
    });
    opB.next = { account: 'b-newbie' };
    const b = new Browser(s);
    expect((await signInWith(b, appB)).statusCode).toBe(303);
    const me = await whoAmI(b);
    expect(me.Email).toBe('newbie@example.com');
    const user = await s.req({ url: `/users/${me.UserID}` });
    expect(user.json()).toMatchObject({ Email: 'newbie@example.com', Name: { FullName: 'New Bie' } });
    // The same identity again is the same user, not a second one.
    const c = new Browser(s);
    expect((await signInWith(c, appB)).statusCode).toBe(303);
    expect((await whoAmI(c)).UserID).toBe(me.UserID);
  });

  it('the identity of a deleted user is free again: it makes one new user, or links to another', async () => {
    const usersWith = async (email: string) =>
      (await s.req({ url: `/users?filter=${encodeURIComponent(`Email = "${email}"`)}` })).body
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => (JSON.parse(l) as { ID: string }).ID);

    // Made by the provider's App (CreateUsers), deleted, then signing in again: one new user.
    opB.accounts.set('b-gone', { sub: 'b-gone', email: 'gone@example.com', email_verified: true });
    opB.next = { account: 'b-gone' };
    const b = new Browser(s);
    expect((await signInWith(b, appB)).statusCode).toBe(303);
    const first = (await whoAmI(b)).UserID;
    await deleteUser(s, first);
    const c = new Browser(s);
    const again = await signInWith(c, appB);
    expect(again.statusCode, again.body).toBe(303);
    const second = (await whoAmI(c)).UserID;
    expect(second).not.toBe('');
    expect(second).not.toBe(first);
    expect(await usersWith('gone@example.com')).toEqual([second]);

    // Linked from an account's own sign-in, the account deleted: another account may link it.
    const old = await linkedAtA('relinked');
    await deleteUser(s, old.userId);
    const email = 'relinker@example.com';
    const userId = await makeUser(s, { email, password: PW });
    const d = new Browser(s);
    expect((await d.post('/auth/password', { email, password: PW })).statusCode).toBe(204);
    opA.next = { account: old.sub };
    const linked = await signInWith(d, appA, { link: 'true' });
    expect(linked.statusCode, linked.body).toBe(303);
    const e = new Browser(s);
    opA.next = { account: old.sub };
    expect((await signInWith(e, appA)).statusCode).toBe(303);
    expect((await whoAmI(e)).UserID).toBe(userId);
  });

  it('a new user from an unverified address does not get the address', async () => {
    opB.accounts.set('b-unv', { sub: 'b-unv', email: 'unverified@example.com', email_verified: false });
    opB.next = { account: 'b-unv' };
    const b = new Browser(s);
    expect((await signInWith(b, appB)).statusCode).toBe(303);
    const me = await whoAmI(b);
    expect(me.UserID).not.toBe('');
    expect((await s.req({ url: `/users/${me.UserID}` })).json().Email).toBe('');
  });

  it('signs in through a GitHub-style OAuth 2.0 provider (user info, numeric id)', async () => {
    gh.users.set('octocat', { id: 583231, login: 'octocat', name: 'The Octocat', email: null });
    gh.next = 'octocat';
    const b = new Browser(s);
    const u = await start(b, appGH);
    expect(u.searchParams.get('code_challenge_method')).toBe('S256');
    expect(u.searchParams.get('nonce')).toBeNull();
    const r = await deliver(b, await atProvider(u));
    expect(r.statusCode, r.body).toBe(303);
    const me = await whoAmI(b);
    expect(me.IntegrityLevel).toBe(2);
    const links = await b.req({ url: '/auth/oauth2rp/links' });
    expect(links.json()).toMatchObject([{ Issuer: `${gh.origin}/user`, Subject: '583231', AppID: appGH }]);
    const c = new Browser(s);
    expect((await signInWith(c, appGH)).statusCode).toBe(303);
    expect((await whoAmI(c)).UserID).toBe(me.UserID);
  });

  // ---- abuse ------------------------------------------------------------------------------------

  it('refuses a state it did not issue (any string), and a state used twice', async () => {
    const b = new Browser(s);
    await fc.assert(
      fc.asyncProperty(fc.string({ minLength: 1, maxLength: 80 }), async (state) => {
        const r = await b.req({
          url: `/auth/oauth2rp/${appA}/callback?code=abc&state=${encodeURIComponent(state)}`,
        });
        expect(r.statusCode).toBe(400);
        expect(r.headers['x-error-code']).toBe('Federation Failed');
      }),
      { numRuns: 25 },
    );
    const { sub } = await linkedAtA('replay');
    opA.next = { account: sub };
    const cb = await atProvider(await start(b, appA));
    expect((await deliver(b, cb)).statusCode).toBe(303);
    const again = await deliver(new Browser(s), cb);
    expect(again.statusCode).toBe(400);
    const same = await deliver(b, cb);
    expect(same.statusCode).toBe(400);
  });

  it('login CSRF: a callback started in another browser signs nobody in', async () => {
    const { sub } = await linkedAtA('csrf');
    const attacker = new Browser(s);
    opA.next = { account: sub };
    const cb = await atProvider(await start(attacker, appA));
    const victim = new Browser(s);
    await victim.req({ url: '/signin' });
    const r = await deliver(victim, cb);
    expect(r.statusCode).toBe(400);
    expect(r.headers['x-error-code']).toBe('Federation Failed');
    expect((await whoAmI(victim)).UserID).toBe('');
    // Nor can a cross-site page start a flow in the victim's browser (no CSRF header).
    const blind = new Browser(s, { csrf: false });
    expect((await blind.post(`/auth/oauth2rp/${appA}`)).statusCode).toBe(403);
  });

  it('code injection: a code from another flow of the same session fails PKCE', async () => {
    const { sub } = await linkedAtA('inject');
    const b = new Browser(s);
    const first = await start(b, appA);
    opA.next = { account: sub };
    const second = await atProvider(await start(b, appA));
    const forged = new URL(second);
    forged.searchParams.set('state', first.searchParams.get('state') ?? '');
    const r = await deliver(b, forged);
    expect(r.statusCode).toBe(400);
    expect(r.headers['x-error-code']).toBe('Federation Failed');
    expect((await whoAmI(b)).UserID).toBe('');
  });

  it('refuses an ID token whose nonce is not the flow’s', async () => {
    const { sub } = await linkedAtA('nonce');
    const b = new Browser(s);
    const u = await start(b, appA);
    u.searchParams.set('nonce', 'a-nonce-the-service-never-issued');
    opA.next = { account: sub };
    const r = await deliver(b, await atProvider(u));
    expect(r.statusCode).toBe(400);
    expect(r.body).toMatch(/nonce/);
    expect((await whoAmI(b)).UserID).toBe('');
  });

  it('refuses ID tokens for another audience, from another issuer, expired, or not signed by the provider', async () => {
    const { sub } = await linkedAtA('idtoken');
    const cases: [string, (c: Record<string, unknown>) => Record<string, unknown>, boolean][] = [
      ['aud', (c) => ({ ...c, aud: 'other-app' }), false],
      ['iss', (c) => ({ ...c, iss: opB.issuer }), false],
      [
        'exp',
        (c) => ({
          ...c,
          iat: Math.floor(Date.now() / 1000) - 7200,
          exp: Math.floor(Date.now() / 1000) - 3600,
        }),
        false,
      ],
      ['signature', (c) => c, true],
    ];
    try {
      for (const [what, change, foreign] of cases) {
        opA.tamper = change;
        opA.foreignKey = foreign;
        const b = new Browser(s);
        opA.next = { account: sub };
        const r = await signInWith(b, appA);
        expect(r.statusCode, what).toBe(400);
        expect(r.headers['x-error-code'], what).toBe('Federation Failed');
        expect((await whoAmI(b)).UserID, what).toBe('');
      }
      // The same rewrite with nothing changed is accepted: the refusals above are the claims'.
      opA.tamper = (c) => c;
      opA.foreignKey = false;
      const ok = new Browser(s);
      expect((await signInWith(ok, appA)).statusCode).toBe(303);
    } finally {
      opA.tamper = undefined;
      opA.foreignKey = false;
    }
  });

  it('mix-up: a response from one provider is never taken for another', async () => {
    const { sub } = await linkedAtA('mixup');
    opB.accounts.set(sub, { sub, email: 'mixup@example.com', email_verified: true });
    const b = new Browser(s);
    const atA = await start(b, appA);
    opB.next = { account: sub };
    // B's code, delivered to A's callback with A's state: A's token endpoint does not know it,
    // and B's iss parameter is not A's.
    const fromB = await atProvider(await start(b, appB));
    const toA = new URL(callbackUri(appA));
    toA.search = fromB.search;
    toA.searchParams.set('state', atA.searchParams.get('state') ?? '');
    expect((await deliver(b, toA)).statusCode).toBe(400);
    // A's state at B's callback: the flow belongs to A.
    const atA2 = await start(b, appA);
    opA.next = { account: sub };
    const fromA = await atProvider(atA2);
    const toB = new URL(callbackUri(appB));
    toB.search = fromA.search;
    expect((await deliver(b, toB)).statusCode).toBe(400);
    expect((await whoAmI(b)).UserID).toBe('');
  });

  it('a provider error (the user said no) is refused, and an unreachable provider is 502', async () => {
    const b = new Browser(s);
    const u = await start(b, appA);
    const r = await deliver(
      b,
      new URL(
        `${callbackUri(appA)}?error=access_denied&state=${u.searchParams.get('state')}&iss=${encodeURIComponent(opA.issuer)}`,
      ),
    );
    expect(r.statusCode).toBe(400);
    const dead = await createProviderApp(s, 'Dead IdP', { ClientID: 'x', Issuer: 'http://127.0.0.1:9' });
    const d = await b.post(`/auth/oauth2rp/${dead}`);
    expect(d.statusCode).toBe(502);
    expect(d.headers['x-error-code']).toBe('Provider Unavailable');
  });

  it('refuses plain-HTTP providers that are not on this machine, and plain OAuth 2.0 without user info, when written', async () => {
    const write = (OAuth2: Record<string, unknown>) =>
      s.req({ method: 'POST', url: '/apps', payload: { Name: `IdP ${Math.random()}`, OAuth2 } });
    for (const [field, OAuth2] of [
      ['OAuth2.Issuer', { ClientID: 'x', Issuer: 'http://idp.example.com' }],
      [
        'OAuth2.TokenURL',
        {
          ClientID: 'x',
          AuthorizeURL: 'https://a.example/auth',
          TokenURL: 'http://a.example/token',
          UserInfoURL: 'https://a.example/me',
        },
      ],
      [
        'OAuth2.UserInfoURL',
        { ClientID: 'x', AuthorizeURL: 'https://a.example/auth', TokenURL: 'https://a.example/token' },
      ],
    ] as const) {
      const r = await write(OAuth2);
      expect(r.statusCode, field).toBe(400);
      expect(r.json().Field, field).toBe(field);
    }
    // Loopback http (a developer's provider) and a client ID alone (not a provider yet) are fine.
    expect((await write({ ClientID: 'x', Issuer: 'http://127.0.0.1:9' })).statusCode).toBe(201);
    expect((await write({ ClientID: 'x' })).statusCode).toBe(201);
  });

  it('removing a link needs step-up and ends the link', async () => {
    const { email } = await linkedAtA('unlink');
    const b = new Browser(s);
    expect((await b.post('/auth/password', { email, password: PW })).statusCode).toBe(204);
    const [link] = (await b.req({ url: '/auth/oauth2rp/links' })).json() as { ID: string }[];
    const key = await s.keyFor(['admin']);
    // An API key is not a way to change someone's credentials without ?user=.
    expect((await s.req({ method: 'DELETE', url: `/auth/oauth2rp/links/${link?.ID}`, key })).statusCode).toBe(
      403,
    );
    expect((await b.req({ method: 'DELETE', url: `/auth/oauth2rp/links/${link?.ID}` })).statusCode).toBe(204);
    expect((await b.req({ url: '/auth/oauth2rp/links' })).json()).toEqual([]);
    expect((await b.req({ method: 'DELETE', url: `/auth/oauth2rp/links/${link?.ID}` })).statusCode).toBe(404);
  });

  it('after the provider, the browser only ever goes to the local sign-in page, whatever next says', async () => {
    const { sub } = await linkedAtA('next');
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.webUrl(),
          fc.string({ maxLength: 60 }),
          fc.constantFrom(
            '//evil.example/x',
            '/\\evil.example',
            'javascript:alert(1)',
            '{"URL":"https://evil.example"}',
          ),
        ),
        async (next) => {
          const b = new Browser(s);
          const start = await b.post(`/auth/oauth2rp/${appA}`, { next });
          if (start.statusCode !== 200) {
            expect(start.statusCode).toBe(400);
            return;
          }
          opA.next = { account: sub };
          const r = await deliver(b, await atProvider(start.json().URL as string));
          expect(r.statusCode).toBe(303);
          const to = new URL(String(r.headers.location), 'http://localhost');
          expect(to.origin).toBe('http://localhost');
          expect(to.pathname).toBe('/signin');
        },
      ),
      { numRuns: 15 },
    );
  });

  it('a disabled user cannot sign in through a link; a session keeps at most a few flows open', async () => {
    const { userId, sub } = await linkedAtA('disabled');
    const cur = await s.req({ url: `/users/${userId}` });
    const put = await s.req({
      method: 'PUT',
      url: `/users/${userId}`,
      headers: { 'if-match': String(cur.headers.etag) },
      payload: { ...(cur.json() as Record<string, unknown>), Disabled: true },
    });
    expect(put.statusCode, put.body).toBe(204);
    const b = new Browser(s);
    opA.next = { account: sub };
    expect((await signInWith(b, appA)).statusCode).toBe(403);
    expect((await whoAmI(b)).UserID).toBe('');
    // Six flows in one session: the first one is gone, the last five still work.
    const c = new Browser(s);
    const urls: URL[] = [];
    for (let i = 0; i < 6; i++) urls.push(await start(c, appB));
    opB.accounts.set('b-cap', { sub: 'b-cap', email: 'cap@example.com', email_verified: true });
    opB.next = { account: 'b-cap' };
    const first = await deliver(c, await atProvider(urls[0] as URL));
    expect(first.statusCode).toBe(400);
    const last = await deliver(c, await atProvider(urls[5] as URL));
    expect(last.statusCode).toBe(303);
  });

  it('never logs client secrets, codes or tokens', () => {
    const all = s.logs.join('\n');
    expect(all).not.toContain(SECRET_A);
    expect(all).not.toContain(gh.clientSecret);
    expect(all).not.toMatch(/gho_[0-9a-f]{32}/);
  });
});
