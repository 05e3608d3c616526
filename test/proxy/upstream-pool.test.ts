import { once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { UpstreamPool } from '../../src/proxy/upstream/pool.js';
import {
  type ResponseSink,
  type UpstreamError,
  type UpstreamRequest,
  upstreamTarget,
} from '../../src/proxy/upstream/request.js';

/** A TCP server whose every connection is handed to `onConn`: it scripts the upstream byte by byte. */
async function rawServer(onConn: (socket: net.Socket, index: number) => void) {
  const sockets: net.Socket[] = [];
  /** Settles when the connection of the same index has closed. */
  const closed: Promise<unknown>[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    closed.push(once(s, 'close'));
    s.on('error', () => {});
    onConn(s, sockets.length - 1);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    sockets,
    closed,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Answers each complete request head (bodiless requests) with `reply(n)`. */
function answering(reply: (n: number, head: string) => string) {
  let n = 0;
  return (s: net.Socket) => {
    let buf = '';
    s.on('data', (d) => {
      buf += d.toString('latin1');
      for (let end = buf.indexOf('\r\n\r\n'); end >= 0; end = buf.indexOf('\r\n\r\n')) {
        const head = buf.slice(0, end);
        buf = buf.slice(end + 4);
        s.write(reply(n++, head));
      }
    });
  };
}

interface Result {
  status?: number;
  headers?: string[];
  body: Buffer;
  error?: UpstreamError;
  responded?: boolean;
}

function collect(pause?: { every: number; ms: number }) {
  const out: Result = { body: Buffer.alloc(0) };
  const chunks: Buffer[] = [];
  let resumeAt: (() => void) | undefined;
  let count = 0;
  const done = new Promise<Result>((resolve) => {
    const sink: ResponseSink & { resume?: () => void } = {
      onHead(head) {
        out.status = head.status;
        out.headers = head.headers;
      },
      onData(chunk) {
        chunks.push(Buffer.from(chunk));
        if (pause && ++count % pause.every === 0) {
          setTimeout(() => resumeAt?.(), pause.ms);
          return false;
        }
        return true;
      },
      onEnd() {
        out.body = Buffer.concat(chunks);
        resolve(out);
      },
      onError(err, responded) {
        out.error = err;
        out.responded = responded;
        out.body = Buffer.concat(chunks);
        resolve(out);
      },
    };
    Object.assign(out, { sink });
  });
  return {
    sink: (out as unknown as { sink: ResponseSink }).sink,
    done,
    setResume(f: () => void) {
      resumeAt = f;
    },
  };
}

const pools: UpstreamPool[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const p of pools.splice(0)) await p.close();
  for (const c of closers.splice(0)) await c();
});

function newPool(opts: ConstructorParameters<typeof UpstreamPool>[0] = {}) {
  const p = new UpstreamPool(opts);
  pools.push(p);
  return p;
}

function request(
  port: number,
  method = 'GET',
  path = '/',
  extra: Partial<UpstreamRequest> = {},
): UpstreamRequest {
  return {
    target: upstreamTarget(new URL(`http://127.0.0.1:${port}`)),
    method,
    head: `${method} ${path} HTTP/1.1\r\nhost: test\r\n`,
    body: null,
    contentLength: undefined,
    ...extra,
  };
}

async function send(pool: UpstreamPool, req: UpstreamRequest, pause?: { every: number; ms: number }) {
  const c = collect(pause);
  const ex = pool.request(req, c.sink);
  c.setResume(() => ex.resume());
  return c.done;
}

const ok = (body: string, extra = '') =>
  `HTTP/1.1 200 OK\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

describe('upstream connection pool', () => {
  it('keeps connections alive and reuses them', async () => {
    const srv = await rawServer(answering((n) => ok(`r${n}`)));
    closers.push(srv.close);
    const pool = newPool();
    for (let i = 0; i < 5; i++) expect((await send(pool, request(srv.port))).body.toString()).toBe(`r${i}`);
    expect(srv.sockets.length).toBe(1);
  });

  it('does not reuse a connection after Connection: close, extra bytes, or an expired Keep-Alive hint', async () => {
    const srv = await rawServer(
      answering((n) =>
        n === 0
          ? ok('a', 'connection: close\r\n')
          : n === 1
            ? `${ok('b')}HTTP/1.1 200 OK\r\n`
            : ok('c', 'keep-alive: timeout=1\r\n'),
      ),
    );
    closers.push(srv.close);
    const pool = newPool();
    for (const want of ['a', 'b', 'c'])
      expect((await send(pool, request(srv.port))).body.toString()).toBe(want);
    // timeout=1 leaves no safe idle time (one second is kept in hand), so the next goes anew.
    await send(pool, request(srv.port));
    expect(srv.sockets.length).toBe(4);
  });

  it('sends a bodiless request again when a reused connection was closed under it, but never a POST', async () => {
    // The first connection answers once, then closes as the next request arrives, unanswered.
    const srv = await rawServer((s, index) => {
      let seen = 0;
      s.on('data', () => {
        seen++;
        if (index === 0 && seen === 2) return s.destroy();
        s.write(ok(`c${index}`));
      });
    });
    closers.push(srv.close);
    const pool = newPool();
    expect((await send(pool, request(srv.port))).body.toString()).toBe('c0');
    const again = await send(pool, request(srv.port));
    expect(again.body.toString()).toBe('c1');
    expect(again.error).toBeUndefined();
    // Now connection 1 is idle; make it close under the next request, a POST: not repeated.
    srv.sockets[1]?.removeAllListeners('data');
    srv.sockets[1]?.once('data', () => srv.sockets[1]?.destroy());
    const post = await send(pool, request(srv.port, 'POST'));
    expect(post.error?.kind).toBe('closed');
    expect(post.responded).toBe(false);
    expect(srv.sockets.length).toBe(2);
  });

  it('opens at most `connections` per origin and queues the rest', async () => {
    let open = 0;
    let most = 0;
    const srv = await rawServer((s) => {
      open++;
      most = Math.max(most, open);
      s.on('close', () => open--);
      s.on('data', () => setTimeout(() => s.write(ok('x')), 30));
    });
    closers.push(srv.close);
    const pool = newPool({ connections: 2 });
    const all = await Promise.all(Array.from({ length: 7 }, () => send(pool, request(srv.port))));
    expect(all.every((r) => r.status === 200 && r.body.toString() === 'x')).toBe(true);
    expect(most).toBe(2);
    expect(pool.connectionCount(`http://127.0.0.1:${srv.port}`)).toBe(2);
  });

  it('fails with connect, timeout and protocol errors, and closes the connection of a bad response', async () => {
    const pool = newPool({ headersTimeoutMs: 200 });
    const unused = await rawServer(() => {});
    const port = unused.port;
    await unused.close();
    expect((await send(pool, request(port))).error?.kind).toBe('connect');

    const silent = await rawServer(() => {});
    closers.push(silent.close);
    const t0 = Date.now();
    const slow = await send(pool, request(silent.port));
    expect(slow.error?.kind).toBe('timeout');
    expect(Date.now() - t0).toBeLessThan(2000);

    const bad = await rawServer(
      answering(() => 'HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n'),
    );
    closers.push(bad.close);
    const r = await send(pool, request(bad.port));
    expect(r.error?.kind).toBe('protocol');
    await bad.closed[0];

    // A response cut short after its head: the sink hears it after onHead.
    const cut = await rawServer(answering(() => 'HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc'));
    closers.push(cut.close);
    const c = collect();
    pool.request(request(cut.port), c.sink);
    await new Promise((r) => setTimeout(r, 50));
    cut.sockets[0]?.destroy();
    const half = await c.done;
    expect(half).toMatchObject({ status: 200, responded: true });
    expect(half.error?.kind).toBe('closed');
  });

  it('streams a large response with backpressure, and request bodies sized or chunked', async () => {
    const big = Buffer.alloc(4 * 1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = i % 251;
    const received: { method?: string; te?: string; cl?: string; body: Buffer }[] = [];
    const server = http.createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      received.push({
        method: req.method,
        te: req.headers['transfer-encoding'],
        cl: req.headers['content-length'],
        body: Buffer.concat(chunks),
      });
      if (req.url === '/big') return void res.end(big);
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => server.close(() => r())));
    server.keepAliveTimeout = 100;
    const port = (server.address() as AddressInfo).port;
    const pool = newPool();
    const r = await send(pool, request(port, 'GET', '/big'), { every: 5, ms: 2 });
    expect(r.body.equals(big)).toBe(true);

    const payload = Buffer.from('x'.repeat(100_000));
    const sized = await send(
      pool,
      request(port, 'PUT', '/up', {
        body: Readable.from([payload.subarray(0, 10), payload.subarray(10)]),
        contentLength: payload.length,
      }),
    );
    expect(sized.status).toBe(200);
    const chunked = await send(
      pool,
      request(port, 'POST', '/up', { body: Readable.from([payload, Buffer.from('!')]) }),
    );
    expect(chunked.status).toBe(200);
    const empty = await send(pool, request(port, 'POST', '/up'));
    expect(empty.status).toBe(200);
    expect(received.slice(1).map((x) => [x.method, x.te, x.cl, x.body.length])).toEqual([
      ['PUT', undefined, '100000', 100_000],
      ['POST', 'chunked', undefined, 100_001],
      ['POST', undefined, '0', 0],
    ]);
  });

  it('aborting closes the upstream connection; nothing is reported to the sink', async () => {
    const srv = await rawServer((s) => {
      s.on('data', () => s.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nab'));
    });
    closers.push(srv.close);
    const pool = newPool();
    let heard!: () => void;
    const headHeard = new Promise<void>((r) => {
      heard = r;
    });
    const ex = pool.request(request(srv.port), {
      onHead() {
        ex.abort();
        heard();
      },
      onData: () => true,
      onEnd() {
        throw new Error('not expected');
      },
      onError() {
        throw new Error('not expected');
      },
    });
    await headHeard;
    await srv.closed[0];
    expect(pool.connectionCount(`http://127.0.0.1:${srv.port}`)).toBe(0);
  });
});
