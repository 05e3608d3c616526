import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Browser } from '../auth/client.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import {
  type Account,
  account,
  freshIp,
  levelOf,
  PIN,
  PW,
  secretOf,
  signIn,
  totpCode,
} from '../kit/index.js';

/**
 * Finding 4: credentials rewritten without proving the current ones. Every enrolment endpoint of
 * every factor goes through one rule (src/auth/factors/stepup.ts): API keys only as an
 * administrator's explicit reset (?user=), sessions only at the level the user's factors reach.
 */
interface Endpoint {
  factor: string;
  method: 'PUT' | 'POST' | 'DELETE';
  url: string;
  body?: Record<string, unknown>;
}
const ENDPOINTS: Endpoint[] = [
  {
    factor: 'password',
    method: 'PUT',
    url: '/auth/enroll/password',
    body: { Password: 'a brand new pass phrase' },
  },
  { factor: 'password', method: 'DELETE', url: '/auth/enroll/password' },
  { factor: 'pin', method: 'PUT', url: '/auth/enroll/pin', body: { PIN: '13571357' } },
  { factor: 'pin', method: 'DELETE', url: '/auth/enroll/pin' },
  { factor: 'totp', method: 'POST', url: '/auth/enroll/totp', body: {} },
  { factor: 'totp', method: 'POST', url: '/auth/enroll/totp/confirm', body: { Code: '000000' } },
  { factor: 'totp', method: 'DELETE', url: '/auth/enroll/totp' },
  { factor: 'backup', method: 'POST', url: '/auth/enroll/backup', body: {} },
  { factor: 'backup', method: 'DELETE', url: '/auth/enroll/backup' },
];
const SCOPES = ['user', 'audit', 'sync', 'admin'] as const;

/** The user's credentials as stored (hashes, encrypted secrets, pending enrolment, Have* flags). */
async function credentials(s: TestService, id: string) {
  const doc = (await s.req({ url: `/users/${id}` })).json();
  return JSON.stringify({
    secret: await secretOf(s, id),
    flags: [doc.HavePassword, doc.HavePIN, doc.HaveTOTPSecret],
  });
}

const send = (b: Browser, e: Endpoint, url = e.url) =>
  b.req({ method: e.method, url, ...(e.body ? { json: e.body } : {}) });

describe.each(backends())('credential changes need step-up on %s', (backend) => {
  let s: TestService;
  let full: Account;
  beforeAll(async () => {
    s = await startTestService(backend);
    full = await account(s, { pin: true, totp: true, tag: 'full' });
    const backup = await s.req({ method: 'POST', url: `/auth/enroll/backup?user=${full.id}`, payload: {} });
    expect(backup.statusCode).toBe(200);
  });
  afterAll(async () => s?.close());

  it("no API key of the user itself, of any scope, changes the user's credentials (403, nothing stored)", async () => {
    const before = await credentials(s, full.id);
    for (const scope of SCOPES) {
      const key = await s.keyFor([scope], full.id);
      // Without ?user=, with an empty one, with a misspelt one and (non-admin keys) naming itself.
      const queries = ['', '?user=', '?User=x', `?USER=${s.adminId}`];
      if (scope !== 'admin') queries.push(`?user=${full.id}`);
      for (const e of ENDPOINTS) {
        for (const q of queries) {
          const r = await s.req({
            method: e.method,
            url: `${e.url}${q}`,
            key,
            ...(e.body ? { payload: e.body } : { payload: undefined }),
          });
          expect([r.statusCode, r.headers['x-error-code']], `${scope} ${e.method} ${e.url}${q}`).toEqual([
            403,
            'Forbidden',
          ]);
        }
      }
    }
    expect(await credentials(s, full.id)).toBe(before);
    // The attack as reported: the audit key sets a password, then signs in with it.
    const audit = await s.keyFor(['audit'], full.id);
    await s.req({
      method: 'PUT',
      url: '/auth/enroll/password',
      key: audit,
      payload: { Password: 'attacker chose this' },
    });
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: full.email });
    expect((await b.post('/auth/password', { password: 'attacker chose this' })).statusCode).toBe(403);
  });

  it("non-admin keys cannot reach another user's credentials either", async () => {
    const other = await account(s, { tag: 'other' });
    const before = await credentials(s, other.id);
    for (const scope of ['user', 'audit', 'sync'] as const) {
      const key = await s.keyFor([scope], full.id);
      for (const e of ENDPOINTS) {
        const r = await s.req({ method: e.method, url: `${e.url}?user=${other.id}`, key, payload: e.body });
        expect(r.statusCode, `${scope} ${e.method} ${e.url}`).toBe(403);
      }
    }
    expect(await credentials(s, other.id)).toBe(before);
  });

  it("an administrator's reset (admin key + ?user=) still works and ends the target's sessions", async () => {
    const a = await account(s, { tag: 'reset' });
    const b = await signIn(s, a, { password: true });
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(200);
    const r = await s.req({
      method: 'PUT',
      url: `/auth/enroll/password?user=${a.id}`,
      payload: { Password: 'reset by the admin' },
    });
    expect(r.statusCode, r.body).toBe(204);
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(401);
    const c = new Browser(s, { ip: freshIp() });
    await c.post('/auth/email', { email: a.email });
    expect((await c.post('/auth/password', { password: 'reset by the admin' })).statusCode).toBe(204);
    for (const e of ENDPOINTS.filter((x) => x.method === 'DELETE')) {
      const d = await s.req({ method: e.method, url: `${e.url}?user=${a.id}` });
      expect(d.statusCode, e.url).toBe(204);
    }
  });

  it('a session below the level the user can reach changes nothing: 401 with an intent for that level', async () => {
    const before = await credentials(s, full.id);
    const sessions = [
      await signIn(s, full, { password: true }),
      await signIn(s, full, { pin: true }),
      await signIn(s, full, { password: true, pin: true }),
    ];
    for (const b of sessions) {
      expect(await levelOf(b)).toBe(2);
      for (const e of ENDPOINTS) {
        const r = await send(b, e);
        expect([r.statusCode, r.headers['x-error-code']], `${e.method} ${e.url}`).toEqual([
          401,
          'Insufficient Integrity',
        ]);
        expect(r.json()).toMatchObject({ RequiredLevel: 3, IntegrityLevel: 2 });
        expect(r.headers['x-service-intent']).toBe(r.json().Intent);
      }
    }
    expect(await credentials(s, full.id)).toBe(before);
  });

  it('the refused change is retried after stepping up in the same session with the intent', async () => {
    const a = await account(s, { totp: true, tag: 'stepup' });
    const b = await signIn(s, a, { password: true });
    const refused = await b.req({ method: 'PUT', url: '/auth/enroll/pin', json: { PIN: '97319731' } });
    expect(refused.statusCode).toBe(401);
    const intent = refused.json().Intent as string;
    expect((await b.post('/auth', { intent })).json()).toMatchObject({ Authorized: false, RequiredLevel: 3 });
    expect((await b.post('/auth/totp', { code: totpCode(a.totp as string), intent })).statusCode).toBe(204);
    expect((await b.post('/auth', { intent })).json()).toMatchObject({ Authorized: true, IntegrityLevel: 3 });
    const retry = await b.req({ method: 'PUT', url: '/auth/enroll/pin', json: { PIN: '97319731' } });
    expect(retry.statusCode, retry.body).toBe(204);
  });

  it('a password-only session may add a second factor, but cannot replace or remove it afterwards', async () => {
    const a = await account(s, { tag: 'second' });
    const b = await signIn(s, a, { password: true });
    const start = await b.req({ method: 'POST', url: '/auth/enroll/totp', json: {} });
    expect(start.statusCode).toBe(200);
    const secret = start.json().Secret as string;
    const conf = await b.req({
      method: 'POST',
      url: '/auth/enroll/totp/confirm',
      json: { Code: totpCode(secret) },
    });
    expect(conf.statusCode, conf.body).toBe(204);
    // The attack as reported: a password-only session swaps the TOTP secret for its own.
    const swap = await b.req({ method: 'POST', url: '/auth/enroll/totp', json: {} });
    expect(swap.statusCode).toBe(401);
    expect((await b.req({ method: 'DELETE', url: '/auth/enroll/totp' })).statusCode).toBe(401);
    expect((await b.req({ method: 'POST', url: '/auth/enroll/backup', json: {} })).statusCode).toBe(401);
    // Neither can a fresh password-only session.
    const c = await signIn(s, a, { password: true });
    expect((await c.req({ method: 'DELETE', url: '/auth/enroll/totp' })).statusCode).toBe(401);
    expect(
      (
        await c.req({
          method: 'PUT',
          url: '/auth/enroll/password',
          json: { Password: 'hijacked pass phrase' },
        })
      ).statusCode,
    ).toBe(401);
    expect((await s.req({ url: `/users/${a.id}` })).json().HaveTOTPSecret).toBe(true);
  });

  it('removing the last factor of a kind needs the level that kind gives, then the level drops', async () => {
    const a = await account(s, { tag: 'last' });
    const codes = (
      await s.req({ method: 'POST', url: `/auth/enroll/backup?user=${a.id}`, payload: {} })
    ).json().Codes as string[];
    const weak = await signIn(s, a, { password: true });
    expect((await weak.req({ method: 'DELETE', url: '/auth/enroll/backup' })).statusCode).toBe(401);
    const strong = await signIn(s, a, { password: true });
    expect((await strong.post('/auth/backup', { code: codes[0] as string })).statusCode).toBe(204);
    expect(await levelOf(strong)).toBe(3);
    expect((await strong.req({ method: 'DELETE', url: '/auth/enroll/backup' })).statusCode).toBe(204);
    // Password only now: a level-2 session may change it (that is the level it gives).
    const now = await signIn(s, a, { password: true });
    expect(
      (
        await now.req({
          method: 'PUT',
          url: '/auth/enroll/password',
          json: { Password: 'another long phrase' },
        })
      ).statusCode,
    ).toBe(204);
  });

  it('changing or removing a credential ends the other sessions of the user', async () => {
    const a = await account(s, { tag: 'others' });
    const other = await signIn(s, a, { password: true });
    const me = await signIn(s, a, { password: true });
    expect(
      (
        await me.req({
          method: 'PUT',
          url: '/auth/enroll/password',
          json: { Password: 'changed pass phrase' },
        })
      ).statusCode,
    ).toBe(204);
    expect((await other.req({ url: '/users/me' })).statusCode).toBe(401);
    expect((await me.req({ url: '/users/me' })).statusCode).toBe(200);
  });

  it("an administrator's session needs IntegrityAdmin for another user's credentials", async () => {
    const admin = await account(s, { totp: true, admin: true, tag: 'admin' });
    const target = await account(s, { tag: 'target' });
    const targetSession = await signIn(s, target, { password: true });
    const weak = await signIn(s, admin, { password: true });
    const r = await weak.req({
      method: 'PUT',
      url: `/auth/enroll/pin?user=${target.id}`,
      json: { PIN: PIN },
    });
    expect(r.statusCode).toBe(401);
    const strong = await signIn(s, admin, { password: true, totp: true });
    const ok = await strong.req({
      method: 'PUT',
      url: `/auth/enroll/pin?user=${target.id}`,
      json: { PIN: PIN },
    });
    expect(ok.statusCode, ok.body).toBe(204);
    expect((await targetSession.req({ url: '/users/me' })).statusCode).toBe(401);
  });

  it('generated: no spelling of an enrolment request lets a level-2 session touch a level-3 account', async () => {
    const before = await credentials(s, full.id);
    const b = await signIn(s, full, { password: true });
    const hex = (c: string, upper: boolean) => {
      const h = c.charCodeAt(0).toString(16);
      return `%${upper ? h.toUpperCase() : h}`;
    };
    const spelling = fc.record({
      e: fc.constantFrom(...ENDPOINTS),
      encode: fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }),
      upper: fc.boolean(),
      slash: fc.constantFrom('', '/'),
      query: fc.constantFrom('', '?user=', `?user=${full.id}`, `?user=${full.id}&x=1`, '?x=user=1'),
    });
    await fc.assert(
      fc.asyncProperty(spelling, async ({ e, encode, upper, slash, query }) => {
        const path = [...e.url]
          .map((c, i) => (c !== '/' && encode[i % encode.length] ? hex(c, upper) : c))
          .join('');
        const r = await send(b, e, `${path}${slash}${query}`);
        expect(
          r.statusCode < 200 || r.statusCode >= 300,
          `${e.method} ${path}${slash}${query}: ${r.statusCode}`,
        ).toBe(true);
      }),
      { numRuns: 60 },
    );
    expect(await credentials(s, full.id)).toBe(before);
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
  });
});
