import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadProxyConfig, type ProxyConfigSources } from '../../src/config/proxy.js';
import type { AuthBackend } from '../../src/proxy/backend.js';
import { type RunningProxy, startProxy } from '../../src/proxy/run.js';
import { type Echo, startEcho } from './harness.js';

/** Reload (SIGHUP) without a service: only open prefixes are exercised. */
describe('settings reload', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gh-proxy-reload-'));
  const file = join(dir, 'proxy.ini');
  const logs: string[] = [];
  let echo: Echo;
  let p: RunningProxy;
  beforeAll(async () => {
    echo = await startEcho();
    writeFileSync(
      file,
      `[proxy]\nlisten = 127.0.0.1:0\ntls = false\nupstream = ${echo.url}\n[prefix./open/]\nauth = none\n`,
    );
    const sources: ProxyConfigSources = { file, env: {} };
    p = await startProxy(loadProxyConfig(sources), {
      logger: pino({ level: 'info' }, { write: (l: string) => void logs.push(l) }),
      sources,
      backend: { publicUrl: 'http://127.0.0.1:1' } as AuthBackend,
      register: false,
    });
  });
  afterAll(async () => {
    await p?.close();
    await echo?.close();
  });

  const status = async (path: string) => (await fetch(`${p.url}${path}`)).status;

  it('reads [proxy] listen and [prefix./open/] from the -C file', async () => {
    expect(p.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await status('/open/x')).toBe(200);
    expect(await status('/also/x')).toBe(401);
  });

  it('applies a changed file on reload, and keeps the old settings when the new file is bad', async () => {
    writeFileSync(
      file,
      `[proxy]\nlisten = 127.0.0.1:0\ntls = false\nupstream = ${echo.url}\n[prefix./open/]\nauth = none\n[prefix./also]\nauth = none\n`,
    );
    expect(p.reload()).toBeUndefined();
    expect(await status('/also/x')).toBe(200);
    writeFileSync(file, `[proxy]\nauth = sometimes\n[prefix./open/]\nauth = required\n`);
    const err = p.reload();
    expect(err?.message).toMatch(/proxy\.auth/);
    expect(logs.join('\n')).toMatch(/proxy\.auth: expected one of.*reload refused/);
    expect(await status('/open/x')).toBe(200);
    expect(await status('/also/x')).toBe(200);
  });

  it('applies proxy.trustedproxies on reload: forward auth answers the new list only', async () => {
    const ask = async () =>
      (
        await fetch(`${p.url}/.gatehouse/authz/forward-auth`, {
          headers: {
            'x-forwarded-method': 'GET',
            'x-forwarded-proto': 'https',
            'x-forwarded-host': 'wiki.example.com',
            'x-forwarded-uri': '/open/x',
          },
        })
      ).status;
    const base = `[proxy]\nlisten = 127.0.0.1:0\ntls = false\nupstream = ${echo.url}\n[prefix./open/]\nauth = none\n`;
    writeFileSync(file, base);
    expect(p.reload()).toBeUndefined();
    expect(await ask()).toBe(200); // loopback is trusted by default
    writeFileSync(file, base.replace('tls = false\n', 'tls = false\ntrustedproxies = 10.0.0.0/8\n'));
    expect(p.reload()).toBeUndefined();
    expect(await ask()).toBe(403);
    writeFileSync(file, base.replace('tls = false\n', 'tls = false\ntrustedproxies = 10.0.0.0/8 nonsense\n'));
    expect(p.reload()?.message).toMatch(/proxy\.trustedproxies/);
    expect(await ask()).toBe(403);
  });
});
