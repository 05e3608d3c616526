import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, authResponse, Browser, freshIp, PW, totpCode } from '../kit/index.js';
import { addScript, scriptLogs } from './kit.js';

/*
 * The sign-in hook (docs/scripts.md): a script decides after each proven factor; deny refuses the
 * step with the script's reason, RequireLevel raises what the session needs, and a script that
 * fails denies (fail-safe).
 */
describe.each(backends())('sign-in scripts on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
    await addScript(
      s,
      'sign-in',
      `function hook(input) {
        const email = input.User.Email;
        if (email.startsWith('blocked')) return { Deny: 'your account is on hold; call the help desk' };
        if (email.startsWith('strict')) return { RequireLevel: 3, Reason: 'members of finance need a second factor' };
        if (email.startsWith('broken')) throw new Error('bug in the policy');
        if (email.startsWith('loop')) for (;;) {}
        if (email.startsWith('weird')) return { RequireLevel: 'high' };
        return null;
      }`,
    );
  });
  afterAll(async () => {
    await s?.close();
  });

  const start = async (tag: string, totp = false) => {
    const a = await account(s, { tag, totp });
    const b = new Browser(s, { ip: freshIp() });
    expect((await b.post('/auth/email', { email: a.email })).statusCode).toBe(204);
    return { a, b };
  };

  it('allows an ordinary sign-in', async () => {
    const { b } = await start('plain');
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(200);
  });

  it('deny: the step is refused with the reason shown to the person, and nothing is proven', async () => {
    const { b } = await start('blocked');
    const r = await b.post('/auth/password', { password: PW });
    expect(r.statusCode).toBe(403);
    expect(r.headers['x-error-code']).toBe('Script Denied');
    expect(r.json().Message).toBe('your account is on hold; call the help desk');
    const ar = await authResponse(b);
    expect(ar.IntegrityLevel).toBe(1);
    expect(ar.Proven).toEqual([]);
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(401);
  });

  it('RequireLevel: the session needs the higher level, with the reason in AuthResponse', async () => {
    const { a, b } = await start('strict', true);
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    const ar = await authResponse(b);
    expect(ar).toMatchObject({
      IntegrityLevel: 2,
      RequiredLevel: 3,
      Authorized: false,
      Reason: 'members of finance need a second factor',
    });
    const me = await b.req({ url: '/users/me' });
    expect(me.statusCode).toBe(401);
    expect(me.headers['x-error-code']).toBe('Insufficient Integrity');
    let t = await b.post('/auth/totp', { code: totpCode(a.totp as string) });
    if (t.statusCode === 403) t = await b.post('/auth/totp', { code: totpCode(a.totp as string, 1) });
    expect(t.statusCode, t.body).toBe(204);
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(200);
  });

  it('fail-safe: a script that throws, loops or answers nonsense denies the sign-in', async () => {
    for (const tag of ['broken', 'loop', 'weird']) {
      const { b } = await start(tag);
      const r = await b.post('/auth/password', { password: PW });
      expect(r.statusCode, tag).toBe(403);
      expect(r.headers['x-error-code']).toBe('Script Denied');
      expect(r.json().Message).toContain('could not be checked');
    }
    const logs = (await scriptLogs(s)).filter((l) => l.Hook === 'sign-in');
    const failSafe = logs.filter((l) => String(l.Applied).startsWith('fail-safe: deny'));
    expect(failSafe.length).toBeGreaterThanOrEqual(3);
    expect(failSafe.some((l) => (l.LimitsHit as string[]).includes('time'))).toBe(true);
    // The input shows the factor and level; no secret is in it.
    const input = JSON.parse(String(failSafe[0]?.Input));
    expect(input).toMatchObject({ Factor: 'password', Factors: ['password'], Level: 2 });
    expect(JSON.stringify(logs)).not.toContain(PW);
  });
});
