/**
 * Second-afternoon audit of the proxy back channel (src/backchannel, src/api/backchannel.ts): privilege fields that
 * decide nothing are the same class of bug as a `sync` key granting admin.
 *
 * App.AccessGroups ("Group IDs whose members may use the app; empty: everyone", an admin-only
 * field) was stored and never read: the back channel handed the proxy an identity for every
 * usable user, by API key, by sign-in code and by session check. Any user of the tenant used an
 * App limited to one group. Now every identity the back channel gives a proxy passes the App's
 * AccessGroups, with the same rule as an access check (an active, not overdue membership at the
 * group's IntegrityLevel; API keys count as level 0).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeUser, signedIn } from '../auth/client.js';
import { create, op, person } from '../groups/fixture.js';
import { backends, startTestService, type TestService } from '../helpers.js';

const CALLBACK = 'https://wiki.example.com/.gatehouse/callback';
const STATE = 'state-0123456789abcdef';

describe.each(backends())('the back channel honours App.AccessGroups on %s', (backend) => {
  let s: TestService;
  let app: string;
  let token: string;
  let staff: string;
  let mfa: string;
  let vetted: string;
  beforeAll(async () => {
    s = await startTestService(backend);
    staff = await create(s, 'groups', { Name: 'staff' });
    mfa = await create(s, 'groups', { Name: 'mfa-staff', IntegrityLevel: 3 });
    vetted = await create(s, 'groups', { Name: 'vetted', RequiresApproval: true });
    app = await create(s, 'apps', {
      Name: 'wiki',
      URL: 'https://wiki.example.com',
      AccessGroups: [staff, vetted, mfa],
    });
    const t = await s.req({ method: 'POST', url: `/apps/${app}/proxytoken` });
    expect(t.statusCode, t.body).toBe(201);
    token = String(t.json().Token);
  });
  afterAll(async () => s?.close());

  const channel = (path: string, payload: Record<string, unknown>) =>
    s.req({
      method: 'POST',
      url: `/proxy/v1${path}`,
      payload,
      headers: { authorization: `Bearer ${token}` },
    });

  /** A signed-in browser's one-time code for the App (or the refusal). */
  const signinCode = async (b: Awaited<ReturnType<typeof signedIn>>) => {
    const res = await b.req({
      url: `/proxy/v1/signin?${new URLSearchParams({ app, state: STATE, return: CALLBACK })}`,
    });
    const location = String(res.headers.location ?? '');
    return { res, code: location.startsWith(CALLBACK) ? new URL(location).searchParams.get('code') : null };
  };

  it('an API key of a user in none of the groups gets no identity; a member does', async () => {
    const outsider = await person(s, 'Outsider');
    const refused = await channel('/apikey', { Key: outsider.key });
    expect(refused.statusCode, refused.body).toBe(403);
    expect(refused.body).not.toContain(outsider.email);
    await op(s, 'add', staff, outsider.id);
    const ok = await channel('/apikey', { Key: outsider.key });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json().UserID).toBe(outsider.id);
    // Removed again: refused again (the proxy caches a key's identity for a short while only).
    await op(s, 'remove', staff, outsider.id);
    expect((await channel('/apikey', { Key: outsider.key })).statusCode).toBe(403);
  });

  it('memberships that do not count do not open the App: requested, rejected, below the group level', async () => {
    const u = await person(s, 'Pending');
    expect((await op(s, 'add', vetted, u.id, { key: u.key })).statusCode).toBe(201); // a request
    expect((await channel('/apikey', { Key: u.key })).statusCode).toBe(403);
    await op(s, 'reject', vetted, u.id);
    expect((await channel('/apikey', { Key: u.key })).statusCode).toBe(403);
    // An active member of the level-3 group: an API key is level 0.
    await op(s, 'add', mfa, u.id);
    expect((await channel('/apikey', { Key: u.key })).statusCode).toBe(403);
  });

  it('a signed-in outsider gets no code, and a code or session of a member removed since gets no identity', async () => {
    const email = 'bc-outsider@example.com';
    const password = 'pw-bc-outsider-long-enough';
    const id = await makeUser(s, { email, password });
    const b = await signedIn(s, email, password);
    const first = await signinCode(b);
    expect(first.code, `${first.res.statusCode} ${first.res.headers.location}`).toBeNull();
    expect(first.res.statusCode).toBe(403);

    const added = await op(s, 'add', staff, id);
    expect([200, 201]).toContain(added.statusCode);
    const { code } = await signinCode(b);
    expect(code).toBeTruthy();
    const ex = await channel('/session/exchange', { Code: code });
    expect(ex.statusCode, ex.body).toBe(200);
    const sid = String(ex.json().SessionID);
    expect((await channel('/session/check', { SessionID: sid })).statusCode).toBe(200);

    // A code issued while a member, exchanged after the removal; and the session checked after it.
    const { code: late } = await signinCode(b);
    await op(s, 'remove', staff, id);
    expect((await channel('/session/exchange', { Code: late })).statusCode).toBe(403);
    expect((await channel('/session/check', { SessionID: sid })).statusCode).toBe(403);
  });

  it('an App without AccessGroups stays open to every usable user', async () => {
    const open = await create(s, 'apps', { Name: 'open', URL: 'https://open.example.com' });
    const t = await s.req({ method: 'POST', url: `/apps/${open}/proxytoken` });
    const u = await person(s, 'Anyone');
    const res = await s.req({
      method: 'POST',
      url: '/proxy/v1/apikey',
      payload: { Key: u.key },
      headers: { authorization: `Bearer ${t.json().Token}` },
    });
    expect(res.statusCode, res.body).toBe(200);
  });
});
