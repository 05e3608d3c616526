/**
 * A request the proxy answers itself (a refusal, an error, its own endpoints) has a body nobody
 * will use: the proxy reads at most a small part of it, and only for a short time, to keep a
 * well-behaved client's connection; a body that is larger, slower or endless gets the answer and
 * then a closed connection, never gigabytes read. The same for refused upgrades, and for the
 * service (Fastify) refusing a request before reading its body.
 *
 * Longer than ~400 lines on purpose: a suite of independent attack cases on one mechanism, each
 * readable on its own; splitting it would scatter the shared set-up, not make a case easier to read.
 */
import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProxy } from '../../src/proxy/run.js';
import { backends } from '../helpers.js';
import { startWorld, type World } from '../proxy/harness.js';
import { finalResponses } from './raw.js';

/** More than a refused body may cost the server (the client's and the server's socket buffers included). */
const BOUND = 32 << 20;
/** What a well-behaved client's body may be and still keep its connection (the proxy's drain limit). */
const SMALL = 64 * 1024;
/** The time the proxy waits for the rest of a small body, with slack for a busy test machine. */
const SHORT_MS = 1000 + 1500;

interface Refusal {
  name: string;
  /** Request line and extra header lines (each ending in CRLF) for the body's framing to follow. */
  head: (w: World) => string;
  status: number;
}

const BAD_KEY = `gv${'Q'.repeat(54)}`;

/** Requests the proxy answers without forwarding them, each for another reason. */
const REFUSALS: Refusal[] = [
  { name: 'no credentials', head: () => 'POST /app/upload HTTP/1.1\r\nHost: h\r\n', status: 401 },
  {
    name: 'an unknown key',
    head: () => `PUT /app/upload HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer ${BAD_KEY}\r\n`,
    status: 401,
  },
  {
    name: 'a key in the URL',
    head: () => `POST /app/upload?access_token=${BAD_KEY} HTTP/1.1\r\nHost: h\r\n`,
    status: 400,
  },
  {
    name: 'a path without a canonical form',
    head: () => 'POST /app/a%2fb HTTP/1.1\r\nHost: h\r\n',
    status: 400,
  },
  {
    name: 'a browser sent to sign in',
    head: () => 'GET /app/page HTTP/1.1\r\nHost: h\r\nAccept: text/html\r\n',
    status: 302,
  },
  {
    name: 'an unknown proxy endpoint',
    head: () => 'POST /.gatehouse/nope HTTP/1.1\r\nHost: h\r\n',
    status: 404,
  },
  {
    name: 'the callback with a body',
    head: () => 'POST /.gatehouse/callback HTTP/1.1\r\nHost: h\r\n',
    status: 405,
  },
  {
    name: 'the sign-in endpoint',
    head: () => 'POST /.gatehouse/signin HTTP/1.1\r\nHost: h\r\n',
    status: 302,
  },
  {
    name: 'a spent access-check URL',
    head: () =>
      'POST /.gatehouse/access-check/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\n',
    status: 404,
  },
];

interface Sent {
  /** Body bytes the server took (written without blocking, or after a drain). */
  sent: number;
  /** The server closed the connection. */
  closed: boolean;
  /** Milliseconds from the head to the close (or to giving up). */
  ms: number;
  received: string;
}

interface Sender {
  /** Size of each write. */
  piece: number;
  /** Pause between writes (a slow sender). */
  pauseMs: number;
  /** Chunked framing instead of a declared Content-Length. */
  chunked: boolean;
  /**
   * `head` is the whole request head and the pieces go unframed after it (an upgrade's "tunnel
   * data"); the client keeps its side open when the server ends its own, so only the server's
   * close of the socket (a reset on the next write) counts as closed.
   */
  raw?: boolean;
}

/**
 * Sends `head` and a body that never ends (or a declared 1 GiB one) as fast as the server takes it
 * (or `pauseMs` apart): stops when the server closed, took more than BOUND or `stopMs` passed.
 */
async function flood(port: number, head: string, how: Sender, stopMs = 6000): Promise<Sent> {
  const sock = net.connect({ port, host: '127.0.0.1', allowHalfOpen: how.raw === true });
  await new Promise((r) => sock.once('connect', r));
  let received = '';
  let closed = false;
  sock.on('data', (d: Buffer) => {
    received += d.toString('latin1');
  });
  const gone = new Promise((r) =>
    sock.once('close', () => {
      closed = true;
      r(undefined);
    }),
  );
  sock.on('error', () => undefined);
  const started = Date.now();
  if (how.raw) sock.write(head);
  else
    sock.write(`${head}${how.chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${1 << 30}`}\r\n\r\n`);
  const piece = Buffer.alloc(how.piece, 97);
  const frame = how.chunked
    ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')])
    : piece;
  let sent = 0;
  const stop = started + stopMs;
  while (!closed && sent <= BOUND && Date.now() < stop) {
    if (!sock.write(frame)) {
      await Promise.race([
        new Promise((r) => sock.once('drain', r)),
        gone,
        new Promise((r) => setTimeout(r, stop - Date.now())),
      ]);
      if (!closed && sock.writableNeedDrain) break;
    }
    sent += piece.length;
    if (how.pauseMs > 0) await Promise.race([new Promise((r) => setTimeout(r, how.pauseMs)), gone]);
  }
  // A server that stopped reading but keeps the connection open is given the rest of the time.
  if (!closed) await Promise.race([gone, new Promise((r) => setTimeout(r, Math.max(0, stop - Date.now())))]);
  const ms = Date.now() - started;
  sock.destroy();
  return { sent, closed, ms, received };
}

/** An open connection: write, and wait for the n-th final response (or the close). */
class Conn {
  private readonly sock: net.Socket;
  received = '';
  closed = false;
  constructor(port: number) {
    this.sock = net.connect(port, '127.0.0.1');
    this.sock.on('data', (d: Buffer) => {
      this.received += d.toString('latin1');
    });
    this.sock.on('close', () => {
      this.closed = true;
    });
    this.sock.on('error', () => undefined);
  }
  write(b: string | Buffer) {
    this.sock.write(typeof b === 'string' ? Buffer.from(b, 'latin1') : b);
  }
  async responses(n: number, ms = 3000) {
    const stop = Date.now() + ms;
    while (
      finalResponses(this.received).filter((r) => r.complete).length < n &&
      !this.closed &&
      Date.now() < stop
    )
      await new Promise((r) => setTimeout(r, 5));
    return finalResponses(this.received);
  }
  async closedWithin(ms: number) {
    const stop = Date.now() + ms;
    while (!this.closed && Date.now() < stop) await new Promise((r) => setTimeout(r, 10));
    return this.closed;
  }
  close() {
    this.sock.destroy();
  }
}

const statusOf = (received: string) => finalResponses(received)[0]?.status;

describe.each(backends())('bodies of requests the proxy answers itself, on %s', (backend) => {
  let w: World;
  let p: RunningProxy;
  let port: number;
  beforeAll(async () => {
    w = await startWorld(backend);
    p = await w.proxy();
    port = Number(new URL(p.url).port);
  });
  afterAll(async () => w?.close());

  it('a large or endless body, fast or slow, sized or chunked, is answered and cut off for every reason', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...REFUSALS),
        fc.record({
          piece: fc.constantFrom(1 << 10, 16 << 10, 256 << 10, 1 << 20),
          pauseMs: fc.constantFrom(0, 0, 5, 40),
          chunked: fc.boolean(),
        }),
        async (refusal, how) => {
          const r = await flood(port, refusal.head(w), how);
          expect(statusOf(r.received), refusal.name).toBe(refusal.status);
          expect(r.closed, `${refusal.name}: connection closed`).toBe(true);
          expect(r.sent).toBeLessThanOrEqual(BOUND);
          expect(r.ms, `${refusal.name}: closed soon`).toBeLessThanOrEqual(SHORT_MS);
        },
      ),
      { numRuns: 16 },
    );
  });

  it('a declared large body is answered with Connection: close, not read', async () => {
    for (const refusal of REFUSALS) {
      const c = new Conn(port);
      c.write(`${refusal.head(w)}Content-Length: ${SMALL + 1}\r\n\r\n`);
      const [answer] = await c.responses(1);
      expect(answer?.status, refusal.name).toBe(refusal.status);
      expect(answer?.headers.connection, refusal.name).toBe('close');
      expect(await c.closedWithin(SHORT_MS), refusal.name).toBe(true);
      c.close();
    }
  });

  it('a body that stops coming is given a short time, then the connection is closed', async () => {
    for (const chunked of [false, true]) {
      const c = new Conn(port);
      c.write(
        `POST /app/upload HTTP/1.1\r\nHost: h\r\n${chunked ? 'Transfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n' : 'Content-Length: 100\r\n\r\n0123456789'}`,
      );
      const [answer] = await c.responses(1);
      expect(answer?.status).toBe(401);
      expect(await c.closedWithin(SHORT_MS), `chunked: ${chunked}`).toBe(true);
      c.close();
    }
  });

  it('a well-behaved client with a small body keeps its connection, and the next request on it is served', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...REFUSALS),
        fc.integer({ min: 0, max: SMALL }),
        fc.boolean(),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(0, 10),
        async (refusal, size, chunked, pieces, pauseMs) => {
          const c = new Conn(port);
          const body = Buffer.alloc(size, 98);
          const framing = chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${size}`;
          c.write(`${refusal.head(w)}${framing}\r\n\r\n`);
          const step = Math.ceil(size / pieces) || 1;
          for (let at = 0; at < size; at += step) {
            const part = body.subarray(at, Math.min(size, at + step));
            c.write(
              chunked
                ? Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')])
                : part,
            );
            if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
          }
          if (chunked) c.write('0\r\n\r\n');
          c.write(`GET /app/next HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer ${w.userKey}\r\n\r\n`);
          const answers = await c.responses(2);
          c.close();
          expect(answers[0]?.status, refusal.name).toBe(refusal.status);
          expect(answers[0]?.headers.connection, refusal.name).not.toBe('close');
          expect(answers[1]?.status, `${refusal.name}: the next request`).toBe(200);
          expect(JSON.parse(answers[1]?.body ?? '{}').url).toBe('/app/next');
        },
      ),
      { numRuns: 30 },
    );
  });

  it('an access check whose form is too large is answered 413 (not reset), and the rest is not read', async () => {
    let answer: { status: number; closed: boolean } | undefined;
    w.echo.onCheck = async (checkUrl) => {
      const url = new URL(checkUrl);
      const r = await flood(
        Number(url.port),
        `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/x-www-form-urlencoded\r\n`,
        { piece: 16 << 10, pauseMs: 0, chunked: true },
      );
      answer = { status: statusOf(r.received) ?? 0, closed: r.closed };
      return { status: answer.status, body: '' };
    };
    try {
      const res = await fetch(`${p.url}/app/check`, { headers: { authorization: `Bearer ${w.userKey}` } });
      expect(res.status).toBe(200);
      expect(answer).toEqual({ status: 413, closed: true });
    } finally {
      w.echo.onCheck = undefined;
    }
  });

  it('an upgrade answered without a tunnel is closed soon, what the client sends after it read only within a bound', async () => {
    const ws =
      'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
    const cases = [
      { head: `GET /app/ws HTTP/1.1\r\nHost: h\r\n${ws}\r\n`, status: 401, ms: 0 },
      {
        head: `GET /app/ws HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer ${BAD_KEY}\r\n${ws}\r\n`,
        status: 401,
        ms: 0,
      },
      { head: `GET /.gatehouse/ws HTTP/1.1\r\nHost: h\r\n${ws}\r\n`, status: 404, ms: 0 },
      {
        head: `GET /app/ws HTTP/1.1\r\nHost: h\r\n${ws}Content-Length: ${1 << 30}\r\n\r\n`,
        status: 400,
        ms: 0,
      },
      // Not websocket: forwarded without Upgrade, to an upstream that answers after 2 s (/slow).
      {
        head: `POST /slow/x HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer ${w.userKey}\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n`,
        status: 200,
        ms: 2000,
      },
    ];
    for (const c of cases) {
      const r = await flood(port, c.head, { piece: 64 << 10, pauseMs: 0, chunked: false, raw: true });
      const name = c.head.split('\r\n')[0];
      expect(statusOf(r.received), name).toBe(c.status);
      expect(r.closed, `${name}: closed`).toBe(true);
      expect(r.sent, name).toBeLessThanOrEqual(BOUND);
      expect(r.ms, `${name}: closed soon`).toBeLessThanOrEqual(c.ms + SHORT_MS);
    }
  });
});

describe.each(backends())('bodies of requests the service refuses, on %s', (backend) => {
  let w: World;
  let port: number;
  beforeAll(async () => {
    w = await startWorld(backend);
    port = Number(new URL(w.serviceUrl).port);
  });
  afterAll(async () => w?.close());

  it('an anonymous upload of any size and framing is answered 401 and cut off', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('POST /users', 'PATCH /users/x', 'POST /groups', 'GET /users', 'POST /nothing-here'),
        fc.record({
          piece: fc.constantFrom(16 << 10, 1 << 20),
          pauseMs: fc.constantFrom(0, 5),
          chunked: fc.boolean(),
        }),
        async (line, how) => {
          const r = await flood(
            port,
            `${line} HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n`,
            how,
          );
          expect([401, 404, 413]).toContain(statusOf(r.received));
          expect(r.closed, line).toBe(true);
          expect(r.sent).toBeLessThanOrEqual(BOUND);
          expect(r.ms, `${line}: closed soon`).toBeLessThanOrEqual(SHORT_MS);
        },
      ),
      { numRuns: 12 },
    );
  });

  it('a well-behaved anonymous client with a small body keeps its connection for the next request', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: SMALL }), fc.boolean(), async (size, chunked) => {
        const c = new Conn(port);
        const body = Buffer.alloc(size, 98);
        c.write(
          `POST /users HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n${chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${size}`}\r\n\r\n`,
        );
        c.write(
          chunked
            ? Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')])
            : body,
        );
        c.write(
          `GET /users/${w.user.id} HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer ${w.s.adminKey}\r\n\r\n`,
        );
        const answers = await c.responses(2);
        c.close();
        expect(answers[0]?.status).toBe(401);
        expect(answers[1]?.status).toBe(200);
      }),
      { numRuns: 10 },
    );
  });

  it('a body over the limit with a key is answered 413 without being read', async () => {
    const r = await flood(
      port,
      `POST /users HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer ${w.s.adminKey}\r\nContent-Type: application/json\r\n`,
      { piece: 1 << 20, pauseMs: 0, chunked: false },
    );
    expect(statusOf(r.received)).toBe(413);
    expect(r.closed).toBe(true);
    expect(r.sent).toBeLessThanOrEqual(BOUND);
  });
});
