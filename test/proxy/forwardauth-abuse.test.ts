/**
 * Forward auth as the attacker tries it: forged X-Forwarded-Host / X-Original-URL from addresses
 * that are not trusted front proxies, forged identity headers in generated spellings through real
 * nginx and Caddy, open redirects through the sign-in and callback round trip, and the host a
 * redirect or a cookie is made for (docs/security.md, "Forward auth").
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { App } from '../../src/objects/app.js';
import type { RunningProxy } from '../../src/proxy/run.js';
import { makeUser, signedIn } from '../auth/client.js';
import { backends } from '../helpers.js';
import { CADDY, type FrontProxy, Jar, missing, NGINX, startCaddy, startNginx } from './frontproxy.js';
import { relearn, serviceBackend, startWorld, type World } from './harness.js';

const PASSWORD = 'correct horse battery staple 42';
const IDENTITY = [
  'x-service-user',
  'x-service-email',
  'x-service-user-name',
  'x-service-full-name',
  'x-service-auth-type',
  'x-service-session-expires',
  'x-service-assertion',
  'x-remote-user',
  'remote-user',
];

/** A spelling of a header name an application may read as the name: any case, "-", "_" or "." between words. */
const spelling = (name: string) =>
  fc
    .tuple(
      fc.array(fc.boolean(), { minLength: name.length, maxLength: name.length }),
      fc.array(fc.constantFrom('-', '_', '.'), { minLength: 8, maxLength: 8 }),
    )
    .map(([upper, seps]) => {
      let i = 0;
      return [...name]
        .map((c, k) => (c === '-' ? (seps[i++ % seps.length] as string) : upper[k] ? c.toUpperCase() : c))
        .join('');
    });

describe.each(backends())('forward auth under attack on %s', (backend) => {
  let w: World;
  let g: RunningProxy;
  let nginx: FrontProxy | undefined;
  let caddy: FrontProxy | undefined;
  let serviceSession: string;
  const skipNginx = missing('nginx', NGINX);
  const skipCaddy = missing('caddy', CADDY);

  beforeAll(async () => {
    w = await startWorld(backend);
    g = await w.proxy({ overrides: ['path_/open/_auth=none', 'path_/opt/_auth=optional'] });
    const gatehouse = new URL(g.url).host;
    const app = new URL(w.echo.url).host;
    if (!skipNginx) nginx = await startNginx(gatehouse, app);
    if (!skipCaddy) caddy = await startCaddy(gatehouse, app);
    await w.s.store.systemPut(App, w.appId, (doc) => ({
      doc: { ...(doc ?? {}), AllowedOrigins: [nginx?.url, caddy?.url].filter(Boolean) },
    }));
    // The proxy learned the App's origins when it started: let it learn the front proxies' too.
    await relearn(g, (l) => [nginx?.url, caddy?.url].every((u) => !u || l.origins.has(u)));
    await makeUser(w.s, { email: 'grace@example.com', password: PASSWORD });
    serviceSession = (await signedIn(w.s, 'grace@example.com', PASSWORD)).session as string;
  }, 60_000);
  afterAll(async () => {
    await nginx?.close();
    await caddy?.close();
    await w?.close();
  });

  const fronts = () =>
    [
      ['nginx', nginx],
      ['caddy', caddy],
    ].filter((f): f is [string, FrontProxy] => f[1] !== undefined);

  it('believes no X-Original-* or X-Forwarded-* from an address outside proxy.trustedproxies', async () => {
    for (const trusted of ['10.9.9.9', '', '192.168.0.0/16, fd00::/8']) {
      const strict = await w.proxy({ env: { SVC_PROXY_TRUSTEDPROXIES: trusted } });
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom('auth-request', 'forward-auth'),
          fc.record({
            'x-original-url': fc.constantFrom(
              'http://wiki.example.com/',
              'https://evil.example/x',
              'http://127.0.0.1/open/',
            ),
            'x-original-method': fc.constantFrom('GET', 'POST'),
            'x-forwarded-host': fc.constantFrom('wiki.example.com', 'evil.example', '127.0.0.1'),
            'x-forwarded-proto': fc.constantFrom('http', 'https'),
            'x-forwarded-uri': fc.constantFrom('/', '/open/x', '/admin'),
            'x-forwarded-method': fc.constantFrom('GET', 'HEAD'),
            'x-forwarded-for': fc.constantFrom('127.0.0.1', '10.9.9.9', '::1'),
            'x-real-ip': fc.constantFrom('127.0.0.1', '10.9.9.9'),
            forwarded: fc.constantFrom('for=10.9.9.9', 'for=127.0.0.1;host=wiki.example.com'),
          }),
          fc.boolean(),
          async (kind, forged, withKey) => {
            const r = await fetch(`${strict.url}/.gatehouse/authz/${kind}`, {
              redirect: 'manual',
              headers: {
                ...forged,
                accept: 'text/html',
                ...(withKey ? { authorization: `Bearer ${w.userKey}` } : {}),
              },
            });
            expect(r.status).toBe(403);
            expect(r.headers.get('x-service-user')).toBeNull();
            expect(r.headers.get('location')).toBeNull();
            expect(r.headers.get('set-cookie')).toBeNull();
          },
        ),
        { numRuns: 15 },
      );
      await strict.close();
    }
  });

  it('lets no identity header the client sent reach the upstream, in any generated spelling, through nginx and Caddy', async () => {
    for (const [name, f] of fronts()) {
      let n = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.constantFrom(...IDENTITY).chain(spelling), { minLength: 1, maxLength: 6 }),
          fc.constantFrom('/open/', '/opt/', '/app/'),
          fc.boolean(),
          async (names, prefix, withKey) => {
            const marker = `${name}-spell-${++n}-${Date.now().toString(36)}`;
            const headers: Record<string, string> = {};
            for (const [i, h] of names.entries()) headers[h] = `forged-${i}`;
            if (withKey) headers.authorization = `Bearer ${w.userKey}`;
            const r = await fetch(`${f.url}${prefix}${marker}`, { headers, redirect: 'manual' });
            if (prefix === '/app/' && !withKey) {
              expect(r.status).toBe(401);
              return;
            }
            expect(r.status, `${name} ${JSON.stringify(headers)}`).toBe(200);
            const hit = w.echo.hits.find((h) => h.url.includes(marker));
            expect(hit, name).toBeDefined();
            expect(JSON.stringify(hit?.headers), `${name} ${JSON.stringify(headers)}`).not.toMatch(/forged/);
            // Mode none forwards no identity even with a key (as inline); the others the key's.
            if (withKey && prefix !== '/open/') expect(hit?.headers['x-service-user']).toBe(w.user.id);
          },
        ),
        { numRuns: 30 },
      );
    }
  });

  it('returns a browser only to a path on the application after the sign-in round trip, whatever it asked for', async () => {
    const f = fronts()[0]?.[1];
    if (!f) return;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.constantFrom(
            '//evil.example/x',
            '/\\evil.example',
            '/%2F%2Fevil.example',
            '/%5Cevil.example',
            '/..//evil.example',
            '/ok?next=//evil.example',
            '/\t/evil.example',
            '/%09/evil.example',
            '/https:/evil.example',
          ),
          fc.webPath().map((p) => `/${p.replace(/^\/+/, '')}`),
        ),
        fc.boolean(),
        async (target, viaSigninPath) => {
          const jar = new Jar();
          jar.set(w.serviceUrl, 'gatehouse_session', serviceSession);
          const first = viaSigninPath
            ? await jar.get(`${f.url}/.gatehouse/signin?return=${encodeURIComponent(target)}`)
            : await jar.get(`${f.url}${target}`).catch(() => undefined);
          // Refused before any redirect (nginx or the proxy: a path without a canonical form).
          if (first === undefined) return;
          if (first.res.status !== 302) return;
          const to = new URL(first.location);
          expect(to.origin).toBe(w.serviceUrl);
          const atService = await jar.get(first.location);
          if (atService.res.status !== 302) return;
          expect(atService.location.startsWith(`${f.url}/.gatehouse/callback?`)).toBe(true);
          const back = await jar.get(atService.location);
          expect(back.res.status).toBe(302);
          // A path on the same origin: never a URL, never "//host" or "/\host".
          expect(back.location).toMatch(/^\/(?![/\\])/);
          expect(new URL(back.location, f.url).origin).toBe(f.url);
        },
      ),
      { numRuns: 20 },
    );
  });

  it('makes no redirect or cookie for a host the client chose', async () => {
    // 1. From a trusted front proxy, a forged host is refused by the proxy itself: the service
    //    told it the App's origins at registration, so no sign-in starts for another host.
    const direct = await fetch(`${g.url}/.gatehouse/authz/forward-auth`, {
      redirect: 'manual',
      headers: {
        accept: 'text/html',
        'x-forwarded-method': 'GET',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'evil.example',
        'x-forwarded-uri': '/x',
      },
    });
    expect(direct.status).toBe(400);
    expect(direct.headers.get('location')).toBeNull();
    expect(direct.headers.getSetCookie()).toEqual([]);
    // 1b. A proxy that was told no origins (an older service) still never gets a code sent
    //     there: the service refuses the callback URL.
    const older = await w.proxy(
      {},
      {
        backend: serviceBackend(w, (real) => ({
          register: async (r) => {
            const { Origins: _none, ...rest } = await real.register(r);
            return rest;
          },
        })),
      },
    );
    const viaOlder = await fetch(`${older.url}/.gatehouse/authz/forward-auth`, {
      redirect: 'manual',
      headers: {
        accept: 'text/html',
        'x-forwarded-method': 'GET',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'evil.example',
        'x-forwarded-uri': '/x',
      },
    });
    expect(viaOlder.status).toBe(302);
    for (const c of viaOlder.headers.getSetCookie()) expect(c).not.toMatch(/domain=/i);
    const jar = new Jar();
    jar.set(w.serviceUrl, 'gatehouse_session', serviceSession);
    const atService = await jar.get(viaOlder.headers.get('location') ?? '');
    expect(atService.res.status).toBe(400);
    expect(atService.location).toBe('');
    // 2. When the service has said which origins the App is on, the proxy refuses other hosts itself.
    const told = await w.proxy(
      {},
      {
        backend: serviceBackend(w, (real) => ({
          register: async (r) => ({ ...(await real.register(r)), Origins: ['https://wiki.example.com'] }),
        })),
      },
    );
    for (const [host, status] of [
      ['evil.example', 400],
      ['wiki.example.com.evil.example', 400],
      ['wiki.example.com', 302],
    ] as const) {
      const r = await fetch(`${told.url}/.gatehouse/authz/forward-auth`, {
        redirect: 'manual',
        headers: {
          accept: 'text/html',
          'x-forwarded-method': 'GET',
          'x-forwarded-proto': 'https',
          'x-forwarded-host': host,
          'x-forwarded-uri': '/x',
        },
      });
      expect(r.status, host).toBe(status);
      if (status !== 302) expect(r.headers.get('location'), host).toBeNull();
    }
    const nginxForged = await fetch(`${told.url}/.gatehouse/authz/auth-request`, {
      headers: {
        accept: 'text/html',
        'x-original-url': 'https://evil.example/x',
        'x-original-method': 'GET',
      },
      redirect: 'manual',
    });
    expect(nginxForged.status).toBe(400);
    // 3. Through Caddy, an X-Forwarded-Host the client sends is replaced with the real host.
    if (caddy) {
      const r = await fetch(`${caddy.url}/x`, {
        redirect: 'manual',
        headers: {
          accept: 'text/html',
          'x-forwarded-host': 'evil.example',
          'x-original-url': 'http://evil.example/',
        },
      });
      expect(r.status).toBe(302);
      expect(new URL(r.headers.get('location') ?? '').searchParams.get('return')).toBe(
        `${caddy.url}/.gatehouse/callback`,
      );
    }
    // 4. Through nginx, a forged X-Original-URL is replaced by nginx's own.
    if (nginx) {
      const r = await fetch(`${nginx.url}/x`, {
        redirect: 'manual',
        headers: {
          accept: 'text/html',
          'x-original-url': 'http://evil.example/',
          'x-forwarded-host': 'evil.example',
        },
      });
      expect(r.status).toBe(302);
      expect(new URL(r.headers.get('location') ?? '').searchParams.get('return')).toBe(
        `${nginx.url}/.gatehouse/callback`,
      );
    }
  });

  it('refuses forward-auth requests that are not GET, and descriptions given twice or malformed', async () => {
    const base = {
      'x-forwarded-method': 'GET',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'wiki.example.com',
      'x-forwarded-uri': '/x',
    };
    const post = await fetch(`${g.url}/.gatehouse/authz/forward-auth`, {
      method: 'POST',
      headers: base,
      body: 'x',
    });
    expect(post.status).toBe(405);
    for (const bad of [
      { 'x-forwarded-proto': 'gopher' },
      { 'x-forwarded-host': 'user@wiki.example.com' },
      { 'x-forwarded-host': 'wiki.example.com/evil' },
      { 'x-forwarded-uri': '/a/%2e%2e%2fadmin' },
      { 'x-forwarded-uri': 'http://evil.example/' },
      { 'x-forwarded-method': 'G E T' },
    ]) {
      const r = await fetch(`${g.url}/.gatehouse/authz/forward-auth`, {
        headers: { ...base, ...bad, authorization: `Bearer ${w.userKey}` },
      });
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(r.headers.get('x-service-user')).toBeNull();
    }
    for (const bad of ['//evil.example/x', 'javascript:alert(1)', '/x', 'http://user:pw@wiki.example.com/']) {
      const r = await fetch(`${g.url}/.gatehouse/authz/auth-request`, {
        headers: { 'x-original-url': bad, 'x-original-method': 'GET', authorization: `Bearer ${w.userKey}` },
      });
      expect(r.status, bad).toBe(400);
    }
  });
});
