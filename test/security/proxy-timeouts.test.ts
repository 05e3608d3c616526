/**
 * Every wait has a bound: a request head that trickles in (slow loris), a request body that stops
 * coming, a request waiting for an upstream connection. Each is answered (408/503) and frees what
 * it held, counted on the upstream's side; slow but live uploads, long streamed responses and
 * idle websockets are not cut.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { RunningProxy, StartProxyOptions } from '../../src/proxy/run.js';
import { backends } from '../helpers.js';
import { startWorld, type World } from '../proxy/harness.js';
import { finalResponses, RawConnection } from './raw.js';

/** The small limits the proxies here run with. */
const LIMITS: Partial<StartProxyOptions> = {
  headersTimeoutMs: 400,
  bodyIdleTimeoutMs: 300,
  queueTimeoutMs: 300,
};

interface Received {
  url: string;
  size: number;
  complete: boolean;
  /** The connection the request came on has closed (the proxy gave it up). */
  connectionClosed: boolean;
}

/**
 * An upstream that counts its open connections and records each request (body size, whether the
 * body ended). /hold/* answers when `release()` is called; /stream sends 8 chunks 150 ms apart;
 * /slow-reader/* reads nothing for a second; anything else answers once the body is read.
 */
async function countingUpstream() {
  const received: Received[] = [];
  let held: (() => void)[] = [];
  const server = http.createServer(async (req, res) => {
    const rec: Received = { url: req.url ?? '', size: 0, complete: false, connectionClosed: false };
    received.push(rec);
    req.socket.once('close', () => {
      rec.connectionClosed = true;
    });
    if (rec.url.startsWith('/public/hold')) await new Promise<void>((r) => held.push(r));
    if (rec.url.startsWith('/public/slow-reader')) {
      req.pause();
      await new Promise((r) => setTimeout(r, 1000));
    }
    if (rec.url.startsWith('/public/stream')) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      for (let i = 0; i < 8; i++) {
        res.write(`chunk${i}\n`);
        await new Promise((r) => setTimeout(r, 150));
      }
      return void res.end();
    }
    try {
      for await (const c of req) rec.size += (c as Buffer).length;
      rec.complete = true;
    } catch {
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ size: rec.size }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    release() {
      for (const r of held) r();
      held = [];
    },
    /**
     * Waits (at most `ms`) until the connections of all requests for `url` have closed; returns
     * how many are still open.
     */
    async freed(url: string, ms = 2000) {
      const stop = Date.now() + ms;
      const open = () => received.filter((r) => r.url === url && !r.connectionClosed).length;
      while (open() > 0 && Date.now() < stop) await new Promise((r) => setTimeout(r, 10));
      return open();
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const portOf = (p: RunningProxy) => Number(new URL(p.url).port);

function post(path: string, length: number) {
  return `POST ${path} HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\nContent-Length: ${length}\r\n\r\n`;
}

describe.each(backends())('proxy time limits on %s', (backend) => {
  let w: World;
  let up: Awaited<ReturnType<typeof countingUpstream>>;

  beforeAll(async () => {
    w = await startWorld(backend);
    up = await countingUpstream();
  });
  afterAll(async () => {
    up?.release();
    await up?.close();
    await w?.close();
  });

  /** A proxy in front of the counting upstream, /public/ without sign-in, with the small limits. */
  const proxy = (opts: Partial<StartProxyOptions> = {}) =>
    w.proxy(
      { env: { SVC_PROXY_UPSTREAM: up.url }, overrides: ['path_/public/_auth=none'] },
      { ...LIMITS, ...opts },
    );

  it('generated: a request head that trickles in or stalls anywhere is cut off with 408 and never forwarded', async () => {
    const p = await proxy();
    const head = 'GET /public/x HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nX-Long: abcdefghijklmnop\r\n\r\n';
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: head.length - 1 }),
        fc.boolean(),
        fc.boolean(),
        async (cut, trickle, afterRequest) => {
          const before = up.received.length;
          const c = new RawConnection(portOf(p));
          if (afterRequest) {
            // A kept-alive connection: the bound applies to each request's head.
            await c.write(head);
            await c.until((r) => finalResponses(r).length === 1);
          }
          const started = Date.now();
          await c.write(head.slice(0, cut));
          // Slow loris: the rest a byte every 50 ms, never the final CRLF; or nothing more.
          let at = cut;
          const drip = trickle
            ? setInterval(() => {
                if (at < head.length - 2) void c.write(head.charAt(at++));
              }, 50)
            : undefined;
          await c.until(() => false, 2500);
          clearInterval(drip);
          c.close();
          expect(c.closed).toBe(true);
          expect(Date.now() - started).toBeLessThan(2000);
          const statuses = finalResponses(c.received).map((r) => r.status);
          expect(statuses.at(-1)).toBe(408);
          expect(up.received.length - before).toBe(afterRequest ? 1 : 0);
        },
      ),
      { numRuns: 6 },
    );
  });

  it('a Content-Length with no body gets 408 and never reaches the upstream; the pool stays usable', async () => {
    const p = await proxy({ upstreamConnections: 1, queueTimeoutMs: 5000 });
    const c = new RawConnection(portOf(p));
    const started = Date.now();
    await c.write(`${post('/public/upload', 100)}only part`);
    await c.until((r) => finalResponses(r).length > 0);
    const [r] = finalResponses(c.received);
    expect(r?.status).toBe(408);
    expect(r?.headers['x-error-code']).toBe('Request Timeout');
    expect(r?.headers.connection).toBe('close');
    expect(Date.now() - started).toBeLessThan(1500);
    await c.until(() => false, 300);
    expect(c.closed).toBe(true);
    expect(await up.freed('/public/upload')).toBe(0);
    // The body's first part is read before an upstream connection is taken (src/proxy/body.ts).
    expect(up.received.find((r) => r.url === '/public/upload')).toBeUndefined();
    const after = await fetch(`${p.url}/public/after`, { method: 'POST', body: 'x'.repeat(10) });
    expect(after.status).toBe(200);
    expect(await after.json()).toEqual({ size: 10 });
  });

  it('many stalled uploads all get 408 and hold no upstream connection afterwards', async () => {
    const p = await proxy({ upstreamConnections: 4, queueTimeoutMs: 5000 });
    const conns = Array.from({ length: 12 }, () => new RawConnection(portOf(p)));
    await Promise.all(conns.map((c) => c.write(post('/public/stalled', 100))));
    const got = await Promise.all(conns.map((c) => c.until((r) => finalResponses(r).length > 0, 5000)));
    for (const g of got) expect(finalResponses(g).map((r) => r.status)).toEqual([408]);
    for (const c of conns) c.close();
    expect(up.received.filter((r) => r.url === '/public/stalled')).toHaveLength(0);
    expect(await up.freed('/public/stalled')).toBe(0);
  });

  it('a request waiting too long for an upstream connection gets 503 with Retry-After', async () => {
    const p = await proxy({ upstreamConnections: 1 });
    const holding = fetch(`${p.url}/public/hold/1`);
    const stop = Date.now() + 2000;
    while (!up.received.some((r) => r.url === '/public/hold/1') && Date.now() < stop)
      await new Promise((r) => setTimeout(r, 10));
    const started = Date.now();
    const queued = await fetch(`${p.url}/public/queued`);
    expect(queued.status).toBe(503);
    expect(queued.headers.get('x-error-code')).toBe('Service Unavailable');
    expect(queued.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await queued.json()) as { Message: string }).Message).toMatch(/busy/);
    expect(Date.now() - started).toBeLessThan(1500);
    expect(up.received.some((r) => r.url === '/public/queued')).toBe(false);
    up.release();
    expect((await holding).status).toBe(200);
  });

  it('a client that goes away frees its upstream connection, mid-upload or waiting for the answer', async () => {
    const p = await proxy({ bodyIdleTimeoutMs: 60_000 });
    const uploading = new RawConnection(portOf(p));
    // More than the part read before forwarding (64 KiB): the upload is streaming when abandoned.
    await uploading.write(`${post('/public/abandoned-upload', 200_000)}${'s'.repeat(100_000)}`);
    const arrived = async (url: string) => {
      const stop = Date.now() + 2000;
      while (!up.received.some((r) => r.url === url) && Date.now() < stop)
        await new Promise((r) => setTimeout(r, 10));
    };
    await arrived('/public/abandoned-upload');
    uploading.close();
    expect(await up.freed('/public/abandoned-upload')).toBe(0);
    const waiting = new RawConnection(portOf(p));
    await waiting.write('GET /public/hold/abandoned HTTP/1.1\r\nHost: a\r\n\r\n');
    await arrived('/public/hold/abandoned');
    await new Promise((r) => setTimeout(r, 100));
    expect(await up.freed('/public/hold/abandoned', 0)).toBe(1);
    waiting.close();
    expect(await up.freed('/public/hold/abandoned')).toBe(0);
    up.release();
  });

  it('a slow but live upload, one the upstream is slow to read, and a long streamed response all complete', async () => {
    const p = await proxy();
    // 10 pieces 150 ms apart: 1.5 s in all, each pause half the idle bound.
    const c = new RawConnection(portOf(p));
    await c.write(post('/public/slow-upload', 1000));
    for (let i = 0; i < 10; i++) {
      await new Promise((r) => setTimeout(r, 150));
      await c.write('y'.repeat(100));
    }
    await c.until((r) => finalResponses(r).some((x) => x.complete));
    c.close();
    const [slow] = finalResponses(c.received);
    expect(slow?.status).toBe(200);
    expect(JSON.parse(slow?.body ?? '{}')).toEqual({ size: 1000 });

    // The upstream reads nothing for a second: the body waits on it, not on the client. The
    // idle bound is still under that second, with room for this test's own client (fetch in a
    // busy test process) to pause when the upstream reads again.
    const patient = await proxy({ bodyIdleTimeoutMs: 600 });
    const big = Buffer.alloc(16 * 1024 * 1024, 1);
    const reader = await fetch(`${patient.url}/public/slow-reader`, { method: 'POST', body: big });
    expect(reader.status).toBe(200);
    expect(await reader.json()).toEqual({ size: big.length });

    const stream = await fetch(`${p.url}/public/stream`);
    expect(stream.status).toBe(200);
    expect((await stream.text()).split('\n').filter(Boolean)).toHaveLength(8);

    // Answering slower than the body idle bound, after the whole body came: not a 408.
    const answer = fetch(`${p.url}/public/hold/slow-answer`, { method: 'POST', body: 'z' });
    await new Promise((r) => setTimeout(r, 800));
    up.release();
    expect((await answer).status).toBe(200);
  });

  it('an idle websocket outlives every bound', async () => {
    const q = await w.proxy({ overrides: ['path_/public/_auth=none'] }, LIMITS);
    const ws = new WebSocket(`${q.url.replace('http', 'ws')}/public/ws`);
    const messages: string[] = [];
    ws.on('message', (m) => messages.push(m.toString()));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    await new Promise((r) => setTimeout(r, 1000));
    ws.send('still here');
    const stop = Date.now() + 2000;
    while (!messages.includes('echo:still here') && Date.now() < stop)
      await new Promise((r) => setTimeout(r, 10));
    ws.close();
    expect(messages).toContain('echo:still here');
  });
});
