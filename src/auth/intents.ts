import { randomBytes } from 'node:crypto';
import { CompactSign, compactVerify, errors as joseErrors } from 'jose';
import { ApiError } from '../core/errors.js';
import type { ServiceContext } from '../store/service.js';
import { intentKeys } from './session/keys.js';

/**
 * A signed intent: what a rejected request tried to do and the level it needs, bound to the
 * session and device that tried. A compact JWS (EdDSA/Ed25519) whose payload is this object.
 */
export interface Intent {
  /** Public ID of the session that was refused ('' when the request had no session). */
  sid: string;
  /**
   * Tag of the browser's device ID (`intentDevice` in session/authenticator.ts; '' when unknown):
   * intents travel in URLs and logs, and the device ID itself is what sign-in regulation trusts.
   */
  did: string;
  /** The session's user at the time ('' when not identified). */
  uid: string;
  /** The attempted operation. */
  method: string;
  path: string;
  /** The integrity level that operation requires. */
  lvl: number;
  iat: number;
  exp: number;
  jti: string;
}

/** How long an intent stays valid. */
export const INTENT_TTL_SECONDS = 300;
const TYP = 'gatehouse-intent+jws';

export async function signIntent(
  ctx: Pick<ServiceContext, 'db'>,
  i: Omit<Intent, 'iat' | 'exp' | 'jti'>,
  now = Date.now(),
): Promise<string> {
  const keys = await intentKeys(ctx);
  const iat = Math.floor(now / 1000);
  const payload: Intent = {
    ...i,
    path: i.path.slice(0, 512),
    iat,
    exp: iat + INTENT_TTL_SECONDS,
    jti: randomBytes(9).toString('base64url'),
  };
  return new CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
    .setProtectedHeader({ alg: 'EdDSA', kid: keys.kid, typ: TYP })
    .sign(keys.privateKey);
}

/** Verifies an intent: 400 (Invalid Intent) when it is malformed, altered, foreign or expired. */
export async function verifyIntent(
  ctx: Pick<ServiceContext, 'db'>,
  jws: unknown,
  field = 'intent',
): Promise<Intent> {
  const bad = (why: string) => new ApiError('InvalidIntent', `the intent ${why}`, { field });
  if (typeof jws !== 'string' || jws.length === 0 || jws.length > 4096) throw bad('is missing or malformed');
  const keys = await intentKeys(ctx);
  let payload: Uint8Array;
  try {
    const r = await compactVerify(jws, keys.publicKey, { algorithms: ['EdDSA'] });
    if (r.protectedHeader.typ !== TYP) throw bad('is not a Gatehouse intent');
    payload = r.payload;
  } catch (e) {
    if (e instanceof ApiError) throw e;
    if (e instanceof joseErrors.JOSEError) throw bad('has an invalid signature or format');
    throw e;
  }
  let i: Intent;
  try {
    i = JSON.parse(new TextDecoder().decode(payload)) as Intent;
  } catch {
    throw bad('is malformed');
  }
  if (typeof i.exp !== 'number' || typeof i.lvl !== 'number' || typeof i.sid !== 'string')
    throw bad('is malformed');
  if (Date.now() / 1000 >= i.exp) throw bad('has expired; retry the operation to get a new one');
  return i;
}
