import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../../helpers.js';
import {
  account,
  authResponse,
  Browser,
  clearOfStepBoundary,
  freshIp,
  HTTP_DATE,
  levelOf,
  makeUser,
  oathtool,
  oathtoolInstalled,
  PW,
  signedIn,
  signIn,
  totpCode,
  wrongTotp,
} from '../../kit/index.js';

/**
 * The TOTP factor (src/auth/factors/totp): POST /auth/totp, POST /auth/enroll/totp (a pending
 * secret), POST /auth/enroll/totp/confirm, DELETE /auth/enroll/totp, as docs/signin.md describes
 * them: RFC 6238 (SHA-1, 6 digits, 30 s), ±1 step, each step accepted once. TOTP is *possession*:
 * one factor alone, two with a password or PIN, still one with backup codes. Codes come from
 * oathtool (an independent implementation) where the test says so, else from the otpauth package.
 */
const OATH = oathtoolInstalled();

describe.each(backends())('TOTP factor on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `user${++n}@example.com`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it.skipIf(!OATH)(
    'TOTP: enroll (URI + QR), sign in with an oathtool code, 403 wrong and replayed codes',
    async () => {
      const e = email();
      await makeUser(s, { email: e, password: PW });
      const b = await signedIn(s, e, PW);
      const start = await b.req({ method: 'POST', url: '/auth/enroll/totp', json: {} });
      expect(start.statusCode, start.body).toBe(200);
      const { Secret, URI, QRCode } = start.json();
      expect(URI).toMatch(/^otpauth:\/\/totp\//);
      expect(URI).toContain(`secret=${Secret}`);
      expect(QRCode).toMatch(/^data:image\/png;base64,/);
      const bad = await b.req({ method: 'POST', url: '/auth/enroll/totp/confirm', json: { Code: '000000' } });
      expect(bad.statusCode).toBe(403);
      // The previous step's code, sent within the same step (else it is two steps old).
      await clearOfStepBoundary();
      const prev = oathtool(Secret, new Date(Date.now() - 30_000));
      const conf = await b.req({ method: 'POST', url: '/auth/enroll/totp/confirm', json: { Code: prev } });
      expect(conf.statusCode, conf.body).toBe(204);
      expect((await b.req({ url: '/users/me' })).json().HaveTOTPSecret).toBe(true);
      // Stored encrypted: the base32 secret is nowhere in the database.
      const rows = await s.db.kysely
        .selectFrom('objects')
        .select('secret')
        .where('type', '=', 'User')
        .execute();
      expect(JSON.stringify(rows)).not.toContain(Secret);

      const c = new Browser(s);
      await c.post('/auth/email', { email: e });
      expect(
        (await c.post('/auth/totp', { code: '123456' === oathtool(Secret) ? '654321' : '123456' }))
          .statusCode,
      ).toBe(403);
      const code = oathtool(Secret);
      const ok = await c.post('/auth/totp', { code });
      expect(ok.statusCode, ok.body).toBe(204);
      expect((await c.post('/auth/totp', { code })).statusCode).toBe(403);
      await c.post('/auth/password', { password: PW });
      expect((await c.post('/auth')).json()).toMatchObject({ IntegrityLevel: 3, Authorized: true });
      // Removing it needs the level it gives: the password-only session that enrolled it is not
      // enough any more (step-up, docs/signin.md), the two-factor session is.
      expect((await b.req({ method: 'DELETE', url: '/auth/enroll/totp' })).statusCode).toBe(401);
      expect((await c.req({ method: 'DELETE', url: '/auth/enroll/totp' })).statusCode).toBe(204);
      expect((await c.req({ url: '/users/me' })).json().HaveTOTPSecret).toBe(false);
    },
  );

  it('enrolment: a pending secret (no-store; otpauth URI for this user) that is no factor until confirmed', async () => {
    const a = await account(s, { tag: 'totp-set' });
    const b = await signIn(s, a, { password: true });
    const none = await b.req({ method: 'POST', url: '/auth/enroll/totp/confirm', json: { Code: '123456' } });
    expect(none.statusCode).toBe(409);
    const start = await b.req({ method: 'POST', url: '/auth/enroll/totp', json: {} });
    expect(start.statusCode, start.body).toBe(200);
    expect(start.headers['cache-control']).toBe('no-store');
    const secret = start.json().Secret as string;
    expect(secret).toMatch(/^[A-Z2-7]{32}$/); // 20 random bytes
    const uri = new URL(start.json().URI as string);
    expect([uri.protocol, uri.host]).toEqual(['otpauth:', 'totp']);
    expect(decodeURIComponent(uri.pathname)).toBe(`/Gatehouse:${a.email}`);
    expect(Object.fromEntries(uri.searchParams)).toMatchObject({
      secret,
      issuer: 'Gatehouse',
      algorithm: 'SHA1',
      digits: '6',
      period: '30',
    });
    // Pending only: not a factor yet.
    expect((await b.req({ url: '/users/me' })).json().HaveTOTPSecret).toBe(false);
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: a.email });
    expect((await authResponse(c)).Factors).toEqual(['password']);
    expect((await c.post('/auth/totp', { code: totpCode(secret) })).statusCode).toBe(403);
    const wrong = await b.req({
      method: 'POST',
      url: '/auth/enroll/totp/confirm',
      json: { Code: wrongTotp(secret) },
    });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.headers['x-error-code']).toBe('Incorrect Credential');
    expect((await b.req({ url: '/users/me' })).json().HaveTOTPSecret).toBe(false);
    await clearOfStepBoundary();
    const conf = await b.req({
      method: 'POST',
      url: '/auth/enroll/totp/confirm',
      json: { Code: totpCode(secret, -1) },
    });
    expect(conf.statusCode, conf.body).toBe(204);
    expect((await authResponse(c)).Factors).toEqual(['password', 'totp']);
    // Confirmed: nothing is pending any more.
    const two = await signIn(s, { ...a, totp: secret }, { password: true, totp: true }, { level: 3 });
    const again = await two.req({
      method: 'POST',
      url: '/auth/enroll/totp/confirm',
      json: { Code: totpCode(secret, 1) },
    });
    expect(again.statusCode).toBe(409);
  });

  it('step-up: once enrolled, starting another secret or removing it takes password and TOTP', async () => {
    const a = await account(s, { totp: true, tag: 'totp-step' });
    const one = await signIn(s, a, { password: true }, { level: 2 });
    const r = await one.req({ method: 'POST', url: '/auth/enroll/totp', json: {} });
    expect(r.statusCode).toBe(401);
    expect(r.json()).toMatchObject({ IntegrityLevel: 2, RequiredLevel: 3 });
    expect((await one.req({ method: 'DELETE', url: '/auth/enroll/totp' })).statusCode).toBe(401);
    const two = await signIn(s, a, { password: true, totp: true }, { level: 3 });
    expect((await two.req({ method: 'POST', url: '/auth/enroll/totp', json: {} })).statusCode).toBe(200);
    // A new enrolment only started replaces nothing: the enrolled secret still signs in.
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: a.email });
    expect((await c.post('/auth/totp', { code: totpCode(a.totp as string, 1) })).statusCode).toBe(204);
    expect((await s.req({ url: `/users/${a.id}` })).json().HaveTOTPSecret).toBe(true);
  });

  it('a right code proves one factor (possession); backup codes beside it are the same kind; a password makes two', async () => {
    const a = await account(s, { totp: true, backup: true, tag: 'totp-level' });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    expect((await b.post('/auth/totp', { code: totpCode(a.totp as string) })).statusCode).toBe(204);
    expect(await authResponse(b)).toMatchObject({ IntegrityLevel: 2, Proven: ['totp'] });
    await signIn(s, a, { backup: true }, { browser: b, level: 2 });
    await signIn(s, a, { password: true }, { browser: b, level: 3 });
  });

  it('wrong codes: 403 Incorrect Credential, also two steps away or malformed; counted for TOTP only', async () => {
    const a = await account(s, { totp: true, tag: 'totp-wrong' });
    const secret = a.totp as string;
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    // Two steps back, three ahead: outside the ±1 window even if a step boundary passes meanwhile.
    const valid = new Set([-1, 0, 1].map((k) => totpCode(secret, k)));
    const away = [totpCode(secret, -2), totpCode(secret, 3)].filter((c) => !valid.has(c));
    const wrong = await b.post('/auth/totp', { code: away[0] ?? wrongTotp(secret) });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.headers['x-error-code']).toBe('Incorrect Credential');
    expect(await levelOf(b)).toBe(1);
    const codes = [away[1] ?? wrongTotp(secret), 'abcdef', '1234567'];
    const statuses: number[] = [];
    for (const code of codes) statuses.push((await b.post('/auth/totp', { code })).statusCode);
    expect(statuses).toEqual([403, 403, 403]);
    const held = await b.post('/auth/totp', { code: totpCode(secret) });
    expect(held.statusCode).toBe(429);
    expect(held.headers['x-next-attempt']).toMatch(HTTP_DATE);
    // The password is not held up, and proving it refunds no TOTP guess.
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    expect((await b.post('/auth/totp', { code: totpCode(secret) })).statusCode).toBe(429);
    expect(await levelOf(b)).toBe(2);
  });

  it('each step is accepted once: a code again, or an older one after a newer, is 403; spaces are ignored', async () => {
    const a = await account(s, { totp: true, tag: 'totp-replay' });
    const secret = a.totp as string;
    // The steps relative to now must stay the same steps while the test sends them.
    await clearOfStepBoundary(8_000);
    const now = totpCode(secret);
    const next = totpCode(secret, 1);
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    expect((await b.post('/auth/totp', { code: `${next.slice(0, 3)} ${next.slice(3)}` })).statusCode).toBe(
      204,
    );
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: a.email });
    expect((await c.post('/auth/totp', { code: next })).statusCode).toBe(403);
    if (now !== next) expect((await c.post('/auth/totp', { code: now })).statusCode).toBe(403);
    expect(await levelOf(c)).toBe(1);
  });

  it('confirmations are regulated apart from sign-in codes (the TOTP sign-in is not held up)', async () => {
    const a = await account(s, { totp: true, tag: 'totp-confirm' });
    const two = await signIn(s, a, { password: true, totp: true }, { level: 3 });
    const start = await two.req({ method: 'POST', url: '/auth/enroll/totp', json: {} });
    expect(start.statusCode).toBe(200);
    const pending = start.json().Secret as string;
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push(
        (
          await two.req({
            method: 'POST',
            url: '/auth/enroll/totp/confirm',
            json: { Code: wrongTotp(pending) },
          })
        ).statusCode,
      );
    expect(statuses).toEqual([403, 403, 403, 403, 429]);
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: a.email });
    expect((await c.post('/auth/totp', { code: totpCode(a.totp as string, 1) })).statusCode).toBe(204);
  });
});
