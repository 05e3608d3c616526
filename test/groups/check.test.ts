import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServiceConfig } from '../../src/config/index.js';
import { allowedNext, checkMembership, markUsed } from '../../src/groups/check.js';
import { sweepMemberships } from '../../src/groups/sweep.js';
import { Membership } from '../../src/objects/membership.js';
import type { ServiceContext } from '../../src/store/service.js';
import { backends, jsonLines, startTestService, type TestService } from '../helpers.js';
import { setTenant } from '../kit/index.js';
import { create, op, person } from './fixture.js';

describe.each(backends())('membership check, lists and expiry on %s', (backend) => {
  let s: TestService;
  let ctx: ServiceContext;
  let a: string;
  let b: string;
  let c: string;
  let alice: Awaited<ReturnType<typeof person>>;
  let syncKey: string;
  beforeAll(async () => {
    s = await startTestService(backend);
    ctx = { store: s.store, db: s.db, logger: s.app.log as never, config: loadServiceConfig({ env: {} }) };
    alice = await person(s, 'Alice');
    syncKey = await s.keyFor(['sync']);
    a = await create(s, 'groups', { Name: 'a', RequiresApproval: true });
    b = await create(s, 'groups', { Name: 'b' });
    c = await create(s, 'groups', { Name: 'c', RequiresActivation: true });
    // Alice is an active member of b only; approved (not active) in c.
    await op(s, 'add', b, alice.id);
    await op(s, 'add', c, alice.id);
    await setTenant(s, {
      SigninURL: 'https://id.example.com/signin',
      AllowedReturnOrigins: ['https://app.example.com'],
    });
  });
  afterAll(async () => s?.close());

  it('checks "and" without short-circuit and "or" up to the first active membership', async () => {
    const next = 'https://app.example.com/reports?x=1';
    const and = await checkMembership(ctx, alice.id, [a, b, c], 'and', { next });
    expect(and.StatusCode).toBe(403);
    const page = (g: string) => `https://id.example.com/signin/groups/${g}?next=${encodeURIComponent(next)}`;
    expect(and.Results).toEqual([
      { GroupID: a, StatusCode: 403, Location: page(a) },
      { GroupID: b, StatusCode: 200 },
      { GroupID: c, StatusCode: 403, Location: page(c) },
    ]);
    expect(and.Location).toBe(page(a));
    // or: a fails, b is active, c is never looked at.
    const or = await checkMembership(ctx, alice.id, [a, b, c], 'or', { next });
    expect(or).toEqual({
      Satisfied: true,
      StatusCode: 200,
      Results: [
        { GroupID: a, StatusCode: 403, Location: page(a) },
        { GroupID: b, StatusCode: 200 },
      ],
    });
    const first = await checkMembership(ctx, alice.id, [b, a, c], 'or');
    expect(first.Results).toEqual([{ GroupID: b, StatusCode: 200 }]);
    expect((await checkMembership(ctx, alice.id, [b], 'and')).StatusCode).toBe(200);
    const none = await checkMembership(ctx, alice.id, [a, c], 'or');
    expect(none.StatusCode).toBe(403);
    expect(none.Results).toHaveLength(2);
    expect(none.Location).toBe('https://id.example.com/signin/groups/' + a);
  });

  it('carries next as given (the page checks it), refuses an unknown user, and records uses', async () => {
    const evil = await checkMembership(ctx, alice.id, [a], 'and', { next: 'https://evil.example.net/' });
    expect(evil.Location).toBe(
      `https://id.example.com/signin/groups/${a}?next=${encodeURIComponent('https://evil.example.net/')}`,
    );
    await expect(
      checkMembership(ctx, alice.id, [a], 'and', { next: `https://x/${'a'.repeat(2048)}` }),
    ).rejects.toThrow(/longer/);
    // markUsed (the proxy back channel's hook): fills LastUsed of an active membership, ignores others.
    await markUsed(ctx, b, alice.id);
    const m = await s.store.get(Membership, `${b}.${alice.id}`);
    expect(m?.doc.LastUsed).not.toBe('0001-01-01T00:00:00Z');
    expect((m?.doc.LastChange as Record<string, string> | undefined)?.Via).toBe('system');
    const etag = m?.etag;
    await markUsed(ctx, b, alice.id); // within the minute: no new write
    expect((await s.store.get(Membership, `${b}.${alice.id}`))?.etag).toBe(etag);
    await markUsed(ctx, a, alice.id); // not a member: nothing happens, nothing thrown
    expect(await s.store.get(Membership, `${a}.${alice.id}`)).toBeUndefined();
    await expect(checkMembership(ctx, 'nosuchuser00000', [b], 'and')).rejects.toThrow(/does not exist/);
    expect(allowedNext('/signin/done', [])).toBe('/signin/done');
    expect(allowedNext('//evil.example.net/', [])).toBeUndefined();
    expect(allowedNext('/\\evil.example.net/', [])).toBeUndefined();
    expect(allowedNext('javascript:alert(1)', ['https://app.example.com'])).toBeUndefined();
    expect(allowedNext('https://app.example.com.evil.net/', ['https://app.example.com'])).toBeUndefined();
    expect(allowedNext('https://user@app.example.com/', ['https://app.example.com'])).toBeUndefined();
    expect(allowedNext('https://app.example.com/x', ['https://app.example.com'])).toBe(
      'https://app.example.com/x',
    );
  });

  it('serves the check over HTTP (JSON or form) to sync and admin keys only', async () => {
    const json = await s.req({
      method: 'POST',
      url: '/groups/check',
      key: syncKey,
      payload: { User: alice.id, Groups: [a, b], Op: 'or' },
    });
    expect(json.statusCode, json.body).toBe(200);
    expect(json.json()).toMatchObject({
      StatusCode: 200,
      Results: [
        { GroupID: a, StatusCode: 403 },
        { GroupID: b, StatusCode: 200 },
      ],
    });
    const form = await s.req({
      method: 'POST',
      url: '/groups/check',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `user=${alice.id}&group=${a}&group=${b}&next=${encodeURIComponent('https://app.example.com/')}`,
    });
    expect(form.statusCode, form.body).toBe(200);
    const body = form.json();
    expect(body.StatusCode).toBe(403); // op defaults to and
    expect(body.Results).toHaveLength(2);
    expect(body.Location).toContain(`/groups/${a}?next=`);
    // Unknown group: a 404 entry, not satisfied.
    const unknown = await s.req({
      method: 'POST',
      url: '/groups/check',
      payload: { User: alice.id, Groups: ['zzz'] },
    });
    expect(unknown.json()).toEqual({
      Satisfied: false,
      StatusCode: 403,
      Results: [{ GroupID: 'zzz', StatusCode: 404 }],
    });
    // Bad input.
    const badOp = await s.req({
      method: 'POST',
      url: '/groups/check',
      payload: { User: alice.id, Groups: [b], Op: 'xor' },
    });
    expect(badOp.statusCode).toBe(400);
    const noGroups = await s.req({
      method: 'POST',
      url: '/groups/check',
      payload: { User: alice.id, Groups: [] },
    });
    expect(noGroups.statusCode).toBe(400);
    const noUser = await s.req({
      method: 'POST',
      url: '/groups/check',
      payload: { User: 'nosuchuser00000', Groups: [b] },
    });
    expect(noUser.statusCode).toBe(404);
    // Scopes: user and audit keys may not ask.
    const audit = await s.keyFor(['audit']);
    for (const key of [alice.key, audit]) {
      const r = await s.req({
        method: 'POST',
        url: '/groups/check',
        key,
        payload: { User: alice.id, Groups: [b] },
      });
      expect(r.statusCode).toBe(403);
    }
  });

  it('requires the group integrity level', async () => {
    const high = await create(s, 'groups', { Name: 'high', IntegrityLevel: 2 });
    await op(s, 'add', high, alice.id);
    expect((await checkMembership(ctx, alice.id, [high], 'and')).StatusCode).toBe(403);
    expect((await checkMembership(ctx, alice.id, [high], 'and', { integrityLevel: 1 })).StatusCode).toBe(403);
    expect((await checkMembership(ctx, alice.id, [high], 'and', { integrityLevel: 2 })).StatusCode).toBe(200);
  });

  it('lists members of a group and groups of a user as JSON lines with the usual options', async () => {
    const g = await create(s, 'groups', { Name: 'listed' });
    const users = [];
    for (let i = 0; i < 5; i++) {
      const u = await person(s, `Member ${i}`);
      users.push(u);
      await op(s, 'add', g, u.id);
    }
    const all = await s.req({ method: 'GET', url: `/groups/${g}/members` });
    expect(all.statusCode).toBe(200);
    expect(all.headers['content-type']).toBe('application/x-json-lines');
    const lines = jsonLines(all.body);
    expect(lines).toHaveLength(5);
    for (const l of lines) expect(l.ID).toBe((l.Item as { ID: string }).ID);
    expect(lines.map((l) => (l.Item as { UserID: string }).UserID).sort()).toEqual(
      users.map((u) => u.id).sort(),
    );
    // Paging with limit and cursors, as on every list.
    const p1 = await s.req({ method: 'GET', url: `/groups/${g}/members?limit=2&order=UserID` });
    expect(jsonLines(p1.body)).toHaveLength(2);
    const end = p1.headers['x-end-cursor'] as string;
    expect(end).toBeTruthy();
    const p2 = await s.req({ method: 'GET', url: `/groups/${g}/members?limit=10&order=UserID&start=${end}` });
    expect(jsonLines(p2.body)).toHaveLength(3);
    // Extra filters combine with the group.
    const one = await s.req({
      method: 'GET',
      url: `/groups/${g}/members?filter=${encodeURIComponent(`UserID = "${users[0]!.id}"`)}`,
    });
    expect(jsonLines(one.body)).toHaveLength(1);
    const bad = await s.req({ method: 'GET', url: `/groups/${g}/members?filter=Nope%20%3D%201` });
    expect(bad.statusCode).toBe(400);
    // A user's groups: the user may read their own, others may not; audit may read all.
    const mine = await s.req({ method: 'GET', url: `/users/${alice.id}/groups`, key: alice.key });
    expect(mine.statusCode).toBe(200);
    expect(jsonLines(mine.body).map((l) => (l.Item as { GroupID: string }).GroupID)).toEqual(
      expect.arrayContaining([b, c]),
    );
    expect(
      (await s.req({ method: 'GET', url: `/users/${users[0]!.id}/groups`, key: alice.key })).statusCode,
    ).toBe(403);
    expect((await s.req({ method: 'GET', url: `/groups/${g}/members`, key: alice.key })).statusCode).toBe(
      403,
    );
    const audit = await s.keyFor(['audit']);
    expect(
      (await s.req({ method: 'GET', url: `/users/${users[0]!.id}/groups`, key: audit })).statusCode,
    ).toBe(200);
    // The generic read-only list: a user key sees only its own memberships.
    const own = jsonLines((await s.req({ method: 'GET', url: '/memberships', key: alice.key })).body);
    expect(own.length).toBeGreaterThan(0);
    for (const l of own) expect((l.Item as { UserID: string }).UserID).toBe(alice.id);
    expect((await s.req({ method: 'POST', url: '/memberships', payload: {} })).statusCode).toBe(405);
  });

  it('expires unused memberships lazily at check time and by the sweep', async () => {
    const g = await create(s, 'groups', { Name: 'expiring', ExpireUnusedDays: 30 });
    const u1 = await person(s, 'Stale One');
    const u2 = await person(s, 'Stale Two');
    const fresh = await person(s, 'Fresh');
    for (const u of [u1, u2, fresh]) await op(s, 'add', g, u.id);
    // Age two memberships: last used 31 days ago.
    const old = new Date(Date.now() - 31 * 86_400_000).toISOString().slice(0, 19) + 'Z';
    for (const u of [u1, u2]) {
      await s.store.systemPut(Membership, `${g}.${u.id}`, (doc) => ({
        doc: { ...doc!, ActivateTime: old, LastUsed: old },
      }));
    }
    // The report already leaves them out.
    const report = await s.req({ method: 'GET', url: '/groups/report.csv' });
    expect(report.body).not.toContain(u1.id);
    expect(report.body).toContain(fresh.id);
    // Lazily at check time: u1 expires now.
    const r = await checkMembership(ctx, u1.id, [g], 'and');
    expect(r.Results[0]).toMatchObject({ StatusCode: 403 });
    expect((await s.req({ method: 'GET', url: `/groups/${g}/members/${u1.id}` })).json()).toMatchObject({
      State: 'expired',
      LastChange: { Op: 'expire', Via: 'system', Reason: 'not used for 30 days' },
    });
    // Use of an overdue membership is refused (409 naming expired).
    const use = await op(s, 'use', g, u2.id, { key: syncKey });
    expect(use.statusCode).toBe(409);
    expect(use.headers['x-membership-state']).toBe('expired');
    // The sweep finds nothing more to expire but removes memberships of deleted users.
    const gone = await person(s, 'Gone');
    await op(s, 'add', g, gone.id);
    const user = await s.req({ method: 'GET', url: `/users/${gone.id}` });
    await s.req({
      method: 'DELETE',
      url: `/users/${gone.id}`,
      headers: { 'if-match': user.headers.etag as string },
    });
    const swept = await sweepMemberships(ctx);
    expect(swept).toEqual({ expired: 0, removed: 1 });
    expect(await s.store.get(Membership, `${g}.${gone.id}`)).toBeUndefined();
    // An expired member asks again: a new episode (the group needs no approval, so active at once).
    const back = await op(s, 'add', g, u1.id, { key: u1.key });
    expect(back.statusCode).toBe(200);
    expect(back.json()).toMatchObject({
      State: 'active',
      LastChange: { Op: 'request', FromState: 'expired' },
    });
    expect((await checkMembership(ctx, u1.id, [g], 'and')).StatusCode).toBe(200);
  });

  it('the sweep expires overdue memberships by itself', async () => {
    const g = await create(s, 'groups', { Name: 'swept', ExpireUnusedDays: 1 });
    const u = await person(s, 'Sleepy');
    await op(s, 'add', g, u.id);
    await op(s, 'use', g, u.id);
    const old = new Date(Date.now() - 2 * 86_400_000).toISOString().slice(0, 19) + 'Z';
    await s.store.systemPut(Membership, `${g}.${u.id}`, (doc) => ({
      doc: { ...doc!, ActivateTime: old, LastUsed: old },
    }));
    expect(await sweepMemberships(ctx)).toEqual({ expired: 1, removed: 0 });
    expect((await s.store.get(Membership, `${g}.${u.id}`))?.doc.State).toBe('expired');
  });
});
