import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { argon2Hash, argon2Verify } from '../../core/hashing.js';
import type { ServiceContext } from '../../store/service.js';
import { secretsKey } from '../session/keys.js';

export const hashSecret = (s: string) => argon2Hash(s);

// module-state: true process singleton: one dummy argon2 hash, only ever used for timing, the same for every service.
let dummy: Promise<string> | undefined;
/**
 * Verifies against an argon2id hash; without one, verifies against a dummy hash anyway so that
 * "no such credential" takes as long as "wrong credential".
 */
export async function verifySecret(stored: unknown, given: string): Promise<boolean> {
  if (typeof stored !== 'string' || stored === '') {
    dummy ??= argon2Hash(randomBytes(16).toString('hex'));
    await argon2Verify(await dummy, given).catch(() => false);
    return false;
  }
  try {
    return await argon2Verify(stored, given);
  } catch {
    return false;
  }
}

/** AES-256-GCM with the server key; the user ID is bound in as additional data. */
export async function encryptSecret(
  ctx: Pick<ServiceContext, 'db'>,
  plain: string,
  aad: string,
): Promise<string> {
  const key = await secretsKey(ctx);
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(aad));
  const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
  return [
    'v1',
    iv.toString('base64url'),
    ct.toString('base64url'),
    c.getAuthTag().toString('base64url'),
  ].join('.');
}

export async function decryptSecret(
  ctx: Pick<ServiceContext, 'db'>,
  box: string,
  aad: string,
): Promise<string> {
  const [v, iv, ct, tag] = box.split('.');
  if (v !== 'v1' || !iv || !ct || !tag) throw new Error('unknown secret format');
  const key = await secretsKey(ctx);
  const d = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  d.setAAD(Buffer.from(aad));
  d.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([d.update(Buffer.from(ct, 'base64url')), d.final()]).toString('utf8');
}
