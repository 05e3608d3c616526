/** Which path prefix applies to a request: its settings over the host's defaults. */
import { pathMatchKey, prefixCovers } from '../core/path.js';
import type { AuthMode, PrefixRule, ProxyConfig } from './proxy.js';

/** What applies to one request path: the longest matching prefix's settings over the defaults. */
export interface RouteSettings {
  prefix: string | undefined;
  auth: AuthMode;
  upstream: string;
}

/** What a request gets where no prefix decides: its host's settings (a VirtualHost) or the proxy's. */
export interface RouteDefaults {
  readonly auth: AuthMode;
  readonly upstream: string;
}

const STRICTNESS: Record<AuthMode, number> = { none: 0, optional: 1, required: 2 };

/**
 * Resolves the settings for a canonical path (src/core/path.ts): each setting from the longest
 * prefix that sets it, else from `defaults` (the request's host, see src/proxy/hosts.ts), else
 * proxy.auth/proxy.upstream. Prefixes are matched twice: on the canonical path, and on the match
 * keys (pathMatchKey: case folded, `;` parameters and trailing dots cut), which is how lenient
 * upstreams may read the same path. The stricter mode wins, with the upstream of the reading it
 * came from: "/ADMIN" or "/admin;x" gets the mode of the "/admin" prefix when that is stricter,
 * never a laxer one ("/PUBLIC/x" does not get an open "/public" prefix's mode).
 */
export function routeFor(config: ProxyConfig, canonical: string, defaults?: RouteDefaults): RouteSettings {
  const exact = settle(config, defaults, canonical, false);
  // Nothing is stricter than required; and without prefixes there is nothing to read leniently.
  if (exact.auth === 'required' || config.prefixes.length === 0) return exact;
  const key = pathMatchKey(canonical);
  if (key === canonical && !keysDiffer(config.prefixes)) return exact;
  const loose = settle(config, defaults, key, true);
  return STRICTNESS[loose.auth] > STRICTNESS[exact.auth] ? loose : exact;
}

function keysDiffer(rules: readonly PrefixRule[]): boolean {
  for (const r of rules) if (r.match !== r.prefix) return true;
  return false;
}

/**
 * The prefixes longest match key first, for the lenient pass: a key can be shorter than its
 * prefix ("/caf%C3%A9" is "/café"), so the order by prefix does not always hold for keys.
 */
// module-state: a memo of a pure function of an immutable rule list, keyed by that list; gone with it.
const byKeyLength = new WeakMap<readonly PrefixRule[], readonly PrefixRule[]>();

function prefixesByKey(rules: readonly PrefixRule[]): readonly PrefixRule[] {
  let sorted = byKeyLength.get(rules);
  if (!sorted) {
    sorted = [...rules].sort((a, b) => b.match.length - a.match.length);
    byKeyLength.set(rules, sorted);
  }
  return sorted;
}

function settle(
  config: ProxyConfig,
  defaults: RouteDefaults | undefined,
  path: string,
  byKey: boolean,
): RouteSettings {
  let auth: AuthMode | undefined;
  let upstream: string | undefined;
  let matched: string | undefined;
  for (const rule of byKey ? prefixesByKey(config.prefixes) : config.prefixes) {
    if (!prefixCovers(byKey ? rule.match : rule.prefix, path)) continue;
    matched ??= rule.prefix;
    auth ??= rule.auth;
    upstream ??= rule.upstream;
    if (auth && upstream) break;
  }
  return {
    prefix: matched,
    auth: auth ?? defaults?.auth ?? config.proxy.auth,
    upstream: upstream ?? defaults?.upstream ?? config.proxy.upstream,
  };
}
