/**
 * Request smuggling through the upgrade tunnel: a request with `Connection: Upgrade` must not
 * turn the client connection into a raw pipe before the upstream said 101. Each attack sends an
 * upgrade request on a path that needs no sign-in, then, on the same connection, a request for a
 * path that does, with forged identity headers; the upstream reports every request its parser
 * read. Only websocket is tunnelled: h2c (an HTTP/2 connection past the proxy) never is.
 *
 * Longer than ~400 lines on purpose: a suite of independent attack cases on one mechanism, each
 * readable on its own; splitting it would scatter the shared set-up, not make a case easier to read.
 */
import type http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { RunningProxy } from '../../src/proxy/run.js';
import { MAX_EARLY_BYTES } from '../../src/proxy/upgrade.js';
import { backends } from '../helpers.js';
import { startWorld, type World } from '../proxy/harness.js';
import { finalResponses, RawConnection, rawExchange } from './raw.js';

const WS_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
const HANDSHAKE = `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${WS_KEY}\r\n`;

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

/** How the scripted upstream answers: status, and whether the body is sent chunked. */
interface Answer {
  status: number;
  chunked: boolean;
}

/**
 * An HTTP/1.1 upstream that answers an upgrade request like any other and then goes on reading
 * requests on the connection, as many servers without websocket support do (Node's own server
 * drops what follows a refused upgrade, so it would hide the attack). It records every request
 * head it read and answers each with `answer`.
 */
async function scriptedUpstream() {
  const seen: Seen[] = [];
  const state: { answer: Answer } = { answer: { status: 200, chunked: false } };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    let buf = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      buf += d;
      for (let end = buf.indexOf('\r\n\r\n'); end >= 0; end = buf.indexOf('\r\n\r\n')) {
        const [line = '', ...fields] = buf.slice(0, end).split('\r\n');
        buf = buf.slice(end + 4);
        const headers: http.IncomingHttpHeaders = {};
        for (const f of fields) {
          const i = f.indexOf(':');
          headers[f.slice(0, i).trim().toLowerCase()] = f.slice(i + 1).trim();
        }
        const [method = '', url = ''] = line.split(' ');
        seen.push({ method, url, headers });
        // Bodies of requests that declare one by length are skipped (enough for these tests).
        buf = buf.slice(Number(headers['content-length'] ?? 0));
        const { status, chunked } = state.answer;
        const body = status === 204 || status === 304 || method === 'HEAD' ? '' : `answer ${status}`;
        const framing = chunked ? 'transfer-encoding: chunked\r\n' : `content-length: ${body.length}\r\n`;
        const payload = chunked
          ? `${body ? `${body.length.toString(16)}\r\n${body}\r\n` : ''}0\r\n\r\n`
          : body;
        const bodyless = status === 204 || status === 304;
        s.write(
          `HTTP/1.1 ${status} X\r\n${status === 302 ? 'location: /elsewhere\r\n' : ''}` +
            `${bodyless ? '' : framing}\r\n${method === 'HEAD' || bodyless ? '' : payload}`,
        );
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    state,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/**
 * A TCP upstream that accepts any upgrade: to a request head with an Upgrade header it answers
 * 101 naming `switchTo` (default: what was asked) and, in the same write, `firstBytes` of the new
 * protocol; to others 200. It records every byte it got.
 */
async function switchingUpstream(switchTo?: string, firstBytes = '') {
  const received: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    const index = received.push('') - 1;
    let answered = false;
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      received[index] += d;
      const text = received[index] as string;
      if (answered || !text.includes('\r\n\r\n')) return;
      answered = true;
      const asked = /\r\nupgrade: *([^\r]*)/i.exec(text)?.[1];
      if (asked !== undefined)
        s.write(
          `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${switchTo ?? asked}\r\n\r\n${firstBytes}`,
          'latin1',
        );
      else s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A TCP upstream that reads and never answers; it records every byte it got. */
async function silentUpstream() {
  const received: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    const index = received.push('') - 1;
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      received[index] += d;
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    open: () => sockets.size,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A masked websocket text frame, as a client sends it (RFC 6455 5.2), for payloads under 126 bytes. */
function clientFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = Buffer.from([1, 2, 3, 4]);
  const masked = Buffer.from(payload.map((b, i) => b ^ (mask[i % 4] as number)));
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]);
}

const portOf = (p: RunningProxy) => Number(new URL(p.url).port);

describe.each(backends())('proxy upgrade requests on %s', (backend) => {
  let w: World;
  let up: Awaited<ReturnType<typeof scriptedUpstream>>;
  /** In front of the scripted upstream: /public/ needs no sign-in, everything else does. */
  let p: RunningProxy;
  /** In front of the harness's echo upstream, which speaks websocket. */
  let q: RunningProxy;
  /** The forged identity: the real user's, so that only the proxy's checks stand in the way. */
  let forged: string;

  beforeAll(async () => {
    w = await startWorld(backend);
    up = await scriptedUpstream();
    p = await w.proxy({ env: { SVC_PROXY_UPSTREAM: up.url }, overrides: ['path_/public/_auth=none'] });
    q = await w.proxy({ overrides: ['path_/public/_auth=none'] });
    forged = `X-Service-Email: ${w.user.email}\r\nX-Service-User: ${w.user.id}\r\nX-Service-Auth-Type: bearer\r\n`;
  });
  afterAll(async () => {
    await up?.close();
    await w?.close();
  });

  /** The smuggled second request: a path that needs a user, with the identity headers forged. */
  const smuggled = () => `GET /admin/secret HTTP/1.1\r\nHost: a\r\n${forged}\r\n`;

  /** Nothing the upstream saw came from the smuggled request. */
  function expectNotSmuggled(seen: Seen[]) {
    for (const s of seen) {
      expect(s.url).not.toContain('/admin');
      expect(s.headers['x-service-email']).toBeUndefined();
      expect(s.headers['x-service-user']).toBeUndefined();
    }
  }

  it('a websocket upgrade the upstream refuses (200/400/404/426/302) is relayed, then the connection closes', async () => {
    for (const status of [200, 400, 404, 426, 302]) {
      up.state.answer = { status, chunked: false };
      const before = up.seen.length;
      const got = await rawExchange(
        portOf(p),
        `GET /public/x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${HANDSHAKE}\r\n${smuggled()}`,
        { responses: 2, idleMs: 1500 },
      );
      const seen = up.seen.slice(before);
      expectNotSmuggled(seen);
      expect(seen.map((s) => s.url)).toEqual(['/public/x']);
      const responses = finalResponses(got);
      expect(responses.map((r) => r.status)).toEqual([status]);
      expect(responses[0]?.headers.connection).toBe('close');
    }
  });

  it('a second request written after the refusal arrived goes nowhere: the connection is closed', async () => {
    up.state.answer = { status: 404, chunked: true };
    const before = up.seen.length;
    const c = new RawConnection(portOf(p));
    await c.write(
      `GET /public/x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${HANDSHAKE}\r\n`,
    );
    await c.until((r) => finalResponses(r).length > 0);
    await c.write(smuggled());
    await c.until(() => false, 300);
    expect(c.closed).toBe(true);
    expect(finalResponses(c.received).map((r) => r.status)).toEqual([404]);
    expect(up.seen.slice(before).map((s) => s.url)).toEqual(['/public/x']);
    c.close();
  });

  it('generated: no Upgrade or Connection spelling, upstream status or framing lets a pipelined request through', async () => {
    const upgradeValue = fc.oneof(
      fc.mixedCase(
        fc.constantFrom('websocket', 'h2c', 'websocket, h2c', 'h2c, websocket', 'tls/1.2, websocket'),
      ),
      fc.constantFrom('WebSocket/13', 'HTTP/2.0', 'foo', ' websocket ', 'websocket,,'),
    );
    const connectionValue = fc.mixedCase(
      fc.constantFrom(
        'upgrade',
        'keep-alive, upgrade',
        'upgrade, http2-settings',
        'upgrade,keep-alive',
        ' upgrade ',
      ),
    );
    await fc.assert(
      fc.asyncProperty(
        upgradeValue,
        connectionValue,
        fc.constantFrom(200, 204, 302, 400, 404, 426, 500),
        fc.boolean(),
        fc.constantFrom('GET', 'HEAD', 'OPTIONS', 'DELETE'),
        fc.boolean(),
        async (upgrade, connection, status, chunked, method, separateWrite) => {
          up.state.answer = { status, chunked };
          const before = up.seen.length;
          const first =
            `${method} /public/x HTTP/1.1\r\nHost: a\r\nConnection: ${connection}\r\nUpgrade: ${upgrade}\r\n` +
            `HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n${HANDSHAKE}\r\n`;
          const got = await rawExchange(portOf(p), separateWrite ? [first, smuggled()] : first + smuggled(), {
            responses: 2,
            idleMs: 1500,
          });
          const seen = up.seen.slice(before);
          expectNotSmuggled(seen);
          expect(seen.map((s) => s.url)).toEqual(['/public/x']);
          expect(finalResponses(got).map((r) => r.status)).toEqual([status]);
          // Only a websocket handshake asks the upstream to switch, and only for websocket.
          const asked = seen[0]?.headers.upgrade;
          if (asked !== undefined) expect(asked).toBe('websocket');
        },
      ),
      { numRuns: 40 },
    );
  });

  it('h2c is never tunnelled: it reaches the upstream as an ordinary request, without Upgrade', async () => {
    const h2 = await switchingUpstream();
    try {
      const r = await w.proxy({
        env: { SVC_PROXY_UPSTREAM: h2.url },
        overrides: ['path_/public/_auth=none'],
      });
      const got = await rawExchange(
        portOf(r),
        'GET /public/x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n' +
          `HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n${smuggled()}`,
        { responses: 2, idleMs: 1500 },
      );
      expect(finalResponses(got).map((x) => x.status)).toEqual([200]);
      expect(h2.received).toHaveLength(1);
      const head = h2.received[0] as string;
      expect(head).not.toMatch(/upgrade|http2-settings/i);
      // Nothing after the request head: no preface, no smuggled request.
      expect(head.indexOf('\r\n\r\n')).toBe(head.length - 4);
    } finally {
      await h2.close();
    }
  });

  it('a 101 to another protocol than websocket is refused with 502 and nothing is tunnelled', async () => {
    const h2 = await switchingUpstream('h2c');
    try {
      const r = await w.proxy({
        env: { SVC_PROXY_UPSTREAM: h2.url },
        overrides: ['path_/public/_auth=none'],
      });
      const got = await rawExchange(
        portOf(r),
        `GET /public/x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${HANDSHAKE}\r\n${smuggled()}`,
        { responses: 2, idleMs: 1500 },
      );
      const responses = finalResponses(got);
      expect(responses.map((x) => x.status)).toEqual([502]);
      expect(responses[0]?.headers['x-error-code']).toBe('Bad Gateway');
      const head = h2.received[0] as string;
      expect(head).toMatch(/\r\nupgrade: websocket\r\n/i);
      expect(head.indexOf('\r\n\r\n')).toBe(head.length - 4);
    } finally {
      await h2.close();
    }
  });

  it('generated: an upgrade request with a body is refused before it reaches the upstream', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.mixedCase(fc.constantFrom('websocket', 'h2c')),
        fc.constantFrom('GET', 'POST', 'PUT'),
        fc.oneof(
          fc
            .string({ minLength: 1, maxLength: 40 })
            .map((b) => ({ framing: `Content-Length: ${b.length}\r\n`, body: b })),
          fc.constant({ framing: 'Transfer-Encoding: chunked\r\n', body: '5\r\nhello\r\n0\r\n\r\n' }),
        ),
        async (upgrade, method, { framing, body }) => {
          const before = up.seen.length;
          const got = await rawExchange(
            portOf(p),
            `${method} /public/x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: ${upgrade}\r\n${HANDSHAKE}${framing}\r\n${body}${smuggled()}`,
            { responses: 2, idleMs: 1500 },
          );
          const responses = finalResponses(got);
          expect(responses.map((x) => x.status)).toEqual([400]);
          expect(responses[0]?.headers['x-error-code']).toBe('Bad Request');
          expect(up.seen.length).toBe(before);
        },
      ),
      { numRuns: 15 },
    );
  });

  it('websocket still works end to end through the proxy, with identity', async () => {
    const ws = new WebSocket(`${q.url.replace('http', 'ws')}/ws/chat`, {
      headers: { authorization: `Bearer ${w.userKey}` },
    });
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
    expect(JSON.parse(msgs[0] as string)).toEqual({ hello: w.user.email, url: '/ws/chat' });
    expect(msgs[1]).toBe('echo:ping');
  });

  it('frames a client sends before the 101 are held back and delivered after it', async () => {
    const c = new RawConnection(portOf(q));
    await c.write(
      `GET /public/ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: WebSocket\r\n${HANDSHAKE}\r\n${clientFrame('early').toString('latin1')}`,
    );
    const got = await c.until((r) => r.includes('echo:early'));
    c.close();
    expect(got.split('\r\n')[0]).toBe('HTTP/1.1 101 Switching Protocols');
    expect(got).toMatch(/\r\nupgrade: websocket\r\n/i);
    expect(got).toContain('echo:early');
  });

  it('bytes of the new protocol that come with the 101 reach the client, and the tunnel carries both ways', async () => {
    const frame = '\x81\x05hello';
    const ws = await switchingUpstream('websocket', frame);
    try {
      const r = await w.proxy({
        env: { SVC_PROXY_UPSTREAM: ws.url },
        overrides: ['path_/public/_auth=none'],
      });
      const c = new RawConnection(portOf(r));
      await c.write(
        `GET /public/ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${HANDSHAKE}\r\n`,
      );
      const got = await c.until((x) => x.endsWith(frame));
      expect(got.split('\r\n')[0]).toBe('HTTP/1.1 101 Switching Protocols');
      expect(got.slice(got.indexOf('\r\n\r\n') + 4)).toBe(frame);
      await c.write('after the switch');
      const stop = Date.now() + 2000;
      while (!ws.received[0]?.endsWith('after the switch') && Date.now() < stop)
        await new Promise((x) => setTimeout(x, 10));
      c.close();
      expect(ws.received[0]).toMatch(/\r\n\r\nafter the switch$/);
    } finally {
      await ws.close();
    }
  });

  it('more than the bound of early bytes before the 101 is refused; the upstream gets none of them', async () => {
    const silent = await silentUpstream();
    try {
      const r = await w.proxy({
        env: { SVC_PROXY_UPSTREAM: silent.url },
        overrides: ['path_/public/_auth=none'],
      });
      const c = new RawConnection(portOf(r));
      await c.write(
        `GET /public/ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${HANDSHAKE}\r\n`,
      );
      await c.write('x'.repeat(MAX_EARLY_BYTES + 1));
      const got = await c.until(() => false, 1500);
      c.close();
      expect(finalResponses(got).map((x) => x.status)).toEqual([400]);
      // At most the request head went upstream (the refusal may even come before it was sent).
      expect(silent.received.join('')).not.toContain('xxxx');
      // The upstream connection waiting for the answer was given up.
      const stop = Date.now() + 2000;
      while (silent.open() > 0 && Date.now() < stop) await new Promise((x) => setTimeout(x, 20));
      expect(silent.open()).toBe(0);
    } finally {
      await silent.close();
    }
  });

  it('an upstream that never answers the upgrade gets 504 within the upstream timeout', async () => {
    const silent = await silentUpstream();
    try {
      const r = await w.proxy(
        { env: { SVC_PROXY_UPSTREAM: silent.url }, overrides: ['path_/public/_auth=none'] },
        { upstreamTimeoutMs: 300 },
      );
      const started = Date.now();
      const got = await rawExchange(
        portOf(r),
        `GET /public/ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${HANDSHAKE}\r\n${clientFrame('x').toString('latin1')}`,
        { idleMs: 3000 },
      );
      expect(finalResponses(got).map((x) => x.status)).toEqual([504]);
      expect(Date.now() - started).toBeLessThan(2500);
      const head = silent.received[0] as string;
      expect(head.indexOf('\r\n\r\n')).toBe(head.length - 4);
    } finally {
      await silent.close();
    }
  });
});
