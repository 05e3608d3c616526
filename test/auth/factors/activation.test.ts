import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../../helpers.js';
import {
  account,
  activationCode,
  attempts,
  authResponse,
  Browser,
  freshIp,
  HTTP_DATE,
  levelOf,
  makeUser,
  PW,
  setTenant,
  signIn,
} from '../../kit/index.js';

/**
 * The activation-code step (src/auth/factors/activation): POST /auth/activation_code and POST
 * /auth/activate, as docs/signin.md describes them. A code is an enrolment *invitation* (kind
 * `invitation`), not a proof of the person: it lifts a session to level 2 on its own so that a
 * new user can enrol and activate, but it is left out of the proven level, never combines into
 * two factors and never lends a level to a boost. There is no enrolment endpoint of its own:
 * codes are ActivationCode objects that administrators create. Who may redeem which code (bound
 * to a user or a group, general) and what an attacker can do with one are tested in
 * test/security/activation.test.ts.
 */
describe.each(backends())('activation-code factor on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `user${++n}@example.com`;
  const code = (tag: string) => `${tag}-${++n}-${Date.now().toString(36)}`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('activation: 403 when a code is required and missing or invalid; 204 with a valid one; uses and expiry count', async () => {
    await setTenant(s, { RequireActivationCode: true });
    try {
      const e = email();
      const id = await makeUser(s, { email: e, active: false });
      await s.req({
        method: 'POST',
        url: '/activationcodes',
        payload: { Code: 'welcome-123456', MaxUses: 1 },
      });
      await s.req({
        method: 'POST',
        url: '/activationcodes',
        payload: { Code: 'expired-123456', ExpireTime: '2001-01-01T00:00:00Z' },
      });
      const b = new Browser(s);
      await b.post('/auth/email', { email: e });
      const noCode = await b.post('/auth/activate');
      expect(noCode.statusCode).toBe(403);
      expect(noCode.headers['x-error-code']).toBe('Activation Code Required');
      expect((await b.post('/auth/activation_code', { code: 'wrong-code-000' })).statusCode).toBe(403);
      expect((await b.post('/auth/activation_code', { code: 'expired-123456' })).statusCode).toBe(403);
      expect((await b.post('/auth/activation_code', { code: 'welcome-123456' })).statusCode).toBe(204);
      expect((await b.post('/auth/activate')).statusCode).toBe(204);
      expect((await s.req({ url: `/users/${id}` })).json().Active).toBe(true);
      // MaxUses 1: a second user cannot use it again.
      const e2 = email();
      await makeUser(s, { email: e2, active: false });
      const c = new Browser(s);
      await c.post('/auth/email', { email: e2 });
      expect((await c.post('/auth/activation_code', { code: 'welcome-123456' })).statusCode).toBe(403);
    } finally {
      await setTenant(s, { RequireActivationCode: false });
    }
  });

  it('codes are ActivationCode objects: the code is write-only, uses are counted, MaxUses 0 is unlimited', async () => {
    const secret = code('unlimited');
    const id = await activationCode(s, { Code: secret, MaxUses: 0 });
    const before = await s.req({ url: `/activationcodes/${id}` });
    expect(before.json()).toMatchObject({ HaveCode: true, Uses: 0, MaxUses: 0 });
    expect(before.body).not.toContain(secret);
    for (let i = 0; i < 3; i++) {
      const u = await account(s, { password: false, active: false, tag: 'act-many' });
      const b = new Browser(s, { ip: freshIp() });
      await b.post('/auth/email', { email: u.email });
      expect((await b.post('/auth/activation_code', { code: secret })).statusCode).toBe(204);
    }
    expect((await s.req({ url: `/activationcodes/${id}` })).json().Uses).toBe(3);
  });

  it("a right code is an invitation: level 2 on its own, the user's first factor, activation; not a proof", async () => {
    const u = await account(s, { password: false, active: false, tag: 'act-new' });
    const secret = code('welcome');
    await activationCode(s, { Code: secret });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: u.email });
    expect((await b.post('/auth/activation_code', { code: secret })).statusCode).toBe(204);
    expect(await authResponse(b)).toMatchObject({
      IntegrityLevel: 2,
      Authorized: true,
      Active: false,
      Proven: ['activation_code'],
      Factors: [],
    });
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(200);
    // The user's first factor may be set from this session, and then counts as proven in it.
    const pw = await b.req({ method: 'PUT', url: '/auth/enroll/password', json: { Password: PW } });
    expect(pw.statusCode, pw.body).toBe(204);
    expect(((await authResponse(b)).Proven as string[]).sort()).toEqual(['activation_code', 'password']);
    expect((await b.post('/auth/activate')).statusCode).toBe(204);
    expect((await s.req({ url: `/users/${u.id}` })).json()).toMatchObject({
      Active: true,
      HavePassword: true,
    });
  });

  it('never a second factor: password + code is level 2; a code-only session cannot boost another', async () => {
    // Being enrolled (not active) with a password set by an administrator: a bound code serves them.
    const u = await account(s, { active: false, tag: 'act-second' });
    const bound = code('bound');
    await activationCode(s, { Code: bound, UserID: u.id, MaxUses: 0 });
    const b = await signIn(s, u, { password: true }, { level: 2 });
    expect((await b.post('/auth/activation_code', { code: bound })).statusCode).toBe(204);
    expect(await levelOf(b)).toBe(2);
    // A session of the same user that only named it asks to be raised to 2; the code lends nothing.
    const weak = new Browser(s, { ip: freshIp() });
    await weak.post('/auth/email', { email: u.email });
    const denied = await weak.req({ url: '/users/me' });
    expect(denied.json().RequiredLevel).toBe(2);
    const codeOnly = new Browser(s, { ip: freshIp() });
    await codeOnly.post('/auth/email', { email: u.email });
    expect((await codeOnly.post('/auth/activation_code', { code: bound })).statusCode).toBe(204);
    expect(await levelOf(codeOnly)).toBe(2);
    const boost = await codeOnly.req({
      method: 'POST',
      url: '/auth/boost',
      json: { Intent: denied.json().Intent },
    });
    expect(boost.statusCode).toBe(401);
    expect(await levelOf(weak)).toBe(1);
    // Nor does it change a credential the user already has.
    const change = await codeOnly.req({
      method: 'PUT',
      url: '/auth/enroll/password',
      json: { Password: 'taken over by an invitation' },
    });
    expect(change.statusCode).toBe(401);
  });

  it('a wrong code: 403 Incorrect Credential, nothing gained; counted for activation codes only', async () => {
    // Password + TOTP, not active yet: the password does not complete the sign-in (the device
    // stays untrusted), and a code bound to the user serves them.
    const u = await account(s, { totp: true, active: false, tag: 'act-wrong' });
    const bound = code('bound');
    await activationCode(s, { Code: bound, UserID: u.id });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: u.email });
    const wrong = await b.post('/auth/activation_code', { code: 'not-a-code-0000' });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.headers['x-error-code']).toBe('Incorrect Credential');
    expect(await levelOf(b)).toBe(1);
    expect(await attempts(b, '/auth/activation_code', { code: 'not-a-code-0000' }, 4)).toEqual([
      403, 403, 403, 429,
    ]);
    const held = await b.post('/auth/activation_code', { code: bound });
    expect(held.statusCode).toBe(429);
    expect(held.headers['x-next-attempt']).toMatch(HTTP_DATE);
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    expect((await b.post('/auth/activation_code', { code: bound })).statusCode).toBe(429);
  });

  it('POST /auth/activate without required codes: a proven factor activates, the e-mail step alone does not', async () => {
    const e = email();
    const id = await makeUser(s, { email: e, password: PW, active: false });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: e });
    const early = await b.post('/auth/activate');
    expect(early.statusCode).toBe(403);
    expect(early.headers['x-error-code']).toBe('Forbidden');
    expect((await s.req({ url: `/users/${id}` })).json().Active).toBe(false);
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    expect((await b.post('/auth/activate')).statusCode).toBe(204);
    expect((await s.req({ url: `/users/${id}` })).json().Active).toBe(true);
    // Already active: 204 again, also for a session that has proven nothing.
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: e });
    expect((await c.post('/auth/activate')).statusCode).toBe(204);
    // Required codes: an active user's sign-in needs none.
    await setTenant(s, { RequireActivationCode: true });
    try {
      expect((await c.post('/auth/activate')).statusCode).toBe(204);
    } finally {
      await setTenant(s, { RequireActivationCode: false });
    }
  });

  it('edge cases: the code is trimmed, at most 256 characters, one field; an expired code is refused', async () => {
    const u = await account(s, { password: false, active: false, tag: 'act-edge' });
    const secret = code('spaced');
    await activationCode(s, { Code: secret, MaxUses: 0 });
    const expired = code('expired');
    await activationCode(s, { Code: expired, MaxUses: 0, ExpireTime: '2001-01-01T00:00:00Z' });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: u.email });
    const long = await b.post('/auth/activation_code', { code: 'x'.repeat(257) });
    expect(long.statusCode).toBe(400);
    expect(long.json().Field).toBe('code');
    expect((await b.post('/auth/activation_code', { code: [secret, secret] })).statusCode).toBe(400);
    expect((await b.post('/auth/activation_code', { code: expired })).statusCode).toBe(403);
    expect((await b.post('/auth/activation_code', { code: secret.toUpperCase() })).statusCode).toBe(403);
    expect((await b.post('/auth/activation_code', { code: `  ${secret}\t` })).statusCode).toBe(204);
  });
});
