import { createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import { readP256PrivateKey } from '../core/eckey.js';
import { GATEHOUSE_COOKIE_PREFIX, type WireIdentity } from '../wire/proxy.js';

export const COOKIE_NAME = 'gatehouse_proxy';
export const STATE_COOKIE = 'gatehouse_proxy_state';
/** Lifetime of the signed session proof; after it, the session is re-validated at the service. */
export const COOKIE_TTL_S = 300;
const ISSUER = 'gatehouse-proxy';
const MAX_CACHED = 20_000;

/** Loads proxy.cookiekey (PEM text, or a file holding it), or generates a P-256 key when unset. */
export function loadCookieKey(setting: string): { key: KeyObject; generated: boolean } {
  if (setting === '') {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    return { key: privateKey, generated: true };
  }
  return { key: readP256PrivateKey(setting), generated: false };
}

export interface SessionProof {
  identity: WireIdentity;
  /** When the signed proof expires (ms). */
  exp: number;
}

export type VerifyResult =
  | { ok: true; proof: SessionProof }
  /** Signature good but the proof is past its lifetime: re-validate SessionID at the service. */
  | { ok: false; expired: true; sessionId: string }
  | { ok: false; expired: false };

/**
 * Signs and verifies the proxy's session cookie: an ES256 JWT holding the user's identity and the
 * service session it stands for. Verified cookies are remembered until they expire, so the common
 * request costs one Map lookup.
 */
export class CookieSigner {
  private readonly publicKey: KeyObject;
  private readonly cache = new Map<string, SessionProof>();

  constructor(
    private readonly privateKey: KeyObject,
    private readonly audience: string,
    readonly ttlS = COOKIE_TTL_S,
  ) {
    this.publicKey = createPublicKey(privateKey);
  }

  /** A signed proof for `identity` and when it expires (ms). */
  async sign(identity: WireIdentity): Promise<{ token: string; exp: number }> {
    const claims: Record<string, unknown> = {
      sid: identity.SessionID,
      email: identity.Email,
      un: identity.UserName,
      name: identity.FullName,
    };
    if (identity.Expires) claims.sexp = Math.floor(Date.parse(identity.Expires) / 1000);
    // Groups and level ride along for the identity assertion (src/proxy/assertion.ts).
    if (identity.Groups?.length) claims.grp = identity.Groups;
    if (typeof identity.IntegrityLevel === 'number') claims.lvl = identity.IntegrityLevel;
    const now = Math.floor(Date.now() / 1000);
    let exp = now + this.ttlS;
    if (typeof claims.sexp === 'number') exp = Math.min(exp, claims.sexp);
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuer(ISSUER)
      .setAudience(this.audience)
      .setSubject(identity.UserID)
      .setIssuedAt(now)
      .setExpirationTime(exp)
      .sign(this.privateKey);
    return { token, exp: exp * 1000 };
  }

  /** The proof of a cookie verified before and not yet expired, without any other work. */
  cached(token: string): SessionProof | undefined {
    const hit = this.cache.get(token);
    return hit && hit.exp > Date.now() ? hit : undefined;
  }

  async verify(token: string): Promise<VerifyResult> {
    const now = Date.now();
    const hit = this.cache.get(token);
    if (hit) {
      if (hit.exp > now) return { ok: true, proof: hit };
      this.cache.delete(token);
      return { ok: false, expired: true, sessionId: hit.identity.SessionID ?? '' };
    }
    try {
      const { payload } = await jwtVerify(token, this.publicKey, {
        algorithms: ['ES256'],
        issuer: ISSUER,
        audience: this.audience,
        requiredClaims: ['exp', 'sub', 'sid'],
      });
      const proof = { identity: toIdentity(payload), exp: (payload.exp as number) * 1000 };
      if (this.cache.size >= MAX_CACHED) {
        const oldest = this.cache.keys().next().value;
        if (oldest !== undefined) this.cache.delete(oldest);
      }
      this.cache.set(token, proof);
      return { ok: true, proof };
    } catch (e) {
      // Only a well-signed proof that merely expired may be renewed; jose checks the signature first.
      if (
        e instanceof joseErrors.JWTExpired &&
        e.payload.iss === ISSUER &&
        e.payload.aud === this.audience &&
        typeof e.payload.sid === 'string' &&
        e.payload.sid !== ''
      )
        return { ok: false, expired: true, sessionId: e.payload.sid };
      return { ok: false, expired: false };
    }
  }
}

function toIdentity(p: Record<string, unknown>): WireIdentity {
  const id: WireIdentity = {
    UserID: String(p.sub ?? ''),
    UserName: String(p.un ?? ''),
    Email: String(p.email ?? ''),
    FullName: String(p.name ?? ''),
    SessionID: String(p.sid ?? ''),
  };
  if (typeof p.sexp === 'number') id.Expires = new Date(p.sexp * 1000).toISOString();
  if (Array.isArray(p.grp)) id.Groups = p.grp.filter((g): g is string => typeof g === 'string');
  if (typeof p.lvl === 'number') id.IntegrityLevel = p.lvl;
  return id;
}

/**
 * The value of one cookie in a Cookie header, or undefined. A name sent twice counts as absent:
 * a second copy can only come from a cookie planted for a parent domain or another path.
 */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header?.includes(name)) return undefined;
  let found: string | undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    if (found !== undefined) return undefined;
    found = part.slice(eq + 1).trim();
  }
  return found;
}

/**
 * Is this cookie name one of Gatehouse's: `gatehouse_` + anything, after an optional `__Host-` or
 * `__Secure-`, in any case and with any surrounding whitespace? Wider than what the service and
 * the proxy read (exact names, trimmed), so whatever either reads is covered.
 */
export function isGatehouseCookie(name: string): boolean {
  let n = name.trim().toLowerCase();
  if (n.startsWith('__host-')) n = n.slice(7);
  else if (n.startsWith('__secure-')) n = n.slice(9);
  return n.startsWith(GATEHOUSE_COOKIE_PREFIX);
}

/** A Cookie or Set-Cookie value that may name a Gatehouse cookie: the cheap test before parsing. */
const MENTIONS_GATEHOUSE = /gatehouse_/i;

/**
 * The Cookie header without Gatehouse's cookies, or undefined when none is left. Neither the
 * proxy's (`gatehouse_proxy`, `gatehouse_proxy_state`) nor the service's (`gatehouse_session`,
 * `gatehouse_device`, `__Host-` prefixed over TLS) are forwarded: the upstream could replay them
 * as the user (the service's give the user's API). Other cookies keep their order.
 */
export function stripOwnCookies(header: string | undefined): string | undefined {
  if (header === undefined || !MENTIONS_GATEHOUSE.test(header)) return header;
  const kept = header
    .split(';')
    .map((p) => p.trim())
    .filter((p) => {
      const eq = p.indexOf('=');
      return p !== '' && !isGatehouseCookie(eq < 0 ? p : p.slice(0, eq));
    });
  return kept.length ? kept.join('; ') : undefined;
}

/**
 * Does an upstream's Set-Cookie value set a Gatehouse cookie? An application may not: it could
 * fix the browser's proxy or service session to one of its choosing (a session it holds).
 */
export function setsGatehouseCookie(setCookie: string): boolean {
  if (!MENTIONS_GATEHOUSE.test(setCookie)) return false;
  const semi = setCookie.indexOf(';');
  const pair = semi < 0 ? setCookie : setCookie.slice(0, semi);
  const eq = pair.indexOf('=');
  return isGatehouseCookie(eq < 0 ? pair : pair.slice(0, eq));
}

export function cookieHeader(
  name: string,
  value: string,
  opts: { maxAge: number; secure: boolean; domain: string; path?: string },
): string {
  let c = `${name}=${value}; Path=${opts.path ?? '/'}; Max-Age=${opts.maxAge}; HttpOnly; SameSite=Lax`;
  if (opts.secure) c += '; Secure';
  if (opts.domain) c += `; Domain=${opts.domain}`;
  return c;
}

/** A renewed proof: who, until when, and the Set-Cookie header that carries it. */
export interface Renewal {
  identity: WireIdentity;
  exp: number;
  setCookie: string;
}

/**
 * Renewals by the expired cookie they replace. Requests already on their way, or a client that
 * ignores Set-Cookie, keep sending the expired cookie: they get the same renewal from memory
 * (until the new proof expires, so an ended session still stops within one proof lifetime)
 * instead of a service call and a signature each. Concurrent renewals of one cookie share one call.
 */
export class RenewalCache {
  private readonly done = new Map<string, Renewal>();
  private readonly pending = new Map<string, Promise<Renewal>>();

  get(expired: string): Renewal | undefined {
    const r = this.done.get(expired);
    return r && r.exp > Date.now() ? r : undefined;
  }

  renew(expired: string, make: () => Promise<Renewal>): Promise<Renewal> {
    const hit = this.get(expired);
    if (hit) return Promise.resolve(hit);
    let p = this.pending.get(expired);
    if (!p) {
      p = make()
        .then((r) => {
          if (this.done.size >= MAX_CACHED) {
            const oldest = this.done.keys().next().value;
            if (oldest !== undefined) this.done.delete(oldest);
          }
          this.done.set(expired, r);
          return r;
        })
        .finally(() => this.pending.delete(expired));
      this.pending.set(expired, p);
    }
    return p;
  }
}
