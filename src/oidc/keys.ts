import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { secretsKey } from '../auth/session/keys.js';
import type { ServiceContext } from '../store/service.js';
import { oidcDb } from './db.js';

/** The provider signs with RS256: what every relying party accepts by default. */
export const SIGNING_ALG = 'RS256';

export interface KeyTimes {
  /** A signing key older than this is replaced by a new one at the next load. */
  rotateAfterMs: number;
  /** A replaced key stays published this long (the longest life of a token it signed). */
  publishAfterMs: number;
  /**
   * A new key is published this long before it signs (PUBLISH_LEAD_MS by default): long enough
   * for every instance sharing the database to have loaded it, so a relying party fetching the
   * JWKS through any of them can verify what the new key signs.
   */
  leadMs?: number;
}

/**
 * Instances look for new keys at least once a minute (KEYS_RECHECK_MS in provider.ts); twice that
 * also covers clocks of instances that differ by up to a minute.
 */
export const PUBLISH_LEAD_MS = 120_000;

/**
 * The key-encryption key: server.oidckey when set (kept out of the database, so a copy of the
 * database alone does not hold the signing keys), otherwise derived from the service's
 * database-held secrets key (as TOTP secrets are kept).
 */
async function kek(ctx: Pick<ServiceContext, 'db' | 'config'>): Promise<Buffer> {
  const configured = ctx.config.server.oidckey;
  if (configured !== '') return Buffer.from(configured, 'base64');
  const base = await secretsKey(ctx);
  return Buffer.from(hkdfSync('sha256', base, Buffer.alloc(0), 'gatehouse oidc signing keys', 32));
}

/** AES-256-GCM; the kid is bound in as additional data, so a sealed key cannot be moved to another row. */
export function seal(key: Buffer, kid: string, plain: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(kid));
  const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
  return [
    'v1',
    iv.toString('base64url'),
    ct.toString('base64url'),
    c.getAuthTag().toString('base64url'),
  ].join('.');
}

export function unseal(key: Buffer, kid: string, box: string): string {
  const [v, iv, ct, tag] = box.split('.');
  if (v !== 'v1' || !iv || !ct || !tag) throw new Error('unknown sealed key format');
  const d = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  d.setAAD(Buffer.from(kid));
  d.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([d.update(Buffer.from(ct, 'base64url')), d.final()]).toString('utf8');
}

/** Creates a new signing key: published at once, signing once PUBLISH_LEAD_MS has passed (loadKeySet). */
export async function addSigningKey(ctx: Pick<ServiceContext, 'db' | 'config'>): Promise<string> {
  const { privateKey } = await generateKeyPair(SIGNING_ALG, { modulusLength: 2048, extractable: true });
  const jwk = await exportJWK(privateKey);
  const kid = randomBytes(12).toString('base64url');
  Object.assign(jwk, { kid, alg: SIGNING_ALG, use: 'sig' });
  await oidcDb(ctx)
    .insertInto('oidc_keys')
    .values({
      kid,
      sealed: seal(await kek(ctx), kid, JSON.stringify(jwk)),
      create_time: Date.now(),
      retire_time: null,
    })
    .execute();
  return kid;
}

export interface KeySet {
  /** Private JWKs, the signing key first, then the replaced keys still published. */
  keys: JWK[];
  /** Changes whenever the set changes (the provider is rebuilt then). */
  version: string;
  /** When a waiting key begins to sign (epoch ms): the set must be loaded again by then. */
  nextChange?: number;
}

/**
 * The published keys. A key signs from `leadMs` after its creation (the first key ever from its
 * creation, as nothing else could sign): until then it is published only. The newest key that
 * signs is the signing key; each older key was replaced when its successor began to sign
 * (retire_time) and is published until publishAfterMs after that, then deleted. When the newest
 * key is older than rotateAfterMs (or there is none), a new one is created first. Several
 * instances may do so at once: the newest wins and the other stays published for its window, so
 * nothing it signed in between fails to verify.
 */
export async function loadKeySet(
  ctx: Pick<ServiceContext, 'db' | 'config'>,
  times: KeyTimes,
): Promise<KeySet> {
  const db = oidcDb(ctx);
  const read = () =>
    db.selectFrom('oidc_keys').selectAll().orderBy('create_time', 'desc').orderBy('kid', 'desc').execute();
  let rows = await read();
  const now = Date.now();
  const newest = rows[0];
  if (!newest || now - Number(newest.create_time) >= times.rotateAfterMs) {
    await addSigningKey(ctx);
    rows = await read();
  }
  const lead = times.leadMs ?? PUBLISH_LEAD_MS;
  const signsFrom = (i: number) => {
    const row = rows[i];
    if (!row) return undefined;
    return i === rows.length - 1 ? Number(row.create_time) : Number(row.create_time) + lead;
  };
  // Newest first: keys still waiting to sign, then the signing key, then replaced ones. An older
  // key retires when the next newer one begins to sign.
  const waiting: typeof rows = [];
  const live: typeof rows = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    if (!row) continue;
    if ((signsFrom(i) as number) > now) {
      waiting.push(row);
      continue;
    }
    const retired = i > 0 ? signsFrom(i - 1) : undefined;
    if (retired === undefined || retired > now) {
      live.push(row); // the signing key
      continue;
    }
    if (row.retire_time === null || Number(row.retire_time) !== retired)
      await db.updateTable('oidc_keys').set({ retire_time: retired }).where('kid', '=', row.kid).execute();
    if (now - retired < times.publishAfterMs) live.push(row);
    else await db.deleteFrom('oidc_keys').where('kid', '=', row.kid).execute();
  }
  // The signing key first: the provider signs with the first key of the algorithm it holds.
  const ordered = [...live.slice(0, 1), ...waiting, ...live.slice(1)];
  const key = await kek(ctx);
  const keys = ordered.map((r) => JSON.parse(unseal(key, r.kid, r.sealed)) as JWK);
  return {
    keys,
    version: ordered.map((r) => r.kid).join(','),
    nextChange:
      waiting.length > 0
        ? (signsFrom(rows.indexOf(waiting[waiting.length - 1] as (typeof rows)[number])) as number)
        : undefined,
  };
}
