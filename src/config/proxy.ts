// Over 400 lines: every setting of the proxy is declared here once, section by section (the point of
// the file); the loading code below them is short.
import { availableParallelism } from 'node:os';
import { readP256PrivateKey } from '../core/eckey.js';
import { canonicalPath, PathError, pathMatchKey } from '../core/path.js';
import { checkHttpUrl } from '../core/url.js';
import { parseAddressList } from './addresses.js';
import { ConfigError, type ConfigSources, loadSections, readConfigFile } from './load.js';
import { bool, int, listen, oneOf, type SectionValues, type Setting, str } from './setting.js';

/** Authentication modes of the proxy, per path prefix. */
export const AUTH_MODES = ['none', 'optional', 'required'] as const;
export type AuthMode = (typeof AUTH_MODES)[number];

/** Production directory of Let's Encrypt, the public ACME CA used when acme.server is unset. */
export const DEFAULT_ACME_SERVER = 'https://acme-v02.api.letsencrypt.org/directory';

const optionalUrl = (v: string) => {
  if (v !== '') checkHttpUrl(v);
};

export const proxySection = {
  listen: listen({
    key: 'proxy.listen',
    restart: true,
    env: 'SVC_PROXY_LISTEN',
    flag: 'listen',
    default: ':443',
    description: 'Address and port of the proxy',
  }),
  tls: bool({
    key: 'proxy.tls',
    restart: true,
    env: 'SVC_PROXY_TLS',
    flag: 'tls',
    default: true,
    description: 'Listen for encrypted requests; otherwise plaintext',
  }),
  cert: str({
    key: 'proxy.cert',
    restart: true,
    env: 'SVC_PROXY_CERT',
    flag: 'cert',
    default: '',
    description: 'With proxy.key: serve TLS from this PEM certificate file; unset: certificates by ACME',
  }),
  key: str({
    key: 'proxy.key',
    restart: true,
    env: 'SVC_PROXY_KEY',
    flag: 'key',
    default: '',
    description: 'PEM private key file paired with proxy.cert',
  }),
  name: str({
    key: 'proxy.name',
    env: 'SVC_PROXY_NAME',
    flag: 'name',
    default: '',
    description: 'Host name; if unset, determined at the first request',
    validate(v) {
      if (
        v !== '' &&
        !/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i.test(v)
      )
        throw new Error(`expected a host name, got ${JSON.stringify(v)}`);
    },
  }),
  auth: oneOf(AUTH_MODES, {
    key: 'proxy.auth',
    env: 'SVC_PROXY_AUTH',
    flag: 'auth',
    default: 'required',
    description: 'Default authentication mode: none, optional or required',
  }),
  upstream: str({
    key: 'proxy.upstream',
    env: 'SVC_PROXY_UPSTREAM',
    flag: 'upstream',
    default: 'http://localhost:8000',
    description: 'Default upstream server',
    validate: checkHttpUrl,
  }),
  privateaddress: str({
    key: 'proxy.privateaddress',
    env: 'SVC_PROXY_PRIVATEADDRESS',
    flag: 'privateaddress',
    default: '',
    description:
      'Base URL the upstream uses for metadata requests such as access checks; built from the inbound request when unset',
    validate: optionalUrl,
  }),
  cookiekey: str({
    key: 'proxy.cookiekey',
    restart: true,
    env: 'SVC_PROXY_COOKIEKEY',
    flag: 'cookiekey',
    default: '',
    description:
      'PEM ECDSA P-256 private key (or a file holding it) signing session cookies; generated at start-up when unset',
  }),
  metrics: str({
    key: 'proxy.metrics',
    restart: true,
    env: 'SVC_PROXY_METRICS',
    flag: 'metrics',
    default: '',
    description:
      'Address and port of a plaintext listener serving Prometheus metrics at /metrics (e.g. 127.0.0.1:9464); empty: none',
    validate(v) {
      if (v !== '') listen({ key: '', env: '', default: '', description: '' }).parse(v);
    },
  }),
  assertionkey: str({
    key: 'proxy.assertionkey',
    env: 'SVC_PROXY_ASSERTIONKEY',
    flag: 'assertionkey',
    default: '',
    description:
      'PEM ECDSA P-256 private key (or a file holding it) signing the X-Service-Assertion JWT; generated at start-up when unset; a reload with a new key rotates it (docs/federation.md)',
    validate(v) {
      if (v !== '') readP256PrivateKey(v);
    },
  }),
  cookiedomain: str({
    key: 'proxy.cookiedomain',
    env: 'SVC_PROXY_COOKIEDOMAIN',
    default: '',
    description: 'Domain attribute of issued session cookies',
    validate(v) {
      if (v !== '' && !/^\.?[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/i.test(v))
        throw new Error(`expected a domain name, got ${JSON.stringify(v)}`);
    },
  }),
  trustedproxies: str({
    key: 'proxy.trustedproxies',
    env: 'SVC_PROXY_TRUSTEDPROXIES',
    flag: 'trustedproxies',
    default: '127.0.0.1/8, ::1',
    description:
      'Front proxies (addresses or CIDRs, comma-separated) whose X-Original-* and X-Forwarded-* headers the forward-auth endpoints believe; requests from any other address are refused there. Empty: none',
    validate(v) {
      parseAddressList(v);
    },
  }),
  workers: int({
    key: 'proxy.workers',
    restart: true,
    env: 'SVC_PROXY_WORKERS',
    flag: 'workers',
    default: availableParallelism(),
    min: 1,
    max: 256,
    description: 'Processes serving the listener (default: the number of CPUs)',
  }),
  bodyminrate: int({
    key: 'proxy.bodyminrate',
    env: 'SVC_PROXY_BODYMINRATE',
    flag: 'bodyminrate',
    default: 1024,
    min: 0,
    description:
      'Request bodies must arrive at this many bytes per second at least, averaged over 10 s once they start (0: no minimum); slower ones end with 408',
  }),
  bodytimeout: int({
    key: 'proxy.bodytimeout',
    env: 'SVC_PROXY_BODYTIMEOUT',
    flag: 'bodytimeout',
    default: 20,
    min: 1,
    max: 3600,
    description: 'Seconds a request body may stall (nothing arrives) before the request ends with 408',
  }),
};

export const authSection = {
  token: str({
    key: 'auth.token',
    restart: true,
    env: 'SVC_AUTH_TOKEN',
    flag: 'token',
    default: '',
    description: 'Token tying this proxy to an App (POST /apps/:id/proxytoken)',
  }),
  server: str({
    key: 'auth.server',
    restart: true,
    env: 'SVC_AUTH_SERVER',
    flag: 'auth-server',
    default: 'http://127.0.0.1:8080',
    description: 'Address of the service API server',
    validate: checkHttpUrl,
  }),
};

export const redirectSection = {
  listen: str({
    key: 'redirect.listen',
    restart: true,
    env: 'SVC_REDIRECT_LISTEN',
    flag: 'redirect-listen',
    default: ':80',
    description: 'Address of the plaintext-to-TLS redirector (also serves ACME HTTP-01); "off" disables it',
    validate(v) {
      if (v !== 'off') listen({ key: '', env: '', default: '', description: '' }).parse(v);
    },
  }),
};

export const acmeSection = {
  server: str({
    key: 'acme.server',
    restart: true,
    env: 'SVC_ACME_SERVER',
    flag: 'acme-server',
    default: DEFAULT_ACME_SERVER,
    description: 'ACME directory URL (a staging directory for tests)',
    validate: checkHttpUrl,
  }),
  email: str({
    key: 'acme.email',
    restart: true,
    env: 'SVC_ACME_EMAIL',
    flag: 'acme-email',
    default: '',
    description:
      'Contact e-mail for ACME registration; derived from proxy.name (hostmaster@<name>) when empty',
    validate(v) {
      if (v !== '' && !/^[^\s@]+@[^\s@]+$/.test(v))
        throw new Error(`expected an e-mail address, got ${JSON.stringify(v)}`);
    },
  }),
  dir: str({
    key: 'acme.dir',
    restart: true,
    env: 'SVC_ACME_DIR',
    flag: 'acme-dir',
    default: './data/acme',
    description: 'Directory where the ACME account key and obtained certificates are kept',
  }),
  cacert: str({
    key: 'acme.cacert',
    restart: true,
    env: 'SVC_ACME_CACERT',
    flag: 'acme-cacert',
    default: '',
    description: 'Extra PEM CA certificate trusted for the ACME server (a test CA such as pebble)',
  }),
};

/** Settings a path prefix may override, and the section setting each inherits from. */
export const prefixSettings = {
  auth: proxySection.auth,
  upstream: proxySection.upstream,
} satisfies Record<string, Setting<unknown>>;
export type PrefixSettingName = keyof typeof prefixSettings;

export interface PrefixRule {
  /** Canonical prefix (src/core/path.ts): starts with "/", no trailing "/" except the root itself. */
  prefix: string;
  /** The prefix's match key (pathMatchKey): what lenient upstreams read it as. */
  match: string;
  auth?: AuthMode;
  upstream?: string;
}

export interface ProxyConfig {
  proxy: SectionValues<typeof proxySection>;
  auth: SectionValues<typeof authSection>;
  redirect: SectionValues<typeof redirectSection>;
  acme: SectionValues<typeof acmeSection>;
  /** Longest prefix first. */
  prefixes: PrefixRule[];
  /**
   * The `section.name` keys given a value by the file, the environment or a flag; the others
   * hold their default. (proxy.auth set explicitly beats the App's ProxyAuth from the service.)
   */
  explicit: ReadonlySet<string>;
}

export interface ProxyConfigSources extends ConfigSources {
  /** Values of `-c path_<prefix>_<setting>=<value>` (repeatable). */
  overrides?: string[];
}

/**
 * Normalizes a prefix written in any of the three forms: "__" stands for "/" (for environment
 * variable names, which shells cannot write with "/"), a leading "/" is added, and the result is
 * made canonical exactly as request paths are (src/core/path.ts: unreserved escapes decoded,
 * dot segments resolved, what has no canonical form refused), so that a prefix and a request
 * path are compared in one form. A trailing "/" is dropped (prefixes match whole path segments,
 * so "/static/" and "/static" are the same prefix).
 */
export function normalizePrefix(raw: string, key: string): string {
  const text = raw.replace(/__/g, '/');
  if (text === '') throw new ConfigError(key, 'the path prefix is empty');
  let p: string;
  try {
    p = canonicalPath(text.startsWith('/') ? text : `/${text}`);
  } catch (e) {
    if (!(e instanceof PathError)) throw e;
    throw new ConfigError(key, `the prefix ${JSON.stringify(raw)} is not a usable path: ${e.message}`);
  }
  return p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p;
}

interface RawOverride {
  prefix: string;
  setting: string;
  value: string;
  origin: string;
}

function parsePrefixSetting(
  rules: Map<string, Record<string, { value: unknown; rank: number }>>,
  o: RawOverride,
  rank: number,
) {
  const name = o.setting.toLowerCase();
  const setting = (prefixSettings as Record<string, Setting<unknown>>)[name];
  if (!setting)
    throw new ConfigError(
      o.origin,
      `unknown prefix setting ${JSON.stringify(o.setting)}; expected auth or upstream`,
    );
  const prefix = normalizePrefix(o.prefix, o.origin);
  let value: unknown;
  try {
    value = setting.parse(o.value);
  } catch (e) {
    throw new ConfigError(o.origin, (e as Error).message);
  }
  const rule = rules.get(prefix) ?? {};
  const prev = rule[name];
  if (!prev || prev.rank <= rank) rule[name] = { value, rank };
  rules.set(prefix, rule);
}

/** Splits `path_<prefix>_<setting>`: the setting is the text after the last "_". */
function splitPathKey(body: string, origin: string): { prefix: string; setting: string } {
  const at = body.lastIndexOf('_');
  if (at <= 0 || at === body.length - 1)
    throw new ConfigError(origin, 'expected path_<prefix>_<setting>, for example path_/static/_auth');
  return { prefix: body.slice(0, at), setting: body.slice(at + 1) };
}

/**
 * Loads `gatehouse proxy`'s settings: sections proxy, auth, redirect, acme and the path-prefix
 * overrides. Precedence flag > environment > file > default, for prefix settings too.
 */
export function loadProxyConfig(sources: ProxyConfigSources): ProxyConfig {
  const fileValues =
    sources.fileValues ?? (sources.file ? readConfigFile(sources.file) : new Map<string, string>());
  const explicit = new Set<string>();
  const sections = loadSections(
    { proxy: proxySection, auth: authSection, redirect: redirectSection, acme: acmeSection },
    { ...sources, fileValues },
    ['server', 'prefix'],
    explicit,
  );
  if ((sections.proxy.cert === '') !== (sections.proxy.key === ''))
    throw new ConfigError('proxy.cert', 'proxy.cert and proxy.key must be set together');

  const rules = new Map<string, Record<string, { value: unknown; rank: number }>>();
  // File: [prefix./static/] sections, flattened by readConfigFile to "prefix./static/.auth".
  for (const [key, value] of fileValues) {
    if (!key.startsWith('prefix.')) continue;
    const at = key.lastIndexOf('.');
    if (at <= 'prefix.'.length - 1)
      throw new ConfigError(
        key,
        'prefix settings belong in a [prefix.<path>] section, e.g. [prefix./static/]',
      );
    parsePrefixSetting(
      rules,
      { prefix: key.slice('prefix.'.length, at), setting: key.slice(at + 1), value, origin: key },
      1,
    );
  }
  // Environment: SVC_PATH_<prefix>_<SETTING>.
  for (const [name, value] of Object.entries(sources.env ?? {})) {
    if (!name.startsWith('SVC_PATH_') || value === undefined) continue;
    const { prefix, setting } = splitPathKey(name.slice('SVC_PATH_'.length), name);
    parsePrefixSetting(rules, { prefix, setting, value, origin: name }, 2);
  }
  // Flags: -c path_<prefix>_<setting>=<value>.
  for (const o of sources.overrides ?? []) {
    const eq = o.indexOf('=');
    const origin = `-c ${eq > 0 ? o.slice(0, eq) : o}`;
    if (eq <= 0 || !o.startsWith('path_'))
      throw new ConfigError(origin, 'expected -c path_<prefix>_<setting>=<value>');
    const { prefix, setting } = splitPathKey(o.slice('path_'.length, eq), origin);
    parsePrefixSetting(rules, { prefix, setting, value: o.slice(eq + 1), origin }, 3);
  }
  const prefixes: PrefixRule[] = [...rules.entries()]
    .map(([prefix, r]) => {
      const rule: PrefixRule = { prefix, match: pathMatchKey(prefix) };
      if (r.auth) rule.auth = r.auth.value as AuthMode;
      if (r.upstream) rule.upstream = r.upstream.value as string;
      return rule;
    })
    .sort((a, b) => b.prefix.length - a.prefix.length);
  return { ...sections, prefixes, explicit };
}

/** The settings marked `restart: true`, as [section, name]: a reload keeps their old values. */
export const RESTART_KEYS: [keyof ProxyConfig & string, string][] = [
  proxySection,
  authSection,
  redirectSection,
  acmeSection,
].flatMap((section) =>
  Object.values(section as Record<string, Setting<unknown>>)
    .filter((s) => s.restart === true)
    .map((s) => s.key.split('.') as [keyof ProxyConfig & string, string]),
);

/** Every proxy setting with a flag, keyed by its section.name key (flag names are unique across them). */
export const proxyFlagSettings: Record<string, Setting<unknown>> = Object.fromEntries(
  [proxySection, authSection, redirectSection, acmeSection].flatMap((s) =>
    Object.values(s as Record<string, Setting<unknown>>).map((x) => [x.key, x]),
  ),
);
