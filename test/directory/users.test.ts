import fc from 'fast-check';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { authenticateApiKey } from '../../src/auth/apikeys.js';
import { decryptSecret } from '../../src/auth/factors/secrets.js';
import { KEY_CACHE_TTL_MS } from '../../src/auth/keycache.js';
import { loadServiceConfig } from '../../src/config/index.js';
import { disableUser } from '../../src/directory/disable.js';
import { suggestMerges } from '../../src/directory/mergesuggest.js';
import { APIKey, hashApiKey } from '../../src/objects/apikey.js';
import { User } from '../../src/objects/user.js';
import { SYSTEM } from '../../src/policy/actor.js';
import { openDb } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { ObjectStore } from '../../src/store/objects.js';
import { backends, freshLocation, jsonLines, startTestService, type TestService } from '../helpers.js';
import { account, secretOf, signIn } from '../kit/index.js';
import { addMember, claim, report, world } from './fixture.js';

/** #16 item 4: disable and merge, and the merge suggestions. */
describe.each(backends())('disable and merge on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  const applyAll = async (token: string) => {
    for (const c of (await claim(s, token)).Changes)
      expect(
        (await report(s, token, String(c.Change.ID), { Lease: c.Lease, Result: 'applied' })).statusCode,
      ).toBe(200);
  };

  it('merges e-mail, factors, memberships, accounts and records into the target, leaving the from user disabled', async () => {
    const w = await world(s);
    const from = await account(s, { totp: true, tag: 'from' });
    const toRes = await s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: `to-${w.tag}@example.com` },
    });
    const to = toRes.headers['x-id'] as string;
    await addMember(s, w.groupId, from.id);
    await s.req({ method: 'POST', url: `/users/${from.id}/accounts/suggest`, payload: { Plan: {} } });
    await applyAll(w.token);
    const fromKey = await s.keyFor(['user'], from.id);
    const vouch = await s.req({
      method: 'POST',
      url: '/vouchrequests',
      payload: { UserID: from.id, Reason: 'r' },
    });

    // Refusals first: the from user is required, must differ, must exist; only admin merges.
    expect((await s.req({ method: 'POST', url: `/users/${to}/merge` })).statusCode).toBe(400);
    expect((await s.req({ method: 'POST', url: `/users/${to}/merge?from=${to}` })).statusCode).toBe(400);
    expect((await s.req({ method: 'POST', url: `/users/${to}/merge?from=nosuchuser0000` })).statusCode).toBe(
      404,
    );
    expect(
      (await s.req({ method: 'POST', url: `/users/nosuchuser0000/merge?from=${from.id}` })).statusCode,
    ).toBe(404);
    const sync = await s.keyFor(['sync']);
    expect(
      (await s.req({ method: 'POST', url: `/users/${to}/merge?from=${from.id}`, key: sync })).statusCode,
    ).toBe(403);

    // Suggested before the merge: the same address appears on both.
    const get = await s.req({ method: 'GET', url: `/users/${to}` });
    await s.req({
      method: 'PUT',
      url: `/users/${to}`,
      payload: { ...(get.json() as object), OtherEmails: [from.email.toUpperCase()] },
      headers: { 'if-match': get.headers.etag as string },
    });
    const sug = await s.req({ method: 'GET', url: '/users/merge', key: await s.keyFor(['audit']) });
    expect(sug.statusCode).toBe(200);
    expect(sug.headers['content-type']).toMatch(/^application\/x-json-lines/);
    expect(jsonLines(sug.body)).toContainEqual({
      UserIDs: [from.id, to].sort(),
      Reason: 'same verified e-mail',
      Detail: from.email.toLowerCase(),
    });

    const r = await s.req({ method: 'POST', url: `/users/${to}/merge`, payload: { From: from.id } });
    expect(r.statusCode).toBe(204);

    const target = (await s.req({ method: 'GET', url: `/users/${to}` })).json();
    expect(target.OtherEmails.map((e: string) => e.toLowerCase())).toContain(from.email.toLowerCase());
    expect(target).toMatchObject({ HavePassword: true, HaveTOTPSecret: true });
    const old = (await s.req({ method: 'GET', url: `/users/${from.id}` })).json();
    expect(old).toMatchObject({ Disabled: true, MergedInto: to, Email: '', HavePassword: false });
    // The TOTP secret is re-encrypted for the target: it opens under the target's binding only.
    const secret = await secretOf(s, to);
    await expect(decryptSecret(s, String(secret.TOTPSecret), `totp:${to}`)).resolves.toMatch(/^[A-Z2-7]+=*$/);
    expect(await secretOf(s, from.id)).toEqual({});
    expect((await s.req({ method: 'GET', url: `/memberships/${w.groupId}.${to}` })).json().State).toBe(
      'active',
    );
    expect((await s.req({ method: 'GET', url: `/memberships/${w.groupId}.${from.id}` })).statusCode).toBe(
      404,
    );
    expect((await s.req({ method: 'GET', url: `/accounts/${w.appId}.${to}` })).json()).toMatchObject({
      UserID: to,
      State: 'active',
    });
    expect((await s.req({ method: 'GET', url: `/accounts/${w.appId}.${from.id}` })).statusCode).toBe(404);
    expect(
      (await s.req({ method: 'GET', url: `/vouchrequests/${vouch.headers['x-id']}` })).json().UserID,
    ).toBe(to);
    expect((await s.req({ method: 'GET', url: '/users/me', key: fromKey })).statusCode).toBe(401);
    // The initial password went with the account, fetchable by the target's user.
    const pw = await s.req({
      method: 'POST',
      url: `/accounts/${w.appId}.${to}/password`,
      key: await s.keyFor(['user'], to),
    });
    expect(pw.statusCode).toBe(200);
    expect(pw.json().Password).toMatch(/^[A-Za-z2-9]{20}$/);
    // Merged users are suggested no more; a repeated merge is harmless; merging into a merged user is not.
    expect(
      jsonLines((await s.req({ method: 'GET', url: '/users/merge' })).body).some((l) =>
        (l.UserIDs as string[]).includes(from.id),
      ),
    ).toBe(false);
    expect((await s.req({ method: 'POST', url: `/users/${to}/merge?from=${from.id}` })).statusCode).toBe(204);
    expect((await s.req({ method: 'POST', url: `/users/${from.id}/merge?from=${to}` })).statusCode).toBe(409);
  });

  it('disables: 404 for nobody, 403 for a user key or sync on an admin, 409 on oneself; idempotent', async () => {
    expect((await s.req({ method: 'POST', url: '/users/nosuchuser0000/disable' })).statusCode).toBe(404);
    const u = await s.req({ method: 'POST', url: '/users', payload: {} });
    const id = u.headers['x-id'] as string;
    const own = await s.keyFor(['user'], id);
    expect((await s.req({ method: 'POST', url: `/users/${id}/disable`, key: own })).statusCode).toBe(403);
    expect(
      (await s.req({ method: 'POST', url: `/users/${id}/disable`, key: await s.keyFor(['audit']) }))
        .statusCode,
    ).toBe(403);
    const adminUser = await s.req({ method: 'POST', url: '/users', payload: { Admin: true } });
    const sync = await s.keyFor(['sync']);
    expect(
      (await s.req({ method: 'POST', url: `/users/${adminUser.headers['x-id']}/disable`, key: sync }))
        .statusCode,
    ).toBe(403);
    expect((await s.req({ method: 'POST', url: `/users/${s.adminId}/disable` })).statusCode).toBe(409);
    const first = await s.req({ method: 'POST', url: `/users/${id}/disable`, key: sync });
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ UserID: id, Disabled: true, APIKeysRevoked: [expect.any(String)] });
    const again = await s.req({ method: 'POST', url: `/users/${id}/disable` });
    expect(again.json()).toMatchObject({ Accounts: [], APIKeysRevoked: [], SessionsRevoked: 0 });
  });

  it("ends the user's sessions at once", async () => {
    const a = await account(s, { tag: 'sess' });
    const b = await signIn(s, a, { password: true });
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(200);
    const r = await s.req({ method: 'POST', url: `/users/${a.id}/disable` });
    expect(r.json().SessionsRevoked).toBe(1);
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(401);
  });

  it("refuses the user's key at the proxy back channel at once", async () => {
    const w = await world(s);
    const u = await s.req({ method: 'POST', url: '/users', payload: { Email: `k-${w.tag}@example.com` } });
    const id = u.headers['x-id'] as string;
    const key = await s.keyFor(['user'], id);
    const viaProxy = () =>
      s.req({
        method: 'POST',
        url: '/proxy/v1/apikey',
        key: '',
        headers: { authorization: `Bearer ${w.token}` },
        payload: { Key: key },
      });
    expect((await viaProxy()).statusCode).toBe(200);
    expect((await s.req({ method: 'POST', url: `/users/${id}/disable` })).statusCode).toBe(200);
    expect((await viaProxy()).statusCode).toBe(403);
  });

  it("kills the user's keys on another instance within the key cache's second", async () => {
    const loc = await freshLocation(backend);
    const a = new ObjectStore(openDb(loc.location));
    await migrate(a.db);
    const b = new ObjectStore(openDb(loc.location));
    const serviceB = { store: b }; // instance b's service object, which holds its key cache
    try {
      const { obj: user } = await a.create(User, { Email: 'x@example.com' });
      const key = String((await a.create(APIKey, { Scopes: ['user'], UserID: user.id })).response?.Secret);
      expect((await authenticateApiKey(serviceB, key)).userId).toBe(user.id); // cached on instance b
      const ctx = {
        store: a,
        db: a.db,
        logger: pino({ level: 'silent' }),
        config: loadServiceConfig({ env: {} }),
      };
      await disableUser(ctx, SYSTEM, user.id, '');
      // Gone for good: not just refused because the user is disabled.
      expect(
        await a.get(APIKey, String((await b.findByKey(APIKey, 'KeyHash', hashApiKey(key)))?.id ?? 'none')),
      ).toBeUndefined();
      const spy = vi.spyOn(Date, 'now').mockReturnValue(Date.now() + KEY_CACHE_TTL_MS + 1);
      try {
        await expect(authenticateApiKey(serviceB, key)).rejects.toMatchObject({ status: 401 });
      } finally {
        spy.mockRestore();
      }
    } finally {
      await a.db.close();
      await b.db.close();
      await loc.cleanup();
    }
  });
});

describe('merge suggestions (property)', () => {
  const user = fc.record({
    ID: fc.stringMatching(/^[a-z0-9]{14}$/),
    Email: fc.constantFrom('', 'a@x.org', 'b@x.org', 'A@X.org'),
    OtherEmails: fc.array(fc.constantFrom('a@x.org', 'c@x.org', 'B@x.org'), { maxLength: 2 }),
    UserName: fc.constantFrom('', 'alice', 'alice2', 'bob', 'bob_07'),
    Name: fc.record({ FullName: fc.constantFrom('', 'Alice Liddell', 'alice  liddell', 'Bob') }),
    MergedInto: fc.constantFrom('', '', 'someone'),
  });
  it('suggests exactly the unmerged pairs sharing an address, or a full name and user-name stem', () => {
    fc.assert(
      fc.property(fc.uniqueArray(user, { selector: (u) => u.ID, maxLength: 8 }), (users) => {
        const got = suggestMerges(users);
        const emails = (u: (typeof users)[number]) =>
          new Set([u.Email, ...u.OtherEmails].filter((e) => e !== '').map((e) => e.toLowerCase()));
        const stem = (n: string) => n.replace(/[-_.]?\d+$/, '');
        const nameKey = (u: (typeof users)[number]) =>
          u.Name.FullName && u.UserName
            ? `${u.Name.FullName.toLowerCase().replace(/\s+/g, ' ')}/${stem(u.UserName)}`
            : '';
        const live = users.filter((u) => !u.MergedInto);
        for (let i = 0; i < live.length; i++)
          for (let j = i + 1; j < live.length; j++) {
            const [x, y] = [live[i], live[j]] as [(typeof users)[number], (typeof users)[number]];
            const ids = [x.ID, y.ID].sort();
            const has = (reason: string) =>
              got.some((g) => g.Reason === reason && g.UserIDs.join() === ids.join());
            expect(has('same verified e-mail')).toBe([...emails(x)].some((e) => emails(y).has(e)));
            expect(has('same name and Unix user name')).toBe(nameKey(x) !== '' && nameKey(x) === nameKey(y));
          }
        expect(
          got.every(
            (g) => live.some((u) => u.ID === g.UserIDs[0]) && live.some((u) => u.ID === g.UserIDs[1]),
          ),
        ).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});
