import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { App } from '../../src/objects/app.js';
import { TENANT_ID, Tenant } from '../../src/objects/tenant.js';
import type { RunningProxy } from '../../src/proxy/run.js';
import { makeUser, signedIn } from '../auth/client.js';
import { backends } from '../helpers.js';
import { Jar } from './frontproxy.js';
import { serviceBackend, startWorld, type World } from './harness.js';

const HTTP_DATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const PASSWORD = 'correct horse battery staple 42';

describe.each(backends())('proxy sessions and access checks on %s', (backend) => {
  let w: World;
  let p: RunningProxy;
  let userId: string;
  let serviceSession: string;
  beforeAll(async () => {
    w = await startWorld(backend);
    p = await w.proxy({ env: { SVC_PROXY_COOKIEDOMAIN: '' } }, { cookieTtlS: 2 });
    await w.s.store.systemPut(App, w.appId, (doc) => ({ doc: { ...(doc ?? {}), AllowedOrigins: [p.url] } }));
    await w.s.store.systemPut(Tenant, TENANT_ID, (doc) => ({
      doc: { ...(doc ?? {}), AllowedReturnOrigins: [p.url] },
    }));
    userId = await makeUser(w.s, { email: 'grace@example.com', password: PASSWORD });
    const b = await signedIn(w.s, 'grace@example.com', PASSWORD);
    serviceSession = b.session as string;
  });
  afterAll(async () => w?.close());

  /** Runs the whole browser handshake; returns the jar holding the proxy cookie. */
  async function signInThroughProxy(proxy: RunningProxy, path = '/app/page?q=1') {
    const jar = new Jar();
    jar.set(w.serviceUrl, 'gatehouse_session', serviceSession);
    const first = await jar.get(`${proxy.url}${path}`);
    expect(first.res.status).toBe(302);
    const atService = await jar.get(first.location);
    expect(atService.res.status).toBe(302);
    const cb = new URL(atService.location);
    expect(cb.origin + cb.pathname).toBe(`${proxy.url}/.gatehouse/callback`);
    const back = await jar.get(atService.location);
    return { jar, first, atService, back };
  }

  it('signs a browser in through the service and returns it to the page it asked for', async () => {
    const { jar, back } = await signInThroughProxy(p);
    expect(back.res.status).toBe(302);
    expect(back.location).toBe('/app/page?q=1');
    const cookie = back.setCookies.find((c) => c.startsWith('gatehouse_proxy='));
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Lax/);
    expect(cookie).toMatch(/Path=\//);
    expect(cookie).not.toMatch(/Secure/); // plaintext listener in this test
    const page = await jar.get(`${p.url}${back.location}`, { accept: 'application/json' });
    expect(page.res.status).toBe(200);
    const h = JSON.parse(page.text).headers as Record<string, string>;
    expect(h['x-service-auth-type']).toBe('session');
    expect(h['x-service-user']).toBe(userId);
    expect(h['x-service-email']).toBe('grace@example.com');
    expect(h['x-remote-user']).toBe('grace@example.com');
    expect(h['x-service-session-expires']).toMatch(HTTP_DATE);
    expect(Date.parse(h['x-service-session-expires'] as string)).toBeGreaterThan(Date.now());
    expect(Buffer.from((h.authorization as string).slice(6), 'base64').toString()).toBe('grace@example.com:');
    expect(h.cookie).toBeUndefined();
  });

  it('sends a browser without a service session to the sign-in pages, which come back to the handshake', async () => {
    const jar = new Jar();
    const first = await jar.get(`${p.url}/x`);
    const atService = await jar.get(first.location);
    expect(atService.res.status).toBe(302);
    const signin = new URL(atService.location, w.serviceUrl);
    expect(signin.pathname).toBe('/signin');
    // The path on the service: nothing of the request's Host (test/security/audit-host.test.ts).
    const handshake = new URL(first.location);
    expect(handshake.origin).toBe(w.serviceUrl);
    expect(signin.searchParams.get('return')).toBe(handshake.pathname + handshake.search);
  });

  it('refuses a callback with the wrong state, a reused code, and return URLs off the App', async () => {
    const jar = new Jar();
    jar.set(w.serviceUrl, 'gatehouse_session', serviceSession);
    const first = await jar.get(`${p.url}/y`);
    const atService = await jar.get(first.location);
    const cb = new URL(atService.location);
    // Another browser (no state cookie) cannot use this code (login CSRF): the code is not
    // exchanged; the sign-in starts again for that browser, with its own state cookie (a front
    // proxy may have dropped the first one), and a second callback without it is refused.
    const other = new Jar();
    const again = await other.get(cb.toString());
    expect(again.res.status).toBe(302);
    expect(new URL(again.location).origin).toBe(w.serviceUrl);
    expect(again.setCookies.some((c) => c.startsWith('gatehouse_proxy='))).toBe(false);
    expect(other.byOrigin.get(p.url)?.has('gatehouse_proxy_state')).toBe(true);
    const retried = new URL(cb);
    retried.searchParams.set('state', new URL(again.location).searchParams.get('state') as string);
    expect((await new Jar().get(retried.toString())).res.status).toBe(400);
    const forged = new URL(cb);
    forged.searchParams.set('state', 'A'.repeat(24));
    expect((await jar.get(forged.toString())).res.status).toBe(400);
    // The code is single-use: the forged attempt above did not consume it at the proxy, but one
    // exchange does.
    expect((await jar.get(cb.toString())).res.status).toBe(302);
    // The state cookie is cleared after success, and the code is spent: replaying the link only
    // starts a new sign-in.
    const replay = await jar.get(cb.toString());
    expect(replay.res.status).toBe(302);
    expect(new URL(replay.location).origin).toBe(w.serviceUrl);
    const bad = new URL(first.location);
    bad.searchParams.set('return', 'https://evil.example/.gatehouse/callback');
    const r = await jar.get(bad.toString());
    expect(r.res.status).toBe(400);
    const path = new URL(first.location);
    path.searchParams.set('return', `${p.url}/somewhere-else`);
    expect((await jar.get(path.toString())).res.status).toBe(400);
  });

  it('refuses an altered cookie and one signed by another key (a restart with a generated key)', async () => {
    const { jar } = await signInThroughProxy(p);
    const good = jar.byOrigin.get(p.url)?.get('gatehouse_proxy') as string;
    const parts = good.split('.');
    const payload = JSON.parse(Buffer.from(parts[1] as string, 'base64url').toString());
    payload.sub = 'someoneelse';
    const altered = [parts[0], Buffer.from(JSON.stringify(payload)).toString('base64url'), parts[2]].join(
      '.',
    );
    const r = await fetch(`${p.url}/z`, { headers: { cookie: `gatehouse_proxy=${altered}` } });
    expect(r.status).toBe(401);
    const restarted = await w.proxy();
    const r2 = await fetch(`${restarted.url}/z`, { headers: { cookie: `gatehouse_proxy=${good}` } });
    expect(r2.status).toBe(401);
    const r3 = await fetch(`${p.url}/z`, { headers: { cookie: `gatehouse_proxy=${good}` } });
    expect(r3.status).toBe(200);
  });

  it('signs cookies with proxy.cookiekey (verifiable with its public half) and sets Domain', async () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const q = await w.proxy({ env: { SVC_PROXY_COOKIEKEY: pem, SVC_PROXY_COOKIEDOMAIN: 'example.test' } });
    await w.s.store.systemPut(App, w.appId, (doc) => ({
      doc: { ...(doc ?? {}), AllowedOrigins: [p.url, q.url] },
    }));
    const { back } = await signInThroughProxy(q);
    const cookie = back.setCookies.find((c) => c.startsWith('gatehouse_proxy=')) as string;
    expect(cookie).toMatch(/Domain=example\.test/);
    const jwt = cookie.split(';')[0]?.slice('gatehouse_proxy='.length) as string;
    const { payload, protectedHeader } = await jwtVerify(jwt, createPublicKey(privateKey));
    expect(protectedHeader.alg).toBe('ES256');
    expect(payload.sub).toBe(userId);
    await expect(w.proxy({ env: { SVC_PROXY_COOKIEKEY: 'not a key' } })).rejects.toThrow(/proxy\.cookiekey/);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    });
    await expect(w.proxy({ env: { SVC_PROXY_COOKIEKEY: rsa as string } })).rejects.toThrow(/P-256/);
  });

  it('re-validates the session when the short-lived proof expires, and stops when the session ends', async () => {
    const b = await signedIn(w.s, 'grace@example.com', PASSWORD);
    const jar = new Jar();
    jar.set(w.serviceUrl, 'gatehouse_session', b.session as string);
    const first = await jar.get(`${p.url}/r`);
    const atService = await jar.get(first.location);
    await jar.get(atService.location);
    const ok = await jar.get(`${p.url}/r`, { accept: 'application/json' });
    expect(ok.res.status).toBe(200);
    expect(ok.setCookies).toEqual([]); // proof still fresh: no re-issue
    await new Promise((r) => setTimeout(r, 2100));
    const renewed = await jar.get(`${p.url}/r`, { accept: 'application/json' });
    expect(renewed.res.status).toBe(200);
    expect(renewed.setCookies.some((c) => c.startsWith('gatehouse_proxy='))).toBe(true);
    // Sign out at the service: once the proof expires again, the proxy refuses.
    expect((await b.post('/auth/signout')).statusCode).toBeLessThan(300);
    await new Promise((r) => setTimeout(r, 2100));
    const ended = await jar.get(`${p.url}/r`, { accept: 'application/json' });
    expect(ended.res.status).toBe(401);
  });

  it('renews an expired proof once: requests still sending the old cookie reuse that renewal', async () => {
    let checks = 0;
    const backend = serviceBackend(w, (real) => ({
      session: (sid) => {
        checks++;
        return real.session(sid);
      },
    }));
    try {
      const q = await w.proxy({ env: { SVC_PROXY_COOKIEDOMAIN: '' } }, { backend, cookieTtlS: 2 });
      await w.s.store.systemPut(App, w.appId, (doc) => ({
        doc: { ...(doc ?? {}), AllowedOrigins: [p.url, q.url] },
      }));
      const b = await signedIn(w.s, 'grace@example.com', PASSWORD);
      const jar = new Jar();
      jar.set(w.serviceUrl, 'gatehouse_session', b.session as string);
      const first = await jar.get(`${q.url}/r`);
      await jar.get((await jar.get(first.location)).location);
      const old = jar.byOrigin.get(q.url)?.get('gatehouse_proxy') as string;
      expect(old).toBeTruthy();
      // Proofs expire on whole seconds, so a TTL of 2 s lasts between 1 and 2 s: waits are 2.1 s,
      // and the requests that must share one renewal finish well within its shortest life.
      await new Promise((r) => setTimeout(r, 2100));
      // A client that never takes the new cookie: parallel, then sequential requests.
      const send = () =>
        fetch(`${q.url}/r`, { headers: { cookie: `gatehouse_proxy=${old}`, accept: 'application/json' } });
      const parallel = await Promise.all([send(), send(), send(), send()]);
      const sequential = [await send(), await send()];
      const all = [...parallel, ...sequential];
      expect(all.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
      const renewed = new Set(
        all.map((r) => r.headers.getSetCookie().find((c) => c.startsWith('gatehouse_proxy='))),
      );
      expect(renewed.size).toBe(1);
      expect([...renewed][0]).not.toContain(old);
      expect(checks).toBe(1);
      // Once that renewal expires, the old cookie is checked again: after sign-out, refused.
      expect((await b.post('/auth/signout')).statusCode).toBeLessThan(300);
      await new Promise((r) => setTimeout(r, 2100));
      expect((await send()).status).toBe(401);
      expect(checks).toBe(2);
    } finally {
      await w.s.store.systemPut(App, w.appId, (doc) => ({
        doc: { ...(doc ?? {}), AllowedOrigins: [p.url] },
      }));
      await backend.close();
    }
  });

  it('answers access checks with the real group memberships, marking used ones', async () => {
    const mk = async (name: string) =>
      (await w.s.req({ method: 'POST', url: '/groups', payload: { Name: name } })).headers['x-id'] as string;
    const [g1, g2, g3] = [await mk('g-one'), await mk('g-two'), await mk('g-three')];
    const add = await w.s.req({ method: 'POST', url: `/groups/${g1}/members/${w.user.id}` });
    expect(add.statusCode).toBeLessThan(300);
    const results: Record<string, { status: number; body: string; location: string | null }> = {};
    w.echo.onCheck = async (url, req) => {
      const form = new URL(req.url as string, 'http://x').searchParams.get('form') as string;
      const r = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: form,
        redirect: 'manual',
      });
      const out = { status: r.status, body: await r.text(), location: r.headers.get('location') };
      results[form] = out;
      return out;
    };
    const run = async (form: string) => {
      await fetch(`${p.url}/check?form=${encodeURIComponent(form)}`, {
        headers: { authorization: `Bearer ${w.userKey}` },
      });
      return results[form] as { status: number; body: string; location: string | null };
    };
    const both = await run(`group=${g1}&group=${g2}`);
    expect(both.status).toBe(403); // op defaults to and
    expect(JSON.parse(both.body).map((e: { GroupID: string }) => e.GroupID)).toEqual([g1, g2]);
    expect(both.location).toMatch(new RegExp(`/groups/${g2}`));
    // Absolute, on the service: the browser is at the proxy's origin, where a relative path would be wrong.
    expect(both.location).toMatch(new RegExp(`^https?://[^/]+/signin/groups/${g2}`));
    expect(both.location?.startsWith(p.url)).toBe(false);
    const or = await run(`group=${g2}&group=${g1}&group=${g3}&op=or`);
    expect(or.status).toBe(200);
    expect(JSON.parse(or.body)).toEqual([
      { GroupID: g2, StatusCode: 403, Location: expect.stringContaining(`/groups/${g2}`) },
      { GroupID: g1, StatusCode: 200 },
    ]);
    const first = await run(`group=${g1}&group=${g2}&group=${g3}&op=or`);
    expect(JSON.parse(first.body)).toEqual([{ GroupID: g1, StatusCode: 200 }]);
    const andAll = await run(`group=${g2}&group=${g1}&group=${g3}&op=and&next=/done`);
    expect(andAll.status).toBe(403);
    const entries = JSON.parse(andAll.body) as { GroupID: string; StatusCode: number; Location?: string }[];
    expect(entries.map((e) => e.StatusCode)).toEqual([403, 200, 403]);
    expect(entries[0]?.Location).toContain(encodeURIComponent(`${p.url}/done`));
    const only = await run(`group=${g1}`);
    expect(only.status).toBe(200);
    expect(only.location).toBeNull();
    const m = await w.s.req({ method: 'GET', url: `/groups/${g1}/members/${w.user.id}` });
    expect(m.json().LastUsed).not.toBe('0001-01-01T00:00:00Z');
    const bad = await run('group=a%20b');
    expect(bad.status).toBe(400);
    const badOp = await run(`group=${g1}&op=xor`);
    expect(badOp.status).toBe(400);
  });
});
