import type { Logger } from 'pino';
import { AUTH_MODES, type AuthMode, type ProxyConfig } from '../config/proxy.js';
import type { RouteDefaults } from '../config/routing.js';
import { checkHttpUrl } from '../core/url.js';
import type { RegisterResponse } from '../wire/proxy.js';

/** A VirtualHost's own settings; undefined where it sets none. */
export interface HostSettings {
  readonly auth: AuthMode | undefined;
  readonly upstream: string | undefined;
}

/**
 * What the proxy learned from the service at its last successful registration. Replaced as a
 * whole at each registration, never changed in place.
 */
export interface Learned {
  /** The App's ProxyAuth; undefined when the service did not say. */
  readonly appAuth: AuthMode | undefined;
  /** The App's VirtualHosts that set an Upstream or an Auth, by lower-case name. */
  readonly hosts: ReadonlyMap<string, HostSettings>;
  /** Every VirtualHost name of the App (lower case): names this proxy serves. */
  readonly names: ReadonlySet<string>;
  /** The App's name, for the error pages. */
  readonly appName: string;
  /** The access-request page of the App's first AccessGroup (RegisterResponse.AccessRequestURL). */
  readonly accessRequestUrl: string | undefined;
  /** The origins the App is served on (RegisterResponse.Origins), lower case; empty when not sent. */
  readonly origins: ReadonlySet<string>;
}

const isMode = (v: unknown): v is AuthMode => (AUTH_MODES as readonly unknown[]).includes(v);

/**
 * Reads the routing part of a register answer. Nothing the service sends makes this throw:
 * - an Upstream that is not a usable http(s) URL leaves its host out (logged), so the host gets
 *   the proxy's defaults. (Keeping only its Auth would apply, say, `none` to proxy.upstream.)
 * - a mode this proxy does not know counts as `required` (fail closed);
 * - an answer without ProxyAuth and Hosts (an older service) learns no mode and no host.
 */
export function learnFrom(r: RegisterResponse, log: Logger): Learned {
  const mode = (v: unknown, what: Record<string, string>): AuthMode | undefined => {
    if (v === undefined || v === null || v === '') return undefined;
    if (isMode(v)) return v;
    log.warn(
      { ...what, value: String(v) },
      'the service sent a mode this proxy does not know; using required',
    );
    return 'required';
  };
  const appAuth = mode(r.ProxyAuth, { field: 'App.ProxyAuth' });
  const hosts = new Map<string, HostSettings>();
  const names = new Set<string>();
  for (const n of Array.isArray(r.VirtualHosts) ? r.VirtualHosts : [])
    if (typeof n === 'string' && HOST_NAME.test(n)) names.add(n.toLowerCase());
  for (const h of Array.isArray(r.Hosts) ? r.Hosts : []) {
    if (typeof h?.Name !== 'string' || h.Name === '') continue;
    const name = h.Name.toLowerCase();
    if (HOST_NAME.test(name)) names.add(name);
    let upstream: string | undefined;
    if (h.Upstream !== undefined && h.Upstream !== null && h.Upstream !== '') {
      try {
        checkHttpUrl(h.Upstream);
        upstream = h.Upstream;
      } catch {
        // The value is not logged: it may hold a password.
        log.warn(
          { host: name, reason: 'not an http(s) URL without a user name and password' },
          'VirtualHost.Upstream is not usable: this host gets the default upstream and mode',
        );
        continue;
      }
    }
    const auth = mode(h.Auth, { field: 'VirtualHost.Auth', host: name });
    if (auth !== undefined || upstream !== undefined) hosts.set(name, { auth, upstream });
  }
  const origins = new Set<string>();
  for (const o of Array.isArray(r.Origins) ? r.Origins : []) {
    const origin = typeof o === 'string' ? httpOrigin(o) : undefined;
    if (origin) origins.add(origin);
  }
  const access = typeof r.AccessRequestURL === 'string' ? r.AccessRequestURL : '';
  return {
    appAuth,
    hosts,
    names,
    appName: typeof r.AppName === 'string' ? r.AppName.slice(0, 200) : '',
    accessRequestUrl: access !== '' && httpOrigin(access) !== undefined ? access : undefined,
    origins,
  };
}

/** The origin of an http(s) URL without user info (lower case), else undefined. */
export function httpOrigin(url: string): string | undefined {
  try {
    const u = new URL(url);
    if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.username !== '' || u.password !== '')
      return undefined;
    return u.origin.toLowerCase();
  } catch {
    return undefined;
  }
}

/**
 * The mode where neither a prefix nor a VirtualHost decides: proxy.auth when it was set (file,
 * environment or flag), else the App's ProxyAuth as last learned, else `required`.
 */
export function defaultMode(config: ProxyConfig, learned: Learned | undefined): AuthMode {
  return config.explicit.has('proxy.auth') ? config.proxy.auth : (learned?.appAuth ?? 'required');
}

/**
 * The routing defaults of each request Host, compiled from the settings and what was learned.
 * A new table is built when either changes; the proxy swaps it in one assignment. The only state
 * that changes afterwards is the memo of Host spellings already looked up.
 */
export class HostRoutes {
  /** For any Host that is not a VirtualHost of the App (and for every Host when there are none). */
  readonly global: RouteDefaults;
  private readonly byHost = new Map<string, RouteDefaults>();
  /** The names this proxy serves: proxy.name and the App's VirtualHosts (lower case). */
  private readonly served: ReadonlySet<string>;
  /** Host header as sent -> its defaults; bounded, since clients choose what they send. */
  private readonly seen = new Map<string, RouteDefaults>();

  constructor(config: ProxyConfig, learned: Learned | undefined) {
    this.global = { auth: defaultMode(config, learned), upstream: config.proxy.upstream };
    const served = new Set(learned?.names);
    if (config.proxy.name !== '') served.add(config.proxy.name.toLowerCase());
    this.served = served;
    for (const [name, h] of learned?.hosts ?? [])
      this.byHost.set(name, {
        auth: h.auth ?? this.global.auth,
        upstream: h.upstream ?? this.global.upstream,
      });
  }

  /** The defaults for a request's Host header: one map lookup for a Host seen before. */
  defaultsFor(host: string | undefined): RouteDefaults {
    if (this.byHost.size === 0 || host === undefined) return this.global;
    let d = this.seen.get(host);
    if (d === undefined) {
      d = this.byHost.get(hostName(host)) ?? this.global;
      if (this.seen.size >= 1024) this.seen.clear();
      this.seen.set(host, d);
    }
    return d;
  }

  /** Is `name` (lower case, from plainHostName) proxy.name or a VirtualHost of the App? */
  serves(name: string): boolean {
    return this.served.has(name);
  }
}

/** A DNS host name (letters, digits, hyphens; dot-separated labels; no trailing dot). */
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i;

/**
 * The host name of a Host header that is exactly "name" or "name:port" with a DNS name (lower
 * case, port dropped); undefined for anything else: IP addresses, user info ("a@b"), URLs,
 * trailing dots, bad ports. Only a name like this can be compared with the names the proxy serves.
 */
export function plainHostName(host: string | undefined): string | undefined {
  if (host === undefined) return undefined;
  const colon = host.indexOf(':');
  const name = colon < 0 ? host : host.slice(0, colon);
  if (colon >= 0 && !/^\d{1,5}$/.test(host.slice(colon + 1))) return undefined;
  return HOST_NAME.test(name) && !/^[\d.]+$/.test(name) ? name.toLowerCase() : undefined;
}

/** The name in a Host header: lower case, without a port ("Wiki.Example:8443" -> "wiki.example"). */
export function hostName(host: string): string {
  const colon = host.lastIndexOf(':');
  const end = colon > host.lastIndexOf(']') && /^\d*$/.test(host.slice(colon + 1)) ? colon : host.length;
  return host.slice(0, end).toLowerCase();
}
