import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/load.js';
import { DEFAULT_ACME_SERVER, loadProxyConfig, RESTART_KEYS } from '../../src/config/proxy.js';
import { routeFor } from '../../src/config/routing.js';
import { canonicalPath as normalizePath } from '../../src/core/path.js';

const dir = mkdtempSync(join(tmpdir(), 'gh-proxy-config-'));
let n = 0;
const file = (text: string) => {
  const p = join(dir, `c${n++}.ini`);
  writeFileSync(p, text);
  return p;
};

describe('proxy settings', () => {
  it('marks the settings that change only at restart on their declarations (RESTART_KEYS)', () => {
    // The address, TLS material, cookie key, back channel and ACME account: a reload keeps these.
    expect(RESTART_KEYS.map(([s, k]) => `${s}.${k}`).sort()).toEqual(
      [
        'proxy.listen',
        'proxy.tls',
        'proxy.cert',
        'proxy.key',
        'proxy.cookiekey',
        'proxy.metrics',
        'proxy.workers',
        'auth.token',
        'auth.server',
        'redirect.listen',
        'acme.server',
        'acme.email',
        'acme.dir',
        'acme.cacert',
      ].sort(),
    );
  });

  it('has the defaults of the spec table', () => {
    const c = loadProxyConfig({ env: {} });
    expect(c.proxy).toEqual({
      listen: ':443',
      tls: true,
      cert: '',
      key: '',
      name: '',
      auth: 'required',
      upstream: 'http://localhost:8000',
      privateaddress: '',
      cookiekey: '',
      metrics: '',
      assertionkey: '',
      cookiedomain: '',
      trustedproxies: '127.0.0.1/8, ::1',
      workers: availableParallelism(),
      bodyminrate: 1024,
      bodytimeout: 20,
    });
    expect(c.auth.token).toBe('');
    expect(c.redirect.listen).toBe(':80');
    expect(c.acme.server).toBe(DEFAULT_ACME_SERVER);
    expect(c.acme.email).toBe('');
    expect(c.prefixes).toEqual([]);
  });

  it('refuses a proxy.assertionkey that is not a P-256 private key, naming the setting', () => {
    expect(() => loadProxyConfig({ env: { SVC_PROXY_ASSERTIONKEY: '/no/such/file.pem' } })).toThrow(
      /proxy\.assertionkey/,
    );
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    });
    expect(() => loadProxyConfig({ env: { SVC_PROXY_ASSERTIONKEY: String(rsa) } })).toThrow(/P-256/);
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    });
    expect(loadProxyConfig({ env: { SVC_PROXY_ASSERTIONKEY: String(ec) } }).proxy.assertionkey).toContain(
      'BEGIN',
    );
  });

  it('reads every key from file, env and flag with precedence flag > env > file', () => {
    const f = file(
      '[proxy]\nlisten = :9001\nauth = optional\nupstream = http://a:1\n[auth]\ntoken = t1\n[redirect]\nlisten=:81\n[acme]\nemail = a@b.c\n',
    );
    expect(loadProxyConfig({ file: f, env: {} }).proxy.listen).toBe(':9001');
    expect(loadProxyConfig({ file: f, env: { SVC_PROXY_LISTEN: ':9002' } }).proxy.listen).toBe(':9002');
    const c = loadProxyConfig({ file: f, env: { SVC_PROXY_LISTEN: ':9002' }, flags: { listen: ':9003' } });
    expect(c.proxy.listen).toBe(':9003');
    expect(c.proxy.auth).toBe('optional');
    expect(c.auth.token).toBe('t1');
    expect(c.redirect.listen).toBe(':81');
    expect(c.acme.email).toBe('a@b.c');
    const env = {
      SVC_PROXY_TLS: 'false',
      SVC_PROXY_NAME: 'app.example.com',
      SVC_PROXY_PRIVATEADDRESS: 'http://10.0.0.1:8443',
      SVC_PROXY_COOKIEDOMAIN: 'example.com',
      SVC_AUTH_TOKEN: 'tok',
      SVC_AUTH_SERVER: 'https://id.example.com',
      SVC_REDIRECT_LISTEN: ':8080',
      SVC_ACME_SERVER: 'https://localhost:14000/dir',
      SVC_ACME_EMAIL: 'x@y.z',
    };
    const e = loadProxyConfig({ env });
    expect([e.proxy.tls, e.proxy.name, e.proxy.privateaddress, e.proxy.cookiedomain]).toEqual([
      false,
      'app.example.com',
      'http://10.0.0.1:8443',
      'example.com',
    ]);
    expect([e.auth.token, e.auth.server, e.redirect.listen, e.acme.server, e.acme.email]).toEqual([
      'tok',
      'https://id.example.com',
      ':8080',
      'https://localhost:14000/dir',
      'x@y.z',
    ]);
    const fl = loadProxyConfig({
      env: {},
      flags: {
        tls: 'false',
        name: 'n.example',
        token: 'ft',
        'auth-server': 'http://s:1',
        'redirect-listen': ':82',
        'acme-server': 'http://a/d',
        'acme-email': 'q@r.s',
        privateaddress: 'http://p:1',
        cookiekey: 'k',
        auth: 'none',
        upstream: 'http://u:1',
      },
    });
    expect(fl.proxy).toMatchObject({
      tls: false,
      name: 'n.example',
      privateaddress: 'http://p:1',
      cookiekey: 'k',
      auth: 'none',
      upstream: 'http://u:1',
    });
    expect(fl.auth).toEqual({ token: 'ft', server: 'http://s:1' });
    expect(fl.redirect.listen).toBe(':82');
  });

  it('stops on a bad setting, naming the key', () => {
    expect(() => loadProxyConfig({ env: { SVC_PROXY_AUTH: 'maybe' } })).toThrow(
      /proxy\.auth.*SVC_PROXY_AUTH/,
    );
    expect(() => loadProxyConfig({ env: {}, flags: { upstream: 'ftp://x' } })).toThrow(/proxy\.upstream/);
    // A URL with credentials is refused without printing them.
    let message = '';
    try {
      loadProxyConfig({ env: { SVC_PROXY_UPSTREAM: 'ftp://ops:hunter2@app:8000' } });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/proxy\.upstream.*user name or password/);
    expect(message).not.toContain('hunter2');
    // The URL parser would drop these silently; the raw value goes into X-Service-Access-Check.
    expect(() =>
      loadProxyConfig({ env: { SVC_PROXY_PRIVATEADDRESS: 'http://10.0.0.1\r\nX-Service-User: admin' } }),
    ).toThrow(/proxy\.privateaddress.*control characters/);
    expect(() => loadProxyConfig({ file: file('[proxy]\nlisten = nope\n'), env: {} })).toThrow(
      /proxy\.listen/,
    );
    expect(() => loadProxyConfig({ file: file('[proxy]\nlisen = :1\n'), env: {} })).toThrow(
      /proxy\.lisen: unknown/,
    );
    expect(() => loadProxyConfig({ env: { SVC_PATH_x_COLOR: 'red' } })).toThrow(ConfigError);
    expect(() => loadProxyConfig({ env: { SVC_PATH_x_COLOR: 'red' } })).toThrow(/SVC_PATH_x_COLOR/);
    expect(() => loadProxyConfig({ env: {}, overrides: ['path_/a/_auth=sometimes'] })).toThrow(
      /-c path_\/a\/_auth/,
    );
    expect(() => loadProxyConfig({ file: file('[prefix./a/]\nauth = x\n'), env: {} })).toThrow(
      /prefix\.\/a\/\.auth/,
    );
    expect(() => loadProxyConfig({ env: { SVC_PROXY_CERT: '/x.pem' } })).toThrow(/proxy\.cert/);
  });

  it('knows which settings were given (file, env or flag) rather than defaulted', () => {
    expect(loadProxyConfig({ env: {} }).explicit.has('proxy.auth')).toBe(false);
    // Given as the default value is still given: it beats the App's ProxyAuth.
    expect(loadProxyConfig({ env: { SVC_PROXY_AUTH: 'required' } }).explicit.has('proxy.auth')).toBe(true);
    expect(loadProxyConfig({ env: {}, flags: { auth: 'none' } }).explicit.has('proxy.auth')).toBe(true);
    const c = loadProxyConfig({ file: file('[proxy]\nauth = optional\n'), env: {} });
    expect([...c.explicit]).toEqual(['proxy.auth']);
  });

  it('reads prefix overrides in all three forms, flag > env > file', () => {
    const f = file(
      '[prefix./static/]\nauth = none\nupstream = http://files:1\n[prefix./a.b/]\nauth = optional\n[prefix./]\nupstream = http://root:1\n',
    );
    const c = loadProxyConfig({
      file: f,
      env: {
        SVC_PATH_static_AUTH: 'optional',
        SVC_PATH_api__v1_UPSTREAM: 'http://api:1',
        'SVC_PATH_/x_y/_AUTH': 'none',
      },
      overrides: ['path_/static/_auth=required', 'path_/my_dir/_upstream=http://md:1'],
    });
    const byPrefix = Object.fromEntries(c.prefixes.map((p) => [p.prefix, p]));
    expect(byPrefix['/static']).toEqual({
      prefix: '/static',
      match: '/static',
      auth: 'required',
      upstream: 'http://files:1',
    });
    expect(byPrefix['/a.b']).toEqual({ prefix: '/a.b', match: '/a.b', auth: 'optional' });
    expect(byPrefix['/api/v1']).toEqual({ prefix: '/api/v1', match: '/api/v1', upstream: 'http://api:1' });
    expect(byPrefix['/x_y']).toEqual({ prefix: '/x_y', match: '/x_y', auth: 'none' });
    expect(byPrefix['/my_dir']).toEqual({ prefix: '/my_dir', match: '/my_dir', upstream: 'http://md:1' });
    expect(byPrefix['/']).toEqual({ prefix: '/', match: '/', upstream: 'http://root:1' });
  });

  it('longest prefix wins, on whole segments of the normalized path', () => {
    const c = loadProxyConfig({
      env: {},
      overrides: [
        'path_/a_auth=none',
        'path_/a/b_auth=optional',
        'path_/public/_auth=none',
        'path_/a/b_upstream=http://ab:1',
      ],
    });
    expect(routeFor(c, '/a/b/x')).toEqual({ prefix: '/a/b', auth: 'optional', upstream: 'http://ab:1' });
    expect(routeFor(c, '/a/x')).toMatchObject({
      prefix: '/a',
      auth: 'none',
      upstream: 'http://localhost:8000',
    });
    expect(routeFor(c, '/a')).toMatchObject({ auth: 'none' });
    expect(routeFor(c, '/ab')).toMatchObject({ prefix: undefined, auth: 'required' });
    expect(routeFor(c, '/publicity')).toMatchObject({ auth: 'required' });
    expect(routeFor(c, normalizePath('/public/../admin'))).toMatchObject({ auth: 'required' });
    expect(routeFor(c, normalizePath('/public/./x'))).toMatchObject({ auth: 'none' });
    expect(normalizePath('/a//b/../../../c/')).toBe('/c/');
    // A host's defaults (its VirtualHost) replace proxy.auth/proxy.upstream; prefixes still win.
    const host = { auth: 'optional', upstream: 'http://vh:1' } as const;
    expect(routeFor(c, '/a/x', host)).toEqual({ prefix: '/a', auth: 'none', upstream: 'http://vh:1' });
    expect(routeFor(c, '/a/b/x', host)).toEqual({
      prefix: '/a/b',
      auth: 'optional',
      upstream: 'http://ab:1',
    });
    expect(routeFor(c, '/other', host)).toEqual({
      prefix: undefined,
      auth: 'optional',
      upstream: 'http://vh:1',
    });
  });
});
