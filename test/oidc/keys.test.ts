import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { oidcDb } from '../../src/oidc/db.js';
import { PUBLISH_LEAD_MS } from '../../src/oidc/keys.js';
import { backends } from '../helpers.js';
import {
  authorizationUrl,
  browse,
  type ClientApp,
  makeClient,
  newAccount,
  type OidcService,
  rpConfig,
  signedInJar,
  startOidcService,
} from './rp.js';

const KEK = Buffer.alloc(32, 7).toString('base64');

/** Signing keys: encrypted at rest with server.oidckey, rotated with old keys still published. */
describe.each(backends())('OpenID provider signing keys (%s)', (backend) => {
  let s: OidcService;
  let app: ClientApp;
  let config: client.Configuration;

  beforeAll(async () => {
    s = await startOidcService(backend, { SVC_SERVER_OIDCKEY: KEK });
    app = await makeClient(s);
    config = await rpConfig(s, app);
  });
  afterAll(async () => s?.close());

  async function idToken(): Promise<string> {
    const user = await newAccount(s, { tag: 'keys' });
    const jar = await signedInJar(s, user);
    const flow = await authorizationUrl(config, app);
    const t = await client.authorizationCodeGrant(config, await browse(jar, flow.url), {
      pkceCodeVerifier: flow.verifier,
      expectedState: flow.state,
      expectedNonce: flow.nonce,
    });
    return String(t.id_token);
  }

  it('keeps private keys only encrypted in the database', async () => {
    const rows = await oidcDb(s).selectFrom('oidc_keys').selectAll().execute();
    expect(rows.length).toBeGreaterThanOrEqual(1);
    for (const r of rows) {
      expect(r.sealed.startsWith('v1.')).toBe(true);
      expect(r.sealed).not.toMatch(/"d"|"kty"|RSA/);
    }
  });

  it('rotates: new tokens use the new key, tokens signed before still verify against the JWKS', async () => {
    const before = await idToken();
    const jwks = createRemoteJWKSet(new URL(`${s.issuer}/jwks`));
    const oldKid = decodeProtectedHeader(before).kid;
    expect(
      (await s.req({ method: 'POST', url: '/oidc/keys/rotate', key: await s.keyFor(['user']) })).statusCode,
    ).toBe(403);
    const rot = await s.req({ method: 'POST', url: '/oidc/keys/rotate' });
    expect(rot.statusCode, rot.body).toBe(201);
    const newKid = rot.json().KeyID as string;
    expect(newKid).not.toBe(oldKid);
    // Published at once, but not signing yet: other instances may not publish it yet.
    const published = (await (await fetch(`${s.issuer}/jwks`)).json()) as {
      keys: { kid: string; d?: string }[];
    };
    expect(published.keys.map((k) => k.kid)).toEqual(expect.arrayContaining([oldKid, newKid]));
    expect(published.keys.every((k) => k.d === undefined)).toBe(true);
    expect(decodeProtectedHeader(await idToken()).kid).toBe(oldKid);
    // Once every instance has had time to publish it (PUBLISH_LEAD_MS), it signs.
    const real = Date.now.bind(Date);
    const clock = vi.spyOn(Date, 'now').mockImplementation(() => real() + PUBLISH_LEAD_MS + 1000);
    let after: string;
    try {
      after = await idToken();
    } finally {
      clock.mockRestore();
    }
    expect(decodeProtectedHeader(after).kid).toBe(newKid);
    await jwtVerify(before, jwks, { issuer: s.issuer, audience: app.id });
    await jwtVerify(after, createRemoteJWKSet(new URL(`${s.issuer}/jwks`)), {
      issuer: s.issuer,
      audience: app.id,
    });
  });

  it('retires a replaced key from the JWKS once its tokens have expired', async () => {
    // Age every key past the publication window (2 × the ID token lifetime) except the newest.
    const rows = await oidcDb(s)
      .selectFrom('oidc_keys')
      .select(['kid', 'create_time'])
      .orderBy('create_time', 'desc')
      .execute();
    const [newest, ...older] = rows;
    const longAgo = Date.now() - 3 * 3600_000;
    for (const r of older)
      await oidcDb(s)
        .updateTable('oidc_keys')
        .set({ create_time: longAgo - 1000, retire_time: null })
        .where('kid', '=', r.kid)
        .execute();
    await oidcDb(s)
      .updateTable('oidc_keys')
      .set({ create_time: longAgo })
      .where('kid', '=', String(newest?.kid))
      .execute();
    // The newest key is now old enough to be replaced by the next load, which the rotation endpoint forces.
    const rot = await s.req({ method: 'POST', url: '/oidc/keys/rotate' });
    expect(rot.statusCode).toBe(201);
    const published = (await (await fetch(`${s.issuer}/jwks`)).json()) as { keys: { kid: string }[] };
    const kids = published.keys.map((k) => k.kid);
    expect(kids).toContain(rot.json().KeyID);
    for (const r of older) expect(kids).not.toContain(r.kid);
  });

  it('a service with another key-encryption key cannot read the keys', async () => {
    const { loadKeySet } = await import('../../src/oidc/keys.js');
    const { loadServiceConfig } = await import('../../src/config/index.js');
    const config = loadServiceConfig({ env: { SVC_SERVER_OIDCKEY: Buffer.alloc(32, 9).toString('base64') } });
    const wrong = { db: s.db, config };
    await expect(loadKeySet(wrong as never, { rotateAfterMs: 1e12, publishAfterMs: 1e12 })).rejects.toThrow();
  });
});
