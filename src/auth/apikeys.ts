import { timingSafeEqual } from 'node:crypto';
import { ApiError } from '../core/errors.js';
import { APIKey, hashApiKey } from '../objects/apikey.js';
import { userUsable } from '../policy/users.js';
import { timestampMs } from '../schema/fields.js';
import type { Scope } from '../schema/type.js';
import type { ServiceContext } from '../store/service.js';
import { API_KEY_PATTERN } from '../wire/proxy.js';
import { keyCacheOf } from './keycache.js';
import type { Principal } from './principal.js';

const CHALLENGE = 'Bearer realm="gatehouse"';

export function unauthenticated(message: string, invalidToken: boolean): ApiError {
  return new ApiError('Unauthenticated', message, {
    headers: { 'WWW-Authenticate': invalidToken ? `${CHALLENGE}, error="invalid_token"` : CHALLENGE },
  });
}

/** The key presented in `Authorization: Bearer` or `access_token`, or undefined when none is. */
export function presentedKey(authorization: string | undefined, accessToken: unknown): string | undefined {
  if (authorization !== undefined && authorization !== '') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!m) throw unauthenticated('the Authorization header must be "Bearer <API key>"', true);
    return m[1];
  }
  if (typeof accessToken === 'string' && accessToken !== '') return accessToken;
  if (Array.isArray(accessToken)) throw unauthenticated('access_token may be given only once', true);
  return undefined;
}

/**
 * Is the user allowed to act now (not disabled, merged away or inside the suspension window)?
 * The one rule, in the policy (src/policy/users.ts); re-exported for the callers here.
 */
export { userUsable };

/** Resolves an API key to a principal, or throws 401. Looks up by hash: no plaintext is stored or compared. */
export async function authenticateApiKey(
  ctx: Pick<ServiceContext, 'store' | 'state'>,
  key: string,
): Promise<Principal> {
  const store = ctx.store;
  if (!API_KEY_PATTERN.test(key)) throw unauthenticated('the API key is not valid', true);
  const hash = hashApiKey(key);
  const now = Date.now();
  const cache = keyCacheOf(ctx);
  let hit = cache.get(hash, now);
  if (!hit) {
    const readAt = cache.generation;
    const found = await store.findByKeyWithRef(APIKey, 'KeyHash', hash, 'UserID');
    if (!found) throw unauthenticated('the API key is not valid', true);
    // The index lookup found the hash; compare once more in constant time as defence in depth.
    const stored = Buffer.from(String(found.obj.secret.KeyHash ?? ''));
    const given = Buffer.from(hash);
    if (stored.length !== given.length || !timingSafeEqual(stored, given))
      throw unauthenticated('the API key is not valid', true);
    hit = { keyId: found.obj.id, keyDoc: found.obj.doc, userDoc: found.ref?.doc, until: 0 };
    cache.set(hash, hit, now, readAt);
  }
  // Time-based conditions are checked on every request, cached or not.
  const doc = hit.keyDoc;
  const expires = timestampMs(String(doc.ExpireTime));
  if (Number.isFinite(expires) && now >= expires) throw unauthenticated('the API key has expired', true);
  const userId = String(doc.UserID ?? '');
  if (userId !== '' && (!hit.userDoc || !userUsable(hit.userDoc, now))) {
    throw unauthenticated("the API key's user is disabled or suspended", true);
  }
  return { via: 'apikey', userId, scopes: new Set(doc.Scopes as Scope[]), keyId: hit.keyId };
}
