/**
 * The signed identity assertion (X-Service-Assertion): a short-lived ES256 JWT the proxy adds to
 * every request it forwards for a user, so the upstream can verify who the user is instead of
 * trusting the network, with the public keys the proxy serves at /.gatehouse/jwks.json.
 *
 * Keys: proxy.assertionkey (or a key generated at start-up). A reload (SIGHUP) with another key
 * rotates it: new assertions are signed with the new key at once, and the previous public key
 * stays in the JWK Set for RETIRED_KEEP_MS, longer than any assertion signed with it lives.
 */
import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
} from 'node:crypto';
import { readP256PrivateKey } from '../core/eckey.js';
import type { WireIdentity } from '../wire/proxy.js';

/** How long an assertion is valid (the issue asks for at most 5 minutes). */
export const ASSERTION_TTL_S = 120;
/** A cached assertion is signed again once less than this much of its life is left. */
const RESIGN_BELOW_S = 60;
/** A key replaced by a reload is still published this long (> ASSERTION_TTL_S). */
export const RETIRED_KEEP_MS = 10 * 60_000;
export const ASSERTION_ISSUER = 'gatehouse-proxy';

/** A signing key and what is derived from it; a snapshot (src/proxy/snapshot.ts) holds the one in force. */
export interface SigningKey {
  setting: string;
  key: KeyObject;
  kid: string;
  /** The public JWK as served. */
  jwk: Record<string, string>;
  headerB64: string;
}

const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64url');

function signingKey(setting: string, key: KeyObject): SigningKey {
  const pub = createPublicKey(key).export({ format: 'jwk' }) as {
    crv: string;
    kty: string;
    x: string;
    y: string;
  };
  // RFC 7638 thumbprint: the required members in lexicographic order, no whitespace.
  const kid = createHash('sha256')
    .update(JSON.stringify({ crv: pub.crv, kty: pub.kty, x: pub.x, y: pub.y }))
    .digest('base64url');
  return {
    setting,
    key,
    kid,
    jwk: { kty: pub.kty, crv: pub.crv, x: pub.x, y: pub.y, kid, alg: 'ES256', use: 'sig' },
    headerB64: b64(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid })),
  };
}

export class AssertionSigner {
  private current: SigningKey;
  private retired: { key: SigningKey; until: number }[] = [];
  /** Assertions by identity object and auth type: the proxy's caches hand out one object per user. */
  private readonly cache = new WeakMap<WireIdentity, Map<string, { token: string; exp: number }>>();

  constructor(
    /** proxy.assertionkey at start-up (a reload passes its own to `reload`). */
    setting: string,
    /** The App this proxy serves: the assertion's audience. */
    private readonly appId: string,
  ) {
    this.current = this.load(setting);
  }

  /** Whether the key was generated (no proxy.assertionkey): assertions then change key at restart. */
  get generated(): boolean {
    return this.current.setting === '';
  }

  private load(setting: string): SigningKey {
    if (setting === '') return signingKey('', generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey);
    return signingKey(setting, readP256PrivateKey(setting));
  }

  /**
   * Takes in proxy.assertionkey again (SIGHUP; the file it names may hold a new key): a different
   * key becomes the signing key at once and the one it replaces is retired. Unset keeps the
   * generated key. On error the old key stays and the error is returned.
   */
  reload(want: string): Error | undefined {
    if (want === '' && this.current.setting === '') return undefined;
    let next: SigningKey;
    try {
      next = this.load(want);
    } catch (e) {
      return e as Error;
    }
    if (next.kid !== this.current.kid)
      this.retired.push({ key: this.current, until: Date.now() + RETIRED_KEEP_MS });
    this.current = next;
    return undefined;
  }

  /** The key new assertions are signed with (a reload may replace it). */
  get signingKey(): SigningKey {
    return this.current;
  }

  /** The JWK Set: the current public key and those retired less than RETIRED_KEEP_MS ago. */
  jwks(): { keys: Record<string, string>[] } {
    const now = Date.now();
    const cur = this.current;
    this.retired = this.retired.filter((r) => r.until > now && r.key.kid !== cur.kid);
    return { keys: [cur.jwk, ...this.retired.map((r) => r.key.jwk)] };
  }

  /**
   * The assertion for a request forwarded for `who` (cached while more than a minute of it is
   * left), signed with `k`: the key of the request's snapshot.
   */
  assertion(who: WireIdentity, authType: 'session' | 'bearer', k: SigningKey = this.current): string {
    const now = Math.floor(Date.now() / 1000);
    let byType = this.cache.get(who);
    const hit = byType?.get(authType);
    if (hit && hit.exp - now >= RESIGN_BELOW_S && hit.token.startsWith(k.headerB64)) return hit.token;
    let exp = now + ASSERTION_TTL_S;
    if (who.Expires) {
      const end = Math.floor(Date.parse(who.Expires) / 1000);
      if (Number.isFinite(end)) exp = Math.min(exp, end);
    }
    const claims: Record<string, unknown> = {
      iss: ASSERTION_ISSUER,
      aud: this.appId,
      sub: who.UserID,
      email: who.Email,
      name: who.FullName,
      groups: who.Groups ?? [],
      auth_type: authType,
      iat: now,
      exp,
      jti: randomBytes(12).toString('base64url'),
    };
    if (authType === 'session' && typeof who.IntegrityLevel === 'number') claims.level = who.IntegrityLevel;
    const input = `${k.headerB64}.${b64(JSON.stringify(claims))}`;
    const sig = sign('sha256', Buffer.from(input), { key: k.key, dsaEncoding: 'ieee-p1363' });
    const token = `${input}.${sig.toString('base64url')}`;
    if (!byType) {
      byType = new Map();
      this.cache.set(who, byType);
    }
    byType.set(authType, { token, exp });
    return token;
  }
}
