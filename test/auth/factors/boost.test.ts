import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIntent } from '../../../src/auth/intents.js';
import { backends, startTestService, type TestService } from '../../helpers.js';
import {
  account,
  authResponse,
  Browser,
  freshIp,
  levelOf,
  makeUser,
  PW,
  signedIn,
  signIn,
} from '../../kit/index.js';

/**
 * The boost step (src/auth/factors/boost): POST /auth/boost carries the intent a weak session got
 * with its 401 to a strong session, which raises the weak one to the intent's level, as
 * docs/signin.md describes it. A boost is no factor of its own: it sets a floor under the target
 * session's level and proves nothing in it. There is no secret (the intent is signed by the
 * service), so no 403 Incorrect Credential and no regulation, and no enrolment. That an
 * activation code lends a booster no level is tested with the activation code
 * (activation.test.ts).
 */
describe.each(backends())('boost step on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `sec${++n}@example.com`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  /** A browser that named the user, and the intent of its 401 for GET /users/me. */
  const weakSession = async (address: string) => {
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: address });
    const denied = await b.req({ url: '/users/me' });
    expect(denied.statusCode).toBe(401);
    return { b, intent: denied.json().Intent as string };
  };
  const boost = (from: Browser, intent: unknown) =>
    from.req({ method: 'POST', url: '/auth/boost', json: { Intent: intent } });

  it('POST /auth/boost: 204 and the retried operation passes; 400, 401, 403, 409 as the spec lists', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const strong = await signedIn(s, e, PW);
    const weak = new Browser(s);
    await weak.post('/auth/email', { email: e });
    const denied = await weak.req({ url: '/users/me' });
    expect(denied.statusCode).toBe(401);
    const intent = denied.json().Intent as string;

    // 400: malformed, garbage, expired.
    expect((await strong.req({ method: 'POST', url: '/auth/boost', json: [] })).statusCode).toBe(400);
    expect(
      (await strong.req({ method: 'POST', url: '/auth/boost', json: { Intent: 'x.y.z' } })).statusCode,
    ).toBe(400);
    const payload = JSON.parse(Buffer.from(intent.split('.')[1] as string, 'base64url').toString());
    const expired = await signIntent(s, payload, Date.now() - 3600_000);
    expect(
      (await strong.req({ method: 'POST', url: '/auth/boost', json: { Intent: expired } })).statusCode,
    ).toBe(400);

    // 401: a session with less integrity than the target level.
    const weak2 = new Browser(s);
    await weak2.post('/auth/email', { email: e });
    const r401 = await weak2.req({ method: 'POST', url: '/auth/boost', json: { Intent: intent } });
    expect(r401.statusCode).toBe(401);

    // 403: another user's session, caller not an administrator.
    const e2 = email();
    await makeUser(s, { email: e2, password: PW });
    const stranger = await signedIn(s, e2, PW);
    expect(
      (await stranger.req({ method: 'POST', url: '/auth/boost', json: { Intent: intent } })).statusCode,
    ).toBe(403);
    // 403: the intent's user is not the session's user.
    const lie = await signIntent(s, { ...payload, uid: 'someoneelse00' });
    expect((await strong.req({ method: 'POST', url: '/auth/boost', json: { Intent: lie } })).statusCode).toBe(
      403,
    );

    // 409: device differs; session gone.
    const otherDevice = await signIntent(s, { ...payload, did: 'AAAAAAAAAAAAAAAAAAAAAA' });
    const r409 = await strong.req({ method: 'POST', url: '/auth/boost', json: { Intent: otherDevice } });
    expect(r409.statusCode).toBe(409);
    const gone = await signIntent(s, { ...payload, sid: 'nosuchsession1' });
    expect(
      (await strong.req({ method: 'POST', url: '/auth/boost', json: { Intent: gone } })).statusCode,
    ).toBe(409);

    // 204: raised; the weak session retries and passes, with a new token (fixation).
    const before = weak.session;
    const ok = await strong.req({ method: 'POST', url: '/auth/boost', json: { Intent: intent } });
    expect(ok.statusCode, ok.body).toBe(204);
    const retry = await weak.req({ url: '/users/me' });
    expect(retry.statusCode).toBe(200);
    expect(weak.session).not.toBe(before);
    expect((await weak.req({ url: '/users/me' })).statusCode).toBe(200);

    // The bare JSON string and the whole 401 body are accepted as the IntegrityLevelChangeIntent too.
    const weak4 = new Browser(s);
    await weak4.post('/auth/email', { email: e });
    const d4 = await weak4.req({ url: '/users/me' });
    expect((await strong.req({ method: 'POST', url: '/auth/boost', json: d4.json() })).statusCode).toBe(204);
    const weak5 = new Browser(s);
    await weak5.post('/auth/email', { email: e });
    const r5a = await weak5.req({ url: '/users/me' });
    expect(r5a.statusCode, r5a.body).toBe(401);
    const d5 = r5a.json().Intent;
    const r5 = await strong.req({ method: 'POST', url: '/auth/boost', json: d5 });
    expect(r5.statusCode, r5.body).toBe(204);
    expect((await weak5.req({ url: '/users/me' })).statusCode).toBe(200);

    // An administrator may boost another user's session.
    const adminEmail = email();
    const adminId = await makeUser(s, { email: adminEmail, password: PW, pin: '8642', admin: true });
    void adminId;
    const admin = await signedIn(s, adminEmail, PW);
    const w3 = new Browser(s);
    await w3.post('/auth/email', { email: e2 });
    const i3 = (await w3.req({ url: '/users/me' })).json().Intent;
    expect((await admin.req({ method: 'POST', url: '/auth/boost', json: { Intent: i3 } })).statusCode).toBe(
      204,
    );
    expect((await w3.req({ url: '/users/me' })).statusCode).toBe(200);
  });

  it('a floor, not a factor: the raised session proves nothing new and stays at the level', async () => {
    const a = await account(s, { tag: 'boost-floor' });
    const strong = await signIn(s, a, { password: true }, { level: 2 });
    const weak = await weakSession(a.email);
    expect((await boost(strong, weak.intent)).statusCode).toBe(204);
    const r = await authResponse(weak.b);
    expect(r).toMatchObject({ IntegrityLevel: 2, Proven: [], Factors: ['password'] });
    // The floor holds while the session goes on (the same user named again changes nothing).
    await weak.b.post('/auth/email', { email: a.email });
    expect(await levelOf(weak.b)).toBe(2);
    expect((await weak.b.req({ url: '/users/me' })).statusCode).toBe(200);
  });

  it('to two factors: a one-factor session cannot raise another to 3, a two-factor session can, and the change passes', async () => {
    const a = await account(s, { totp: true, tag: 'boost-3' });
    // A password session asked to step up for a credential change of a two-factor account.
    const weak = await signIn(s, a, { password: true }, { level: 2 });
    const change = { method: 'PUT', url: '/auth/enroll/password', json: { Password: 'raised and replaced' } };
    const denied = await weak.req(change);
    expect(denied.statusCode).toBe(401);
    expect(denied.json().RequiredLevel).toBe(3);
    const one = await signIn(s, a, { password: true }, { level: 2 });
    expect((await boost(one, denied.json().Intent)).statusCode).toBe(401);
    expect(await levelOf(weak)).toBe(2);
    const two = await signIn(s, a, { password: true, totp: true }, { level: 3 });
    expect((await boost(two, denied.json().Intent)).statusCode).toBe(204);
    expect(await levelOf(weak)).toBe(3);
    expect((await weak.req(change)).statusCode).toBe(204);
  });

  it('edge cases: no session to boost from, an intent of no session, a session raising itself, a signed-out target', async () => {
    const a = await account(s, { tag: 'boost-edge' });
    const strong = await signIn(s, a, { password: true });
    const weak = await weakSession(a.email);
    // The booster needs a signed-in session of its own.
    const nobody = new Browser(s, { ip: freshIp() });
    expect((await boost(nobody, weak.intent)).statusCode).toBe(401);
    // A browser without any session gets an intent that names no session: nothing to raise.
    const anonymous = await new Browser(s, { ip: freshIp() }).req({ url: '/users/me' });
    const none = await boost(strong, anonymous.json().Intent);
    expect(none.statusCode).toBe(400);
    expect(none.headers['x-error-code']).toBe('Invalid Intent');
    // Its own intent, after it proved a factor itself: 409.
    const self = await weakSession(a.email);
    expect((await self.b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    const own = await boost(self.b, self.intent);
    expect(own.statusCode).toBe(409);
    expect(own.headers['x-error-code']).toBe('Session Conflict');
    // The target signed out in the meantime.
    expect((await weak.b.post('/auth/signout')).statusCode).toBe(204);
    expect((await boost(strong, weak.intent)).statusCode).toBe(409);
  });
});
