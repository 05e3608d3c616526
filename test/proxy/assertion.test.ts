import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeProtectedHeader,
  type JSONWebKeySet,
  jwtVerify,
} from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { App } from '../../src/objects/app.js';
import { TENANT_ID, Tenant } from '../../src/objects/tenant.js';
import type { RunningProxy } from '../../src/proxy/run.js';
import { makeUser, signedIn } from '../auth/client.js';
import { backends } from '../helpers.js';
import { startWorld, type World } from './harness.js';

const PASSWORD = 'correct horse battery staple 42';
const pem = () =>
  generateKeyPairSync('ec', { namedCurve: 'P-256' })
    .privateKey.export({ type: 'pkcs8', format: 'pem' })
    .toString();

async function echoed(url: string, headers: Record<string, string> = {}) {
  const r = await fetch(url, { headers: { accept: 'application/json', ...headers }, redirect: 'manual' });
  expect(r.status).toBe(200);
  return (await r.json()) as { headers: Record<string, string> };
}

describe.each(backends())('signed identity assertion from the proxy (%s)', (backend) => {
  let w: World;
  let p: RunningProxy;
  let dir: string;
  let keyFile: string;
  let active: string;
  let pending: string;
  let highLevel: string;

  beforeAll(async () => {
    w = await startWorld(backend);
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-assertion-'));
    keyFile = join(dir, 'assertion.pem');
    writeFileSync(keyFile, pem());
    p = await w.proxy({
      env: { SVC_PROXY_ASSERTIONKEY: keyFile },
      overrides: ['path_/open/_auth=none'],
    });
    const group = async (body: Record<string, unknown>) =>
      String((await w.s.req({ method: 'POST', url: '/groups', payload: body })).headers['x-id']);
    active = await group({ Name: 'engineers' });
    pending = await group({ Name: 'self-activation', RequiresActivation: true });
    highLevel = await group({ Name: 'vault', IntegrityLevel: 3 });
    for (const g of [active, pending, highLevel]) {
      const r = await w.s.req({ method: 'POST', url: `/groups/${g}/members/${w.user.id}` });
      expect(r.statusCode, r.body).toBeLessThan(300);
    }
    for (const g of [active, highLevel]) {
      const r = await w.s.req({ method: 'POST', url: `/groups/${g}/members/${w.user.id}/activate` });
      expect(r.statusCode, r.body).toBeLessThan(300);
    }
  });
  afterAll(async () => {
    await w?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const jwks = () => createRemoteJWKSet(new URL(`${p.url}/.gatehouse/jwks.json`));
  const verify = (token: string) =>
    jwtVerify(token, jwks(), { issuer: 'gatehouse-proxy', audience: w.appId, algorithms: ['ES256'] });

  it('an API-key request carries a verifiable ES256 assertion for the App, at most 5 minutes long', async () => {
    const h = (await echoed(`${p.url}/app`, { authorization: `Bearer ${w.userKey}` })).headers;
    const token = h['x-service-assertion'] as string;
    expect(decodeProtectedHeader(token).alg).toBe('ES256');
    const { payload } = await verify(token);
    expect(payload.sub).toBe(w.user.id);
    expect(payload.email).toBe(w.user.email);
    expect(payload.name).toBe(w.user.fullName);
    expect(payload.auth_type).toBe('bearer');
    expect(payload.level).toBeUndefined();
    // Active memberships only, and only those at the caller's level (an API key: 0).
    expect(payload.groups).toEqual([active]);
    expect((payload.exp as number) - (payload.iat as number)).toBeLessThanOrEqual(300);
    expect((payload.exp as number) * 1000).toBeGreaterThan(Date.now());
    // For another App (audience) or another issuer it does not verify.
    await expect(
      jwtVerify(token, jwks(), { audience: 'some-other-app', issuer: 'gatehouse-proxy' }),
    ).rejects.toThrow();
  });

  it('a session request carries the session level, and the groups that count at it', async () => {
    await w.s.store.systemPut(App, w.appId, (doc) => ({ doc: { ...(doc ?? {}), AllowedOrigins: [p.url] } }));
    await w.s.store.systemPut(Tenant, TENANT_ID, (doc) => ({
      doc: { ...(doc ?? {}), AllowedReturnOrigins: [p.url] },
    }));
    const email = 'lin@example.com';
    const userId = await makeUser(w.s, { email, password: PASSWORD });
    await w.s.req({ method: 'POST', url: `/groups/${active}/members/${userId}` });
    await w.s.req({ method: 'POST', url: `/groups/${active}/members/${userId}/activate` });
    const service = (await signedIn(w.s, email, PASSWORD)).session as string;
    // The proxy handshake, by hand: proxy → service (with its session cookie) → proxy callback.
    const first = await fetch(`${p.url}/app`, { headers: { accept: 'text/html' }, redirect: 'manual' });
    const state = first.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const atService = await fetch(first.headers.get('location') as string, {
      headers: { accept: 'text/html', cookie: `gatehouse_session=${service}` },
      redirect: 'manual',
    });
    const back = await fetch(atService.headers.get('location') as string, {
      headers: { accept: 'text/html', cookie: state },
      redirect: 'manual',
    });
    const cookie = back.headers.getSetCookie().find((c) => c.startsWith('gatehouse_proxy='));
    expect(cookie).toBeDefined();
    const h = (await echoed(`${p.url}/app`, { cookie: (cookie as string).split(';')[0] as string })).headers;
    const { payload } = await verify(h['x-service-assertion'] as string);
    expect(payload).toMatchObject({ sub: userId, email, auth_type: 'session', level: 2, groups: [active] });
    const sessionEnds = Date.parse(h['x-service-session-expires'] as string);
    expect((payload.exp as number) * 1000).toBeLessThanOrEqual(sessionEnds);
  });

  it('client copies of the header are dropped in every spelling, and anonymous requests carry none', async () => {
    const spellings = fc
      .array(fc.constantFrom('-', '_', '.'), { minLength: 2, maxLength: 2 })
      .chain((seps) =>
        fc
          .array(fc.boolean(), { minLength: 17, maxLength: 17 })
          .map((ups) =>
            [...`x${seps[0]}service${seps[1]}assertion`]
              .map((c, i) => (ups[i] ? c.toUpperCase() : c))
              .join(''),
          ),
      );
    await fc.assert(
      fc.asyncProperty(spellings, async (name) => {
        const forged = 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJyb290In0.';
        const open = (await echoed(`${p.url}/open/x`, { [name]: forged })).headers;
        for (const [k, v] of Object.entries(open)) {
          expect(k.replace(/[^a-z]/g, '')).not.toBe('xserviceassertion');
          expect(v).not.toBe(forged);
        }
        const withKey = (
          await echoed(`${p.url}/app`, { [name]: forged, authorization: `Bearer ${w.userKey}` })
        ).headers;
        const copies = Object.keys(withKey).filter((k) => k.replace(/[^a-z]/g, '') === 'xserviceassertion');
        expect(copies).toEqual(['x-service-assertion']);
        expect(withKey['x-service-assertion']).not.toBe(forged);
      }),
      { numRuns: 20 },
    );
  });

  it('rotates on reload: new assertions use the new key, the old key stays published meanwhile', async () => {
    const before = (await echoed(`${p.url}/app`, { authorization: `Bearer ${w.userKey}` })).headers[
      'x-service-assertion'
    ] as string;
    const oldKid = decodeProtectedHeader(before).kid;
    writeFileSync(keyFile, pem());
    expect(p.reload()).toBeUndefined();
    const after = (await echoed(`${p.url}/app`, { authorization: `Bearer ${w.userKey}` })).headers[
      'x-service-assertion'
    ] as string;
    const newKid = decodeProtectedHeader(after).kid;
    expect(newKid).not.toBe(oldKid);
    const set = (await (await fetch(`${p.url}/.gatehouse/jwks.json`)).json()) as JSONWebKeySet;
    expect(set.keys.map((k) => k.kid)).toEqual([newKid, oldKid]);
    expect(set.keys.every((k) => k.d === undefined)).toBe(true);
    const local = createLocalJWKSet(set);
    for (const t of [before, after])
      expect((await jwtVerify(t, local, { audience: w.appId, issuer: 'gatehouse-proxy' })).payload.sub).toBe(
        w.user.id,
      );
    // A bad key file refuses the reload and keeps signing with the key in force.
    writeFileSync(keyFile, 'not a key');
    expect(p.reload()).toBeInstanceOf(Error);
    const still = (await echoed(`${p.url}/app`, { authorization: `Bearer ${w.userKey}` })).headers[
      'x-service-assertion'
    ] as string;
    expect(decodeProtectedHeader(still).kid).toBe(newKid);
  });

  it('the key set is public (every mode), read-only, and never holds a private key', async () => {
    const r = await fetch(`${p.url}/.gatehouse/jwks.json`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/jwk-set+json');
    const body = await r.text();
    expect(body).not.toMatch(/"d"/);
    expect((await fetch(`${p.url}/.gatehouse/jwks.json`, { method: 'POST', body: 'x' })).status).toBe(405);
  });
});
