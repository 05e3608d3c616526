import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { User } from '../../../src/objects/user.js';
import { backends, startTestService, type TestService } from '../../helpers.js';
import {
  authResponse,
  Browser,
  freshIp,
  HTTP_DATE,
  levelOf,
  makeUser,
  PW,
  signedIn,
} from '../../kit/index.js';
import { handleOf, type KeyOptions, SoftKey } from '../../kit/softkey.js';

/**
 * Security keys and passkeys (src/auth/factors/u2f) through the HTTP API with a software
 * authenticator (test/kit/softkey.ts): registration and its step-up, sign-in with a named user and
 * with a passkey alone, the level each kind of key earns, and what must be refused: a clone (the
 * signature counter not moving forward), another origin or RP ID, a replayed or foreign
 * challenge, tampered bytes, an unknown user handle; failures throttled per factor.
 * Longer than ~400 lines on purpose: one factor's cases around one shared service and relying
 * party, each independent; the browser side is test/web/webauthn.test.ts.
 */
const RP = 'id.example.com';
const ORIGIN = `https://${RP}`;

describe.each(backends())('security keys and passkeys on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `key${++n}@example.com`;
  beforeAll(async () => {
    s = await startTestService(backend, { SVC_SERVER_SIGNINURL: `${ORIGIN}/signin` });
  });
  afterAll(async () => s?.close());

  /** A user with a password and one registered key; the browser that registered it. */
  async function withKey(opts: KeyOptions = {}) {
    const e = email();
    const id = await makeUser(s, { email: e, password: PW });
    const b = await signedIn(s, e, PW, { ip: freshIp() });
    const key = new SoftKey(RP, ORIGIN, opts);
    const start = await b.req({ method: 'POST', url: '/auth/enroll/u2f', json: {} });
    expect(start.statusCode, start.body).toBe(200);
    const conf = await b.req({
      method: 'POST',
      url: '/auth/enroll/u2f/confirm',
      json: { Credential: key.create(start.json()), Name: 'Desk key' },
    });
    expect(conf.statusCode, conf.body).toBe(200);
    return { e, id, b, key };
  }

  /** start + finish in a fresh browser; returns the finish response. */
  async function keySignIn(
    key: SoftKey,
    o: { email?: string; browser?: Browser; answer?: Parameters<SoftKey['get']>[1] } = {},
  ) {
    const b = o.browser ?? new Browser(s, { ip: freshIp() });
    const start = await b.post('/auth/u2f/start', o.email ? { email: o.email } : {});
    expect(start.statusCode, start.body).toBe(200);
    const finish = await b.req({
      method: 'POST',
      url: '/auth/u2f/finish',
      json: key.get(start.json(), o.answer),
    });
    return { b, start, finish };
  }

  it('registers a key (options for this RP, the user, excluding keys already there) and lists it', async () => {
    const { b, id, key } = await withKey();
    const list = await b.req({ url: '/auth/enroll/u2f' });
    expect(list.statusCode).toBe(200);
    expect(list.json().Credentials).toEqual([
      expect.objectContaining({
        ID: Buffer.from(key.id).toString('base64url'),
        Name: 'Desk key',
        Passkey: true,
        DeviceBound: true,
        UserVerified: true,
      }),
    ]);
    // Registering again excludes the key already there; the options name this RP and user.
    const b2 = await signInWith(key, b);
    const again = await b2.req({ method: 'POST', url: '/auth/enroll/u2f', json: {} });
    expect(again.statusCode, again.body).toBe(200);
    const o = again.json();
    expect(o.rp).toEqual({ id: RP, name: expect.any(String) });
    expect(o.user.id).toBe(handleOf(id));
    expect(o.excludeCredentials.map((c: { id: string }) => c.id)).toEqual([
      Buffer.from(key.id).toString('base64url'),
    ]);
    // Public keys are not shown.
    expect(list.body).not.toContain('PublicKey');
  });

  /**
   * A new browser session on the device of `b`, which completed a sign-in of the user: the device
   * has its own regulation counter, so a test can fail, succeed (clearing it) and fail again.
   */
  function onDevice(b: Browser, ip = freshIp()) {
    const nb = new Browser(s, { ip });
    nb.cookies.set('gatehouse_device', String(b.device));
    return nb;
  }

  async function signInWith(key: SoftKey, via: Browser) {
    const st = await via.post('/auth/u2f/start');
    expect(st.statusCode, st.body).toBe(200);
    const f = await via.req({ method: 'POST', url: '/auth/u2f/finish', json: key.get(st.json()) });
    expect(f.statusCode, f.body).toBe(200);
    return via;
  }

  it('signs in after the e-mail step: a device-bound key with user verification is level 4', async () => {
    const { e, key } = await withKey();
    const { start, finish, b } = await keySignIn(key, { email: e });
    expect(start.headers['cache-control']).toBe('no-store');
    expect(start.json().rpId).toBe(RP);
    expect(start.json().allowCredentials).toHaveLength(1);
    expect(finish.statusCode, finish.body).toBe(200);
    expect(finish.json()).toMatchObject({
      Factor: 'u2f',
      IntegrityLevel: 4,
      IntegrityLevelName: 'hardware-backed',
    });
    const st = await authResponse(b);
    expect(st).toMatchObject({ IntegrityLevel: 4, ReachableLevel: 4, Email: e });
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(200);
  });

  it('passkey: signs in with no e-mail and no password (the user handle names the user)', async () => {
    const { e, id, key } = await withKey();
    const b = new Browser(s, { ip: freshIp() });
    const start = await b.post('/auth/u2f/start');
    expect(start.statusCode, start.body).toBe(200);
    expect(start.json().allowCredentials).toEqual([]);
    const f = await b.req({
      method: 'POST',
      url: '/auth/u2f/finish',
      json: key.get(start.json(), { userHandle: handleOf(id) }),
    });
    expect(f.statusCode, f.body).toBe(200);
    expect(await authResponse(b)).toMatchObject({ UserID: id, Email: e, IntegrityLevel: 4, Proven: ['u2f'] });
  });

  it('a passkey registered before a user merge signs in as the user it was merged into', async () => {
    const { id: from, key } = await withKey();
    const to = await makeUser(s, { email: email(), password: PW });
    expect((await s.req({ method: 'POST', url: `/users/${to}/merge?from=${from}` })).statusCode).toBe(204);
    // The passkey names the user it was registered for, as a browser's would.
    const { finish } = await keySignIn(key, { answer: { userHandle: handleOf(from) } });
    expect(finish.statusCode, finish.body).toBe(200);
    expect(finish.json().UserID).toBe(to);
    // The handle only says whom to ask: a key of the merged-away user that did not move is refused.
    const stray = await withKey();
    const other = await makeUser(s, { email: email(), password: PW });
    expect((await s.req({ method: 'POST', url: `/users/${other}/merge?from=${stray.id}` })).statusCode).toBe(
      204,
    );
    const secret = await s.store.getSecret(User, other);
    await s.store.systemPut(User, other, (doc) =>
      doc ? { doc, secret: { ...secret, WebAuthnCredentials: [] } } : null,
    );
    expect(
      (await keySignIn(stray.key, { answer: { userHandle: handleOf(stray.id) } })).finish.statusCode,
    ).toBe(403);
  });

  it('the level follows the key and the assertion: presence only is one factor, a synced passkey two', async () => {
    const synced = await withKey({ synced: true });
    const r1 = await keySignIn(synced.key, { email: synced.e });
    expect(r1.finish.json()).toMatchObject({ Factor: 'u2f_uv', IntegrityLevel: 3 });
    const plain = await withKey({ uv: false });
    const r2 = await keySignIn(plain.key, { email: plain.e });
    expect(r2.finish.json()).toMatchObject({ Factor: 'u2f_up', IntegrityLevel: 2 });
    // Password + a presence-only key: two kinds, level 3 (what that user can reach).
    await r2.b.post('/auth/password', { password: PW });
    expect(await authResponse(r2.b)).toMatchObject({ IntegrityLevel: 3, ReachableLevel: 3 });
    // A UV-capable device-bound key answering without UV this time proves presence only.
    const hw = await withKey();
    const r3 = await keySignIn(hw.key, { email: hw.e, answer: { uv: false } });
    expect(r3.finish.json()).toMatchObject({ Factor: 'u2f_up', IntegrityLevel: 2 });
  });

  it('refuses a cloned authenticator: a signature counter that does not move forward', async () => {
    const { e, key } = await withKey();
    expect((await keySignIn(key, { email: e })).finish.statusCode).toBe(200);
    const seen = key.counter;
    // The clone answers with the counter the original already used, then with a lower one.
    for (const counter of [seen, seen - 1]) {
      const { finish, b } = await keySignIn(key, { email: e, answer: { counter } });
      expect(finish.statusCode, finish.body).toBe(403);
      expect(finish.headers['x-error-code']).toBe('Incorrect Credential');
      expect(await levelOf(b)).toBe(1);
    }
    // The original, moving on, still works.
    expect((await keySignIn(key, { email: e })).finish.statusCode).toBe(200);
    expect(s.logs.some((l) => l.includes('counter'))).toBe(true);
  });

  it('refuses another origin and another RP ID, and a challenge answered twice', async () => {
    const { e, key } = await withKey();
    const home = (await keySignIn(key, { email: e })).b;
    for (const answer of [
      { origin: 'https://evil.example.com' },
      { origin: `http://${RP}` },
      { origin: `${ORIGIN}:8443` },
      { rpId: 'evil.example.com' },
    ]) {
      const { finish, b } = await keySignIn(key, { email: e, answer, browser: onDevice(home) });
      expect(finish.statusCode, JSON.stringify(answer)).toBe(403);
      expect(await levelOf(b)).toBe(1);
      // The right answer on this device clears its counter for the next wrong one.
      expect((await keySignIn(key, { email: e, browser: onDevice(home) })).finish.statusCode).toBe(200);
    }
    // The Host header does not choose the origin either.
    const b = new Browser(s, { ip: freshIp() });
    const st = await b.req({
      method: 'POST',
      url: '/auth/u2f/start',
      form: { email: e },
      headers: { host: 'evil.example.com' },
    });
    expect(st.json().rpId).toBe(RP);
    // Single use: the same challenge answered again (even correctly) is 400.
    const b2 = new Browser(s, { ip: freshIp() });
    const start = await b2.post('/auth/u2f/start', { email: e });
    const ok = await b2.req({ method: 'POST', url: '/auth/u2f/finish', json: key.get(start.json()) });
    expect(ok.statusCode).toBe(200);
    const replay = await b2.req({ method: 'POST', url: '/auth/u2f/finish', json: key.get(start.json()) });
    expect(replay.statusCode).toBe(400);
    // A challenge issued to another session is no use here.
    const b3 = new Browser(s, { ip: freshIp() });
    await b3.post('/auth/email', { email: e });
    const foreign = await b3.req({ method: 'POST', url: '/auth/u2f/finish', json: key.get(start.json()) });
    expect(foreign.statusCode).toBe(400);
  });

  it('refuses tampered assertions (property: any changed byte of the signed data or of the signature value)', async () => {
    const { e, key } = await withKey();
    const home = (await keySignIn(key, { email: e })).b;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('authenticatorData', 'signature', 'clientDataJSON'),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        async (part, at, xor) => {
          const b = onDevice(home);
          const start = await b.post('/auth/u2f/start', { email: e });
          const a = key.get(start.json());
          const bytes = Buffer.from(a.response[part], 'base64url');
          // In the signature, the value bytes of s (its last 32): the DER wrapping around r and s
          // (a leading 0x00 pad) is read leniently by the library, which is no forgery (the same
          // r and s), so the property is about what was signed and the signature's value.
          const i = part === 'signature' ? bytes.length - 1 - (at % 32) : at % bytes.length;
          bytes[i] = (bytes[i] as number) ^ xor;
          a.response[part] = bytes.toString('base64url');
          const f = await b.req({ method: 'POST', url: '/auth/u2f/finish', json: a });
          expect([400, 403]).toContain(f.statusCode);
          expect(await levelOf(b)).toBe(1);
          // The untampered answer to a new challenge passes (and clears the device's counter).
          const again = await keySignIn(key, { email: e, browser: onDevice(home) });
          expect(again.finish.statusCode, again.finish.body).toBe(200);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('a passkey of an unknown user, or answering for another user than the one named, is refused', async () => {
    const one = await withKey();
    const two = await withKey();
    // The user handle names a user who does not exist.
    const b = new Browser(s, { ip: freshIp() });
    const st = await b.post('/auth/u2f/start');
    const f = await b.req({
      method: 'POST',
      url: '/auth/u2f/finish',
      json: one.key.get(st.json(), { userHandle: handleOf('nosuchuser0000') }),
    });
    expect(f.statusCode).toBe(403);
    // Named user one; key of user two claiming to be user two: refused, session stays user one's.
    const b2 = new Browser(s, { ip: freshIp() });
    const st2 = await b2.post('/auth/u2f/start', { email: one.e });
    const f2 = await b2.req({
      method: 'POST',
      url: '/auth/u2f/finish',
      json: two.key.get(st2.json(), { userHandle: handleOf(two.id) }),
    });
    expect(f2.statusCode).toBe(403);
    expect(await authResponse(b2)).toMatchObject({ UserID: one.id, IntegrityLevel: 1 });
    // Named user one; user two's key without a handle: not one of user one's keys.
    const st3 = await b2.post('/auth/u2f/start');
    const f3 = await b2.req({ method: 'POST', url: '/auth/u2f/finish', json: two.key.get(st3.json()) });
    expect(f3.statusCode).toBe(403);
    // Named user one, one's own key with another handle (a key moved by a user merge keeps the
    // merged-away user's handle): the key is one's, so it counts.
    const st4 = await b2.post('/auth/u2f/start');
    const f4 = await b2.req({
      method: 'POST',
      url: '/auth/u2f/finish',
      json: one.key.get(st4.json(), { userHandle: handleOf(two.id) }),
    });
    expect(f4.statusCode, f4.body).toBe(200);
    expect(await authResponse(b2)).toMatchObject({ UserID: one.id, IntegrityLevel: 4 });
  });

  it('throttles failures per factor: 429 with X-Next-Attempt, even for a right answer', async () => {
    const { e, key } = await withKey();
    const ip = freshIp();
    const codes: number[] = [];
    for (let i = 0; i < 5; i++) {
      const b = new Browser(s, { ip });
      const st = await b.post('/auth/u2f/start', { email: e });
      const f = await b.req({
        method: 'POST',
        url: '/auth/u2f/finish',
        json: key.get(st.json(), { origin: 'https://evil.example.com' }),
      });
      codes.push(f.statusCode);
      if (f.statusCode === 429) expect(String(f.headers['x-next-attempt'])).toMatch(HTTP_DATE);
    }
    expect(codes.slice(0, 3)).toEqual([403, 403, 403]);
    expect(codes.slice(3)).toContain(429);
    const right = await keySignIn(key, { email: e });
    expect(right.finish.statusCode).toBe(429);
    // Another factor of the same user is not held up: the password still works.
    const p = await signedIn(s, e, PW, { ip: freshIp() });
    expect(await levelOf(p)).toBe(2);
  });

  it("registration and removal need step-up; API keys may only remove (an administrator's reset)", async () => {
    const { e, id, key } = await withKey();
    // The user's factors now reach 4: a password-only session may neither add nor remove keys.
    const pw = await signedIn(s, e, PW, { ip: freshIp() });
    for (const r of [
      await pw.req({ method: 'POST', url: '/auth/enroll/u2f', json: {} }),
      await pw.req({
        method: 'DELETE',
        url: `/auth/enroll/u2f/${Buffer.from(key.id).toString('base64url')}`,
      }),
    ]) {
      expect(r.statusCode, r.body).toBe(401);
      expect(r.headers['x-error-code']).toBe('Insufficient Integrity');
    }
    // No API key registers a key, not even the admin's reset; a user's own key changes nothing.
    expect(
      (await s.req({ method: 'POST', url: `/auth/enroll/u2f?user=${id}`, payload: {} })).statusCode,
    ).toBe(403);
    const own = await s.keyFor(['user'], id);
    expect(
      (
        await s.req({
          method: 'DELETE',
          url: `/auth/enroll/u2f/${Buffer.from(key.id).toString('base64url')}`,
          key: own,
        })
      ).statusCode,
    ).toBe(403);
    // With the key proven, the user removes it; unknown IDs are 404.
    const kb = (await keySignIn(key, { email: e })).b;
    expect((await kb.req({ method: 'DELETE', url: '/auth/enroll/u2f/nosuchkey' })).statusCode).toBe(404);
    const del = await kb.req({
      method: 'DELETE',
      url: `/auth/enroll/u2f/${Buffer.from(key.id).toString('base64url')}`,
    });
    expect(del.statusCode, del.body).toBe(204);
    expect((await kb.req({ url: '/auth/enroll/u2f' })).json().Credentials).toEqual([]);
    const gone = new Browser(s, { ip: freshIp() });
    expect((await gone.post('/auth/u2f/start', { email: e })).statusCode).toBe(400);
    // An administrator's reset (admin key, ?user=) removes a lost key and ends the user's sessions.
    const again = await withKey();
    const rm = await s.req({
      method: 'DELETE',
      url: `/auth/enroll/u2f/${Buffer.from(again.key.id).toString('base64url')}?user=${again.id}`,
    });
    expect(rm.statusCode, rm.body).toBe(204);
    expect((await again.b.req({ url: '/users/me' })).statusCode).toBe(401);
  });

  it('registration refuses another origin, a replayed challenge, and answers without a challenge', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const b = await signedIn(s, e, PW, { ip: freshIp() });
    const key = new SoftKey(RP, ORIGIN);
    const none = await b.req({
      method: 'POST',
      url: '/auth/enroll/u2f/confirm',
      json: { Credential: key.create({ challenge: 'x' }) },
    });
    expect(none.statusCode).toBe(409);
    const start = await b.req({ method: 'POST', url: '/auth/enroll/u2f', json: {} });
    const bad = await b.req({
      method: 'POST',
      url: '/auth/enroll/u2f/confirm',
      json: { Credential: key.create(start.json(), { origin: 'https://evil.example.com' }) },
    });
    expect(bad.statusCode).toBe(400);
    const replay = await b.req({
      method: 'POST',
      url: '/auth/enroll/u2f/confirm',
      json: { Credential: key.create(start.json()) },
    });
    expect(replay.statusCode).toBe(409);
    expect((await b.req({ url: '/auth/enroll/u2f' })).json().Credentials).toEqual([]);
  });

  it('the endpoints are in the OpenAPI document', async () => {
    const doc = (await s.req({ url: '/openapi.json', key: '' })).json();
    for (const [path, method] of [
      ['/auth/u2f/start', 'post'],
      ['/auth/u2f/finish', 'post'],
      ['/auth/enroll/u2f', 'get'],
      ['/auth/enroll/u2f', 'post'],
      ['/auth/enroll/u2f/confirm', 'post'],
      ['/auth/enroll/u2f/{id}', 'delete'],
    ] as const)
      expect(doc.paths[path]?.[method], `${method} ${path}`).toBeDefined();
  });

  it('without a configured sign-in URL there is no relying party: 409, whatever the Host says', async () => {
    const bare = await startTestService(backend);
    try {
      const b = new Browser(bare, { ip: freshIp() });
      const r = await b.req({ method: 'POST', url: '/auth/u2f/start', headers: { host: 'id.example.com' } });
      expect(r.statusCode).toBe(409);
    } finally {
      await bare.close();
    }
  });
});
