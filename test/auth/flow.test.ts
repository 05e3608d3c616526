import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIntent } from '../../src/auth/intents.js';
import { authDb } from '../../src/auth/session/db.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { oathtool, oathtoolInstalled } from '../kit/index.js';
import { Browser, makeUser, signedIn } from './client.js';

const PW = 'correct horse battery staple';
const OATH = oathtoolInstalled();

describe.each(backends())('sign-in flow endpoints on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `user${++n}@example.com`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('POST /auth returns an AuthResponse: anonymous, identified, authorized; 400 for altered intents', async () => {
    const anon = await new Browser(s).post('/auth');
    expect(anon.statusCode).toBe(200);
    expect(anon.json()).toMatchObject({ Authorized: false, IntegrityLevel: 0, Factors: ['email'] });
    const e = email();
    await makeUser(s, { email: e, password: PW, pin: '424242' });
    const b = new Browser(s);
    await b.post('/auth/email', { email: e });
    const denied = await b.req({ url: '/users/me' });
    const intent = denied.json().Intent as string;
    const r1 = await b.post('/auth', { intent });
    expect(r1.statusCode).toBe(200);
    expect(r1.json()).toMatchObject({
      Authorized: false,
      IntegrityLevel: 1,
      RequiredLevel: 2,
      Method: 'GET',
      Path: '/users/me',
    });
    expect(r1.json().Factors.sort()).toEqual(['password', 'pin']);
    await b.post('/auth/pin', { code: '424242', intent });
    const r2 = await b.post('/auth', { intent });
    expect(r2.json()).toMatchObject({ Authorized: true, IntegrityLevel: 2, Factors: ['password'] });
    const [h, p, sig] = intent.split('.') as [string, string, string];
    const payload = JSON.parse(Buffer.from(p, 'base64url').toString());
    payload.lvl = 0;
    const forged = `${h}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${sig}`;
    const bad = await b.post('/auth', { intent: forged });
    expect(bad.statusCode).toBe(400);
    expect(bad.headers['x-error-code']).toBe('Invalid Intent');
    expect((await b.post('/auth/password', { password: PW, intent: forged })).statusCode).toBe(400);
    expect((await b.post('/auth', { intent: 'garbage' })).statusCode).toBe(400);
    const expired = await signIntent(
      s,
      { sid: '', did: '', uid: '', method: 'GET', path: '/', lvl: 2 },
      Date.now() - 3600_000,
    );
    expect((await b.post('/auth', { intent: expired })).statusCode).toBe(400);
  });

  it.skipIf(!OATH)(
    'administrators provision TOTP and backup codes for a user with the admin key',
    async () => {
      const e = email();
      const id = await makeUser(s, { email: e, password: PW });
      const start = await s.req({ method: 'POST', url: `/auth/enroll/totp?user=${id}`, payload: {} });
      expect(start.statusCode).toBe(200);
      const secret = start.json().Secret as string;
      const conf = await s.req({
        method: 'POST',
        url: `/auth/enroll/totp/confirm?user=${id}`,
        payload: { Code: oathtool(secret) },
      });
      expect(conf.statusCode, conf.body).toBe(204);
      const codes = (
        await s.req({ method: 'POST', url: `/auth/enroll/backup?user=${id}`, payload: {} })
      ).json().Codes;
      const b = new Browser(s);
      await b.post('/auth/email', { email: e });
      expect((await b.post('/auth')).json().Factors.sort()).toEqual(['backup', 'password', 'totp']);
      expect((await b.post('/auth/backup', { code: codes[3] })).statusCode).toBe(204);
      await b.post('/auth/password', { password: PW });
      expect((await b.post('/auth')).json().IntegrityLevel).toBe(3);
      // A user key may not act on another user.
      const userKey = await s.keyFor(['user'], id);
      expect(
        (
          await s.req({
            method: 'POST',
            url: `/auth/enroll/backup?user=${s.adminId}`,
            payload: {},
            key: userKey,
          })
        ).statusCode,
      ).toBe(403);
    },
  );

  it('sessions: listed with Current, revocable, sign-out ends the session', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const a = await signedIn(s, e, PW);
    const b = await signedIn(s, e, PW);
    const list = (await a.req({ url: '/auth/sessions' })).body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(list).toHaveLength(2);
    expect(list.filter((x) => x.Item.Current)).toHaveLength(1);
    const other = list.find((x) => !x.Item.Current).ID;
    expect((await a.req({ method: 'DELETE', url: `/auth/sessions/${other}` })).statusCode).toBe(204);
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(401);
    expect((await a.req({ method: 'DELETE', url: '/auth/sessions/nosuchsession1' })).statusCode).toBe(404);
    expect((await a.post('/auth/signout')).statusCode).toBe(204);
    expect(a.session).toBeUndefined();
    expect((await a.req({ url: '/users/me' })).statusCode).toBe(401);
  });

  it('lifetimes: a session idle longer than SessionIdleSeconds, or past its end, is over', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const a = await signedIn(s, e, PW);
    const b = await signedIn(s, e, PW);
    const db = authDb(s);
    const [sa, sb] = (await a.req({ url: '/auth/sessions' })).body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).ID);
    await db
      .updateTable('sessions')
      .set({ last_seen: Date.now() - 9 * 3600_000 })
      .where('id', '=', sa)
      .execute();
    expect((await a.req({ url: '/users/me' })).statusCode).toBe(401);
    await db
      .updateTable('sessions')
      .set({ expire_time: Date.now() - 1 })
      .where('id', '=', sb)
      .execute();
    const r = await b.req({ url: '/users/me' });
    expect(r.statusCode).toBe(401);
    expect(r.json().Message).toMatch(/ended/);
  });

  it('enrollment needs integrity and keeps Have* flags; PasswordMinLength holds; admins reset', async () => {
    const e = email();
    const id = await makeUser(s, { email: e, password: PW });
    const weak = new Browser(s);
    await weak.post('/auth/email', { email: e });
    const denied = await weak.req({ method: 'PUT', url: '/auth/enroll/pin', json: { PIN: '5555' } });
    expect(denied.statusCode).toBe(401);
    expect(denied.json().Intent).toBeTruthy();
    const b = await signedIn(s, e, PW);
    expect(
      (await b.req({ method: 'PUT', url: '/auth/enroll/password', json: { Password: 'short' } })).statusCode,
    ).toBe(400);
    expect((await b.req({ method: 'PUT', url: '/auth/enroll/pin', json: { PIN: '12ab' } })).statusCode).toBe(
      400,
    );
    expect((await b.req({ method: 'PUT', url: '/auth/enroll/pin', json: { PIN: '5555' } })).statusCode).toBe(
      204,
    );
    expect((await b.req({ url: '/users/me' })).json().HavePIN).toBe(true);
    // Not someone else's credentials.
    const other = await makeUser(s, { email: email() });
    expect(
      (await b.req({ method: 'PUT', url: `/auth/enroll/pin?user=${other}`, json: { PIN: '5555' } }))
        .statusCode,
    ).toBe(403);
    // The admin resets the PIN: flag false, the user's sessions end.
    expect((await s.req({ method: 'DELETE', url: `/auth/enroll/pin?user=${id}` })).statusCode).toBe(204);
    expect((await s.req({ url: `/users/${id}` })).json().HavePIN).toBe(false);
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(401);
    // Hashes are argon2id.
    const secret = await s.store.getSecret((await import('../../src/objects/user.js')).User, id);
    expect(String(secret.PasswordHash)).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
  });
});
