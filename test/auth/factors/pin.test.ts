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
  PIN,
  signIn,
} from '../../kit/index.js';

/**
 * The PIN factor (src/auth/factors/pin, on knowledge.ts): POST /auth/pin (form field `code`) and
 * PUT/DELETE /auth/enroll/pin {"PIN"}, 4 to 12 digits, as docs/signin.md describes them. A PIN is
 * *knowledge*, like a password: one factor (level 2), and password + PIN is still one factor.
 */
describe.each(backends())('PIN factor on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `user${++n}@example.com`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('POST /auth/pin: 204, 403, and 429 with X-Next-Attempt after repeated failures', async () => {
    const e = email();
    await makeUser(s, { email: e, pin: '1234' });
    const b = new Browser(s, { ip: '10.0.0.2' });
    await b.post('/auth/email', { email: e });
    expect((await b.post('/auth/pin', { code: '1234' })).statusCode).toBe(204);
    const statuses: number[] = [];
    let last = await b.post('/auth/pin', { code: '0000' });
    for (let i = 0; i < 5; i++) {
      statuses.push(last.statusCode);
      last = await b.post('/auth/pin', { code: '0000' });
    }
    expect(statuses.slice(0, 4)).toEqual([403, 403, 403, 403]);
    expect(last.statusCode).toBe(429);
    expect(last.headers['x-next-attempt']).toMatch(HTTP_DATE);
    expect(Date.parse(String(last.headers['x-next-attempt']))).toBeGreaterThan(Date.now());
    // While backing off even the right PIN is refused.
    expect((await b.post('/auth/pin', { code: '1234' })).statusCode).toBe(429);
  });

  it('enrolment: 4 to 12 ASCII digits set HavePIN; anything else is 400', async () => {
    const a = await account(s, { tag: 'pin-set' });
    const b = await signIn(s, a, { password: true });
    const put = (PIN: unknown) => b.req({ method: 'PUT', url: '/auth/enroll/pin', json: { PIN } });
    for (const bad of ['123', '1234567890123', '12ab', '１２３４', ' 1234', '12 34', '', 1234]) {
      const r = await put(bad);
      expect([bad, r.statusCode, r.json().Field]).toEqual([bad, 400, 'PIN']);
    }
    expect((await b.req({ url: '/users/me' })).json().HavePIN).toBe(false);
    expect((await put('0000')).statusCode).toBe(204);
    expect((await put('123456789012')).statusCode).toBe(204);
    expect((await b.req({ url: '/users/me' })).json().HavePIN).toBe(true);
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: a.email });
    expect((await c.post('/auth/pin', { code: '0000' })).statusCode).toBe(403);
    expect((await c.post('/auth/pin', { code: '123456789012' })).statusCode).toBe(204);
  });

  it("step-up: changed at the level the user's factors reach (2 with knowledge only, 3 with TOTP)", async () => {
    const change = { method: 'PUT', url: '/auth/enroll/pin', json: { PIN: '97531' } };
    // PIN only: the PIN session may replace it; the e-mail step alone may not.
    const only = await account(s, { password: false, pin: true, tag: 'pin-only' });
    const weak = new Browser(s, { ip: freshIp() });
    await weak.post('/auth/email', { email: only.email });
    const denied = await weak.req(change);
    expect(denied.statusCode).toBe(401);
    expect(denied.json().RequiredLevel).toBe(2);
    expect((await (await signIn(s, only, { pin: true }, { level: 2 })).req(change)).statusCode).toBe(204);
    // Password + PIN are of one kind: the password session may change the PIN.
    const both = await account(s, { pin: true, tag: 'pin-pw' });
    expect((await (await signIn(s, both, { password: true }, { level: 2 })).req(change)).statusCode).toBe(
      204,
    );
    // PIN + TOTP: a PIN session is not enough, PIN and TOTP together are.
    const strong = await account(s, { password: false, pin: true, totp: true, tag: 'pin-totp' });
    const one = await signIn(s, strong, { pin: true }, { level: 2 });
    const r = await one.req(change);
    expect(r.statusCode).toBe(401);
    expect(r.json().RequiredLevel).toBe(3);
    expect((await one.req({ method: 'DELETE', url: '/auth/enroll/pin' })).statusCode).toBe(401);
    const two = await signIn(s, strong, { pin: true, totp: true }, { level: 3 });
    expect((await two.req(change)).statusCode).toBe(204);
  });

  it('a right PIN proves one factor; with a password still one (same kind); with TOTP two', async () => {
    const a = await account(s, { pin: true, totp: true, tag: 'pin-level' });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    expect((await b.post('/auth/pin', { code: PIN })).statusCode).toBe(204);
    expect(await authResponse(b)).toMatchObject({ IntegrityLevel: 2, Proven: ['pin'] });
    await signIn(s, a, { password: true }, { browser: b, level: 2 });
    await signIn(s, a, { totp: true }, { browser: b, level: 3 });
  });

  it('a wrong PIN: 403 Incorrect Credential; counted for the PIN only (TOTP is not held up)', async () => {
    // PIN + TOTP without a password: TOTP alone does not complete the sign-in (the device stays
    // untrusted, so the PIN's untrusted counter keeps waiting).
    const a = await account(s, { password: false, pin: true, totp: true, tag: 'pin-wrong' });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    const wrong = await b.post('/auth/pin', { code: '0000' });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.headers['x-error-code']).toBe('Incorrect Credential');
    expect(await levelOf(b)).toBe(1);
    expect(await attempts(b, '/auth/pin', { code: '0000' }, 4)).toEqual([403, 403, 403, 429]);
    await signIn(s, a, { totp: true }, { browser: b, level: 2 });
    const held = await b.post('/auth/pin', { code: PIN });
    expect(held.statusCode).toBe(429);
    expect(held.headers['x-next-attempt']).toMatch(HTTP_DATE);
    expect(await levelOf(b)).toBe(2);
  });

  it('edge cases: the field is `code`; leading zeros count; a removed PIN proves nothing', async () => {
    const e = email();
    await makeUser(s, { email: e, password: 'pin edge password', pin: '0042' });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: e });
    const named = await b.post('/auth/pin', { pin: '0042' });
    expect(named.statusCode).toBe(400);
    expect(named.json().Field).toBe('code');
    expect((await b.post('/auth/pin', { code: ['0042', '0042'] })).statusCode).toBe(400);
    expect((await b.post('/auth/pin', { code: '42' })).statusCode).toBe(403);
    expect((await b.post('/auth/pin', { code: '00042' })).statusCode).toBe(403);
    expect((await b.post('/auth/pin', { code: '0042' })).statusCode).toBe(204);
    expect((await b.req({ method: 'DELETE', url: '/auth/enroll/pin' })).statusCode).toBe(204);
    expect((await b.req({ url: '/users/me' })).json().HavePIN).toBe(false);
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: e });
    expect((await c.post('/auth/pin', { code: '0042' })).statusCode).toBe(403);
    expect(await levelOf(c)).toBe(1);
  });
});
