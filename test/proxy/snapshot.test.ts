import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadProxyConfig, type ProxyConfigSources } from '../../src/config/proxy.js';
import type { AuthBackend } from '../../src/proxy/backend.js';
import { type RunningProxy, startProxy } from '../../src/proxy/run.js';
import type { WireIdentity } from '../../src/wire/proxy.js';
import { type Echo, startEcho } from './harness.js';

const TOKEN = `gp.app1.${'t'.repeat(43)}`;
const key = (c: string) => `gv${c.repeat(54)}`;
const identity = (id: string): WireIdentity => ({
  UserID: id,
  UserName: id,
  Email: `${id}@example.com`,
  FullName: id,
});

/**
 * The proxy's settings are one snapshot, read once per request (src/proxy/snapshot.ts): a reload
 * while a request waits on the service never gives that request part of the new settings.
 */
describe('settings snapshot', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gh-proxy-snapshot-'));
  const file = join(dir, 'proxy.ini');
  let echoA: Echo;
  let echoB: Echo;
  let p: RunningProxy;
  /** API key lookups the test holds: released by resolving them. */
  const held = new Map<string, (id: WireIdentity) => void>();
  const settings = (upstream: string, privateAddress: string) =>
    `[proxy]\nlisten = 127.0.0.1:0\ntls = false\nupstream = ${upstream}\nprivateaddress = ${privateAddress}\n[auth]\ntoken = ${TOKEN}\n`;

  beforeAll(async () => {
    echoA = await startEcho('A');
    echoB = await startEcho('B');
    writeFileSync(file, settings(echoA.url, 'http://a.internal:1'));
    const sources: ProxyConfigSources = { file, env: {} };
    const backend = {
      publicUrl: 'http://127.0.0.1:1',
      apiKey: (k: string) =>
        k === key('h')
          ? new Promise<WireIdentity>((resolve) => held.set(k, resolve))
          : Promise.resolve(identity(`user-${k.slice(2, 3)}`)),
    } as Partial<AuthBackend> as AuthBackend;
    p = await startProxy(loadProxyConfig(sources), {
      logger: pino({ level: 'silent' }),
      sources,
      backend,
      register: false,
    });
  });
  afterAll(async () => {
    await p?.close();
    await echoA?.close();
    await echoB?.close();
  });

  const get = async (k: string) => {
    const r = await fetch(`${p.url}/app/x`, { headers: { authorization: `Bearer ${k}` } });
    expect(r.status).toBe(200);
    const body = (await r.json()) as { tag: string; headers: Record<string, string> };
    return { upstream: body.tag, accessCheck: body.headers['x-service-access-check'] ?? '' };
  };

  it('is frozen, and a reload replaces it whole, leaving the old one as it was', () => {
    const before = p.proxy.current;
    expect(Object.isFrozen(before)).toBe(true);
    expect(Object.isFrozen(before.config)).toBe(true);
    expect(Object.isFrozen(before.config.proxy)).toBe(true);
    expect(Object.isFrozen(before.config.prefixes)).toBe(true);
    expect(() => {
      (before.config.proxy as { upstream: string }).upstream = 'http://elsewhere';
    }).toThrow(TypeError);
    writeFileSync(file, settings(echoB.url, 'http://b.internal:2'));
    expect(p.reload()).toBeUndefined();
    expect(p.proxy.current).not.toBe(before);
    expect(p.proxy.current.config.proxy.upstream).toBe(echoB.url);
    expect(before.config.proxy.upstream).toBe(echoA.url);
    writeFileSync(file, settings(echoA.url, 'http://a.internal:1'));
    expect(p.reload()).toBeUndefined();
  });

  it('gives a request held on the service during a reload only the settings it started with', async () => {
    // Started under A; its API key lookup waits on the service.
    const first = get(key('h'));
    const deadline = Date.now() + 5_000;
    while (!held.has(key('h')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(held.has(key('h'))).toBe(true);
    // Reloaded to B while it waits: another upstream and another address for access checks.
    writeFileSync(file, settings(echoB.url, 'http://b.internal:2'));
    expect(p.reload()).toBeUndefined();
    // A request started after the reload sees B wholly...
    const second = await get(key('s'));
    expect(second.upstream).toBe('B');
    expect(second.accessCheck).toMatch(/^http:\/\/b\.internal:2\/\.gatehouse\/access-check\//);
    // ...and the held one, released now, A wholly: its upstream and its access-check address.
    held.get(key('h'))?.(identity('held'));
    const got = await first;
    expect(got.upstream).toBe('A');
    expect(got.accessCheck).toMatch(/^http:\/\/a\.internal:1\/\.gatehouse\/access-check\//);
  });
});
