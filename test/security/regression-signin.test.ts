/**
 * Regression: the service's sign-in. Signed intents are bound to the session (or, before one
 * exists, the device) they were issued to (src/auth/intents.ts, formIntent); cookie-authenticated
 * writes need X-Requested-With or this origin exactly (checkCsrf). Replays, alterations and
 * cross-site requests must be refused without any change of state.
 */
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { CompactSign, UnsecuredJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { signIntent } from '../../src/auth/intents.js';
import { Browser, makeUser, signedIn } from '../auth/client.js';
import { backends, startTestService, type TestService } from '../helpers.js';

const PW = 'correct horse battery staple';
/** fastify inject's default Host: the service's own origin in these requests. */
// As a browser writes it: no default port (inject's Host is localhost:80).
const OWN = 'http://localhost';

/**
 * Each browser comes from an address of its own: per-address limits (the e-mail lookup bucket,
 * regulation) are not what these tests are about, and must not decide them.
 */
let lastIp = 0;
const freshIp = () => `10.77.${(++lastIp >> 8) & 255}.${lastIp & 255}`;

describe.each(backends())('service sign-in regressions on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `reg${++n}@example.com`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  /** A browser that named its user but proved nothing: its 401 on /users/me carries an intent. */
  async function refusedBrowser(address: string) {
    const b = new Browser(s, { ip: freshIp() });
    expect((await b.post('/auth/email', { email: address })).statusCode).toBe(204);
    const denied = await b.req({ url: '/users/me' });
    expect(denied.statusCode).toBe(401);
    return { b, intent: denied.json().Intent as string };
  }

  const FORM_INTENT_STEPS: [string, Record<string, string>][] = [
    ['/auth', {}],
    ['/auth/password', { password: PW }],
    ['/auth/pin', { code: '13579' }],
  ];

  it('an intent is refused in any other session or device, at every step that takes one', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW, pin: '13579' });
    const victim = await refusedBrowser(e);
    // Anonymous intents bind to the device: issued to a browser that has a device cookie but no user.
    const anon = new Browser(s, { ip: freshIp() });
    await anon.post('/auth/location', { lat: '1', long: '1' });
    const anonIntent = (await anon.req({ url: '/users/me' })).json().Intent as string;
    expect(anon.device).toBeTruthy();
    const other = email();
    await makeUser(s, { email: other, password: PW });
    const strongAttacker = await signedIn(s, other, PW, { ip: freshIp() });
    const attackers = {
      'same user, other session': async () => (await refusedBrowser(e)).b,
      'other user': async () => (await refusedBrowser(other)).b,
      // One signed-in attacker for all runs (a password sign-in costs an argon2 verification).
      'signed-in other user': async () => strongAttacker,
      'no cookies': async () => new Browser(s, { ip: freshIp() }),
      'other device, anonymous': async () => {
        const b = new Browser(s, { ip: freshIp() });
        await b.post('/auth/location', { lat: '2', long: '2' });
        return b;
      },
    };
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...(Object.keys(attackers) as (keyof typeof attackers)[])),
        fc.constantFrom(...FORM_INTENT_STEPS),
        fc.boolean(),
        async (who, [url, form], anonymous) => {
          const attacker = await attackers[who]();
          // The anonymous intent is replayed from elsewhere than its own device only.
          const intent = anonymous ? anonIntent : victim.intent;
          fc.pre(!(anonymous && attacker.device === anon.device));
          const r = await attacker.post(url, { ...form, intent });
          expect([who, url, r.statusCode]).toEqual([who, url, 400]);
          // A factor step without a named user stops before it reads the intent ("send POST /auth/email first").
          const unnamed = (who === 'no cookies' || who === 'other device, anonymous') && url !== '/auth';
          expect(r.headers['x-error-code']).toBe(unnamed ? 'Bad Request' : 'Invalid Intent');
          expect(r.headers['set-cookie'] ?? []).not.toContainEqual(
            expect.stringMatching(/^gatehouse_session=[^;]/),
          );
          // Nothing was gained: the attacker is still whoever (and at whatever level) they were.
          const me = await attacker.req({ url: '/users/me' });
          if (who === 'signed-in other user') expect(me.json().Email).toBe(other);
          else expect(me.statusCode).toBe(401);
        },
      ),
      { numRuns: 20 },
    );
    // The rightful holders still may use them.
    expect((await victim.b.post('/auth', { intent: victim.intent })).statusCode).toBe(200);
    expect((await anon.post('/auth', { intent: anonIntent })).statusCode).toBe(200);
  });

  it('an altered, re-signed, unsigned or expired intent is refused', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const { b, intent } = await refusedBrowser(e);
    const [h, p, sig] = intent.split('.') as [string, string, string];
    const header = JSON.parse(Buffer.from(h, 'base64url').toString());
    const payload = JSON.parse(Buffer.from(p, 'base64url').toString());
    const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const alteration = fc.oneof(
      fc
        .record({
          lvl: fc.constantFrom(0, 1, -1, 99),
          sid: fc.constantFrom(payload.sid, '', 'x'),
          exp: fc.constantFrom(payload.exp, payload.exp + 86_400),
          path: fc.constantFrom(payload.path, '/tenant'),
        })
        .filter(
          (c) =>
            c.lvl !== payload.lvl ||
            c.sid !== payload.sid ||
            c.exp !== payload.exp ||
            c.path !== payload.path,
        )
        .map((c) => `${h}.${enc({ ...payload, ...c })}.${sig}`),
      fc
        .constantFrom(
          { ...header, alg: 'none' },
          { ...header, alg: 'HS256' },
          { ...header, typ: 'JWT' },
          { ...header, kid: 'x' },
        )
        .map((hh) => `${enc(hh)}.${p}.${sig}`),
      fc
        .nat({ max: sig.length - 2 })
        .map((i) => `${h}.${p}.${sig.slice(0, i)}${sig[i] === 'A' ? 'B' : 'A'}${sig.slice(i + 1)}`),
      fc.constantFrom(`${h}.${p}.`, `${h}.${p}`, `${h}..${sig}`, `${intent}.`, ` ${intent}`, 'a.b.c', ''),
    );
    await fc.assert(
      fc.asyncProperty(alteration, async (forged) => {
        const r = await b.post('/auth', { intent: forged });
        if (forged === '') return void expect(r.statusCode).toBe(200); // no intent at all: a plain AuthResponse
        expect(r.statusCode).toBe(400);
        expect(r.headers['x-error-code']).toBe('Invalid Intent');
      }),
      { numRuns: 50 },
    );
    // Signed by another Ed25519 key under the service's kid and typ.
    const other = generateKeyPairSync('ed25519').privateKey;
    const resigned = await new CompactSign(new TextEncoder().encode(JSON.stringify({ ...payload, lvl: 0 })))
      .setProtectedHeader(header)
      .sign(other);
    const none = new UnsecuredJWT(payload).encode();
    const expired = await signIntent(s, { ...payload }, Date.now() - 3600_000);
    for (const forged of [resigned, none, expired]) {
      const r = await b.post('/auth', { intent: forged });
      expect(r.statusCode).toBe(400);
      expect(r.headers['x-error-code']).toBe('Invalid Intent');
    }
    // And /auth/boost, which raises the session an intent names, takes none of them.
    const strong = await signedIn(s, e, PW, { ip: freshIp() });
    for (const forged of [resigned, none, expired, `${h}.${enc({ ...payload, lvl: 0 })}.${sig}`]) {
      const r = await strong.req({ method: 'POST', url: '/auth/boost', json: { Intent: forged } });
      expect(r.statusCode).toBe(400);
    }
    expect((await b.req({ url: '/users/me' })).statusCode).toBe(401);
  });

  it('CSRF: cookie writes without X-Requested-With and from any origin but this exact one are refused', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const b = await signedIn(s, e, PW, { ip: freshIp() });
    const bare = new Browser(s, { csrf: false, ip: freshIp() });
    for (const [k, v] of b.cookies) bare.cookies.set(k, v);
    const lookAlike = fc.oneof(
      fc.constantFrom(
        'null',
        'http://localhost:80.evil.example',
        'http://localhost:8080',
        'http://localhost:81',
        'http://localhost',
        'https://localhost:80',
        'http://localhost.evil.example:80',
        'http://evil.example',
        'http://localhost:80@evil.example',
        `${OWN}/`,
        `${OWN} `,
        ` ${OWN}`,
        `${OWN}, http://evil.example`,
        'http://LOCALHOST:80',
        'HTTP://localhost:80',
        'http://127.0.0.1:80',
        'http://[::1]:80',
        '',
      ),
      fc
        .tuple(fc.constantFrom('http', 'https', 'ws'), fc.webSegment(), fc.nat({ max: 65535 }))
        .map(([scheme, host, port]) => `${scheme}://${host}:${port}`),
      fc.webUrl().map((u) => new URL(u).origin),
    );
    const write = fc.constantFrom(
      { method: 'PUT', url: '/auth/enroll/pin', json: { PIN: '97531' } },
      { method: 'POST', url: '/auth/signout' },
      { method: 'POST', url: '/auth/password', form: { password: PW } },
      { method: 'PUT', url: '/auth/enroll/password', json: { Password: 'attacker chose this one' } },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.option(lookAlike, { nil: undefined }),
        fc.constantFrom(undefined, '', '  '),
        write,
        async (origin, xrw, req) => {
          fc.pre(origin !== OWN);
          const headers: Record<string, string> = {};
          if (origin !== undefined) headers.origin = origin;
          if (xrw !== undefined) headers['x-requested-with'] = xrw;
          const r = await bare.req({ ...req, headers });
          expect([origin, xrw, req.url, r.statusCode]).toEqual([origin, xrw, req.url, 403]);
          expect(r.headers['x-error-code']).toBe('CSRF Check Failed');
        },
      ),
      { numRuns: 60 },
    );
    // Nothing changed: no PIN, the old password still works, the session is still signed in.
    const me = await b.req({ url: '/users/me' });
    expect(me.statusCode).toBe(200);
    expect(me.json().HavePIN).not.toBe(true);
    expect((await signedIn(s, e, PW, { ip: freshIp() })).session).toBeTruthy();
  });

  it('CSRF over a real socket: look-alike origins of the listening address are refused, the exact one passes', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const b = await signedIn(s, e, PW, { ip: freshIp() });
    const cookie = [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (!s.app.server.listening) await s.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (s.app.server.address() as AddressInfo).port;
    const put = (origin: string) =>
      new Promise<number>((resolve, reject) => {
        const body = JSON.stringify({ PIN: '97531' });
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            method: 'PUT',
            path: '/auth/enroll/pin',
            headers: { cookie, origin, 'content-type': 'application/json', 'content-length': body.length },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    for (const origin of [
      `http://127.0.0.1:${port}.evil.example`,
      `http://127.0.0.1:${port}@evil.example`,
      `http://127.0.0.1:${port + 1}`,
      `https://127.0.0.1:${port}`,
      'http://127.0.0.1',
      `http://localhost:${port}`,
      'null',
    ])
      expect([origin, await put(origin)]).toEqual([origin, 403]);
    expect((await b.req({ url: '/users/me' })).json().HavePIN).not.toBe(true);
    expect(await put(`http://127.0.0.1:${port}`)).toBe(204);
  });

  it('no CORS grant to any origin, and no event stream for a cookie from a look-alike origin', async () => {
    // X-Requested-With is a CSRF defence only while no origin may send it cross-site: a preflight
    // must never be granted. Websocket handshakes skip CORS, so /events checks Origin itself.
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const b = await signedIn(s, e, PW, { ip: freshIp() });
    const cookie = [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    for (const [method, url] of [
      ['OPTIONS', '/auth/enroll/pin'],
      ['OPTIONS', '/users/me'],
      ['GET', '/users/me'],
      ['OPTIONS', '/auth/password'],
    ] as const) {
      const r = await s.app.inject({
        method,
        url,
        headers: {
          cookie,
          origin: 'http://evil.example',
          'access-control-request-method': 'PUT',
          'access-control-request-headers': 'x-requested-with, content-type',
        },
      });
      expect([url, Object.keys(r.headers).filter((h) => h.startsWith('access-control-'))]).toEqual([url, []]);
    }
    if (!s.app.server.listening) await s.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (s.app.server.address() as AddressInfo).port;
    const open = (origin: string) =>
      new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}/events`, { headers: { cookie, origin } });
        ws.on('open', () => {
          ws.terminate();
          resolve(101);
        });
        ws.on('unexpected-response', (_req, res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        ws.on('error', reject);
      });
    for (const origin of [
      `http://127.0.0.1:${port}.evil.example`,
      `http://127.0.0.1:${port + 1}`,
      `https://127.0.0.1:${port}`,
      'null',
      'http://evil.example',
    ])
      expect([origin, await open(origin)]).toEqual([origin, 403]);
    expect(await open(`http://127.0.0.1:${port}`)).toBe(101);
  });

  it('JSON sent as text/plain (or form, multipart) cross-site to a cookie endpoint is refused', async () => {
    // text/plain, form and multipart bodies need no CORS preflight: the only kinds a hostile page can post.
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const b = await signedIn(s, e, PW, { ip: freshIp() });
    const bare = new Browser(s, { csrf: false, ip: freshIp() });
    for (const [k, v] of b.cookies) bare.cookies.set(k, v);
    for (const type of [
      'text/plain',
      'text/plain; charset=utf-8',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ])
      for (const origin of [undefined, 'http://evil.example', 'null']) {
        const headers: Record<string, string> = { 'content-type': type };
        if (origin) headers.origin = origin;
        const r = await bare.req({
          method: 'PUT',
          url: '/auth/enroll/pin',
          payload: '{"PIN":"97531"}',
          headers,
        });
        expect([type, origin, r.statusCode]).toEqual([type, origin, 403]);
      }
    // Same origin with text/plain is still not parsed as JSON.
    const same = await bare.req({
      method: 'PUT',
      url: '/auth/enroll/pin',
      payload: '{"PIN":"97531"}',
      headers: { 'content-type': 'text/plain', origin: OWN },
    });
    expect(same.statusCode).toBe(415);
    expect((await b.req({ url: '/users/me' })).json().HavePIN).not.toBe(true);
  });
});
