import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { importJWK, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventClient } from '../../events/client.js';
import { backends, startTestService, type TestService } from '../../helpers.js';
import {
  type Account,
  account,
  authResponse,
  Browser,
  freshIp,
  HTTP_DATE,
  levelOf,
  PW,
  secretOf,
  signIn,
} from '../../kit/index.js';
import { PushService, Subscriber } from '../../kit/push.js';

interface Payload {
  Type: string;
  Token: string;
  Email: string;
  Browser: string;
  Address: string;
}

/**
 * Mobile push (src/auth/factors/mobile, docs/signin.md "Mobile push"): a push service started here
 * receives the encrypted messages, which the test decrypts with the subscription's keys.
 */
describe.each(backends())('mobile push on %s', (backend) => {
  let s: TestService;
  let push: PushService;

  beforeAll(async () => {
    push = await PushService.start();
    s = await startTestService(backend, {
      SVC_PUSH_ENDPOINTS: push.origin,
      SVC_PUSH_SUBJECT: 'mailto:security@example.test',
    });
  });
  afterAll(async () => {
    await s?.close();
    await push?.close();
  });

  async function register(b: Browser, sub = new Subscriber(push.origin), name = 'Phone') {
    const r = await b.req({
      method: 'POST',
      url: '/auth/enroll/mobile',
      json: { Name: name, Subscription: sub.toJSON() },
    });
    expect(r.statusCode, r.body).toBe(201);
    return { sub, id: r.json().ID as string };
  }

  async function deviceAccount(tag: string) {
    const a = await account(s, { tag });
    const owner = await signIn(s, a, { password: true }, { level: 2 });
    const dev = await register(owner);
    return { a, owner, ...dev };
  }

  async function identifiedAs(a: Account) {
    const b = new Browser(s, { ip: freshIp() });
    const e = await b.req({
      method: 'POST',
      url: '/auth/email',
      form: { email: a.email },
      headers: {
        'user-agent': 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0',
      },
    });
    expect(e.statusCode).toBe(204);
    return b;
  }

  /** Starts a push on a browser; the decrypted message, the raw request and the number shown. */
  async function started(b: Browser, sub: Subscriber) {
    const before = push.received.length;
    const r = await b.post('/auth/mobile/start');
    expect(r.statusCode, `${r.body} ${s.logs.filter((l) => l.includes('push')).join('\n')}`).toBe(204);
    const raw = await push.next(sub.path, before);
    const msg = JSON.parse(sub.decrypt(raw.body)) as Payload;
    const shown = await b.req({ url: '/auth/mobile' });
    expect(shown.statusCode).toBe(200);
    return { msg, raw, number: String(shown.json().Number) };
  }

  it('registering a device is a credential change; only subscriptions on allowed push services are taken', async () => {
    const a = await account(s, { tag: 'push-enrol' });
    const key = await s.keyFor(['user'], a.id);
    const sub = new Subscriber(push.origin);
    expect(
      (
        await s.req({
          method: 'POST',
          url: '/auth/enroll/mobile',
          key,
          payload: { Subscription: sub.toJSON() },
        })
      ).statusCode,
    ).toBe(403);
    const weak = await identifiedAs(a);
    expect(
      (await weak.req({ method: 'POST', url: '/auth/enroll/mobile', json: { Subscription: sub.toJSON() } }))
        .statusCode,
    ).toBe(401);
    const b = await signIn(s, a, { password: true }, { level: 2 });
    const bad = [
      { ...sub.toJSON(), endpoint: 'http://169.254.169.254/latest/meta-data' },
      { ...sub.toJSON(), endpoint: `${push.origin.replace('127.0.0.1', 'user:pw@127.0.0.1')}/push/x` },
      { ...sub.toJSON(), endpoint: `${push.origin}.evil.example/push/x` },
      { ...sub.toJSON(), keys: { p256dh: 'AAAA', auth: sub.toJSON().keys.auth } },
      { ...sub.toJSON(), keys: { p256dh: sub.toJSON().keys.p256dh, auth: 'short' } },
    ];
    for (const s2 of bad)
      expect(
        (await b.req({ method: 'POST', url: '/auth/enroll/mobile', json: { Subscription: s2 } })).statusCode,
        JSON.stringify(s2),
      ).toBe(400);
    const { id } = await register(b, sub, 'Pixel');
    expect((await b.req({ url: '/auth/enroll/mobile' })).json()).toEqual([
      expect.objectContaining({ ID: id, Name: 'Pixel' }),
    ]);
    // The stored device keeps no private key (there is none to keep); the listing shows no keys.
    expect(JSON.stringify((await b.req({ url: '/auth/enroll/mobile' })).json())).not.toContain(
      sub.toJSON().keys.auth,
    );
    // Now a second kind of factor: removing it needs level 3.
    expect((await b.req({ method: 'DELETE', url: `/auth/enroll/mobile/${id}` })).statusCode).toBe(401);
  });

  it('no devices: 400', async () => {
    const a = await account(s, { tag: 'push-none' });
    const b = await identifiedAs(a);
    expect((await b.post('/auth/mobile/start')).statusCode).toBe(400);
    expect((await new Browser(s, { ip: freshIp() }).post('/auth/mobile/start')).statusCode).toBe(400);
  });

  it('pushes an encrypted, VAPID-signed request; the device approves with the number shown on the page', async () => {
    const { a, sub } = await deviceAccount('push-flow');
    const b = await identifiedAs(a);
    const { msg, raw, number } = await started(b, sub);
    expect(raw.headers['content-encoding']).toBe('aes128gcm');
    expect(Number(raw.headers.ttl)).toBeGreaterThan(0);
    // VAPID (RFC 8292): a JWT for the push service's origin, signed by the service's public key.
    const vapid = (await s.req({ url: '/auth/mobile/vapid', key: '' })).json().PublicKey as string;
    const m = /^vapid t=([^,]+), k=(.+)$/.exec(String(raw.headers.authorization));
    expect(m?.[2]).toBe(vapid);
    const pt = Buffer.from(vapid, 'base64url');
    const jwk = {
      kty: 'EC',
      crv: 'P-256',
      x: pt.subarray(1, 33).toString('base64url'),
      y: pt.subarray(33).toString('base64url'),
    };
    const { payload } = await jwtVerify(m?.[1] as string, await importJWK(jwk, 'ES256'));
    expect(payload).toMatchObject({ aud: push.origin, sub: 'mailto:security@example.test' });
    // The message: who and from what; never the number (that must come from the page).
    expect(msg).toMatchObject({
      Type: 'signin',
      Email: a.email,
      Browser: 'Firefox 133 on Windows',
      Address: b.opts.ip,
    });
    expect(JSON.stringify(msg)).not.toContain(`"Number"`);
    expect(Number(number)).toBeGreaterThanOrEqual(10);

    const device = new Browser(s, { ip: freshIp() });
    expect((await device.post('/auth/mobile/inspect', { token: msg.Token })).json()).toMatchObject({
      Email: a.email,
    });
    expect((await device.post('/auth/mobile/approve', { token: msg.Token, number })).statusCode).toBe(204);
    expect((await authResponse(device)).UserID).toBe('');
    expect((await authResponse(b)).Proven).toEqual(['mobile']);
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    expect(await levelOf(b)).toBe(3);
    // Once.
    expect((await device.post('/auth/mobile/approve', { token: msg.Token, number })).statusCode).toBe(403);
  });

  it('a wrong number fails and spends the request (push fatigue: no second guess)', async () => {
    const { a, sub } = await deviceAccount('push-fatigue');
    const b = await identifiedAs(a);
    const { msg, number } = await started(b, sub);
    const wrong = String(number === '10' ? 11 : Number(number) - 1);
    const device = new Browser(s, { ip: freshIp() });
    expect((await device.post('/auth/mobile/approve', { token: msg.Token, number: wrong })).statusCode).toBe(
      403,
    );
    expect((await device.post('/auth/mobile/approve', { token: msg.Token, number })).statusCode).toBe(403);
    expect(await levelOf(b)).toBe(1);
    expect((await b.req({ url: '/auth/mobile' })).statusCode).toBe(404);
  });

  it('deny ends the asking session', async () => {
    const { a, sub } = await deviceAccount('push-deny');
    const b = await identifiedAs(a);
    const { msg } = await started(b, sub);
    expect(
      (await new Browser(s, { ip: freshIp() }).post('/auth/mobile/deny', { token: msg.Token })).statusCode,
    ).toBe(204);
    expect((await authResponse(b)).UserID).toBe('');
  });

  it('forged tokens are 403, then 429 + X-Next-Attempt for that address, never holding up the owner', async () => {
    const { a, sub } = await deviceAccount('push-guess');
    const b = await identifiedAs(a);
    const { msg, number } = await started(b, sub);
    const attacker = new Browser(s, { ip: freshIp() });
    const statuses: number[] = [];
    await fc.assert(
      fc.asyncProperty(
        fc.stringMatching(/^[A-Za-z0-9_-]{43}$/),
        fc.integer({ min: 10, max: 99 }),
        async (secret, n) => {
          const token = `${a.id}.${secret}`;
          fc.pre(token !== msg.Token);
          const r = await attacker.post('/auth/mobile/approve', { token, number: String(n) });
          statuses.push(r.statusCode);
          expect([403, 429]).toContain(r.statusCode);
          if (r.statusCode === 429) expect(r.headers['x-next-attempt']).toMatch(HTTP_DATE);
        },
      ),
      { numRuns: 8 },
    );
    let held = await attacker.post('/auth/mobile/approve', { token: `${a.id}.${'C'.repeat(43)}`, number });
    for (let i = 0; i < 30 && held.statusCode === 403; i++)
      held = await attacker.post('/auth/mobile/approve', { token: `${a.id}.${'C'.repeat(43)}`, number });
    expect(held.statusCode).toBe(429);
    expect(held.headers['x-next-attempt']).toMatch(HTTP_DATE);
    // The real request, from the user's device elsewhere, is not held up by the forgeries.
    expect(
      (await new Browser(s, { ip: freshIp() }).post('/auth/mobile/approve', { token: msg.Token, number }))
        .statusCode,
    ).toBe(204);
  });

  it('stores only a hash of the pushed secret; an expired subscription (410) is forgotten; none reachable is 503', async () => {
    const { a, sub } = await deviceAccount('push-gone');
    const b = await identifiedAs(a);
    const { msg } = await started(b, sub);
    expect(JSON.stringify(await secretOf(s, a.id))).not.toContain(msg.Token.split('.')[1]);
    expect(s.logs.join('\n')).not.toContain(msg.Token.split('.')[1]);
    push.status = 410;
    try {
      const again = await identifiedAs(a);
      expect((await again.post('/auth/mobile/start')).statusCode).toBe(503);
    } finally {
      push.status = 201;
    }
    expect((await secretOf(s, a.id)).MobileDevices).toEqual([]);
  });

  it('limits how many pushes a user gets (429 + X-Next-Attempt)', async () => {
    const { a, sub } = await deviceAccount('push-limit');
    const b = await identifiedAs(a);
    for (let i = 0; i < 3; i++) await started(b, sub);
    const r = await b.post('/auth/mobile/start');
    expect(r.statusCode).toBe(429);
    expect(r.headers['x-next-attempt']).toMatch(HTTP_DATE);
  });

  it('the asking page’s Auth stream gets the frame when the device approves', async () => {
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
    const { a, sub } = await deviceAccount('push-stream');
    const b = await identifiedAs(a);
    const { msg, number } = await started(b, sub);
    const cookie = [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const c = await EventClient.open(base, undefined, { headers: { cookie, origin: base } });
    try {
      c.send({ Kind: 'Auth' });
      await c.caughtUp('Auth');
      expect(
        (await new Browser(s, { ip: freshIp() }).post('/auth/mobile/approve', { token: msg.Token, number }))
          .statusCode,
      ).toBe(204);
      await c.until((x) =>
        x.frames.some((f) => f.Kind === 'Auth' && ((f.Item.Proven as string[]) ?? []).includes('mobile')),
      );
      await c.waitClose();
    } finally {
      c.ws.terminate();
    }
  });
});
