import fc from 'fast-check';
import * as client from 'openid-client';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '../../src/api/server.js';
import { loadServiceConfig } from '../../src/config/index.js';
import { StoreAdapter, sweep } from '../../src/oidc/adapter.js';
import { oidcDb } from '../../src/oidc/db.js';
import { openDb } from '../../src/store/db.js';
import { ObjectStore } from '../../src/store/objects.js';
import { backends, freshStore } from '../helpers.js';
import { freePort } from '../net.js';
import { PG_ADMIN_URL } from '../pg.js';
import {
  authorizationUrl,
  browse,
  makeClient,
  newAccount,
  type OidcService,
  rpConfig,
  signedInJar,
  startOidcService,
} from './rp.js';

describe.each(backends())('OpenID provider storage (%s)', (backend) => {
  it('honours expiry: an expired row is absent at once and swept later', async () => {
    const { db, cleanup } = await freshStore(backend);
    try {
      const ctx = { db };
      const a = new StoreAdapter(ctx, 'Session');
      await a.upsert('short', { uid: 'u1', accountId: 'x' }, 1);
      await a.upsert('long', { uid: 'u2', accountId: 'y' }, 3600);
      expect(await a.find('short')).toMatchObject({ accountId: 'x' });
      expect(await a.findByUid('u1')).toMatchObject({ accountId: 'x' });
      await new Promise((r) => setTimeout(r, 1100));
      expect(await a.find('short')).toBeUndefined();
      expect(await a.findByUid('u1')).toBeUndefined();
      expect(await a.find('long')).toMatchObject({ accountId: 'y' });
      await sweep(ctx);
      const ids = (await oidcDb(ctx).selectFrom('oidc_store').select('id').execute()).map((r) => r.id);
      expect(ids).toEqual(['long']);
    } finally {
      await cleanup();
    }
  });

  it('round-trips any payload, and revoking a grant removes exactly its rows', async () => {
    const { db, cleanup } = await freshStore(backend);
    try {
      const ctx = { db };
      const grants = new StoreAdapter(ctx, 'Grant');
      const tokens = new StoreAdapter(ctx, 'AccessToken');
      await fc.assert(
        fc.asyncProperty(
          fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 })),
          fc.uuid(),
          async (extra, id) => {
            await grants.upsert(`g-${id}`, { accountId: 'a' }, 600);
            await grants.upsert(`h-${id}`, { accountId: 'a' }, 600);
            const payload = { ...extra, grantId: `g-${id}`, accountId: 'a' };
            await tokens.upsert(`t-${id}`, payload, 600);
            await tokens.upsert(`u-${id}`, { grantId: `h-${id}` }, 600);
            expect(await tokens.find(`t-${id}`)).toEqual(JSON.parse(JSON.stringify(payload)));
            await tokens.revokeByGrantId(`g-${id}`);
            expect(await tokens.find(`t-${id}`)).toBeUndefined();
            expect(await grants.find(`g-${id}`)).toBeUndefined();
            expect(await tokens.find(`u-${id}`)).toBeDefined();
            // A token of a revoked grant is not stored any more (a late writer after a revocation).
            await tokens.upsert(`v-${id}`, { grantId: `g-${id}` }, 600);
            expect(await tokens.find(`v-${id}`)).toBeUndefined();
          },
        ),
        { numRuns: 15 },
      );
    } finally {
      await cleanup();
    }
  });
});

/** Two service instances on one database: a flow begun on one finishes on the other. */
describe.each(backends())('OpenID provider on two instances (%s)', (backend) => {
  let a: OidcService;
  let b: { close(): Promise<void>; base: string };

  beforeAll(async () => {
    a = await startOidcService(backend);
    // Instance B: its own connection pool and server on the same database, the same public URL
    // (behind one load balancer, say); reached here on its own port.
    // The same database as A's: the SQLite file, or A's PostgreSQL database reached with the
    // test server's admin URL (its user and password) and A's database name.
    const described = String(a.db.describe);
    let location = described.replace(/^sqlite /, '');
    if (backend === 'postgres') {
      const url = new URL(PG_ADMIN_URL);
      url.pathname = described.slice(described.lastIndexOf('/'));
      location = url.toString();
    }
    const db2 = openDb(location);
    const port = await freePort();
    const app = await createServer({
      store: new ObjectStore(db2),
      db: db2,
      logger: pino({ level: 'silent' }),
      config: loadServiceConfig({ env: { SVC_SERVER_PUBLICURL: a.base } }),
    });
    await app.listen({ host: '127.0.0.1', port });
    b = {
      base: `http://127.0.0.1:${port}`,
      async close() {
        await app.close();
        await db2.close();
      },
    };
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('authorizes on one instance and redeems, refreshes and revokes on the other', async () => {
    const app = await makeClient(a);
    const conf = await rpConfig(a, app);
    const user = await newAccount(a);
    const jar = await signedInJar(a, user);
    const flow = await authorizationUrl(conf, app);
    const back = await browse(jar, flow.url);
    // The RP talks to instance B for the token endpoint.
    const confB = new client.Configuration(
      {
        ...(JSON.parse(JSON.stringify(conf.serverMetadata())) as client.ServerMetadata),
        token_endpoint: `${b.base}/oidc/token`,
        revocation_endpoint: `${b.base}/oidc/token/revocation`,
      },
      app.id,
      String(app.secret),
    );
    client.allowInsecureRequests(confB);
    const t = await client.authorizationCodeGrant(confB, back, {
      pkceCodeVerifier: flow.verifier,
      expectedState: flow.state,
      expectedNonce: flow.nonce,
    });
    expect(t.claims()?.sub).toBe(user.id);
    const r = await client.refreshTokenGrant(confB, String(t.refresh_token));
    // Reuse on A of the token B rotated revokes the family for both.
    await expect(client.refreshTokenGrant(conf, String(t.refresh_token))).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    await expect(client.refreshTokenGrant(confB, String(r.refresh_token))).rejects.toMatchObject({
      error: 'invalid_grant',
    });
  });
});
