import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { RunningProxy } from '../../src/proxy/run.js';
import { backends, jsonLines } from '../helpers.js';
import { basic, startEcho, startWorld, type World } from './harness.js';

// Longer than ~400 lines on purpose: the proxy's behaviour end to end (modes, headers, cookies,
// sign-in, forwarding) against one shared world of service, upstream and proxy; the attack cases
// are in test/security/, one file per mechanism.
const FORGED = {
  'x-service-user': 'forged',
  'x-service-email': 'evil@example.com',
  'x-service-user-name': 'root',
  'x-service-full-name': 'Evil',
  'x-service-auth-type': 'bearer',
  'x-service-session-expires': 'Fri, 01 Jan 2100 00:00:00 GMT',
  'x-service-access-check': 'http://evil/',
  'x-service-anything': 'x',
  'x-remote-user': 'evil@example.com',
  'x-forwarded-for': '6.6.6.6',
  'x-forwarded-host': 'evil.example',
  'x-forwarded-proto': 'gopher',
  forwarded: 'for=6.6.6.6',
};

type Echoed = {
  tag: string;
  method: string;
  url: string;
  headers: Record<string, string>;
  size: number;
  sha256: string;
};

async function get(url: string, headers: Record<string, string> = {}, init: RequestInit = {}) {
  const res = await fetch(url, { headers, redirect: 'manual', ...init });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json: json as Echoed };
}

/** Sends raw bytes to 127.0.0.1:port; resolves with what came back until the server closed. */
function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.end(text));
    let got = '';
    sock.setEncoding('latin1');
    sock.on('data', (d) => {
      got += d;
    });
    sock.on('close', () => resolve(got));
    sock.on('error', reject);
  });
}

describe.each(backends())('access proxy against the service on %s', (backend) => {
  let w: World;
  let p: RunningProxy;
  beforeAll(async () => {
    w = await startWorld(backend);
    p = await w.proxy({
      overrides: ['path_/public/_auth=none', 'path_/opt_auth=optional', 'path_/public/deep/_auth=required'],
    });
  });
  afterAll(async () => w?.close());

  it('required (default): a non-browser without credentials gets 401 and the upstream sees nothing', async () => {
    const before = w.echo.hits.length;
    const r = await get(`${p.url}/app/page`, { accept: 'application/json' });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toMatch(/Bearer realm="gatehouse"/);
    expect(w.echo.hits.length).toBe(before);
    const post = await get(`${p.url}/app/page`, { accept: 'text/html' }, { method: 'POST', body: 'x' });
    expect(post.status).toBe(401);
  });

  it('required: a browser is sent to the service sign-in with a state cookie and our callback', async () => {
    const r = await get(`${p.url}/app/page?x=1`, { accept: 'text/html,application/xhtml+xml' });
    expect(r.status).toBe(302);
    const loc = new URL(r.headers.get('location') as string);
    expect(loc.origin).toBe(w.serviceUrl);
    expect(loc.pathname).toBe('/proxy/v1/signin');
    expect(loc.searchParams.get('app')).toBe(w.appId);
    expect(loc.searchParams.get('return')).toBe(
      `${p.url.replace('127.0.0.1', '127.0.0.1')}/.gatehouse/callback`,
    );
    const state = loc.searchParams.get('state') as string;
    const cookie = r.headers.get('set-cookie') as string;
    expect(cookie).toMatch(/^gatehouse_proxy_state=/);
    expect(cookie).toContain(state);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Lax/);
    const saved = Buffer.from(cookie.split(';')[0]?.split('.')[1] ?? '', 'base64url').toString();
    expect(saved).toBe('/app/page?x=1');
  });

  it('forwards a Bearer API key as that user, with exactly the identity headers', async () => {
    const r = await get(`${p.url}/app/x?y=1`, { authorization: `Bearer ${w.userKey}`, ...FORGED });
    expect(r.status).toBe(200);
    const h = r.json.headers;
    expect(r.json.url).toBe('/app/x?y=1');
    expect(h['x-service-user']).toBe(w.user.id);
    expect(h['x-service-email']).toBe('ada@example.com');
    expect(h['x-service-user-name']).toBe('ada');
    expect(h['x-service-full-name']).toBe('Ada Lovelace');
    expect(h['x-service-auth-type']).toBe('bearer');
    expect(h['x-remote-user']).toBe('ada@example.com');
    expect(h['x-forwarded-for']).toBe('127.0.0.1');
    expect(h['x-service-session-expires']).toBeUndefined(); // the key never expires
    expect(h['x-service-anything']).toBeUndefined();
    expect(Buffer.from((h.authorization as string).replace(/^Basic /, ''), 'base64').toString()).toBe(
      'ada@example.com:',
    );
    const check = new URL(h['x-service-access-check'] as string);
    expect(check.origin).toBe(p.url);
    expect(check.pathname).toMatch(/^\/\.gatehouse\/access-check\/[A-Za-z0-9_-]{32}$/);
  });

  it('accepts the key as HTTP Basic user name (blank password) and as password', async () => {
    for (const auth of [basic(w.userKey, ''), basic('anything', w.userKey), basic('', w.userKey)]) {
      const r = await get(`${p.url}/b`, { authorization: auth });
      expect(r.status).toBe(200);
      expect(r.json.headers['x-service-user']).toBe(w.user.id);
      expect(r.json.headers['x-service-auth-type']).toBe('bearer');
    }
    // Key as user name with a non-blank password is not one of the accepted forms.
    expect((await get(`${p.url}/b`, { authorization: basic(w.userKey, 'pw') })).status).toBe(401);
  });

  it('refuses keys without scope user or admin, and unknown keys, without reaching the upstream', async () => {
    const audit = await w.s.keyFor(['audit'], w.user.id);
    const sync = await w.s.keyFor(['sync'], w.user.id);
    const admin = await w.s.keyFor(['admin', 'audit'], w.user.id);
    const before = w.echo.hits.length;
    for (const k of [audit, sync, `gv${'A'.repeat(54)}`]) {
      const r = await get(`${p.url}/c`, { authorization: `Bearer ${k}` });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toMatch(/invalid_token/);
    }
    expect(w.echo.hits.length).toBe(before);
    expect((await get(`${p.url}/c`, { authorization: `Bearer ${admin}` })).status).toBe(200);
  });

  it('strips forged identity headers in every mode; anonymous requests carry none', async () => {
    for (const path of ['/public/x', '/opt/x']) {
      const r = await get(`${p.url}${path}`, { ...FORGED, authorization: 'Basic dXNlcjpwYXNz' });
      expect(r.status).toBe(200);
      const h = r.json.headers;
      for (const k of Object.keys(FORGED))
        if (
          !['x-service-access-check', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto'].includes(k)
        )
          expect(h[k]).toBeUndefined();
      expect(h['x-forwarded-for']).toBe('127.0.0.1');
      expect(h['x-forwarded-proto']).toBe('http');
      expect(h['x-forwarded-host']).toBe(new URL(p.url).host);
      expect(h['x-service-access-check']).toMatch(/\/\.gatehouse\/access-check\//);
      // Mode none: the client's own (not a Gatehouse key) Authorization is the app's and passes.
      // Optional: an Authorization reaching the app is the proxy's synthetic one or none, since a
      // client's Basic could pass for the synthetic header.
      expect(h.authorization).toBe(path === '/public/x' ? 'Basic dXNlcjpwYXNz' : undefined);
    }
  });

  it('none forwards anonymously; optional forwards anonymous and identified requests', async () => {
    const none = await get(`${p.url}/public/page`, { authorization: `Bearer ${w.userKey}` });
    expect(none.status).toBe(200);
    expect(none.json.headers['x-service-user']).toBeUndefined();
    const anon = await get(`${p.url}/opt/page`);
    expect(anon.status).toBe(200);
    expect(anon.json.headers['x-service-user']).toBeUndefined();
    const ident = await get(`${p.url}/opt/page`, { authorization: `Bearer ${w.userKey}` });
    expect(ident.json.headers['x-service-user']).toBe(w.user.id);
    // A bad key is refused even where identity is optional.
    expect((await get(`${p.url}/opt/page`, { authorization: `Bearer gv${'B'.repeat(54)}` })).status).toBe(
      401,
    );
  });

  it('decides on the normalized path: /public/../admin does not borrow /public', async () => {
    const paths = [
      '/public/../admin',
      '/public/%2e%2e/admin',
      '/public/%2E%2E/admin',
      '/public/./../admin',
      '/publicity',
      '/public/deep/x',
    ];
    for (const path of paths) {
      const r = await new Promise<number>((resolve, reject) => {
        const req = http.request(`${p.url}${path}`, { headers: { accept: 'application/json' } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
      expect([path, r]).toEqual([path, 401]);
    }
    const enc = await new Promise<number>((resolve) => {
      http.get(`${p.url}/public/..%2fadmin`, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
    });
    expect(enc).toBe(400);
    // The upstream gets the normalized path the decision was made on.
    const ok = await new Promise<Echoed>((resolve) => {
      http.get(`${p.url}/x/../public/./y`, (res) => {
        let b = '';
        res.on('data', (d) => {
          b += d;
        });
        res.on('end', () => resolve(JSON.parse(b)));
      });
    });
    expect(ok.url).toBe('/public/y');
  });

  it('per-prefix upstream and the three override forms reach their targets', async () => {
    const second = await startEcho('second');
    try {
      const q = await w.proxy({
        overrides: [`path_/two/_upstream=${second.url}`],
        env: { SVC_PATH_envopen_AUTH: 'none' },
        file: undefined,
      });
      const two = await get(`${q.url}/two/x`, { authorization: `Bearer ${w.userKey}` });
      expect(two.json.tag).toBe('second');
      expect(two.json.url).toBe('/two/x');
      const one = await get(`${q.url}/twox`, { authorization: `Bearer ${w.userKey}` });
      expect(one.json.tag).toBe('echo');
      expect((await get(`${q.url}/envopen/a`)).status).toBe(200);
      expect((await get(`${q.url}/other`)).status).toBe(401);
    } finally {
      await second.close();
    }
  });

  it('streams request and response bodies and does not forward the proxy cookie', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 7);
    const up = await get(
      `${p.url}/upload`,
      { authorization: `Bearer ${w.userKey}`, 'content-type': 'application/octet-stream' },
      { method: 'PUT', body: big },
    );
    expect(up.json.size).toBe(big.length);
    expect(up.json.sha256).toBe(createHash('sha256').update(big).digest('hex'));
    const s = await get(`${p.url}/stream`, {
      authorization: `Bearer ${w.userKey}`,
      cookie: 'a=1; gatehouse_proxy=abc; gatehouse_proxy_state=s; b=2',
    });
    expect(s.text).toBe('chunk0\nchunk1\nchunk2\nchunk3\nchunk4\n');
    expect(s.headers.get('set-cookie')).toBe('app=1; Path=/');
    const c = await get(`${p.url}/cookies`, {
      authorization: `Bearer ${w.userKey}`,
      cookie: 'a=1; gatehouse_proxy=abc; b=2',
    });
    expect(c.json.headers.cookie).toBe('a=1; b=2');
    const only = await get(`${p.url}/cookies`, {
      authorization: `Bearer ${w.userKey}`,
      cookie: 'gatehouse_proxy=abc',
    });
    expect(only.json.headers.cookie).toBeUndefined();
  });

  it('re-frames chunked uploads, answers HEAD without a body, and drops hop-by-hop headers both ways', async () => {
    const { port } = new URL(p.url);
    // A chunked upload (no Content-Length) with a Connection-named header that must not pass.
    const echoed = await new Promise<{ status: number; body: Echoed }>((resolve, reject) => {
      const r = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/chunked',
          headers: {
            authorization: `Bearer ${w.userKey}`,
            connection: 'keep-alive, x-hop',
            'x-hop': 'secret',
            'x-kept': 'yes',
          },
        },
        (res) => {
          let t = '';
          res.on('data', (c) => {
            t += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(t) }));
        },
      );
      r.on('error', reject);
      r.write('hello ');
      setTimeout(() => r.end('world'), 20);
    });
    expect(echoed.status).toBe(200);
    expect(echoed.body.size).toBe(11);
    expect(echoed.body.headers['transfer-encoding']).toBe('chunked');
    expect(echoed.body.headers['x-kept']).toBe('yes');
    expect(echoed.body.headers['x-hop']).toBeUndefined();
    // HEAD: the upstream announces a length but sends no body; the next response on the same
    // connection must still be read from the right place.
    const netMod = await import('node:net');
    const conns: import('node:net').Socket[] = [];
    const raw = netMod.createServer((sock) => {
      conns.push(sock);
      sock.on('data', (d) => {
        const isHead = d.toString('latin1').startsWith('HEAD');
        sock.write(`HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n${isHead ? '' : 'x'.repeat(1234)}`);
      });
    });
    await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
    try {
      const rawPort = (raw.address() as import('node:net').AddressInfo).port;
      const q = await w.proxy({ env: { SVC_PROXY_UPSTREAM: `http://127.0.0.1:${rawPort}` } });
      const auth = { authorization: `Bearer ${w.userKey}` };
      const head = await fetch(`${q.url}/h`, { method: 'HEAD', headers: auth });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-length')).toBe('1234');
      expect((await head.arrayBuffer()).byteLength).toBe(0);
      const after = await fetch(`${q.url}/g`, { headers: auth });
      expect((await after.text()).length).toBe(1234);
      expect(conns.length).toBe(1);
    } finally {
      for (const c of conns) c.destroy();
      await new Promise((r) => raw.close(r));
    }
    // The echo upstream says "Connection: keep-alive"; the client gets the proxy's own.
    const r = await get(`${p.url}/x`, { authorization: `Bearer ${w.userKey}` });
    expect(r.headers.get('x-upstream')).toBe('echo');
    expect(r.headers.get('keep-alive')).not.toBe('timeout=5');
  });

  it('answers 502 to a response it cannot relay safely, and logs why', async () => {
    const net = await import('node:net');
    const liar = net.createServer((s) =>
      s.on('data', () =>
        s.end(
          'HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n',
        ),
      ),
    );
    await new Promise<void>((r) => liar.listen(0, '127.0.0.1', r));
    try {
      const port = (liar.address() as import('node:net').AddressInfo).port;
      const q = await w.proxy({ env: { SVC_PROXY_UPSTREAM: `http://127.0.0.1:${port}` } });
      const before = w.logs.length;
      const r = await get(`${q.url}/x`, { authorization: `Bearer ${w.userKey}` });
      expect(r.status).toBe(502);
      expect(r.headers.get('x-error-code')).toBe('Bad Gateway');
      expect(w.logs.slice(before).join('\n')).toMatch(/both Content-Length and Transfer-Encoding/);
    } finally {
      await new Promise((r) => liar.close(r));
    }
  });

  it('passes websocket upgrades through, with identity, and refuses them without credentials', async () => {
    const wsUrl = p.url.replace('http', 'ws');
    const ws = new WebSocket(`${wsUrl}/ws/chat`, { headers: { authorization: `Bearer ${w.userKey}` } });
    const msgs: string[] = [];
    await new Promise<void>((resolve, reject) => {
      ws.on('message', (m) => {
        msgs.push(m.toString());
        if (msgs.length === 1) ws.send('ping');
        if (msgs.length === 2) resolve();
      });
      ws.on('error', reject);
    });
    ws.close();
    expect(JSON.parse(msgs[0] as string)).toEqual({ hello: 'ada@example.com', url: '/ws/chat' });
    expect(msgs[1]).toBe('echo:ping');
    const refused = new WebSocket(`${wsUrl}/ws/chat`);
    const status = await new Promise<number>((resolve) => {
      refused.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      refused.on('error', () => resolve(-1));
    });
    expect(status).toBe(401);
  });

  it('refuses absolute-form request targets, for plain requests and websocket upgrades alike', async () => {
    const port = Number(new URL(p.url).port);
    const before = w.echo.hits.length;
    const upgrade =
      'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
    for (const extra of ['', upgrade]) {
      const answer = await rawExchange(
        port,
        `GET http://127.0.0.1:${port}/ws/chat HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
          `Authorization: Bearer ${w.userKey}\r\n${extra}\r\n`,
      );
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
    }
    expect(w.echo.hits.length).toBe(before);
  });

  it('gives the access-check URL only while the request is in flight (anonymous: sign-in Location)', async () => {
    let during: { status: number; body: string } | undefined;
    w.echo.onCheck = async (url) => {
      const r = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'group=g1&group=g2&next=/after',
        redirect: 'manual',
      });
      during = { status: r.status, body: await r.text() };
      return during;
    };
    await get(`${p.url}/opt/check`);
    expect(during?.status).toBe(403);
    const entries = JSON.parse(during?.body as string) as {
      GroupID: string;
      StatusCode: number;
      Location?: string;
    }[];
    expect(entries.map((e) => e.GroupID)).toEqual(['g1', 'g2']);
    expect(entries[0]?.Location).toBe(`${p.url}/.gatehouse/signin?return=%2Fafter`);
    const after = await fetch(w.echo.lastCheckUrl as string, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'group=g1',
    });
    expect(after.status).toBe(404);
    const guessed = await fetch(`${p.url}/.gatehouse/access-check/${'A'.repeat(32)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'group=g1',
    });
    expect(guessed.status).toBe(404);
  });

  it('builds the access-check URL from proxy.privateaddress when set', async () => {
    const q = await w.proxy({ env: { SVC_PROXY_PRIVATEADDRESS: 'http://10.1.2.3:9999/' } });
    const r = await get(`${q.url}/x`, { authorization: `Bearer ${w.userKey}` });
    expect(r.json.headers['x-service-access-check']).toMatch(
      /^http:\/\/10\.1\.2\.3:9999\/\.gatehouse\/access-check\/[A-Za-z0-9_-]{32}$/,
    );
  });

  it('answers 502 when the upstream is down and 504 when it is slow, as pages for browsers', async () => {
    const down = await w.proxy({ env: { SVC_PROXY_UPSTREAM: 'http://127.0.0.1:1' } });
    const r = await get(`${down.url}/x`, { authorization: `Bearer ${w.userKey}`, accept: 'text/html' });
    expect(r.status).toBe(502);
    expect(r.headers.get('content-type')).toMatch(/text\/html/);
    expect(r.text).toMatch(/cannot be reached/);
    const slow = await w.proxy({}, { upstreamTimeoutMs: 300 });
    const s = await get(`${slow.url}/slow/x`, { authorization: `Bearer ${w.userKey}` });
    expect(s.status).toBe(504);
    expect(s.headers.get('x-error-code')).toBe('Gateway Timeout');
  });

  it('registers itself as a RemoteAgent visible through /remoteagents', async () => {
    const list = await w.s.req({ method: 'GET', url: '/remoteagents' });
    const agents = jsonLines(list.body).map((l) => l.Item as Record<string, unknown>);
    const mine = agents.find((a) => a.AppID === w.appId);
    expect(mine).toMatchObject({ Kind: 'proxy', Version: '0.1.0', AppID: w.appId });
    expect(Date.parse(String(mine?.LastSeen))).toBeGreaterThan(Date.now() - 120_000);
  });

  it('with a wrong auth.token cannot authenticate anyone, says so, and still serves open prefixes', async () => {
    const before = w.logs.length;
    const bad = await w.proxy({
      env: { SVC_AUTH_TOKEN: `gp.${w.appId}.${'x'.repeat(43)}`, SVC_PATH_open_AUTH: 'none' },
    });
    expect(w.logs.slice(before).join('\n')).toMatch(/refused auth\.token/);
    const r = await get(`${bad.url}/x`, { authorization: `Bearer ${w.userKey}` });
    expect(r.status).toBe(503);
    expect(r.text).toMatch(/cannot authenticate users/);
    expect((await get(`${bad.url}/open/x`)).status).toBe(200);
    // A token that cannot be one (missing or malformed) stops the start, naming auth.token and not the value.
    await expect(w.proxy({ env: { SVC_AUTH_TOKEN: 'nonsense' } })).rejects.toThrow(
      /^auth\.token: is malformed/,
    );
    await expect(w.proxy({ env: { SVC_AUTH_TOKEN: 'nonsense' } })).rejects.not.toThrow(/nonsense/);
    await expect(w.proxy({ env: { SVC_AUTH_TOKEN: '' } })).rejects.toThrow(/^auth\.token: is not set/);
    // A well-formed token the service refuses: the health endpoint says "not ready".
    const health = await get(`${bad.url}/.gatehouse/health`);
    expect(health.status).toBe(503);
    expect(JSON.parse(health.text)).toMatchObject({ Ready: false });
  });

  it('the proxy token endpoint is admin-only, shown once, and replacing it revokes the old one', async () => {
    const userTry = await w.s.req({ method: 'POST', url: `/apps/${w.appId}/proxytoken`, key: w.userKey });
    expect(userTry.statusCode).toBe(403);
    const missing = await w.s.req({ method: 'POST', url: '/apps/nosuchapp/proxytoken' });
    expect(missing.statusCode).toBe(404);
    const app = await w.s.req({ method: 'GET', url: `/apps/${w.appId}` });
    expect(app.json().HaveProxyToken).toBe(true);
    expect(app.body).not.toContain('ProxyTokenHash');
    const bc = await fetch(`${w.serviceUrl}/proxy/v1/apikey`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ Key: w.userKey }),
    });
    expect(bc.status).toBe(200);
    const noTok = await fetch(`${w.serviceUrl}/proxy/v1/apikey`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.userKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ Key: w.userKey }),
    });
    expect(noTok.status).toBe(401);
  });
});
