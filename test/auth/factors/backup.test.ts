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
  signedIn,
  signIn,
} from '../../kit/index.js';

/**
 * The backup-code factor (src/auth/factors/backup): POST /auth/backup (form `code`), POST
 * /auth/enroll/backup (ten new codes, shown once; the old set stops working), DELETE
 * /auth/enroll/backup, as docs/signin.md describes them. Backup codes are *possession*, like
 * TOTP: one factor alone, two with a password or PIN, still one with TOTP. Each code works once.
 */
describe.each(backends())('backup-code factor on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `user${++n}@example.com`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('backup codes: 204 once, 403 when reused or wrong', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const b = await signedIn(s, e, PW);
    const gen = await b.req({ method: 'POST', url: '/auth/enroll/backup', json: {} });
    expect(gen.statusCode).toBe(200);
    const codes = gen.json().Codes as string[];
    expect(codes).toHaveLength(10);
    const c = new Browser(s);
    await c.post('/auth/email', { email: e });
    expect((await c.post('/auth/backup', { code: 'aaaaa-bbbbb' })).statusCode).toBe(403);
    expect((await c.post('/auth/backup', { code: codes[0] as string })).statusCode).toBe(204);
    expect((await c.post('/auth/backup', { code: codes[0] as string })).statusCode).toBe(403);
    expect((await c.post('/auth/backup', { code: (codes[1] as string).toUpperCase() })).statusCode).toBe(204);
  });

  it('enrolment: ten distinct codes, shown once (no-store), without look-alike characters; a new set replaces the old', async () => {
    const a = await account(s, { tag: 'backup-set' });
    const b = await signIn(s, a, { password: true });
    const gen = await b.req({ method: 'POST', url: '/auth/enroll/backup', json: {} });
    expect(gen.statusCode).toBe(200);
    expect(gen.headers['cache-control']).toBe('no-store');
    const codes = gen.json().Codes as string[];
    expect(new Set(codes).size).toBe(10);
    for (const c of codes) expect(c).toMatch(/^[a-hjkmnp-z2-9]{5}-[a-hjkmnp-z2-9]{5}$/);
    // Password + backup codes now reach two factors: the password session may not make new ones.
    const again = await b.req({ method: 'POST', url: '/auth/enroll/backup', json: {} });
    expect(again.statusCode).toBe(401);
    expect(again.json().RequiredLevel).toBe(3);
    expect((await b.req({ method: 'DELETE', url: '/auth/enroll/backup' })).statusCode).toBe(401);
    const two = await signIn(s, { ...a, backup: codes }, { password: true, backup: true }, { level: 3 });
    const fresh = await two.req({ method: 'POST', url: '/auth/enroll/backup', json: {} });
    expect(fresh.statusCode).toBe(200);
    const next = fresh.json().Codes as string[];
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: a.email });
    expect((await c.post('/auth/backup', { code: codes[5] as string })).statusCode).toBe(403);
    expect((await c.post('/auth/backup', { code: next[5] as string })).statusCode).toBe(204);
    // Removed: no code works, and the factor is no longer offered.
    expect((await two.req({ method: 'DELETE', url: '/auth/enroll/backup' })).statusCode).toBe(204);
    const d = new Browser(s, { ip: freshIp() });
    await d.post('/auth/email', { email: a.email });
    expect((await authResponse(d)).Factors).toEqual(['password']);
    expect((await d.post('/auth/backup', { code: next[6] as string })).statusCode).toBe(403);
  });

  it('a right code proves one factor (possession); TOTP beside it is the same kind; a password makes two', async () => {
    const a = await account(s, { totp: true, backup: true, tag: 'backup-level' });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    expect((await b.post('/auth/backup', { code: a.backup?.shift() as string })).statusCode).toBe(204);
    expect(await authResponse(b)).toMatchObject({ IntegrityLevel: 2, Proven: ['backup'] });
    await signIn(s, a, { totp: true }, { browser: b, level: 2 });
    await signIn(s, a, { password: true }, { browser: b, level: 3 });
  });

  it('wrong codes: 403 Incorrect Credential; counted for backup codes only; a code refused while waiting is not spent', async () => {
    const a = await account(s, { backup: true, tag: 'backup-wrong' });
    const codes = a.backup as string[];
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    const wrong = await b.post('/auth/backup', { code: 'aaaaa-bbbbb' });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.headers['x-error-code']).toBe('Incorrect Credential');
    expect(await levelOf(b)).toBe(1);
    expect(await attempts(b, '/auth/backup', { code: 'aaaaa-bbbbb' }, 4)).toEqual([403, 403, 403, 429]);
    const held = await b.post('/auth/backup', { code: codes[0] as string });
    expect(held.statusCode).toBe(429);
    expect(held.headers['x-next-attempt']).toMatch(HTTP_DATE);
    // The password is not held up (it does not complete this sign-in: backup codes reach 3).
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    expect((await b.post('/auth/backup', { code: codes[0] as string })).statusCode).toBe(429);
    // Once the wait is over, the code refused with 429 still works: it was never checked.
    const wait = Date.parse(String(held.headers['x-next-attempt'])) - Date.now();
    expect(wait).toBeLessThanOrEqual(3000);
    await new Promise((r) => setTimeout(r, Math.max(0, wait) + 100));
    expect((await b.post('/auth/backup', { code: codes[0] as string })).statusCode).toBe(204);
    expect(await levelOf(b)).toBe(3);
  });

  it('edge cases: any case, spaces and hyphens; parallel use of one code succeeds once', async () => {
    const a = await account(s, { backup: true, tag: 'backup-edge' });
    const codes = a.backup as string[];
    const spellings = [
      (codes[0] as string).toUpperCase(),
      (codes[1] as string).replace('-', ''),
      ` ${(codes[2] as string).replace('-', ' - ')} `,
    ];
    for (const code of spellings) {
      const b = new Browser(s, { ip: freshIp() });
      await b.post('/auth/email', { email: a.email });
      expect([code, (await b.post('/auth/backup', { code })).statusCode]).toEqual([code, 204]);
    }
    const racers = await Promise.all(
      [0, 1].map(async () => {
        const b = new Browser(s, { ip: freshIp() });
        await b.post('/auth/email', { email: a.email });
        return b;
      }),
    );
    const results = await Promise.all(
      racers.map((b) => b.post('/auth/backup', { code: codes[3] as string })),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([204, 403]);
  });
});
