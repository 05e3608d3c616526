import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import { perService, type ServiceContext, stateOf } from '../../store/service.js';
import { authDb } from './db.js';

/**
 * Server keys, kept in the database so every instance sharing it signs and decrypts alike.
 * The first instance to need a key creates it (insert-if-absent); everyone then reads the winner.
 */
async function sharedKey(ctx: Pick<ServiceContext, 'db'>, name: string, make: () => Promise<string>) {
  const db = authDb(ctx);
  const read = () => db.selectFrom('auth_keys').select('value').where('name', '=', name).executeTakeFirst();
  const found = await read();
  if (found) return found.value;
  await db
    .insertInto('auth_keys')
    .values({ name, value: await make(), create_time: Date.now() })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const row = await read();
  if (!row) throw new Error(`server key ${name} could not be stored`);
  return row.value;
}

type Key = Awaited<ReturnType<typeof importJWK>>;

export interface IntentKeys {
  privateKey: Key;
  publicKey: Key;
  kid: string;
}

type KeyOwner = Pick<ServiceContext, 'db' | 'state'>;
/** The service's loaded keys, by name (src/store/service.ts: one per service). */
const LOADED_KEYS = perService<Map<string, Promise<unknown>>, KeyOwner>('server keys', () => new Map());
function cached<T>(ctx: KeyOwner, name: string, load: () => Promise<T>): Promise<T> {
  const m = stateOf(ctx, LOADED_KEYS);
  let p = m.get(name) as Promise<T> | undefined;
  if (!p) {
    p = load();
    m.set(name, p);
    // A failed load (database down) is retried on next use rather than remembered.
    p.catch(() => m.delete(name));
  }
  return p;
}

/** The Ed25519 key pair that signs intents (EdDSA compact JWS). */
export function intentKeys(ctx: Pick<ServiceContext, 'db'>): Promise<IntentKeys> {
  return cached(ctx, 'intent', async () => {
    const text = await sharedKey(ctx, 'intent-ed25519', async () => {
      const { privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
      const jwk = await exportJWK(privateKey);
      jwk.kid = randomBytes(8).toString('base64url');
      return JSON.stringify(jwk);
    });
    const jwk = JSON.parse(text) as JWK;
    const { d: _d, ...pub } = jwk;
    return {
      privateKey: (await importJWK(jwk, 'EdDSA')) as Key,
      publicKey: (await importJWK(pub, 'EdDSA')) as Key,
      kid: String(jwk.kid),
    };
  });
}

/** 32 random bytes that encrypt TOTP secrets at rest (AES-256-GCM). */
export function secretsKey(ctx: Pick<ServiceContext, 'db'>): Promise<Buffer> {
  return cached(ctx, 'secrets', async () =>
    Buffer.from(
      await sharedKey(ctx, 'secrets-aes256', async () => randomBytes(32).toString('base64')),
      'base64',
    ),
  );
}

/**
 * The VAPID key pair (P-256) that signs Web Push requests (src/auth/factors/mobile): public key as
 * the 65-byte uncompressed point, private key as the 32-byte scalar, both base64url, as browsers'
 * applicationServerKey and the web-push library take them.
 */
export function vapidKeys(
  ctx: Pick<ServiceContext, 'db'>,
): Promise<{ publicKey: string; privateKey: string }> {
  return cached(ctx, 'vapid', async () => {
    const text = await sharedKey(ctx, 'vapid-p256', async () => {
      const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
      const jwk = privateKey.export({ format: 'jwk' });
      const point = Buffer.concat([
        Buffer.from([4]),
        Buffer.from(String(jwk.x), 'base64url'),
        Buffer.from(String(jwk.y), 'base64url'),
      ]);
      return JSON.stringify({ publicKey: point.toString('base64url'), privateKey: String(jwk.d) });
    });
    return JSON.parse(text) as { publicKey: string; privateKey: string };
  });
}
