import fc from 'fast-check';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountChange } from '../../src/objects/accountchange.js';
import { claim, report, world } from '../directory/fixture.js';
import { backends, jsonLines } from '../helpers.js';
import { account, Browser, freshIp, PW } from '../kit/index.js';
import {
  authorizationUrl,
  browse,
  type ClientApp,
  makeClient,
  type OidcService,
  rpConfig,
  signedInJar,
  startOidcService,
} from '../oidc/rp.js';

/*
 * Findings 3, 5, 7 and 9 of issue #23, each as the attacker ran it, over HTTP against a real
 * service (the OpenID provider on a real port, since openid-client speaks HTTP): App isolation
 * (docs/security.md) and the account rules (docs/directory.md).
 * Longer than ~400 lines on purpose: the findings share one service on a real port (slow to
 * start), and each finding's attack reads on its own.
 */
describe.each(backends())('App isolation and account rules, regressions (%s)', (backend) => {
  let s: OidcService;
  let sync: string;

  beforeAll(async () => {
    s = await startOidcService(backend);
    sync = await s.keyFor(['sync']);
  });
  afterAll(async () => s?.close());

  const newGroup = async (name: string) => {
    const g = await s.req({
      method: 'POST',
      url: '/groups',
      payload: { Name: `${name}-${Date.now()}-${Math.random()}` },
    });
    expect(g.statusCode, g.body).toBe(201);
    return String(g.headers['x-id']);
  };
  const member = async (groupId: string, userId: string, add = true) => {
    const r = await s.req({ method: add ? 'POST' : 'DELETE', url: `/groups/${groupId}/members/${userId}` });
    expect(r.statusCode, r.body).toBeLessThan(300);
  };
  const setApp = async (appId: string, patch: Record<string, unknown>) => {
    const a = await s.req({ url: `/apps/${appId}` });
    const r = await s.req({
      method: 'PUT',
      url: `/apps/${appId}`,
      headers: { 'if-match': String(a.headers.etag) },
      payload: { ...(a.json() as object), ...patch },
    });
    expect([204, 304], r.body).toContain(r.statusCode);
  };

  // ---- finding 3: the OpenID provider applies App.AccessGroups --------------------------------

  describe('finding 3: the OpenID provider ignored App.AccessGroups', () => {
    let app: ClientApp;
    let config: client.Configuration;
    let staff: string;

    beforeAll(async () => {
      app = await makeClient(s);
      config = await rpConfig(s, app);
      staff = await newGroup('staff');
      await setApp(app.id, { AccessGroups: [staff] });
    });

    it('a user outside the AccessGroups completes /oidc/auth: access_denied, no consent, no code', async () => {
      const outsider = await account(s, { tag: 'outsider' });
      const jar = await signedInJar(s, outsider);
      const flow = await authorizationUrl(config, app);
      const { res, url } = await jar.follow(flow.url.toString());
      // Never the consent page: straight back to the client with an error and no code.
      expect(res.status).toBeGreaterThanOrEqual(300);
      const back = new URL(url);
      expect(back.origin + back.pathname).toBe(app.redirect);
      expect(back.searchParams.get('error')).toBe('access_denied');
      expect(back.searchParams.get('code')).toBeNull();
    });

    it('a member gets tokens; removed from the AccessGroups after consent: no code exchange, refresh or userinfo', async () => {
      const user = await account(s, { tag: 'leaver' });
      await member(staff, user.id);
      const jar = await signedInJar(s, user);
      // Tokens while a member.
      const first = await authorizationUrl(config, app);
      const tokens = await client.authorizationCodeGrant(config, await browse(jar, first.url), {
        pkceCodeVerifier: first.verifier,
        expectedState: first.state,
        expectedNonce: first.nonce,
      });
      expect(tokens.claims()?.sub).toBe(user.id);
      // A second code, issued while still a member, not yet exchanged.
      const second = await authorizationUrl(config, app);
      const pending = await browse(jar, second.url);
      expect(pending.searchParams.get('code')).toBeTruthy();

      await member(staff, user.id, false);

      await expect(
        client.authorizationCodeGrant(config, pending, {
          pkceCodeVerifier: second.verifier,
          expectedState: second.state,
          expectedNonce: second.nonce,
        }),
      ).rejects.toMatchObject({ error: 'invalid_grant' });
      await expect(client.refreshTokenGrant(config, String(tokens.refresh_token))).rejects.toMatchObject({
        error: 'invalid_grant',
      });
      await expect(client.fetchUserInfo(config, tokens.access_token, user.id)).rejects.toBeTruthy();
      // Silent authorization with the remembered grant: no code either.
      const silent = await authorizationUrl(config, app, { prompt: 'none' });
      const r = await jar.follow(silent.url.toString());
      const back = new URL(r.url);
      expect(back.searchParams.get('code')).toBeNull();
      expect(back.searchParams.get('error')).toMatch(/^(access_denied|login_required)$/);
    });

    it('a sign-in for the App (no session yet) is refused at the first factor for a user outside', async () => {
      const outsider = await account(s, { tag: 'fresh-outsider' });
      const flow = await authorizationUrl(config, app);
      const b = new Browser(s, { ip: freshIp() });
      // The browser starts at the provider, which sends it to the sign-in pages for this App.
      let r = await b.req({ url: flow.url.pathname + flow.url.search });
      for (let i = 0; i < 5 && r.statusCode >= 300 && r.statusCode < 400; i++) {
        const to = new URL(String(r.headers.location), s.base);
        if (to.origin !== s.base || to.pathname.startsWith('/signin')) break;
        r = await b.req({ url: to.pathname + to.search });
      }
      // Naming a member first, then the outsider (a new session for another user) changes nothing.
      const insider = await account(s, { tag: 'insider' });
      await member(staff, insider.id);
      expect((await b.post('/auth/email', { email: insider.email })).statusCode).toBe(204);
      expect((await b.post('/auth/email', { email: outsider.email })).statusCode).toBe(204);
      const pw = await b.post('/auth/password', { password: PW });
      expect(pw.statusCode).toBe(403);
      expect(pw.json().Message).toContain('app.access-groups');
      expect((await b.req({ url: '/users/me' })).statusCode).toBe(401);
    });
  });

  // ---- finding 5: the back channel's access check --------------------------------------------

  describe("finding 5: any App's proxy token asked about any user in any group and marked its use", () => {
    const check = (token: string, body: Record<string, unknown>) =>
      s.req({
        method: 'POST',
        url: '/proxy/v1/accesscheck',
        key: '',
        headers: { authorization: `Bearer ${token}` },
        payload: body,
      });
    const lastUsed = async (groupId: string, userId: string) =>
      (await s.req({ url: `/groups/${groupId}/members/${userId}` })).json().LastUsed as string;

    it('an App asks only about users it serves, and its question marks no use of anyone else', async () => {
      const appGroup = await newGroup('payroll-users');
      const secret = await newGroup('secret-project');
      const a = await s.req({ method: 'POST', url: '/apps', payload: { Name: `Payroll ${Date.now()}` } });
      const appId = String(a.headers['x-id']);
      await setApp(appId, { AccessGroups: [appGroup] });
      const token = (await s.req({ method: 'POST', url: `/apps/${appId}/proxytoken` })).json()
        .Token as string;
      const stranger = await account(s, { tag: 'stranger' });
      await member(secret, stranger.id);
      const before = await lastUsed(secret, stranger.id);

      // The attack: a user outside the App's AccessGroups, a group the App has nothing to do with.
      const r = await check(token, { UserID: stranger.id, Groups: [secret], Op: 'or', Next: '' });
      expect(r.statusCode, r.body).toBe(200);
      expect(r.json()).toMatchObject({ Satisfied: false, Results: [{ GroupID: secret, StatusCode: 403 }] });
      expect(r.json().Results[0].Location).toBeUndefined();
      expect(await lastUsed(secret, stranger.id)).toBe(before);
      // Unknown users look the same (no existence oracle).
      const ghost = await check(token, { UserID: 'nosuchuser000', Groups: [secret], Op: 'or', Next: '' });
      expect(ghost.json()).toEqual(r.json());

      // The control: a user the App serves is answered, and the use is recorded.
      const staff = await account(s, { tag: 'staffer' });
      await member(appGroup, staff.id);
      await member(secret, staff.id);
      const ok = await check(token, { UserID: staff.id, Groups: [secret], Op: 'or', Next: '' });
      expect(ok.json()).toMatchObject({ Satisfied: true });
      expect(await lastUsed(secret, staff.id)).not.toBe('0001-01-01T00:00:00Z');
    });
  });

  describe('App isolation at the access check, generated', () => {
    type Standing = 'ok' | 'disabled' | 'merged';
    interface Person {
      id: string;
      inAccess: boolean;
      inOther: boolean;
      standing: Standing;
    }
    let access: string;
    let other: string;
    const people: Person[] = [];
    const tokens: Record<'open' | 'gated', string> = { open: '', gated: '' };

    beforeAll(async () => {
      access = await newGroup('gen-access');
      other = await newGroup('gen-other');
      for (const standing of ['ok', 'disabled', 'merged'] as const)
        for (const inAccess of [false, true])
          for (const inOther of [false, true]) {
            const a = await account(s, { tag: `gen-${standing}` });
            if (inAccess) await member(access, a.id);
            if (inOther) await member(other, a.id);
            if (standing === 'disabled') {
              const u = await s.req({ url: `/users/${a.id}` });
              await s.req({
                method: 'PUT',
                url: `/users/${a.id}`,
                headers: { 'if-match': String(u.headers.etag) },
                payload: { ...(u.json() as object), Disabled: true },
              });
            }
            if (standing === 'merged') {
              // Merged away into another user (left disabled, MergedInto set, memberships moved).
              const into = await account(s, { tag: 'gen-into' });
              expect(
                (await s.req({ method: 'POST', url: `/users/${into.id}/merge`, payload: { From: a.id } }))
                  .statusCode,
              ).toBe(204);
            }
            people.push({ id: a.id, inAccess, inOther, standing });
          }
      for (const kind of ['open', 'gated'] as const) {
        const a = await s.req({
          method: 'POST',
          url: '/apps',
          payload: { Name: `gen-${kind}-${Date.now()}` },
        });
        const id = String(a.headers['x-id']);
        if (kind === 'gated') await setApp(id, { AccessGroups: [access] });
        tokens[kind] = (await s.req({ method: 'POST', url: `/apps/${id}/proxytoken` })).json()
          .Token as string;
      }
    }, 60_000);

    it('an answer only ever about a user the App serves; no use marked for anyone else', async () => {
      const usedOf = async (p: Person) =>
        Promise.all(
          [access, other].map(
            async (g) => (await s.req({ url: `/groups/${g}/members/${p.id}` })).json().LastUsed,
          ),
        );
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 11 }),
          fc.constantFrom('open' as const, 'gated' as const),
          fc.subarray(['access', 'other'] as const, { minLength: 1 }),
          fc.constantFrom('and' as const, 'or' as const),
          async (i, kind, asked, op) => {
            const p = people[i] as Person;
            const groups = asked.map((g) => (g === 'access' ? access : other));
            const before = await usedOf(p);
            const r = await s.req({
              method: 'POST',
              url: '/proxy/v1/accesscheck',
              key: '',
              headers: { authorization: `Bearer ${tokens[kind]}` },
              payload: { UserID: p.id, Groups: groups, Op: op, Next: '' },
            });
            expect(r.statusCode, r.body).toBe(200);
            // Merging leaves the source disabled and its memberships moved: it is in nothing.
            const usable = p.standing === 'ok';
            const served = usable && (kind === 'open' || p.inAccess);
            const isIn = (g: 'access' | 'other') => usable && (g === 'access' ? p.inAccess : p.inOther);
            const want = served && (op === 'or' ? asked.some(isIn) : asked.every(isIn));
            expect(r.json().Satisfied).toBe(want);
            if (!served) {
              expect(r.json().Results.every((e: { Location?: string }) => e.Location === undefined)).toBe(
                true,
              );
              expect(await usedOf(p)).toEqual(before);
            }
          },
        ),
        { numRuns: 40 },
      );
    }, 120_000);
  });

  // ---- finding 7: account names unique per App ---------------------------------------------------

  describe("finding 7: a sync key planned create under another user's account name", () => {
    const plan = (body: Record<string, unknown>) =>
      s.req({ method: 'POST', url: '/accountchanges', key: sync, payload: body });

    it('the plan is refused (409) in any case of the name; the agent never applies a second account of it', async () => {
      const w = await world(s);
      const victimName = `svc${w.tag}`.slice(0, 30);
      const created = await plan({
        UserID: w.userId,
        AppID: w.appId,
        Action: 'create',
        AccountName: victimName,
      });
      expect(created.statusCode, created.body).toBe(201);
      const got = await claim(s, w.token);
      expect(got.Changes).toHaveLength(1);
      const c = got.Changes[0] as { Change: { ID: string }; Lease: string };
      expect((await report(s, w.token, c.Change.ID, { Lease: c.Lease, Result: 'applied' })).statusCode).toBe(
        200,
      );

      const attacker = await account(s, { tag: 'attacker' });
      for (const name of [victimName, victimName.toUpperCase()]) {
        const r = await plan({ UserID: attacker.id, AppID: w.appId, Action: 'create', AccountName: name });
        expect(r.statusCode, r.body).toBe(409);
        expect(r.json().Message).toContain('account.name-unique');
      }
      // Nor by renaming a planned change of one's own onto the name.
      const own = await plan({
        UserID: attacker.id,
        AppID: w.appId,
        Action: 'create',
        AccountName: `x${w.tag}`,
      });
      expect(own.statusCode, own.body).toBe(201);
      const id = String(own.headers['x-id']);
      const cur = await s.req({ url: `/accountchanges/${id}`, key: sync });
      const put = await s.req({
        method: 'PUT',
        url: `/accountchanges/${id}`,
        key: sync,
        headers: { 'if-match': String(cur.headers.etag) },
        payload: { ...(cur.json() as object), AccountName: victimName },
      });
      expect(put.statusCode, put.body).toBe(409);
      await s.req({ method: 'POST', url: `/accountchanges/${id}/cancel`, key: sync });

      // A change stored before the rule (written past the API): the agent is not handed it.
      const legacy = await s.store.create(AccountChange, {
        UserID: attacker.id,
        AppID: w.appId,
        Action: 'create',
        AccountName: victimName,
      });
      const again = await claim(s, w.token);
      expect(again.Changes.map((x) => x.Change.ID)).not.toContain(legacy.obj.id);
      const after = (await s.req({ url: `/accountchanges/${legacy.obj.id}` })).json();
      expect(after.State).toBe('cancelled');
      expect(after.Error).toContain('account.name-unique');
      const accounts = jsonLines(
        (await s.req({ url: `/accounts?filter=${encodeURIComponent(`AppID = "${w.appId}"`)}` })).body,
      );
      expect(
        accounts.filter(
          (x) => String((x.Item as { Name: string }).Name).toLowerCase() === victimName.toLowerCase(),
        ),
      ).toHaveLength(1);
    });

    it('a name derived from the e-mail address collides the same way', async () => {
      const w = await world(s, { NameFrom: 'EmailLocalPart' });
      const local = `shared${w.tag}`;
      const mk = async (domain: string) => {
        const r = await s.req({ method: 'POST', url: '/users', payload: { Email: `${local}@${domain}` } });
        expect(r.statusCode, r.body).toBe(201);
        return String(r.headers['x-id']);
      };
      const first = await mk('one.example');
      const second = await mk('two.example');
      expect((await plan({ UserID: first, AppID: w.appId, Action: 'create' })).statusCode).toBe(201);
      const r = await plan({ UserID: second, AppID: w.appId, Action: 'create' });
      expect(r.statusCode, r.body).toBe(409);
      expect(r.json().Message).toContain('account.name-reserved');
    });
  });

  // ---- finding 9 (first half): one change per account in progress --------------------------------

  describe('finding 9: changes made with POST /accountchanges never got an AccountID', () => {
    it('they name their account, and two changes of one account are never in progress at once', async () => {
      const w = await world(s);
      const ids: string[] = [];
      for (const Action of ['modify', 'disable']) {
        const r = await s.req({
          method: 'POST',
          url: '/accountchanges',
          key: sync,
          payload: {
            UserID: w.userId,
            AppID: w.appId,
            Action,
            AccountName: Action === 'modify' ? `m${w.tag}` : '',
          },
        });
        expect(r.statusCode, r.body).toBe(201);
        ids.push(String(r.headers['x-id']));
        const stored = await s.req({ url: `/accountchanges/${r.headers['x-id']}` });
        expect(stored.json().AccountID).toBe(`${w.appId}.${w.userId}`);
      }
      // Two agents claim at once: one change of the account is handed out, the other waits.
      const [a, b] = await Promise.all([claim(s, w.token, { Name: 'a' }), claim(s, w.token, { Name: 'b' })]);
      const handed = [...a.Changes, ...b.Changes].map((x) => x.Change.ID);
      expect(handed).toHaveLength(1);
      const states = await Promise.all(
        ids.map(async (id) => (await s.req({ url: `/accountchanges/${id}` })).json().State as string),
      );
      expect(states.filter((x) => x === 'in_progress')).toHaveLength(1);
    });
  });

  // ---- App isolation for provisioning --------------------------------------------------------------

  it("an agent is not handed a create for a user its App does not serve (outside the App's AccessGroups)", async () => {
    const w = await world(s);
    const gate = await newGroup('gate');
    await setApp(w.appId, { AccessGroups: [gate] });
    const r = await s.req({
      method: 'POST',
      url: '/accountchanges',
      key: sync,
      payload: { UserID: w.userId, AppID: w.appId, Action: 'create', AccountName: `g${w.tag}` },
    });
    expect(r.statusCode, r.body).toBe(201);
    const id = String(r.headers['x-id']);
    expect((await claim(s, w.token)).Changes).toEqual([]);
    const after = (await s.req({ url: `/accountchanges/${id}` })).json();
    expect(after.State).toBe('cancelled');
    expect(after.Error).toContain('app.isolation');
  });
});
