import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { loadProxyConfig } from '../../src/config/proxy.js';
import { HostRoutes, hostName, learnFrom } from '../../src/proxy/hosts.js';
import type { RunningProxy } from '../../src/proxy/run.js';
import type { RegisterResponse } from '../../src/wire/proxy.js';
import { backends } from '../helpers.js';
import { type Echo, serviceBackend, startEcho, startWorld, type World } from './harness.js';

/** A GET to the proxy with a Host header of our choosing (fetch cannot set Host). */
function hostGet(
  base: string,
  path: string,
  host: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: { tag: string; url: string; headers: Record<string, string> } }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}${path}`,
      { headers: { accept: 'application/json', ...headers, host } },
      (res) => {
        let body = '';
        res.on('data', (d) => {
          body += d;
        });
        res.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(body);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json: json as never });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Retries `check` until it holds or `ms` have passed (changes learned by heartbeat or reload). */
async function eventually(check: () => Promise<boolean>, ms = 5000): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

const silent = pino({ level: 'silent' });

describe('VirtualHost routing building blocks', () => {
  it('takes the name of a Host header: lower case, port removed, nothing else changed', () => {
    expect(hostName('Wiki.Example:8443')).toBe('wiki.example');
    expect(hostName('wiki.example:')).toBe('wiki.example');
    expect(hostName('WIKI.example')).toBe('wiki.example');
    expect(hostName('[::1]:80')).toBe('[::1]');
    expect(hostName('[::1]')).toBe('[::1]');
    expect(hostName('wiki.example.')).toBe('wiki.example.');
    expect(hostName('wiki.example:x')).toBe('wiki.example:x');
  });

  it('reads a register answer without throwing: bad upstreams drop their host, unknown modes are required', () => {
    const logs: string[] = [];
    const log = pino({ level: 'warn' }, { write: (l: string) => void logs.push(l) });
    const r = {
      AppID: 'a',
      AppName: 'a',
      RemoteAgentID: 'r',
      VirtualHosts: [],
      ProxyAuth: 'sometimes',
      Hosts: [
        { Name: 'Good.Test', Upstream: 'http://10.0.0.1:81/base', Auth: '' },
        { Name: 'creds.test', Upstream: 'http://u:p@10.0.0.1', Auth: 'none' },
        { Name: 'ftp.test', Upstream: 'ftp://u:p@files', Auth: 'none' },
        { Name: 'junk.test', Upstream: 42, Auth: 'none' },
        { Name: 'mode.test', Upstream: '', Auth: 'mfa' },
        { Name: 'plain.test', Upstream: '', Auth: '' },
        null,
        { Upstream: 'http://x' },
      ],
    } as unknown as RegisterResponse;
    const l = learnFrom(r, log);
    expect(l.appAuth).toBe('required');
    expect([...l.hosts]).toEqual([
      ['good.test', { auth: undefined, upstream: 'http://10.0.0.1:81/base' }],
      ['mode.test', { auth: 'required', upstream: undefined }],
    ]);
    const text = logs.join('\n');
    for (const h of ['creds.test', 'ftp.test', 'junk.test']) expect(text).toContain(`"host":"${h}"`);
    expect(text).not.toContain('u:p@');
    // An older service sends neither field: nothing learned.
    const old = learnFrom(
      { AppID: 'a', AppName: 'a', RemoteAgentID: 'r', VirtualHosts: ['x.test'] } as never,
      log,
    );
    expect(old.appAuth).toBeUndefined();
    expect(old.hosts.size).toBe(0);
  });

  it('orders the defaults: VirtualHost > proxy.auth set explicitly > App.ProxyAuth > required', () => {
    const learned = learnFrom(
      {
        ProxyAuth: 'optional',
        Hosts: [
          { Name: 'none.test', Upstream: '', Auth: 'none' },
          { Name: 'up.test', Upstream: 'http://up:1', Auth: '' },
        ],
      } as unknown as RegisterResponse,
      silent,
    );
    const unset = loadProxyConfig({ env: {} });
    const set = loadProxyConfig({ env: { SVC_PROXY_AUTH: 'required' } });
    expect(new HostRoutes(unset, undefined).defaultsFor('any.test')).toEqual({
      auth: 'required',
      upstream: 'http://localhost:8000',
    });
    const a = new HostRoutes(unset, learned);
    expect(a.defaultsFor('other.test').auth).toBe('optional');
    expect(a.defaultsFor('None.Test:443').auth).toBe('none');
    expect(a.defaultsFor('up.test')).toEqual({ auth: 'optional', upstream: 'http://up:1' });
    const b = new HostRoutes(set, learned);
    expect(b.defaultsFor('other.test').auth).toBe('required');
    expect(b.defaultsFor('none.test').auth).toBe('none');
    expect(b.defaultsFor('up.test')).toEqual({ auth: 'required', upstream: 'http://up:1' });
    // The same object for every request of a host: nothing is built per request.
    expect(b.defaultsFor('up.test')).toBe(b.defaultsFor('UP.test:8080'));
    expect(b.defaultsFor(undefined)).toBe(b.global);
  });
});

describe.each(backends())('VirtualHost routing against the service on %s', (backend) => {
  let w: World;
  let vh: Echo;
  let p: RunningProxy;

  const putObject = async (url: string, patch: Record<string, unknown>) => {
    const got = await w.s.req({ method: 'GET', url });
    const r = await w.s.req({
      method: 'PUT',
      url,
      payload: { ...(got.json() as Record<string, unknown>), ...patch },
      headers: { 'if-match': got.headers.etag as string },
    });
    expect([url, r.statusCode]).toEqual([url, 204]);
  };
  const makeHost = async (name: string, fields: Record<string, unknown>) => {
    const r = await w.s.req({
      method: 'POST',
      url: `/virtualhosts/${name}`,
      payload: { AppID: w.appId, ...fields },
    });
    expect([name, r.statusCode]).toEqual([name, 201]);
  };

  beforeAll(async () => {
    w = await startWorld(backend);
    vh = await startEcho('vh');
    await makeHost('vh.test', { Upstream: vh.url });
    await makeHost('open.test', { Auth: 'none' });
    await makeHost('ws.test', { Upstream: `${vh.url}/wsbase`, Auth: 'none' });
    // Another App's host: never learned by this proxy.
    const other = await w.s.req({ method: 'POST', url: '/apps', payload: { Name: 'other app' } });
    await makeHost('foreign.test', { AppID: other.headers['x-id'], Auth: 'none', Upstream: vh.url });
    p = await w.proxy({ overrides: ['path_/private/_auth=required', `path_/main/_upstream=${w.echo.url}`] });
  });
  afterAll(async () => {
    await w?.close();
    await vh?.close();
  });

  const key = () => ({ authorization: `Bearer ${w.userKey}` });

  it('register answers the App ProxyAuth and its VirtualHosts with Upstream and Auth', async () => {
    const r = await fetch(`${w.serviceUrl}/proxy/v1/register`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ Name: 'probe', Version: 't', Address: '' }),
    });
    const body = (await r.json()) as RegisterResponse;
    expect(body.ProxyAuth).toBe('required');
    expect([...body.VirtualHosts].sort()).toEqual(['open.test', 'vh.test', 'ws.test']);
    expect(body.Hosts.find((h) => h.Name === 'vh.test')).toEqual({
      Name: 'vh.test',
      Upstream: vh.url,
      Auth: '',
    });
    expect(body.Hosts.find((h) => h.Name === 'open.test')).toEqual({
      Name: 'open.test',
      Upstream: '',
      Auth: 'none',
    });
  });

  it("sends a VirtualHost's requests to its Upstream, chosen by the Host header", async () => {
    const r = await hostGet(p.url, '/page?x=1', 'vh.test', key());
    expect(r.status).toBe(200);
    expect(r.json.tag).toBe('vh');
    expect(r.json.url).toBe('/page?x=1');
    expect(r.json.headers.host).toBe('vh.test');
    expect(r.json.headers['x-service-user']).toBe(w.user.id);
    // The VirtualHost has no Auth: the default mode (required) holds there.
    expect((await hostGet(p.url, '/page', 'vh.test')).status).toBe(401);
    const main = await hostGet(p.url, '/page', new URL(p.url).host, key());
    expect(main.json.tag).toBe('echo');
  });

  it('a VirtualHost with Auth none lets anonymous requests through on that host only', async () => {
    const open = await hostGet(p.url, '/page', 'open.test');
    expect(open.status).toBe(200);
    expect(open.json.tag).toBe('echo'); // no Upstream of its own: proxy.upstream
    expect(open.json.headers['x-service-user']).toBeUndefined();
    expect((await hostGet(p.url, '/page', new URL(p.url).host)).status).toBe(401);
    expect((await hostGet(p.url, '/page', 'vh.test')).status).toBe(401);
    // A VirtualHost of another App is not this proxy's.
    const foreign = await hostGet(p.url, '/page', 'foreign.test');
    expect(foreign.status).toBe(401);
  });

  it('a path-prefix override beats the VirtualHost defaults, setting by setting', async () => {
    expect((await hostGet(p.url, '/private/x', 'open.test')).status).toBe(401);
    const priv = await hostGet(p.url, '/private/x', 'open.test', key());
    expect(priv.status).toBe(200);
    // /main sets only the upstream: the host's mode (none) still applies, with the prefix's upstream.
    const main = await hostGet(p.url, '/main/x', 'ws.test');
    expect(main.status).toBe(200);
    expect(main.json.tag).toBe('echo');
    expect(main.json.url).toBe('/main/x');
  });

  it('abuse: a Host differing only in case or port maps to its VirtualHost; unknown Hosts get the global defaults', async () => {
    for (const host of ['OPEN.TEST', 'Open.Test:8443', 'open.test:']) {
      const r = await hostGet(p.url, '/x', host);
      expect([host, r.status]).toEqual([host, 200]);
    }
    const vhCase = await hostGet(p.url, '/x', 'VH.test:1', key());
    expect(vhCase.json.tag).toBe('vh');
    for (const host of [
      'open.test.',
      'xopen.test',
      'open.test.evil',
      'open.test:x',
      'open',
      '127.0.0.1',
      '[::1]:80',
    ]) {
      const r = await hostGet(p.url, '/x', host);
      expect([host, r.status]).toEqual([host, 401]);
      const k = await hostGet(p.url, '/x', host, key());
      expect([host, k.json?.tag]).toEqual([host, 'echo']);
    }
  });

  it('routes websocket upgrades by Host the same way', async () => {
    const wsUrl = `${p.url.replace('http', 'ws')}/ws/chat`;
    const ws = new WebSocket(wsUrl, { headers: { host: 'WS.test' } });
    const first = await new Promise<string>((resolve, reject) => {
      ws.once('message', (m) => resolve(m.toString()));
      ws.once('error', reject);
    });
    ws.close();
    expect(JSON.parse(first)).toEqual({ hello: null, url: '/wsbase/ws/chat' });
    const refused = new WebSocket(wsUrl, { headers: { host: 'vh.test' } });
    const status = await new Promise<number>((resolve) => {
      refused.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      refused.on('error', () => resolve(-1));
    });
    expect(status).toBe(401);
  });

  it('App.ProxyAuth applies when proxy.auth is not set, and not when it is set explicitly', async () => {
    await putObject(`/apps/${w.appId}`, { ProxyAuth: 'optional' });
    try {
      const unset = await w.proxy();
      const anon = await hostGet(unset.url, '/x', 'main.test');
      expect(anon.status).toBe(200);
      expect(anon.json.headers['x-service-user']).toBeUndefined();
      const ident = await hostGet(unset.url, '/x', 'main.test', key());
      expect(ident.json.headers['x-service-user']).toBe(w.user.id);
      // The VirtualHost's own mode still beats it; so does a prefix.
      expect((await hostGet(unset.url, '/x', 'open.test')).status).toBe(200);
      // Set explicitly, even to its default value, in any of the three places: proxy.auth wins.
      const file = join(mkdtempSync(join(tmpdir(), 'gh-proxy-hosts-')), 'proxy.ini');
      writeFileSync(file, '[proxy]\nauth = required\n');
      for (const [where, sources] of [
        ['env', { env: { SVC_PROXY_AUTH: 'required' } }],
        ['flag', { flags: { auth: 'required' } }],
        ['file', { file }],
      ] as const) {
        const set = await w.proxy(sources);
        expect([where, (await hostGet(set.url, '/x', 'main.test')).status]).toEqual([where, 401]);
        expect([where, (await hostGet(set.url, '/x', 'open.test')).status]).toEqual([where, 200]);
      }
      const looser = await w.proxy({ env: { SVC_PROXY_AUTH: 'none' } });
      expect((await hostGet(looser.url, '/x', 'main.test')).status).toBe(200);
    } finally {
      await putObject(`/apps/${w.appId}`, { ProxyAuth: 'required' });
    }
  });

  it('learns changes at the service at the next heartbeat, and at once on reload', async () => {
    const q = await w.proxy({}, { heartbeatMs: 100 });
    expect((await hostGet(q.url, '/x', 'late.test')).status).toBe(401);
    await makeHost('late.test', { Auth: 'none', Upstream: vh.url });
    expect(await eventually(async () => (await hostGet(q.url, '/x', 'late.test')).status === 200)).toBe(true);
    expect((await hostGet(q.url, '/x', 'late.test')).json.tag).toBe('vh');
    await putObject('/virtualhosts/late.test', { Auth: 'required', Upstream: '' });
    expect(await eventually(async () => (await hostGet(q.url, '/x', 'late.test')).status === 401)).toBe(true);
    expect((await hostGet(q.url, '/x', 'late.test', key())).json.tag).toBe('echo');

    // Default heartbeat (5 minutes): only the reload (SIGHUP) asks the service again.
    const slow = await w.proxy();
    await putObject('/virtualhosts/late.test', { Auth: 'none' });
    await new Promise((r) => setTimeout(r, 300));
    expect((await hostGet(slow.url, '/x', 'late.test')).status).toBe(401);
    expect(slow.reload()).toBeUndefined();
    expect(await eventually(async () => (await hostGet(slow.url, '/x', 'late.test')).status === 200)).toBe(
      true,
    );
  });

  it('keeps what it learned while the service cannot be asked; knows nothing (required) before', async () => {
    let down = false;
    const backend = serviceBackend(w, (real) => ({
      register: (r) => (down ? Promise.reject(new Error('connect ECONNREFUSED')) : real.register(r)),
    }));
    try {
      const before = w.logs.length;
      const q = await w.proxy({}, { backend, heartbeatMs: 50 });
      expect((await hostGet(q.url, '/x', 'open.test')).status).toBe(200);
      down = true;
      expect(
        await eventually(async () =>
          /could not register with the service/.test(w.logs.slice(before).join('\n')),
        ),
      ).toBe(true);
      expect((await hostGet(q.url, '/x', 'open.test')).status).toBe(200);
      expect((await hostGet(q.url, '/x', 'vh.test', key())).json.tag).toBe('vh');
      // A SIGHUP reload during the outage keeps it too (and applies the new settings).
      expect(q.reload()).toBeUndefined();
      await new Promise((r) => setTimeout(r, 100));
      expect((await hostGet(q.url, '/x', 'open.test')).status).toBe(200);
      down = false;

      // A first registration that fails is retried soon, not only at the next heartbeat.
      down = true;
      const late = await w.proxy({}, { backend, firstRetryMs: 50 });
      expect((await hostGet(late.url, '/x', 'open.test')).status).toBe(401);
      down = false;
      // Well before the next heartbeat (5 minutes): the 50 ms retry brought it.
      expect(await eventually(async () => (await hostGet(late.url, '/x', 'open.test')).status === 200)).toBe(
        true,
      );

      // A proxy that never reached the service: no VirtualHost, default mode required.
      await putObject(`/apps/${w.appId}`, { ProxyAuth: 'none' });
      const never = await w.proxy({ env: { SVC_AUTH_SERVER: 'http://127.0.0.1:1' } });
      expect((await hostGet(never.url, '/x', 'open.test')).status).toBe(401);
      expect((await hostGet(never.url, '/x', 'main.test')).status).toBe(401);
    } finally {
      await putObject(`/apps/${w.appId}`, { ProxyAuth: 'required' });
      await backend.close();
    }
  });
});
