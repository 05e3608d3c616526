import { hash } from 'node:crypto';
import type { WireIdentity } from '../wire/proxy.js';
import { API_KEY_PATTERN } from '../wire/proxy.js';
import type { AuthBackend } from './backend.js';
import { BackendError } from './backend.js';

/**
 * What the Authorization header holds, for the proxy: one of our API keys (Bearer, or HTTP Basic
 * with the key as user name and a blank password, or as the password), something else
 * ("foreign": meant for the upstream), or nothing.
 */
export type Presented = { kind: 'key'; key: string } | { kind: 'foreign' } | { kind: 'none' };

export function presentedCredential(authorization: string | undefined): Presented {
  if (authorization === undefined || authorization === '') return { kind: 'none' };
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (bearer) {
    const token = bearer[1] as string;
    return API_KEY_PATTERN.test(token) ? { kind: 'key', key: token } : { kind: 'foreign' };
  }
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
  if (basic) {
    const text = Buffer.from(basic[1] as string, 'base64').toString('utf8');
    const colon = text.indexOf(':');
    const user = colon < 0 ? text : text.slice(0, colon);
    const pass = colon < 0 ? '' : text.slice(colon + 1);
    if (API_KEY_PATTERN.test(user) && pass === '') return { kind: 'key', key: user };
    if (API_KEY_PATTERN.test(pass)) return { kind: 'key', key: pass };
  }
  return { kind: 'foreign' };
}

/** A key standing alone (not part of a longer run of letters and digits). */
const KEY_IN_TEXT = /(?<![A-Za-z0-9])gv[A-Za-z0-9]{54}(?![A-Za-z0-9])/;
/** Runs of base64 (either alphabet) long enough to encode a key (56 bytes: 75 characters). */
const BASE64_RUN = /[A-Za-z0-9+/_-]{75,}/g;

/**
 * Does an Authorization value hold one of our API keys in any form the proxy takes or a client
 * might send (Bearer, Basic user or password, another scheme, plain or base64)? Such a header is
 * never forwarded, not even in mode `none`: the upstream could use the key as its owner.
 */
export function holdsApiKey(authorization: string): boolean {
  if (presentedCredential(authorization).kind === 'key' || KEY_IN_TEXT.test(authorization)) return true;
  for (const run of authorization.match(BASE64_RUN) ?? [])
    if (KEY_IN_TEXT.test(Buffer.from(run, 'base64').toString('latin1'))) return true;
  return false;
}

/**
 * May a client's Authorization reach the upstream on a request forwarded without an identity
 * (mode `none`, or `optional` without credentials)? Never one holding a Gatehouse key, and never
 * one the application could take for the proxy's synthetic `Basic base64(<email>:)`: in `optional`
 * any Basic (an application there reads the Basic user name as the proxy's word), in `none` a
 * Basic with a blank password or none at all (the synthetic header's shape). Other schemes (the
 * application's own Bearer tokens, Digest, ...) pass.
 */
export function forwardableAuthorization(authorization: string, mode: 'none' | 'optional'): boolean {
  const basic = /^[ \t]*basic(?:[ \t]+([^ \t]*))?[ \t]*$/i.exec(authorization);
  if (basic) {
    if (mode === 'optional') return false;
    const text = Buffer.from(basic[1] ?? '', 'base64').toString('utf8');
    const colon = text.indexOf(':');
    if (colon < 0 || colon === text.length - 1) return false;
  }
  return !holdsApiKey(authorization);
}

/**
 * Does a request target carry an API key in an `access_token` query parameter (any percent-encoding
 * of the name or the value)? The service takes keys there; the proxy does not, and would forward
 * the URL, key included, to the upstream: such requests are refused.
 */
export function keyInQuery(url: string | undefined): boolean {
  const q = url?.indexOf('?') ?? -1;
  // A key alone is 56 characters: shorter queries cannot hold one, most requests stop here.
  if (q < 0 || (url as string).length - q < 57) return false;
  const query = (url as string).slice(q + 1);
  if (!query.includes('%') && !query.includes('access_token')) return false;
  for (const [name, value] of new URLSearchParams(query))
    if (name === 'access_token' && API_KEY_PATTERN.test(value)) return true;
  return false;
}

interface Entry {
  identity?: WireIdentity;
  error?: BackendError;
  until: number;
}

/** How long an API key's validation is reused: a revoked key keeps working at most this long. */
export const KEY_CACHE_MS = 30_000;
/** How long a refused key stays refused without asking the service again. */
export const KEY_NEGATIVE_CACHE_MS = 5_000;
const MAX_ENTRIES = 10_000;

/**
 * Validates API keys over the back channel and remembers the answer briefly. Keys are held by
 * their SHA-256 only. Concurrent first requests with the same key share one service call.
 */
export class ApiKeyCache {
  private readonly entries = new Map<string, Entry>();
  private readonly pending = new Map<string, Promise<WireIdentity>>();

  constructor(
    private readonly backend: () => AuthBackend,
    private readonly ttlMs = KEY_CACHE_MS,
    private readonly negativeTtlMs = KEY_NEGATIVE_CACHE_MS,
  ) {}

  async identify(key: string): Promise<WireIdentity> {
    return this.lookup(key);
  }

  /** The identity at once when a validation is cached, else a promise (rejected when refused). */
  lookup(key: string): WireIdentity | Promise<WireIdentity> {
    const id = hash('sha256', key, 'base64url');
    const now = Date.now();
    const hit = this.entries.get(id);
    if (hit && hit.until > now) {
      if (hit.error) return Promise.reject(hit.error);
      return hit.identity as WireIdentity;
    }
    const inflight = this.pending.get(id);
    if (inflight) return inflight;
    const p = this.backend()
      .apiKey(key)
      .then(
        (identity) => {
          const expires = identity.Expires ? Date.parse(identity.Expires) : Number.POSITIVE_INFINITY;
          this.put(id, { identity, until: Math.min(Date.now() + this.ttlMs, expires) });
          return identity;
        },
        (e: unknown) => {
          if (e instanceof BackendError && e.refused && !e.proxyRejected)
            this.put(id, { error: e, until: Date.now() + this.negativeTtlMs });
          throw e;
        },
      )
      .finally(() => this.pending.delete(id));
    this.pending.set(id, p);
    return p;
  }

  private put(id: string, e: Entry) {
    if (this.entries.size >= MAX_ENTRIES) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.delete(id);
    this.entries.set(id, e);
  }

  clear() {
    this.entries.clear();
  }
}
