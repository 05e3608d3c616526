/**
 * Regression: the proxy's session cookie and its sign-in handshake. The cookie is an ES256 JWT
 * for this App's audience (src/proxy/cookie.ts); the callback exchanges a one-time code and
 * checks a state cookie bound to the browser that started the sign-in. Every forged, altered,
 * foreign or replayed credential must be refused without the upstream seeing a request.
 */
import { createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import fc from 'fast-check';
import { SignJWT, UnsecuredJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { App } from '../../src/objects/app.js';
import { TENANT_ID, Tenant } from '../../src/objects/tenant.js';
import { CookieSigner } from '../../src/proxy/cookie.js';
import type { RunningProxy } from '../../src/proxy/run.js';
import { makeUser, signedIn } from '../auth/client.js';
import { backends } from '../helpers.js';
import { startWorld, type World } from '../proxy/harness.js';

const PASSWORD = 'correct horse battery staple 42';

/** A browser over real HTTP: cookies per origin, redirects not followed. */
class Jar {
  readonly byOrigin = new Map<string, Map<string, string>>();
  set(origin: string, name: string, value: string) {
    const m = this.byOrigin.get(origin) ?? new Map<string, string>();
    if (value === '') m.delete(name);
    else m.set(name, value);
    this.byOrigin.set(origin, m);
  }
  cookie(origin: string, name: string) {
    return this.byOrigin.get(origin)?.get(name);
  }
  async get(url: string, headers: Record<string, string> = {}) {
    const origin = new URL(url).origin;
    const jar = this.byOrigin.get(origin);
    const h: Record<string, string> = { accept: 'text/html', ...headers };
    if (jar?.size && h.cookie === undefined) h.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(url, { headers: h, redirect: 'manual' });
    const setCookies = res.headers.getSetCookie();
    for (const c of setCookies) {
      const pair = c.split(';')[0] ?? '';
      const i = pair.indexOf('=');
      this.set(origin, pair.slice(0, i), /Max-Age=0(;|$)/.test(c) ? '' : pair.slice(i + 1));
    }
    await res.text();
    return { status: res.status, setCookies, location: res.headers.get('location') ?? '' };
  }
}

describe.each(backends())('proxy cookies and the sign-in handshake on %s', (backend) => {
  let w: World;
  let p: RunningProxy;
  let key: KeyObject;
  let serviceSession: string;
  beforeAll(async () => {
    w = await startWorld(backend);
    key = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const pem = key.export({ type: 'pkcs8', format: 'pem' }) as string;
    p = await w.proxy({ env: { SVC_PROXY_COOKIEKEY: pem, SVC_PROXY_COOKIEDOMAIN: '' } }, { cookieTtlS: 2 });
    await w.s.store.systemPut(App, w.appId, (doc) => ({ doc: { ...(doc ?? {}), AllowedOrigins: [p.url] } }));
    await w.s.store.systemPut(Tenant, TENANT_ID, (doc) => ({
      doc: { ...(doc ?? {}), AllowedReturnOrigins: [p.url] },
    }));
    await makeUser(w.s, { email: 'grace@example.com', password: PASSWORD });
    serviceSession = (await signedIn(w.s, 'grace@example.com', PASSWORD)).session as string;
  });
  afterAll(async () => w?.close());

  /** Starts a sign-in at the proxy and lets the service answer it: the callback URL, not yet visited. */
  async function callbackFor(session = serviceSession) {
    const jar = new Jar();
    jar.set(w.serviceUrl, 'gatehouse_session', session);
    const first = await jar.get(`${p.url}/app/page`);
    expect(first.status).toBe(302);
    const atService = await jar.get(first.location);
    expect(atService.status).toBe(302);
    return { jar, callback: atService.location };
  }

  /** A whole sign-in: the jar then holds the proxy cookie. */
  async function signIn(session = serviceSession) {
    const { jar, callback } = await callbackFor(session);
    expect((await jar.get(callback)).status).toBe(302);
    return jar.cookie(p.url, 'gatehouse_proxy') as string;
  }

  /** One API-client request with this proxy cookie: its status, and whether the upstream saw it. */
  async function withCookie(value: string) {
    const before = w.echo.hits.length;
    const res = await fetch(`${p.url}/app/private`, {
      headers: { cookie: `gatehouse_proxy=${value}`, accept: 'application/json' },
    });
    await res.text();
    return { status: res.status, reached: w.echo.hits.length - before };
  }

  const refused = async (value: string) =>
    expect(await withCookie(value)).toEqual({ status: 401, reached: 0 });

  const claims = (userId: string) => ({
    sid: 'x',
    email: 'evil@example.com',
    un: 'evil',
    name: 'Evil',
    sub: userId,
  });

  it('forged, truncated and bit-flipped cookies are refused; the upstream sees nothing', async () => {
    const good = await signIn();
    expect((await withCookie(good)).status).toBe(200);
    const segments = (t: string) => t.split('.').map((s) => Buffer.from(s, 'base64url').toString('hex'));
    const same = (a: string, b: string) => segments(a).join('.') === segments(b).join('.');
    const mutation = fc.oneof(
      fc.nat({ max: good.length - 1 }).map((n) => good.slice(0, n)),
      fc
        .tuple(fc.nat({ max: good.length - 1 }), fc.constantFrom(...'AbZz09-_.'))
        .map(([i, c]) => good.slice(0, i) + c + good.slice(i + 1)),
      fc.string({ unit: fc.constantFrom(...'ABCDEFabcdef0123456789-_.'), maxLength: 300 }),
      fc.constantFrom(
        `${good}.`,
        `${good}x`,
        `.${good}`,
        good.split('.').slice(0, 2).join('.'),
        `${good.split('.').slice(0, 2).join('.')}.`,
      ),
    );
    await fc.assert(
      fc.asyncProperty(mutation, async (v) => {
        fc.pre(!same(v, good));
        await refused(v);
      }),
      { numRuns: 60 },
    );
  });

  it('a proof signed with another key, unsigned (alg none), or HMAC-keyed with the public key is refused', async () => {
    const userId = w.user.id;
    const aud = `gatehouse-proxy:${w.appId}`;
    const exp = Math.floor(Date.now() / 1000) + 3600;
    const other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const resigned = await new SignJWT(claims(userId))
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuer('gatehouse-proxy')
      .setAudience(aud)
      .setExpirationTime(exp)
      .sign(other);
    await refused(resigned);
    const none = new UnsecuredJWT(claims(userId))
      .setIssuer('gatehouse-proxy')
      .setAudience(aud)
      .setExpirationTime(exp)
      .encode();
    await refused(none);
    await refused(`${none}AAAA`);
    const spki = createPublicKey(key).export({ type: 'spki', format: 'pem' }) as string;
    const hs = await new SignJWT(claims(userId))
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer('gatehouse-proxy')
      .setAudience(aud)
      .setExpirationTime(exp)
      .sign(new TextEncoder().encode(spki));
    await refused(hs);
    // The real key and audience are accepted: the refusals above are the signature's doing.
    const real = await new CookieSigner(key, aud).sign({
      UserID: userId,
      UserName: 'g',
      Email: 'g@example.com',
      FullName: 'G',
      SessionID: 'x',
    });
    expect((await withCookie(real.token)).status).toBe(200);
  });

  it('a proof signed with the same key for another App (or issuer) is refused', async () => {
    // Two Apps whose proxies share one proxy.cookiekey: a cookie from one must not open the other.
    const id = {
      UserID: 'someone',
      UserName: 'evil',
      Email: 'evil@example.com',
      FullName: 'Evil',
      SessionID: 'x',
    };
    for (const aud of [
      'gatehouse-proxy:otherapp00000',
      'gatehouse-proxy:',
      `gatehouse-proxy:${w.appId}x`,
      `${w.appId}`,
    ])
      await refused((await new CookieSigner(key, aud).sign(id)).token);
    const wrongIssuer = await new SignJWT({ sid: 'x', sub: 'someone' })
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuer('gatehouse')
      .setAudience(`gatehouse-proxy:${w.appId}`)
      .setExpirationTime('1h')
      .sign(key);
    await refused(wrongIssuer);
  });

  it('two proxy cookies (one tossed in for a parent domain) count as none, whichever comes first', async () => {
    // Cookie tossing: a sibling subdomain sets its own gatehouse_proxy for the parent domain, hoping
    // the proxy picks it over the victim's and the victim works as the attacker (or the reverse).
    const victim = await signIn();
    const aud = `gatehouse-proxy:${w.appId}`;
    const planted = (
      await new CookieSigner(key, aud).sign({
        UserID: 'attacker00000',
        UserName: 'mallory',
        Email: 'mallory@example.com',
        FullName: 'Mallory',
        SessionID: 'x',
      })
    ).token;
    expect((await withCookie(planted)).status).toBe(200);
    for (const both of [`${victim}; gatehouse_proxy=${planted}`, `${planted}; gatehouse_proxy=${victim}`])
      await refused(both);
  });

  it('a forged, foreign or altered cookie opens no websocket; the real one does', async () => {
    const open = (cookie: string) =>
      new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`${p.url.replace('http', 'ws')}/ws/chat`, { headers: { cookie } });
        ws.on('open', () => {
          ws.close();
          resolve(101);
        });
        ws.on('unexpected-response', (_req, res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        ws.on('error', reject);
      });
    const good = await signIn();
    const foreign = (
      await new CookieSigner(key, 'gatehouse-proxy:otherapp00000').sign({
        UserID: 'someone',
        UserName: 'evil',
        Email: 'evil@example.com',
        FullName: 'Evil',
        SessionID: 'x',
      })
    ).token;
    const before = w.echo.hits.length;
    for (const bad of [foreign, `${good.slice(0, -3)}AAA`, good.split('.').slice(0, 2).join('.'), 'x.y.z'])
      expect(await open(`gatehouse_proxy=${bad}`)).toBe(401);
    expect(w.echo.hits.length).toBe(before);
    expect(await open(`gatehouse_proxy=${good}`)).toBe(101);
  });

  it('an expired proof is not renewed once its service session has ended, however often it is replayed', async () => {
    const b = await signedIn(w.s, 'grace@example.com', PASSWORD);
    const cookie = await signIn(b.session as string);
    expect((await withCookie(cookie)).status).toBe(200);
    expect((await b.post('/auth/signout')).statusCode).toBeLessThan(300);
    // Proofs expire on whole seconds: a 2 s TTL is over after 2.1 s.
    await new Promise((r) => setTimeout(r, 2100));
    const replays = await Promise.all([withCookie(cookie), withCookie(cookie), withCookie(cookie)]);
    expect(replays).toEqual([0, 1, 2].map(() => ({ status: 401, reached: 0 })));
    await refused(cookie);
    // The same expired proof with its expiry pushed out cannot be re-signed by the client.
    const [h, payload, sig] = cookie.split('.') as [string, string, string];
    const later = {
      ...JSON.parse(Buffer.from(payload, 'base64url').toString()),
      exp: Math.floor(Date.now() / 1000) + 3600,
    };
    await refused(`${h}.${Buffer.from(JSON.stringify(later)).toString('base64url')}.${sig}`);
  });

  it("the callback refuses another browser's state: missing, foreign, altered or doubled state cookies", async () => {
    const victim = await callbackFor();
    const attacker = await callbackFor();
    const own = attacker.jar.cookie(p.url, 'gatehouse_proxy_state') as string;
    const victimState = victim.jar.cookie(p.url, 'gatehouse_proxy_state') as string;
    const cb = new URL(victim.callback);
    const state = cb.searchParams.get('state') as string;
    const variants = fc.oneof(
      fc.constantFrom(
        undefined,
        own,
        '',
        '.',
        `.${victimState.split('.')[1]}`,
        `${state.slice(0, -1)}.${victimState.split('.')[1]}`,
        `${state}x.${victimState.split('.')[1]}`,
        `${state.toUpperCase()}.x`,
      ),
      fc.string({ maxLength: 40 }).map((s) => `${s.replace(/[;\s]/g, '')}.${victimState.split('.')[1]}`),
    );
    await fc.assert(
      fc.asyncProperty(variants, async (stateCookie) => {
        const cookie = stateCookie === undefined ? '' : `gatehouse_proxy_state=${stateCookie}`;
        const r = await new Jar().get(victim.callback, cookie ? { cookie } : {});
        // No state cookie (or an empty one): the code is not used; the sign-in starts again for this
        // browser, at the service (a front proxy may have dropped the first cookie). Any other
        // state cookie: refused.
        if (stateCookie === undefined || stateCookie === '') {
          expect(r.status).toBe(302);
          expect(new URL(r.location).origin).toBe(w.serviceUrl);
        } else expect(r.status).toBe(400);
        expect(r.setCookies.some((c) => c.startsWith('gatehouse_proxy='))).toBe(false);
      }),
      { numRuns: 25 },
    );
    // The victim's state twice (one planted for a parent domain or another path) counts as none:
    // the code is not used, the sign-in starts again at the service.
    const doubled = `gatehouse_proxy_state=${victimState}; gatehouse_proxy_state=${own}`;
    const twice = await new Jar().get(victim.callback, { cookie: doubled });
    expect(twice.status).toBe(302);
    expect(new URL(twice.location).origin).toBe(w.serviceUrl);
    expect(twice.setCookies.some((c) => c.startsWith('gatehouse_proxy='))).toBe(false);
    // None of this spent the victim's code: the victim still signs in.
    expect((await victim.jar.get(victim.callback)).status).toBe(302);
  });

  it('a one-time sign-in code is redeemed once, whether replayed in turn or raced in parallel', async () => {
    const first = await callbackFor();
    const state = first.jar.cookie(p.url, 'gatehouse_proxy_state') as string;
    const cookie = { cookie: `gatehouse_proxy_state=${state}` };
    expect((await new Jar().get(first.callback, cookie)).status).toBe(302);
    expect((await new Jar().get(first.callback, cookie)).status).toBe(400);
    const raced = await callbackFor();
    const racedCookie = {
      cookie: `gatehouse_proxy_state=${raced.jar.cookie(p.url, 'gatehouse_proxy_state')}`,
    };
    const all = await Promise.all([0, 1, 2, 3].map(() => new Jar().get(raced.callback, racedCookie)));
    expect(all.map((r) => r.status).sort()).toEqual([302, 400, 400, 400]);
    expect(all.filter((r) => r.setCookies.some((c) => /^gatehouse_proxy=[^;]/.test(c)))).toHaveLength(1);
  });
});
