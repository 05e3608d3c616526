/**
 * The sign-in state: the `state` parameter of the round trip through the service. It is random
 * (a nonce) and also carries, sealed with an HMAC of a key derived from the cookie key (the same
 * in every worker), its expiry, whether it is a second attempt, and the return path when that is
 * short. The state cookie set when the sign-in began binds the callback to this browser; the seal
 * lets the callback recognise its own state when a front proxy did not pass that cookie on
 * (a plain nginx `auth_request` configuration drops the 401's Set-Cookie), and start once more
 * with the cookie set at the callback, instead of failing: the code that came without the cookie
 * is never exchanged (login CSRF), and a browser that keeps no cookie is told so the second time.
 * The service takes a state of 16 to 128 characters [A-Za-z0-9_-].
 */
import { createHash, createHmac, type KeyObject, randomBytes, timingSafeEqual } from 'node:crypto';

const MAC_BYTES = 12;
const NONCE_BYTES = 9;
/** 128 base64url characters are 96 bytes: 1 flag byte, 4 of expiry, the nonce, the MAC, the path. */
const MAX_PATH_BYTES = 96 - 1 - 4 - NONCE_BYTES - MAC_BYTES;
/** How long a sign-in may take (the state cookie lives as long). */
export const STATE_TTL_S = 600;

export interface OpenedState {
  /** The return path when it fitted, else undefined. */
  back: string | undefined;
  /** This state was made by a callback that had no state cookie: a second one will not be tried. */
  retried: boolean;
}

export class StateSealer {
  private readonly key: Buffer;

  constructor(cookieKey: KeyObject) {
    this.key = createHash('sha256')
      .update('gatehouse proxy sign-in state\n')
      .update(cookieKey.export({ format: 'der', type: 'pkcs8' }))
      .digest();
  }

  seal(back: string, retried: boolean): string {
    const path = Buffer.from(back, 'utf8');
    const fits = path.length <= MAX_PATH_BYTES;
    const head = Buffer.alloc(5);
    head[0] = (retried ? 1 : 0) | (fits ? 2 : 0);
    head.writeUInt32BE(Math.floor(Date.now() / 1000) + STATE_TTL_S, 1);
    const payload = Buffer.concat([head, randomBytes(NONCE_BYTES), fits ? path : Buffer.alloc(0)]);
    return Buffer.concat([payload, this.mac(payload)]).toString('base64url');
  }

  /** The state's content when this proxy sealed it and it has not expired; else undefined. */
  open(state: string): OpenedState | undefined {
    if (!/^[A-Za-z0-9_-]{16,128}$/.test(state)) return undefined;
    const raw = Buffer.from(state, 'base64url');
    if (raw.length < 5 + NONCE_BYTES + MAC_BYTES) return undefined;
    const payload = raw.subarray(0, raw.length - MAC_BYTES);
    if (!timingSafeEqual(raw.subarray(raw.length - MAC_BYTES), this.mac(payload))) return undefined;
    if (payload.readUInt32BE(1) < Date.now() / 1000) return undefined;
    const flags = payload[0] as number;
    return {
      retried: (flags & 1) === 1,
      back: (flags & 2) === 2 ? payload.subarray(5 + NONCE_BYTES).toString('utf8') : undefined,
    };
  }

  private mac(payload: Buffer): Buffer {
    return createHmac('sha256', this.key).update(payload).digest().subarray(0, MAC_BYTES);
  }
}
