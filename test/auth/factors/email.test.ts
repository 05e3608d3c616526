import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../../helpers.js';
import { account, authResponse, Browser, freshIp, levelOf, makeUser, signIn } from '../../kit/index.js';

/**
 * The e-mail step (src/auth/factors/email): POST /auth/email names the user who is signing in,
 * as docs/signin.md describes it. It proves nothing (level 1, "identified"): there is no secret
 * to get wrong, so no 403 Incorrect Credential and no per-factor regulation; instead every lookup
 * takes from the client address's e-mail lookup bucket (tested in depth, with its numbers, in
 * test/security/enumeration.test.ts).
 *
 * Not tested, because it does not exist: an e-mail *proof*. The service sends no message (no
 * one-time code, no link) to the address, so owning the mailbox is never checked; the step has no
 * enrolment either (the address is the User's Email field, set through the object API).
 */
describe.each(backends())('e-mail step on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `user${++n}@example.com`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('POST /auth/email: 204 and identified session cookies; 400 Account Missing; form only once', async () => {
    const e = email();
    await makeUser(s, { email: e });
    const b = new Browser(s);
    const ok = await b.post('/auth/email', { email: e.toUpperCase() });
    expect(ok.statusCode, ok.body).toBe(204);
    const cookies = ([] as string[]).concat(ok.headers['set-cookie'] as string[]);
    const sc = cookies.find((c) => c.startsWith('gatehouse_session='));
    expect(sc).toMatch(/HttpOnly/);
    expect(sc).toMatch(/SameSite=Lax/);
    expect(sc).not.toMatch(/Secure/);
    expect(cookies.find((c) => c.startsWith('gatehouse_device='))).toMatch(/Max-Age=34560000/);
    // Each cookie once: a second Set-Cookie of the same name is at best noise, at worst a stale value.
    expect(cookies.map((c) => c.slice(0, c.indexOf('='))).sort()).toEqual([
      'gatehouse_device',
      'gatehouse_session',
    ]);
    const missing = await b.post('/auth/email', { email: 'nobody@example.com' });
    expect(missing.statusCode).toBe(400);
    expect(missing.headers['x-error-code']).toBe('Account Missing');
    const twice = await b.post('/auth/email', { email: [e, 'x@example.com'] });
    expect(twice.statusCode).toBe(400);
    expect(twice.json().Field).toBe('email');
    const none = await b.post('/auth/email', {});
    expect(none.statusCode).toBe(400);
    const charset = await b.req({
      method: 'POST',
      url: '/auth/email',
      payload: `email=${encodeURIComponent(e)}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded; charset=UTF-8' },
    });
    expect(charset.statusCode, charset.body).toBe(204);
  });

  it('names the user (level 1, identified) and proves nothing: no reads, no enrolment, no activation', async () => {
    const a = await account(s, { active: false, tag: 'email-level' });
    const b = new Browser(s, { ip: freshIp() });
    expect((await b.post('/auth/email', { email: a.email })).statusCode).toBe(204);
    expect(await authResponse(b)).toMatchObject({
      Authorized: false,
      IntegrityLevel: 1,
      IntegrityLevelName: 'identified',
      UserID: a.id,
      Email: a.email,
      Proven: [],
      Factors: ['password'],
    });
    for (const [method, url] of [
      ['GET', '/users/me'],
      ['GET', '/auth/sessions'],
      ['PUT', '/auth/enroll/pin'],
    ] as const) {
      const r = await b.req({ method, url, ...(method === 'PUT' ? { json: { PIN: '1234' } } : {}) });
      expect([url, r.statusCode, r.headers['x-error-code']]).toEqual([url, 401, 'Insufficient Integrity']);
    }
    expect((await b.post('/auth/activate')).statusCode).toBe(403);
    expect((await s.req({ url: `/users/${a.id}` })).json().Active).toBe(false);
  });

  it("the same address keeps the session and what it proved; another user's starts a new session", async () => {
    const a = await account(s, { tag: 'email-same' });
    const other = await account(s, { tag: 'email-other' });
    const b = await signIn(s, a, { password: true }, { level: 2 });
    const first = (await authResponse(b)).SessionID;
    // Case and surrounding spaces do not make another address.
    expect((await b.post('/auth/email', { email: `  ${a.email.toUpperCase()} ` })).statusCode).toBe(204);
    expect(await authResponse(b)).toMatchObject({
      SessionID: first,
      IntegrityLevel: 2,
      Proven: ['password'],
    });
    const token = b.session as string;
    expect((await b.post('/auth/email', { email: other.email })).statusCode).toBe(204);
    const switched = await authResponse(b);
    expect(switched).toMatchObject({ UserID: other.id, IntegrityLevel: 1, Proven: [] });
    expect(switched.SessionID).not.toBe(first);
    // The first user's session is gone, not merely left behind.
    const stale = new Browser(s, { ip: freshIp() });
    stale.cookies.set('gatehouse_session', token);
    expect((await stale.req({ url: '/users/me' })).statusCode).toBe(401);
  });

  it('unknown addresses are 400 Account Missing; disabled or suspended users are 403; the field is checked', async () => {
    const b = new Browser(s, { ip: freshIp() });
    const missing = await b.post('/auth/email', { email: 'nobody-here@example.com' });
    expect(missing.statusCode).toBe(400);
    expect(missing.headers['x-error-code']).toBe('Account Missing');
    expect(missing.json().Field).toBe('email');
    expect(await levelOf(b)).toBe(0);
    for (const barred of [{ Disabled: true }, { SuspendAfter: '2001-01-01T00:00:00Z' }]) {
      const e = email();
      const r = await s.req({ method: 'POST', url: '/users', payload: { Email: e, ...barred } });
      expect(r.statusCode).toBe(201);
      const denied = await b.post('/auth/email', { email: e });
      expect([barred, denied.statusCode, denied.headers['x-error-code']]).toEqual([barred, 403, 'Forbidden']);
    }
    const long = await b.post('/auth/email', { email: `${'x'.repeat(243)}@example.com` });
    expect(long.statusCode).toBe(400);
    expect(long.json().Field).toBe('email');
    // A flat JSON object is accepted as well as a form.
    const e = email();
    await makeUser(s, { email: e });
    expect((await b.req({ method: 'POST', url: '/auth/email', json: { email: e } })).statusCode).toBe(204);
  });

  it('lookups are limited per client address, found or missing: 30 at once, then 429', async () => {
    const e = email();
    await makeUser(s, { email: e });
    const ip = freshIp();
    const b = new Browser(s, { ip });
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++)
      statuses.push(
        (await b.post('/auth/email', { email: i % 2 ? e : `nobody${i}@example.com` })).statusCode,
      );
    expect(statuses.filter((c) => c === 204)).toHaveLength(15);
    expect(statuses.filter((c) => c === 400)).toHaveLength(15);
    const limited = await b.post('/auth/email', { email: e });
    expect(limited.statusCode).toBe(429);
    expect(limited.headers['x-error-code']).toBe('Too Many Requests');
    // The same lookup folded into a factor step takes from the same bucket.
    expect((await b.post('/auth/password', { email: e, password: 'anything at all here' })).statusCode).toBe(
      429,
    );
    // Another address has its own bucket.
    expect((await new Browser(s, { ip: freshIp() }).post('/auth/email', { email: e })).statusCode).toBe(204);
  });
});
