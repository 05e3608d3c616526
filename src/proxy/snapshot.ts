/**
 * The proxy's configuration and everything derived from it, as one immutable snapshot: the
 * settings, what the service said at the last registration, the routing table per Host, the
 * trusted front proxies, the body limits. A reload (SIGHUP) or a registration builds a new
 * snapshot and the proxy swaps it in with one assignment, as Pomerium holds an atomic pointer to
 * its proxyState; nothing in a snapshot is changed afterwards. Each request reads the snapshot
 * once, when it starts, and uses only that object to its end, also after an await: a reload
 * meanwhile never mixes two configurations in one request.
 *
 * The only state inside a snapshot that changes is memos of values computed from it (the parsed
 * upstream URLs, the Host spellings already looked up, the last origin built): they are dropped
 * with the snapshot, so no memo outlives the settings it was computed from.
 */
import { AddressMatcher } from '../config/addresses.js';
import type { ProxyConfig } from '../config/proxy.js';
import { RESTART_KEYS } from '../config/proxy.js';
import type { SigningKey } from './assertion.js';
import type { BodyLimits } from './body.js';
import { HostRoutes, type Learned } from './hosts.js';
import { type UpstreamTarget, upstreamTarget } from './upstream/request.js';

/** An upstream URL as requests use it: where to connect and the base path to put in front. */
export interface ParsedUpstream {
  readonly target: UpstreamTarget;
  /** The URL's path without trailing slashes, put before the request path. */
  readonly base: string;
}

export interface ProxySnapshot {
  /** The settings in force (deep-frozen). */
  readonly config: ProxyConfig;
  /** What the last successful registration said (App.ProxyAuth, VirtualHosts); kept through outages. */
  readonly learned: Learned | undefined;
  /** Defaults per Host from `config` and `learned`. */
  readonly routes: HostRoutes;
  /** proxy.trustedproxies, compiled. */
  readonly trusted: AddressMatcher;
  /** proxy.privateaddress without trailing slashes; '' when unset. */
  readonly privateBase: string;
  /** The key X-Service-Assertion is signed with (from proxy.assertionkey, src/proxy/assertion.ts). */
  readonly assertionKey: SigningKey;
  /** What a request body must keep up (src/proxy/body.ts). */
  readonly bodyLimits: BodyLimits;
  /** The parsed form of an upstream URL of these settings (memoised per snapshot). */
  upstream(raw: string): ParsedUpstream;
  /** Memo for the proxy's origin (src/proxy/origin.ts): valid for this snapshot's served names only. */
  readonly originMemo: OriginMemo;
}

/** The last Host header and local address seen, and the origin built from them: clients mostly send the same. */
export interface OriginMemo {
  host: string | undefined;
  address: string | undefined;
  port: number;
  origin: string;
}

/** What a snapshot is built from besides the settings and what was learned. */
export interface SnapshotOptions {
  /** Replaces proxy.bodytimeout (tests). */
  bodyIdleTimeoutMs?: number;
}

/**
 * A new snapshot. `previous` lends what did not change (the compiled trusted proxies), so a
 * registration that changes only `learned` costs no recompilation.
 */
export function buildSnapshot(
  config: ProxyConfig,
  learned: Learned | undefined,
  assertionKey: SigningKey,
  opts: SnapshotOptions,
  previous?: ProxySnapshot,
): ProxySnapshot {
  const frozen = deepFreeze(config);
  const p = frozen.proxy;
  const trusted =
    previous && previous.trusted.text === p.trustedproxies
      ? previous.trusted
      : new AddressMatcher(p.trustedproxies);
  const upstreams = new Map<string, ParsedUpstream>();
  return Object.freeze({
    config: frozen,
    learned,
    routes: new HostRoutes(frozen, learned),
    trusted,
    privateBase: p.privateaddress.replace(/\/+$/, ''),
    assertionKey,
    bodyLimits: Object.freeze({
      minRate: p.bodyminrate,
      stallMs: opts.bodyIdleTimeoutMs ?? p.bodytimeout * 1000,
    }),
    upstream(raw: string): ParsedUpstream {
      let u = upstreams.get(raw);
      if (!u) {
        const url = new URL(raw);
        u = Object.freeze({ target: upstreamTarget(url), base: url.pathname.replace(/\/+$/, '') });
        upstreams.set(raw, u);
      }
      return u;
    },
    originMemo: { host: undefined, address: undefined, port: -1, origin: '' },
  });
}

/**
 * The settings a reload takes: `next`, except the settings that change only at restart
 * (RESTART_KEYS), which keep their `current` values. Also names those that differed.
 */
export function reloadedConfig(
  next: ProxyConfig,
  current: ProxyConfig,
): { config: ProxyConfig; stale: string[] } {
  const value = (c: ProxyConfig, s: string, k: string) =>
    (c[s as keyof ProxyConfig] as Record<string, unknown>)[k];
  const stale = RESTART_KEYS.filter(([s, k]) => value(next, s, k) !== value(current, s, k)).map(
    ([s, k]) => `${s}.${k}`,
  );
  const sections = (['proxy', 'auth', 'redirect', 'acme'] as const).map((s) => [
    s,
    {
      ...next[s],
      ...Object.fromEntries(RESTART_KEYS.filter(([x]) => x === s).map(([, k]) => [k, value(current, s, k)])),
    },
  ]);
  return { config: { ...next, ...Object.fromEntries(sections) } as ProxyConfig, stale };
}

/** Freezes plain objects and arrays all the way down (Sets and Maps are typed read-only instead). */
function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value;
  if (value instanceof Set || value instanceof Map) return value;
  for (const v of Object.values(value as object)) deepFreeze(v);
  return Object.freeze(value);
}
