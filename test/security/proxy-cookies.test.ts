/**
 * What the proxy forwards, cookies (finding 13): no Gatehouse cookie (the proxy's or the service's,
 * in any spelling the service or the proxy reads) reaches the upstream, so the upstream cannot
 * replay the service session; an upstream cannot set them; and the service's cookies over TLS are
 * __Host- prefixed and read only under that name.
 */
import fc from 'fast-check';
import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readCookies } from '../../src/auth/session/cookies.js';
import { stripOwnCookies } from '../../src/proxy/cookie.js';
import { Browser, makeUser, signedIn } from '../auth/client.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import {
  anyCase,
  type Credential,
  MODES,
  type Mode,
  pairs,
  type Rig,
  type Seen,
  startRig,
} from './forwarding.js';

describe('cookie rules (no database)', () => {
  it('the proxy strips every cookie the service reads as its own, and keeps the others in order', () => {
    const names = [
      'gatehouse_session',
      'gatehouse_device',
      '__Host-gatehouse_session',
      '__Host-gatehouse_device',
    ];
    const ws = fc.constantFrom('', ' ', '\t', '\u00a0', '  ');
    const ours = fc
      .tuple(ws, fc.constantFrom(...names, 'gatehouse_proxy', 'gatehouse_proxy_state'), ws, fc.boolean())
      .chain(([a, n, b, cased]) => (cased ? anyCase(n) : fc.constant(n)).map((m) => `${a}${m}${b}`));
    const theirs = fc.stringMatching(/^[a-z][a-z0-9]{0,6}$/).map((n) => `app${n}`);
    const entry = fc.oneof(
      ours.map((name) => ({ name, mine: true })),
      theirs.map((name) => ({ name, mine: false })),
    );
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 8 }), fc.constantFrom('; ', ';', ' ;'), (entries, sep) => {
        const parts = entries.map((e, i) => `${e.name}=${e.mine ? 'SECRET' : 'v'}${i}`);
        const header = parts.join(sep);
        const kept = stripOwnCookies(header) ?? '';
        expect(kept).not.toContain('SECRET');
        const service = readCookies({ headers: { cookie: kept } } as unknown as FastifyRequest);
        for (const n of names) expect(service.has(n)).toBe(false);
        const wanted = entries.flatMap((e, i) => (e.mine ? [] : [`${e.name.trim()}=v${i}`]));
        expect(kept === '' ? [] : kept.split(';').map((p) => p.trim())).toEqual(wanted);
      }),
    );
  });
});

describe.each(backends())('the cookies the proxy forwards (%s)', (backend) => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig(backend);
  });
  afterAll(async () => rig?.close());

  it("no Gatehouse cookie reaches the upstream in any spelling the service or the proxy reads; the app's cookies do", async () => {
    const ours = fc
      .tuple(
        fc.constantFrom('', ' ', '\t'),
        fc.constantFrom('', '__Host-', '__Secure-').chain(anyCase),
        fc
          .constantFrom('gatehouse_session', 'gatehouse_device', 'gatehouse_proxy', 'gatehouse_proxy_state')
          .chain(anyCase),
        fc.constantFrom('', ' '),
      )
      .map(([a, prefix, n, b]) => ({ name: `${a}${prefix}${n}${b}`, mine: true }));
    const theirs = fc.stringMatching(/^[a-z]{1,6}$/).map((n) => ({ name: `app${n}`, mine: false }));
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<[Mode, Credential]>(
          ['none', 'none'],
          ['optional', 'none'],
          ['optional', 'bearer'],
          ['required', 'basicUser'],
        ),
        fc.array(fc.oneof(ours, theirs), { minLength: 1, maxLength: 6 }),
        async ([mode, cred], entries) => {
          const cookie = entries.map((e, i) => `${e.name}=${e.mine ? 'SECRET' : 'v'}${i}`).join('; ');
          const r = await rig.send(MODES[mode], [...rig.credentials[cred], `Cookie: ${cookie}`]);
          expect(r.status).toBe(200);
          const got = pairs(r.seen as Seen).filter(([n]) => n?.toLowerCase() === 'cookie');
          expect(JSON.stringify(got)).not.toContain('SECRET');
          const wanted = entries.flatMap((e, i) => (e.mine ? [] : [`${e.name}=v${i}`]));
          expect(got.map(([, v]) => v)).toEqual(wanted.length ? [wanted.join('; ')] : []);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("the service's session and device cookies sent to a proxy on the same host cannot be replayed from the upstream", async () => {
    await makeUser(rig.w.s, { email: 'root@example.com', password: 'a long admin password 1', admin: true });
    const b = await signedIn(rig.w.s, 'root@example.com', 'a long admin password 1');
    const cookie = `gatehouse_session=${b.session}; gatehouse_device=${b.device}; theme=dark`;
    const replay = (c: string) =>
      rig.w.s.app.inject({ method: 'GET', url: '/users/me', headers: { cookie: c } });
    expect((await replay(cookie)).statusCode).toBe(200); // the cookies are the (admin) user's API
    for (const [mode, cred] of [
      ['none', 'none'],
      ['optional', 'none'],
      ['required', 'bearer'],
      ['required', 'cookie'],
    ] as const) {
      const r = await rig.send(MODES[mode], [
        ...rig.credentials[cred].filter((l) => !l.startsWith('Cookie')),
        `Cookie: ${cred === 'cookie' ? `${rig.signedCookie}; ` : ''}${cookie}`,
      ]);
      expect(r.status).toBe(200);
      const seen = JSON.stringify(r.seen);
      expect(seen).not.toContain(b.session as string);
      expect(seen).not.toContain(b.device as string);
      const forwarded = pairs(r.seen as Seen).find(([n]) => n?.toLowerCase() === 'cookie')?.[1] ?? '';
      expect(forwarded).toBe('theme=dark');
      expect((await replay(forwarded)).statusCode).toBe(401);
    }
  });

  it('an upstream cannot set Gatehouse cookies on the client (no session fixation through the app)', async () => {
    const name = fc
      .tuple(
        fc.constantFrom('', ' '),
        fc.constantFrom('', '__Host-', '__Secure-').chain(anyCase),
        fc
          .constantFrom('gatehouse_session', 'gatehouse_device', 'gatehouse_proxy', 'gatehouse_proxy_state')
          .chain(anyCase),
      )
      .map((parts) => parts.join(''));
    await fc.assert(
      fc.asyncProperty(fc.array(name, { minLength: 1, maxLength: 3 }), async (names) => {
        const set = [...names.map((n) => `${n}=planted; Path=/`), 'app=1; Path=/'];
        const q = set.map((c) => `set=${encodeURIComponent(c)}`).join('&');
        const r = await rig.send(`/none/x?${q}`, []);
        expect(r.status).toBe(200);
        expect(r.headers['set-cookie']).toBe('app=1; Path=/');
      }),
      { numRuns: 25 },
    );
  });
});

describe.each(backends())("the service's cookies over TLS (%s)", (backend) => {
  let s: TestService;
  const tls = { 'x-forwarded-proto': 'https' };
  beforeAll(async () => {
    s = await startTestService(backend, { SVC_SERVER_TRUSTPROXY: '127.0.0.1' });
    await makeUser(s, { email: 'tls@example.com', password: 'a long enough password 2' });
  });
  afterAll(async () => s?.close());

  it('are __Host- prefixed (Secure, Path=/, no Domain) and only the prefixed names count over TLS', async () => {
    const b = new Browser(s);
    const e = await b.req({
      method: 'POST',
      url: '/auth/email',
      form: { email: 'tls@example.com' },
      headers: tls,
    });
    expect(e.statusCode).toBe(204);
    const pw = await b.req({
      method: 'POST',
      url: '/auth/password',
      form: { password: 'a long enough password 2' },
      headers: tls,
    });
    expect(pw.statusCode).toBe(204);
    const set = [e, pw]
      .flatMap((r) => ([] as (string | undefined)[]).concat(r.headers['set-cookie']))
      .filter((c): c is string => !!c);
    for (const c of set) {
      expect(c).toMatch(/^__Host-gatehouse_(session|device)=/);
      expect(c).toMatch(/; Secure/);
      expect(c).toMatch(/; Path=\//);
      expect(c).not.toMatch(/Domain=/i);
    }
    const token = b.cookies.get('__Host-gatehouse_session') as string;
    expect(token).toBeTruthy();
    const me = (cookie: string, headers: Record<string, string> = {}, ip = '127.0.0.1') =>
      s.app.inject({ method: 'GET', url: '/users/me', headers: { cookie, ...headers }, remoteAddress: ip });
    expect((await me(`__Host-gatehouse_session=${token}`, tls)).statusCode).toBe(200);
    // Over TLS the plain name is not read (it may have been planted by a sibling host) ...
    expect((await me(`gatehouse_session=${token}`, tls)).statusCode).toBe(401);
    // ... and over plain HTTP, or when an untrusted client claims https, the prefixed one is not.
    expect((await me(`__Host-gatehouse_session=${token}`)).statusCode).toBe(401);
    expect((await me(`__Host-gatehouse_session=${token}`, tls, '10.9.8.7')).statusCode).toBe(401);
    // Plain HTTP (development) keeps the plain names.
    const plain = await signedIn(s, 'tls@example.com', 'a long enough password 2');
    expect(plain.session).toBeTruthy();
  });
});
