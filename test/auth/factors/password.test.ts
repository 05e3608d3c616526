import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../../helpers.js';
import {
  account,
  attempts,
  authResponse,
  Browser,
  freshIp,
  HTTP_DATE,
  levelOf,
  makeUser,
  PW,
  setTenant,
  signedIn,
  signIn,
} from '../../kit/index.js';

/**
 * The password factor (src/auth/factors/password, on knowledge.ts): POST /auth/password and
 * PUT/DELETE /auth/enroll/password, as docs/signin.md describes them. A password is *knowledge*:
 * one factor (level 2) on its own, never a second factor beside a PIN. The step-up rule itself is
 * tested for every factor at once in test/security/credentials.test.ts, regulation across factors
 * and devices in test/security/throttle.test.ts.
 */
describe.each(backends())('password factor on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `user${++n}@example.com`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('POST /auth/password: 204 raises the level, 403 wrong, 400 before e-mail; the API works with the session', async () => {
    const e = email();
    const id = await makeUser(s, { email: e, password: PW });
    const anon = new Browser(s);
    expect((await anon.post('/auth/password', { password: PW })).statusCode).toBe(400);
    const b = new Browser(s);
    await b.post('/auth/email', { email: e });
    const before = await b.req({ url: '/users/me' });
    expect(before.statusCode).toBe(401);
    expect(before.headers['x-error-code']).toBe('Insufficient Integrity');
    expect(before.headers['x-service-intent']).toBe(before.json().Intent);
    const wrong = await b.post('/auth/password', { password: 'not it at all' });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.headers['x-error-code']).toBe('Incorrect Credential');
    const ok = await b.post('/auth/password', { password: PW, intent: before.json().Intent });
    expect(ok.statusCode, ok.body).toBe(204);
    const me = await b.req({ url: '/users/me' });
    expect(me.statusCode).toBe(200);
    expect(me.json()).toMatchObject({ ID: id, HavePassword: true });
    // API clients may fold the e-mail step into the factor step.
    const oneStep = new Browser(s);
    expect((await oneStep.post('/auth/password', { email: e, password: PW })).statusCode).toBe(204);
    expect((await oneStep.req({ url: '/users/me' })).json().ID).toBe(id);
    expect(
      (await new Browser(s).post('/auth/password', { email: 'nobody@example.com', password: PW })).headers[
        'x-error-code'
      ],
    ).toBe('Account Missing');
    // A plain user's session has user scope: admin operations are refused.
    expect((await b.req({ url: '/tenant' })).statusCode).toBe(403);
    expect(JSON.stringify(s.logs)).not.toContain(PW);
  });

  it('POST /auth/password: 429 + X-Next-Attempt, also for parallel guesses; other users unaffected', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const b = new Browser(s, { ip: '10.0.0.3' });
    await b.post('/auth/email', { email: e });
    const results = await Promise.all(
      Array.from({ length: 10 }, () => b.post('/auth/password', { password: 'wrong guess here' })),
    );
    const codes = results.map((r) => r.statusCode).sort();
    // 3 free failures + the one that starts the back-off: at most 4 guesses are checked.
    expect(codes.filter((c) => c === 403).length).toBeLessThanOrEqual(4);
    expect(codes.filter((c) => c === 429).length).toBeGreaterThanOrEqual(6);
    expect(codes.every((c) => c === 403 || c === 429)).toBe(true);
    const r = results.find((x) => x.statusCode === 429);
    expect(r?.headers['x-next-attempt']).toMatch(HTTP_DATE);
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(429);
    const e2 = email();
    await makeUser(s, { email: e2, password: PW });
    await signedIn(s, e2, PW, { ip: '10.0.0.3' });
  });

  it('enrolment: PUT sets HavePassword; under PasswordMinLength characters or over 1024 is 400', async () => {
    const a = await account(s, { tag: 'pw-set' });
    const b = await signIn(s, a, { password: true }, { level: 2 });
    const put = (Password: unknown) =>
      b.req({ method: 'PUT', url: '/auth/enroll/password', json: { Password } });
    const short = await put('x'.repeat(11));
    expect(short.statusCode).toBe(400);
    expect(short.headers['x-error-code']).toBe('Invalid Field');
    expect(short.json().Field).toBe('Password');
    expect((await put('x'.repeat(1025))).statusCode).toBe(400);
    expect((await put(123456789012345)).statusCode).toBe(400);
    // Counted in characters, not UTF-16 units: 11 keys are 22 units and still too short.
    expect((await put('🔑'.repeat(11))).statusCode).toBe(400);
    expect((await put('🔑'.repeat(12))).statusCode, 'twelve characters').toBe(204);
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: a.email });
    expect((await c.post('/auth/password', { password: '🔑'.repeat(12) })).statusCode).toBe(204);
    // The longest password that can be set is one the sign-in step takes.
    const longest = 'y'.repeat(1024);
    expect((await put(longest)).statusCode).toBe(204);
    const d = new Browser(s, { ip: freshIp() });
    await d.post('/auth/email', { email: a.email });
    expect((await d.post('/auth/password', { password: longest })).statusCode).toBe(204);
    expect((await b.req({ url: '/users/me' })).json().HavePassword).toBe(true);
    // The tenant's minimum decides.
    await setTenant(s, { PasswordMinLength: 20 });
    try {
      expect((await put('z'.repeat(19))).statusCode).toBe(400);
      expect((await put('z'.repeat(20))).statusCode).toBe(204);
    } finally {
      await setTenant(s, { PasswordMinLength: 12 });
    }
  });

  it('step-up: one factor changes a password-only account; with TOTP too it takes both; other sessions end', async () => {
    const a = await account(s, { tag: 'pw-step' });
    const weak = new Browser(s, { ip: freshIp() });
    await weak.post('/auth/email', { email: a.email });
    const change = {
      method: 'PUT',
      url: '/auth/enroll/password',
      json: { Password: 'another long pass phrase' },
    };
    const denied = await weak.req(change);
    expect(denied.statusCode).toBe(401);
    expect(denied.headers['x-error-code']).toBe('Insufficient Integrity');
    expect(denied.json()).toMatchObject({ IntegrityLevel: 1, RequiredLevel: 2 });
    const other = await signIn(s, a, { password: true });
    const b = await signIn(s, a, { password: true });
    expect((await b.req(change)).statusCode).toBe(204);
    expect((await other.req({ url: '/users/me' })).statusCode).toBe(401);
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(200);
    const old = new Browser(s, { ip: freshIp() });
    await old.post('/auth/email', { email: a.email });
    expect((await old.post('/auth/password', { password: PW })).statusCode).toBe(403);
    expect((await old.post('/auth/password', { password: 'another long pass phrase' })).statusCode).toBe(204);

    const t = await account(s, { totp: true, tag: 'pw-step2' });
    const one = await signIn(s, t, { password: true }, { level: 2 });
    const r = await one.req(change);
    expect(r.statusCode).toBe(401);
    expect(r.json()).toMatchObject({ IntegrityLevel: 2, RequiredLevel: 3 });
    expect((await one.req({ method: 'DELETE', url: '/auth/enroll/password' })).statusCode).toBe(401);
    const two = await signIn(s, t, { password: true, totp: true }, { level: 3 });
    expect((await two.req(change)).statusCode).toBe(204);
  });

  it("API keys: the user's own key never sets it (403); the admin key's reset (?user=) does and ends the sessions", async () => {
    const a = await account(s, { tag: 'pw-key' });
    const b = await signIn(s, a, { password: true });
    const body = { Password: 'set by the administrator' };
    for (const scopes of [['user'], ['admin']]) {
      const own = await s.keyFor(scopes, a.id);
      const r = await s.req({ method: 'PUT', url: '/auth/enroll/password', payload: body, key: own });
      expect([scopes, r.statusCode]).toEqual([scopes, 403]);
    }
    const reset = await s.req({ method: 'PUT', url: `/auth/enroll/password?user=${a.id}`, payload: body });
    expect(reset.statusCode).toBe(204);
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(401);
    expect((await signedIn(s, a.email, body.Password, { ip: freshIp() })).session).toBeDefined();
  });

  it('a right password proves one factor; a PIN beside it is the same kind (still 2); TOTP makes two', async () => {
    const a = await account(s, { pin: true, totp: true, tag: 'pw-level' });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    expect(await authResponse(b)).toMatchObject({ IntegrityLevel: 1, ReachableLevel: 3, Proven: [] });
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    const r = await authResponse(b);
    expect(r).toMatchObject({ IntegrityLevel: 2, IntegrityLevelName: 'one factor', Proven: ['password'] });
    expect((r.Factors as string[]).sort()).toEqual(['pin', 'totp']);
    await signIn(s, a, { pin: true }, { browser: b, level: 2 });
    await signIn(s, a, { totp: true }, { browser: b, level: 3 });
  });

  it('a wrong password: 403 Incorrect Credential, nothing proven; counted for the password only', async () => {
    // Password + TOTP: proving TOTP alone does not complete the sign-in, so the device stays
    // untrusted and keeps sharing the untrusted counter (test/security/throttle.test.ts).
    const a = await account(s, { totp: true, tag: 'pw-wrong' });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    const wrong = await b.post('/auth/password', { password: 'not the password at all' });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.headers['x-error-code']).toBe('Incorrect Credential');
    expect(await levelOf(b)).toBe(1);
    expect(await attempts(b, '/auth/password', { password: 'not the password at all' }, 4)).toEqual([
      403, 403, 403, 429,
    ]);
    const held = await b.post('/auth/password', { password: PW });
    expect(held.statusCode).toBe(429);
    expect(held.headers['x-next-attempt']).toMatch(HTTP_DATE);
    // Another factor is not held up, and proving it refunds no password guess.
    await signIn(s, a, { totp: true }, { browser: b, level: 2 });
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(429);
  });

  it('edge cases: one password field, exact match (case, spaces); a removed password proves nothing', async () => {
    const a = await account(s, { tag: 'pw-edge' });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    const twice = await b.post('/auth/password', { password: [PW, PW] });
    expect(twice.statusCode).toBe(400);
    expect(twice.json().Field).toBe('password');
    expect((await b.post('/auth/password', {})).json().Field).toBe('password');
    expect((await b.post('/auth/password', { password: 'x'.repeat(1025) })).statusCode).toBe(400);
    expect((await b.post('/auth/password', { password: PW.toUpperCase() })).statusCode).toBe(403);
    expect((await b.post('/auth/password', { password: ` ${PW}` })).statusCode).toBe(403);
    expect(await levelOf(b)).toBe(1);
    const c = await signIn(s, a, { password: true });
    expect((await c.req({ method: 'DELETE', url: '/auth/enroll/password' })).statusCode).toBe(204);
    expect((await c.req({ url: '/users/me' })).json().HavePassword).toBe(false);
    expect((await c.post('/auth/password', { password: PW })).statusCode).toBe(403);
    expect(await authResponse(c)).toMatchObject({ Factors: [], ReachableLevel: 2 });
  });
});
