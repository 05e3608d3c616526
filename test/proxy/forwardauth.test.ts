/**
 * Forward auth with real front proxies: nginx (auth_request) and Caddy (forward_auth) run the
 * configurations of docs/proxy.md in front of the recording upstream, with `gatehouse proxy`
 * answering them; Traefik is represented by the exact request its forwardAuth sends.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { App } from '../../src/objects/app.js';
import type { RunningProxy } from '../../src/proxy/run.js';
import { makeUser, signedIn } from '../auth/client.js';
import { backends } from '../helpers.js';
import {
  CADDY,
  docConfig,
  FORGED,
  type FrontProxy,
  Jar,
  missing,
  NGINX,
  startCaddy,
  startNginx,
} from './frontproxy.js';
import { basic, relearn, startWorld, type World } from './harness.js';

const PASSWORD = 'correct horse battery staple 42';

describe.each(backends())('forward auth behind real nginx and Caddy on %s', (backend) => {
  let w: World;
  let g: RunningProxy;
  let gatehouse: string;
  let nginx: FrontProxy | undefined;
  let caddy: FrontProxy | undefined;
  let serviceSession: string;
  let graceId: string;
  const skipNginx = missing('nginx', NGINX);
  const skipCaddy = missing('caddy', CADDY);

  beforeAll(async () => {
    w = await startWorld(backend);
    g = await w.proxy({ overrides: ['path_/open/_auth=none', 'path_/opt/_auth=optional'] });
    gatehouse = new URL(g.url).host;
    const app = new URL(w.echo.url).host;
    if (!skipNginx) nginx = await startNginx(gatehouse, app);
    if (!skipCaddy) caddy = await startCaddy(gatehouse, app);
    await w.s.store.systemPut(App, w.appId, (doc) => ({
      doc: { ...(doc ?? {}), AllowedOrigins: [nginx?.url, caddy?.url].filter(Boolean) },
    }));
    // The proxy learned the App's origins when it started: let it learn the front proxies' too.
    await relearn(g, (l) => [nginx?.url, caddy?.url].every((u) => !u || l.origins.has(u)));
    graceId = await makeUser(w.s, { email: 'grace@example.com', password: PASSWORD });
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

  /** The upstream's record of the one request with this marker in its URL. */
  const hitFor = (marker: string) => {
    const hits = w.echo.hits.filter((h) => h.url.includes(marker));
    expect(hits).toHaveLength(1);
    return hits[0] as (typeof w.echo.hits)[number];
  };
  let n = 0;
  const mark = () => `m${++n}-${Date.now().toString(36)}`;

  it('answers the health check while the service is there', async () => {
    const r = await fetch(`${g.url}/.gatehouse/health`);
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ Ready: true });
  });

  it('refuses an anonymous program (401, nothing forwarded) and sends a browser to sign in', async () => {
    for (const [name, f] of fronts()) {
      const m = mark();
      const prog = await fetch(`${f.url}/x/${m}`, { redirect: 'manual' });
      expect(prog.status, name).toBe(401);
      expect(
        w.echo.hits.some((h) => h.url.includes(m)),
        name,
      ).toBe(false);
      const browser = await fetch(`${f.url}/x/${m}`, {
        redirect: 'manual',
        headers: { accept: 'text/html' },
      });
      expect(browser.status, name).toBe(302);
      const to = new URL(browser.headers.get('location') ?? '');
      expect(to.origin + to.pathname, name).toBe(`${w.serviceUrl}/proxy/v1/signin`);
      expect(to.searchParams.get('return'), name).toBe(`${f.url}/.gatehouse/callback`);
      expect(browser.headers.getSetCookie().join(), name).toMatch(/gatehouse_proxy_state=/);
      expect(
        w.echo.hits.some((h) => h.url.includes(m)),
        name,
      ).toBe(false);
    }
  });

  it('passes an API key (Bearer, Basic user, Basic password) with the identity headers, never a forged one', async () => {
    for (const [name, f] of fronts())
      for (const authorization of [`Bearer ${w.userKey}`, basic(w.userKey, ''), basic('anyone', w.userKey)]) {
        const m = mark();
        const r = await fetch(`${f.url}/app/${m}?q=1`, { headers: { ...FORGED, authorization } });
        expect(r.status, `${name} ${authorization.slice(0, 6)}`).toBe(200);
        const h = hitFor(m).headers;
        expect(h['x-service-user'], name).toBe(w.user.id);
        expect(h['x-service-email'], name).toBe(w.user.email);
        expect(h['x-service-user-name'], name).toBe(w.user.userName);
        expect(h['x-service-full-name'], name).toBe(w.user.fullName);
        expect(h['x-service-auth-type'], name).toBe('bearer');
        expect(h['x-remote-user'], name).toBe(w.user.email);
        expect(h.authorization, name).toBe(basic(w.user.email, ''));
        expect(String(h['x-service-assertion']).split('.'), name).toHaveLength(3);
        expect(JSON.stringify(h), name).not.toMatch(/forged/);
        expect(hitFor(m).url).toBe(`/app/${m}?q=1`);
      }
  });

  it('applies the modes per prefix on the original path: none and optional pass anonymously, forged headers removed', async () => {
    for (const [name, f] of fronts())
      for (const prefix of ['open', 'opt']) {
        const m = mark();
        const r = await fetch(`${f.url}/${prefix}/${m}`, {
          headers: { ...FORGED, authorization: basic('forged-basic@evil.example', '') },
        });
        expect(r.status, `${name} ${prefix}`).toBe(200);
        const h = hitFor(m).headers;
        expect(JSON.stringify(h), `${name} ${prefix}`).not.toMatch(/forged/);
        expect(h['x-service-user'], name).toBeUndefined();
        expect(h.authorization, name).toBeUndefined();
      }
    // The application's own bearer token passes in mode none (the inline proxy's rule).
    for (const [name, f] of fronts()) {
      const m = mark();
      await fetch(`${f.url}/open/${m}`, { headers: { authorization: 'Bearer app-own-token' } });
      expect(hitFor(m).headers.authorization, name).toBe('Bearer app-own-token');
    }
    // A path that reads as /open only leniently gets no laxer mode.
    for (const [name, f] of fronts()) {
      const r = await fetch(`${f.url}/OPEN/${mark()}`, { redirect: 'manual' });
      expect(r.status, name).toBe(401);
    }
  });

  it('signs a browser in through the service and back to the application host, then honours the cookie', async () => {
    for (const [name, f] of fronts()) {
      const jar = new Jar();
      jar.set(w.serviceUrl, 'gatehouse_session', serviceSession);
      const m = mark();
      const first = await jar.get(`${f.url}/page/${m}?q=1`);
      expect(first.res.status, name).toBe(302);
      const atService = await jar.get(first.location);
      expect(atService.res.status, `${name}: ${atService.text}`).toBe(302);
      expect(atService.location.startsWith(`${f.url}/.gatehouse/callback?`), name).toBe(true);
      const back = await jar.get(atService.location);
      expect(back.res.status, `${name}: ${back.text}`).toBe(302);
      expect(back.location, name).toBe(`/page/${m}?q=1`);
      const cookie = back.setCookies.find((c) => c.startsWith('gatehouse_proxy='));
      expect(cookie, name).toMatch(/HttpOnly/);
      expect(cookie, name).not.toMatch(/Domain=/i);
      const page = await jar.get(`${f.url}${back.location}`, FORGED);
      expect(page.res.status, name).toBe(200);
      const h = hitFor(m).headers;
      expect(h['x-service-user'], name).toBe(graceId);
      expect(h['x-service-auth-type'], name).toBe('session');
      expect(h['x-service-session-expires'], name).toMatch(/GMT$/);
      expect(JSON.stringify(h), name).not.toMatch(/forged/);
    }
  });

  it('completes the round trip behind an nginx that does not pass the sign-in cookie on (one more hop)', async () => {
    if (!nginx) return;
    const plain = await startNginx(
      new URL(g.url).host,
      new URL(w.echo.url).host,
      docConfig('nginx').replace(/^\s*add_header Set-Cookie .*$/m, ''),
    );
    await w.s.store.systemPut(App, w.appId, (doc) => ({
      doc: { ...(doc ?? {}), AllowedOrigins: [nginx?.url, caddy?.url, plain.url].filter(Boolean) },
    }));
    await relearn(g, (l) => l.origins.has(plain.url));
    try {
      const jar = new Jar();
      jar.set(w.serviceUrl, 'gatehouse_session', serviceSession);
      const m = mark();
      const first = await jar.get(`${plain.url}/deep/${m}?q=1`);
      expect(first.res.status).toBe(302);
      expect(first.setCookies).toHaveLength(0);
      const atService = await jar.get(first.location);
      const noCookie = await jar.get(atService.location);
      // The callback did not get the state cookie: it starts again, setting it now.
      expect(noCookie.res.status).toBe(302);
      expect(new URL(noCookie.location).origin).toBe(w.serviceUrl);
      expect(new URL(noCookie.location).searchParams.get('return')).toBe(`${plain.url}/.gatehouse/callback`);
      const again = await jar.get(noCookie.location);
      const back = await jar.get(again.location);
      expect(back.res.status, back.text).toBe(302);
      expect(back.location).toBe(`/deep/${m}?q=1`);
      const page = await jar.get(`${plain.url}${back.location}`);
      expect(page.res.status).toBe(200);
      expect(hitFor(m).headers['x-service-user']).toBe(graceId);
    } finally {
      await plain.close();
    }
  });

  it('answers Traefik forwardAuth as it asks (X-Forwarded-*, the client headers, no body)', async () => {
    // The App is served on wiki.example.com (as Traefik's router would say), and the proxy knows it.
    await w.s.store.systemPut(App, w.appId, (doc) => ({
      doc: {
        ...(doc ?? {}),
        AllowedOrigins: [...((doc?.AllowedOrigins as string[]) ?? []), 'https://wiki.example.com'],
      },
    }));
    await relearn(g, (l) => l.origins.has('https://wiki.example.com'));
    const traefik = (headers: Record<string, string>) =>
      fetch(`${g.url}/.gatehouse/authz/forward-auth`, {
        redirect: 'manual',
        headers: {
          'x-forwarded-method': 'GET',
          'x-forwarded-proto': 'https',
          'x-forwarded-host': 'wiki.example.com',
          'x-forwarded-uri': '/docs/page?x=1',
          'x-forwarded-for': '203.0.113.7',
          'x-real-ip': '203.0.113.7',
          'user-agent': 'Mozilla/5.0',
          ...headers,
        },
      });
    const ok = await traefik({ authorization: `Bearer ${w.userKey}` });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-service-user')).toBe(w.user.id);
    expect(ok.headers.get('x-service-email')).toBe(w.user.email);
    expect(ok.headers.get('x-remote-user')).toBe(w.user.email);
    expect(ok.headers.get('authorization')).toBe(basic(w.user.email, ''));
    expect(ok.headers.get('x-service-assertion')?.split('.')).toHaveLength(3);
    const prog = await traefik({});
    expect(prog.status).toBe(401);
    expect(prog.headers.get('www-authenticate')).toMatch(/Bearer/);
    const browser = await traefik({ accept: 'text/html' });
    expect(browser.status).toBe(302);
    expect(new URL(browser.headers.get('location') ?? '').searchParams.get('return')).toBe(
      'https://wiki.example.com/.gatehouse/callback',
    );
    const open = await traefik({ 'x-forwarded-uri': '/open/thing' });
    expect(open.status).toBe(200);
    expect(open.headers.get('x-service-user')).toBeNull();
    // Missing or repeated descriptions are refused, never guessed.
    expect((await traefik({ 'x-forwarded-uri': '' })).status).toBe(401); // "" is "/": required
    const noHost = await fetch(`${g.url}/.gatehouse/authz/forward-auth`, {
      headers: { 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'https', 'x-forwarded-uri': '/' },
    });
    expect(noHost.status).toBe(400);
  });

  it('writes one access-log line per request with the service field names, refusals included', async () => {
    const before = w.logs.length;
    const m = mark();
    const f = fronts()[0]?.[1];
    await fetch(`${g.url}/inline/${m}`, { headers: { authorization: `Bearer ${w.userKey}` } });
    await fetch(`${g.url}/inline/${m}-refused`);
    if (f) await fetch(`${f.url}/viafront/${m}`, { headers: { authorization: `Bearer ${w.userKey}` } });
    // A websocket handshake without credentials: refused on the raw connection, logged too.
    await new Promise<void>((resolve) => {
      const c = net.connect(g.port, '127.0.0.1', () =>
        c.write(
          `GET /ws/${m} HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
        ),
      );
      c.on('data', () => c.destroy());
      c.on('error', () => resolve());
      c.on('close', () => resolve());
    });
    await new Promise((r) => setTimeout(r, 100));
    const lines = w.logs
      .slice(before)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request');
    const inline = lines.find((l) => l.url === `/inline/${m}`);
    expect(inline).toMatchObject({
      method: 'GET',
      status: 200,
      user: w.user.id,
      authType: 'bearer',
      mode: 'required',
    });
    expect(inline?.upstream).toBe(w.echo.url);
    expect(typeof inline?.ms).toBe('number');
    expect(typeof inline?.reqId).toBe('string');
    const refused = lines.find((l) => l.url === `/inline/${m}-refused`);
    expect(refused).toMatchObject({ status: 401, user: null, upstream: null, error: 'Unauthenticated' });
    if (f) {
      const fa = lines.find((l) => l.url === `/viafront/${m}`);
      expect(fa).toMatchObject({ status: 200, user: w.user.id, host: new URL(f.url).host, mode: 'required' });
    }
    const ws = lines.find((l) => l.url === `/ws/${m}`);
    expect(ws).toMatchObject({ status: 401, user: null, mode: 'required', error: 'Unauthenticated' });
    expect(w.logs.slice(before).join('\n')).not.toContain(w.userKey);
  });

  it('a user the App is closed to gets 403, named App, never its internal ID', async () => {
    const g1 = await w.s.req({ method: 'POST', url: '/groups', payload: { Name: 'wiki-staff' } });
    const staff = String(g1.headers['x-id']);
    const outsiderId = await makeUser(w.s, { email: 'outsider@example.com' });
    const key = await w.s.keyFor(['user'], outsiderId);
    await w.s.store.systemPut(App, w.appId, (doc) => ({ doc: { ...(doc ?? {}), AccessGroups: [staff] } }));
    // The proxy learns the App's access-request page when it registers.
    await relearn(g, (l) => l.accessRequestUrl !== undefined);
    try {
      for (const [name, f] of fronts()) {
        const m = mark();
        const r = await fetch(`${f.url}/x/${m}`, {
          headers: { authorization: `Bearer ${key}` },
          redirect: 'manual',
        });
        // nginx's error_page sends the person on to the access-request page (docs/proxy.md);
        // Caddy passes the 403 with its Location.
        if (name === 'nginx') expect(r.status, name).toBe(302);
        else expect(r.status, name).toBe(403);
        expect(r.headers.get('location'), name).toContain(`/groups/${staff}`);
        expect(
          w.echo.hits.some((h) => h.url.includes(m)),
          name,
        ).toBe(false);
      }
      const page = await fetch(`${g.url}/x`, {
        headers: { authorization: `Bearer ${key}`, accept: 'text/html' },
      });
      expect(page.status).toBe(403);
      // The access-request page of the App's AccessGroup, for error_page and for the person.
      const direct = await fetch(`${g.url}/.gatehouse/authz/auth-request`, {
        headers: {
          authorization: `Bearer ${key}`,
          accept: 'text/html',
          'x-original-url': `${nginx?.url ?? 'http://127.0.0.1'}/x`,
          'x-original-method': 'GET',
        },
        redirect: 'manual',
      });
      expect(direct.status).toBe(403);
      expect(direct.headers.get('location')).toContain(`/groups/${staff}`);
      const html = await page.text();
      expect(html).toContain(`/groups/${staff}`);
      expect(html).toContain('echo app');
      expect(html).not.toContain(w.appId);
      expect(page.headers.get('content-type')).toMatch(/text\/html/);
    } finally {
      await w.s.store.systemPut(App, w.appId, (doc) => ({ doc: { ...(doc ?? {}), AccessGroups: [] } }));
      await relearn(g, (l) => l.accessRequestUrl === undefined);
    }
  });
});
