import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Browser } from '../auth/client.js';
import { op } from '../groups/fixture.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, activationCode, freshIp, levelOf, PW, setTenant, signIn, totpCode } from '../kit/index.js';

/**
 * Finding 5: an ActivationCode without a UserID acted as a login for any user. A code proves an
 * enrolment invitation only: a general code is for a new user (not active, no factor yet), a
 * bound code for its user; neither counts as a second factor nor carries admin rights.
 */
describe.each(backends())('activation codes on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const code = (tag: string) => `${tag}-${++n}-${Date.now().toString(36)}`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it("a general code is not a factor of an active user: 403, no level, the user's data stays closed", async () => {
    const victim = await account(s, { tag: 'victim' });
    const general = code('general');
    await activationCode(s, { Code: general, MaxUses: 0 });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: victim.email });
    const r = await b.post('/auth/activation_code', { code: general });
    expect(r.statusCode).toBe(403);
    expect(await levelOf(b)).toBe(1);
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(401);
    // The e-mail folded into the step, as an API client would send it: the same.
    const c = new Browser(s, { ip: freshIp() });
    expect((await c.post('/auth/activation_code', { email: victim.email, code: general })).statusCode).toBe(
      403,
    );
    expect(await levelOf(c)).toBe(1);
  });

  it("an administrator's password + a general code gives no admin access", async () => {
    const admin = await account(s, { admin: true, totp: true, tag: 'admin' });
    const general = code('general');
    await activationCode(s, { Code: general, MaxUses: 0 });
    const b = await signIn(s, admin, { password: true });
    expect((await b.post('/auth/activation_code', { code: general })).statusCode).toBe(403);
    expect(await levelOf(b)).toBe(2);
    expect((await b.req({ url: '/tenant' })).statusCode).toBe(401);
    expect((await b.req({ url: '/users' })).statusCode).toBe(401);
  });

  it('a bound code is refused once its user is active with factors of their own', async () => {
    const admin = await account(s, { admin: true, totp: true, tag: 'bound-active' });
    const bound = code('bound');
    await activationCode(s, { Code: bound, UserID: admin.id, MaxUses: 0 });
    const b = await signIn(s, admin, { password: true });
    expect((await b.post('/auth/activation_code', { code: bound })).statusCode).toBe(403);
    expect(await levelOf(b)).toBe(2);
    expect((await b.req({ url: '/tenant' })).statusCode).toBe(401);
  });

  it('a bound code never counts as the second factor, nor as an administrator', async () => {
    // An administrator still being enrolled: a password set by another administrator, not active.
    const admin = await account(s, { admin: true, active: false, tag: 'bound-admin' });
    const bound = code('bound');
    await activationCode(s, { Code: bound, UserID: admin.id, MaxUses: 0 });
    const b = await signIn(s, admin, { password: true });
    expect((await b.post('/auth/activation_code', { code: bound })).statusCode).toBe(204);
    expect(await levelOf(b)).toBe(2);
    expect((await b.req({ url: '/tenant' })).statusCode).toBe(401);
    // Even where the tenant lets level 2 do admin work, a code alone is no administrator.
    await setTenant(s, { IntegrityAdmin: 2 });
    try {
      const c = new Browser(s, { ip: freshIp() });
      await c.post('/auth/email', { email: admin.email });
      expect((await c.post('/auth/activation_code', { code: bound })).statusCode).toBe(204);
      expect(await levelOf(c)).toBe(2);
      expect((await c.req({ url: '/tenant' })).statusCode).not.toBe(200);
      const create = await c.req({
        method: 'POST',
        url: '/users',
        json: { Email: `x${n}@example.com`, Admin: true },
      });
      expect(create.statusCode).not.toBe(201);
      // With a factor of their own the same session is the administrator again.
      expect((await c.post('/auth/password', { password: PW })).statusCode).toBe(204);
      expect((await c.req({ url: '/tenant' })).statusCode).toBe(200);
    } finally {
      await setTenant(s, { IntegrityAdmin: 3 });
    }
  });

  it('a code bound to one user is refused for another', async () => {
    const owner = await account(s, { password: false, active: false, tag: 'owner' });
    const other = await account(s, { password: false, active: false, tag: 'intruder' });
    const bound = code('bound');
    await activationCode(s, { Code: bound, UserID: owner.id });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: other.email });
    expect((await b.post('/auth/activation_code', { code: bound })).statusCode).toBe(403);
    expect(await levelOf(b)).toBe(1);
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: owner.email });
    expect((await c.post('/auth/activation_code', { code: bound })).statusCode).toBe(204);
  });

  it('a group-bound code serves only new users who are members of that group, not those who only asked', async () => {
    const g = await s.req({
      method: 'POST',
      url: '/groups',
      payload: { Name: code('team'), RequiresApproval: true },
    });
    const groupId = g.headers['x-id'] as string;
    const member = await account(s, { password: false, active: false, tag: 'member' });
    const outsider = await account(s, { password: false, active: false, tag: 'outsider' });
    const asker = await account(s, { password: false, active: false, tag: 'asker' });
    expect((await op(s, 'add', groupId, member.id)).statusCode).toBeLessThan(300);
    // A pending join request (the group needs an approver) does not make the user one of the invited.
    await op(s, 'add', groupId, asker.id, { key: await s.keyFor(['user'], asker.id) });
    const asked = await s.req({ url: `/memberships/${groupId}.${asker.id}` });
    expect(JSON.parse(asked.body).State).toBe('requested');
    const team = code('team');
    await activationCode(s, { Code: team, GroupID: groupId, MaxUses: 0 });
    for (const [who, want] of [
      [outsider, 403],
      [asker, 403],
      [member, 204],
    ] as const) {
      const b = new Browser(s, { ip: freshIp() });
      await b.post('/auth/email', { email: who.email });
      expect([who.email, (await b.post('/auth/activation_code', { code: team })).statusCode]).toEqual([
        who.email,
        want,
      ]);
    }
    // Only an administrator binds a code to a group.
    const sync = await s.keyFor(['sync']);
    const bySync = await s.req({
      method: 'POST',
      url: '/activationcodes',
      key: sync,
      payload: { Code: code('sync'), GroupID: groupId },
    });
    expect(bySync.statusCode).toBe(403);
  });

  it('a general code is refused for a user who already has a factor, even before activation', async () => {
    const pending = await account(s, { active: false, tag: 'pending' });
    const general = code('general');
    await activationCode(s, { Code: general, MaxUses: 0 });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: pending.email });
    expect((await b.post('/auth/activation_code', { code: general })).statusCode).toBe(403);
  });

  it('a new user with a general code enrols factors, activates, and then signs in with them', async () => {
    await setTenant(s, { RequireActivationCode: true });
    try {
      const fresh = await account(s, { password: false, active: false, tag: 'fresh' });
      const general = code('general');
      await activationCode(s, { Code: general, MaxUses: 10 });
      const b = new Browser(s, { ip: freshIp() });
      await b.post('/auth/email', { email: fresh.email });
      expect((await b.post('/auth/activate')).headers['x-error-code']).toBe('Activation Code Required');
      expect((await b.post('/auth/activation_code', { code: general })).statusCode).toBe(204);
      expect(await levelOf(b)).toBe(2);
      expect((await b.post('/auth/activate')).statusCode).toBe(204);
      const pw = await b.req({ method: 'PUT', url: '/auth/enroll/password', json: { Password: PW } });
      expect(pw.statusCode, pw.body).toBe(204);
      const start = await b.req({ method: 'POST', url: '/auth/enroll/totp', json: {} });
      expect(start.statusCode, start.body).toBe(200);
      const secret = start.json().Secret as string;
      const conf = await b.req({
        method: 'POST',
        url: '/auth/enroll/totp/confirm',
        json: { Code: totpCode(secret) },
      });
      expect(conf.statusCode, conf.body).toBe(204);
      expect((await s.req({ url: `/users/${fresh.id}` })).json()).toMatchObject({
        Active: true,
        HavePassword: true,
        HaveTOTPSecret: true,
      });
      // Enrolled now: the invitation no longer changes what exists (that needs the new factors).
      expect((await b.req({ method: 'DELETE', url: '/auth/enroll/totp' })).statusCode).toBe(401);
      // And now the general code is no longer accepted for this user.
      const again = new Browser(s, { ip: freshIp() });
      await again.post('/auth/email', { email: fresh.email });
      expect((await again.post('/auth/activation_code', { code: general })).statusCode).toBe(403);
      const c = await signIn(s, { ...fresh, totp: secret }, { password: true, totp: true });
      expect(await levelOf(c)).toBe(3);
    } finally {
      await setTenant(s, { RequireActivationCode: false });
    }
  });

  it('generated: a code is accepted exactly when it is an invitation for this user, and never gives more than level 2', async () => {
    const cases = fc.record({
      active: fc.boolean(),
      password: fc.boolean(),
      admin: fc.boolean(),
      binding: fc.constantFrom('none' as const, 'self' as const, 'other' as const),
      expired: fc.boolean(),
      spent: fc.boolean(),
      withPassword: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        const u = await account(s, { password: c.password, active: c.active, admin: c.admin, tag: 'gen' });
        const other =
          c.binding === 'other'
            ? await account(s, { password: false, active: false, tag: 'genx' })
            : undefined;
        const secret = code('gen');
        await activationCode(s, {
          Code: secret,
          MaxUses: 1,
          ...(c.binding === 'self' ? { UserID: u.id } : {}),
          ...(other ? { UserID: other.id } : {}),
          ...(c.expired ? { ExpireTime: '2001-01-01T00:00:00Z' } : {}),
        });
        if (c.spent) {
          // Used up by someone it was meant for.
          const first =
            other ??
            (c.binding === 'self' ? u : await account(s, { password: false, active: false, tag: 'geny' }));
          const f = new Browser(s, { ip: `10.71.${Math.floor(n / 250)}.${n % 250}` });
          await f.post('/auth/email', { email: first.email });
          await f.post('/auth/activation_code', { code: secret });
        }
        const b = new Browser(s, { ip: `10.72.${Math.floor(n / 250)}.${n % 250}` });
        await b.post('/auth/email', { email: u.email });
        if (c.withPassword && c.password)
          expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
        const r = await b.post('/auth/activation_code', { code: secret });
        const enrolling = !c.active || !c.password;
        const invited =
          c.binding === 'self' ? enrolling : c.binding === 'none' ? !c.active && !c.password : false;
        const expected =
          invited && !c.expired && !(c.spent && c.binding === 'self') && !(c.spent && c.binding === 'none')
            ? 204
            : 403;
        expect(r.statusCode, JSON.stringify(c)).toBe(expected);
        expect(await levelOf(b)).toBeLessThanOrEqual(2);
        if (c.admin) expect((await b.req({ url: '/tenant' })).statusCode).not.toBe(200);
      }),
      { numRuns: 25 },
    );
  }, 120_000);

  it('uses beyond MaxUses, expired codes and parallel redemptions of the last use are refused', async () => {
    const once = code('once');
    await activationCode(s, { Code: once, MaxUses: 1 });
    const users = await Promise.all(
      Array.from({ length: 4 }, () => account(s, { password: false, active: false, tag: 'race' })),
    );
    const results = await Promise.all(
      users.map(async (u) => {
        const b = new Browser(s, { ip: `10.50.0.${users.indexOf(u) + 1}` });
        await b.post('/auth/email', { email: u.email });
        return (await b.post('/auth/activation_code', { code: once })).statusCode;
      }),
    );
    expect(results.filter((c) => c === 204)).toHaveLength(1);
    expect(results.filter((c) => c === 403)).toHaveLength(3);
    const expired = code('expired');
    await activationCode(s, { Code: expired, MaxUses: 0, ExpireTime: '2001-01-01T00:00:00Z' });
    const late = await account(s, { password: false, active: false, tag: 'late' });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: late.email });
    expect((await b.post('/auth/activation_code', { code: expired })).statusCode).toBe(403);
    expect(await levelOf(b)).toBe(1);
  });
});
