import net from 'node:net';
import type { Readable } from 'node:stream';
import tls from 'node:tls';
import { type ResponseHead, ResponseParseError, ResponseParser } from './response.js';

/**
 * The proxy's HTTP/1.1 client for upstream requests: keep-alive connections per upstream origin,
 * one request at a time on each (no pipelining), request and response bodies streamed with
 * backpressure. It does only what a reverse proxy needs, which makes it about a third cheaper
 * per request than undici here (docs/decisions.md, "The proxy's upstream client").
 *
 * One file on purpose (over 400 lines): Exchange, Connection and UpstreamPool are one state
 * machine. An exchange and its connection point at each other, and only the pool moves them
 * between waiting, sending, idle and closed (dispatch, release, end, sweep); in separate files
 * they would import each other, a cycle the import rules forbid. Moving only the declarations
 * above the Exchange out would still leave the machinery over 400 lines, away from its contract.
 */

/** Where requests go: one pool of connections per target key. */
export interface UpstreamTarget {
  /** `http://host:port` or `https://host:port`. */
  key: string;
  secure: boolean;
  /** Host name or address to connect to (IPv6 without brackets). */
  host: string;
  port: number;
  /** The Host header to send when the client sent none. */
  authority: string;
}

export function upstreamTarget(url: URL): UpstreamTarget {
  const secure = url.protocol === 'https:';
  const port = Number(url.port || (secure ? 443 : 80));
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return { key: `${url.protocol}//${url.host}`, secure, host, port, authority: url.host };
}

export interface UpstreamRequest {
  target: UpstreamTarget;
  method: string;
  /** The request line and header lines, each ending in CRLF; no framing headers, no blank line. */
  head: string;
  /** The request body, or null for none. */
  body: Readable | null;
  /** The body's length (Content-Length); undefined with a body: sent chunked. */
  contentLength: number | undefined;
  /**
   * The head asks to switch protocols (a websocket handshake): a 101 answer then takes the
   * connection out of the pool and hands it to `ResponseSink.onSwitch`. Without it a 101 is a
   * protocol error.
   */
  upgrade?: boolean;
}

/**
 * Why an exchange failed: `timeout` (no response head in time) is a 504 to the client, `busy`
 * (no connection became free in time) a 503, `body-idle` (the client stopped sending its request
 * body) a 408, everything else a 502.
 */
export class UpstreamError extends Error {
  constructor(
    readonly kind: 'connect' | 'timeout' | 'protocol' | 'closed' | 'busy' | 'body-idle',
    message: string,
  ) {
    super(message);
    this.name = 'UpstreamError';
  }
}

/** Receives one upstream response. */
export interface ResponseSink {
  /** The final response head (informational 1xx heads are not passed on). */
  onHead(head: ResponseHead): void;
  /** A body chunk; return false to pause the upstream until `Exchange.resume()`. */
  onData(chunk: Buffer): boolean;
  onEnd(): void;
  /** The exchange failed; `responded` says whether onHead was already called. */
  onError(err: UpstreamError, responded: boolean): void;
  /**
   * The upstream switched protocols (101) on a request with `upgrade`: the socket is no longer
   * the pool's, `rest` holds the bytes that followed the 101 head. The sink must take the socket
   * (and its errors) over at once.
   */
  onSwitch?(head: ResponseHead, socket: net.Socket, rest: Buffer): void;
}

export interface PoolOptions {
  /** Connections per upstream origin; more requests wait in line. */
  connections?: number;
  /** An idle connection is closed after this long (or sooner, per the server's Keep-Alive hint). */
  keepAliveMs?: number;
  /** No response head this long after the request was sent: 504. */
  headersTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** A request waits this long at most for a connection (all `connections` busy): then `busy`. */
  queueTimeoutMs?: number;
  /**
   * The request body may pause this long at most between two chunks (not counting time the
   * upstream is not reading it): then `body-idle`.
   */
  bodyIdleTimeoutMs?: number;
}

/** Methods whose request, sent on a connection the server had just closed, may be sent again. */
const RETRYABLE = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
/** Methods that mean to carry a body: sent with `Content-Length: 0` when they have none. */
const EXPECTS_BODY = new Set(['POST', 'PUT', 'PATCH']);

/** One request's journey: waiting for a connection, sent, answered or failed. */
export class Exchange {
  conn: Connection | undefined;
  responded = false;
  finished = false;
  requestSent = false;
  /** When the request was completely written (headers timeout); 0 before. */
  sentAt = 0;
  /** When it joined the queue for a connection (queue timeout). */
  queuedAt = 0;
  /** When the last request body chunk came (body idle timeout); 0 without a body. */
  bodyActiveAt = 0;
  /** The body is paused because the upstream is not reading: the client is not idle then. */
  bodyBlocked = false;
  retried = false;
  private detachBody: (() => void) | undefined;

  constructor(
    readonly pool: UpstreamPool,
    readonly req: UpstreamRequest,
    readonly sink: ResponseSink,
  ) {}

  /** The client went away: stop, and close the connection unless the response had ended. */
  abort() {
    this.pool.end(this, undefined);
  }

  /** Resumes reading the response after onData returned false. */
  resume() {
    this.conn?.socket.resume();
  }

  /** Writes the head and starts streaming the body onto `socket`. */
  send(socket: net.Socket) {
    const { req } = this;
    let framing = '';
    if (req.body === null) {
      if (EXPECTS_BODY.has(req.method)) framing = 'content-length: 0\r\n';
    } else if (req.contentLength !== undefined) framing = `content-length: ${req.contentLength}\r\n`;
    else framing = 'transfer-encoding: chunked\r\n';
    socket.write(`${req.head}${framing}\r\n`, 'latin1');
    if (req.body === null) {
      this.requestSent = true;
      this.sentAt = Date.now();
      return;
    }
    const body = req.body;
    const chunked = req.contentLength === undefined;
    this.bodyActiveAt = Date.now();
    const onData = (chunk: Buffer) => {
      if (chunk.length === 0) return;
      this.bodyActiveAt = Date.now();
      let ok: boolean;
      if (chunked) {
        socket.cork();
        socket.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
        socket.write(chunk);
        ok = socket.write('\r\n', 'latin1');
        socket.uncork();
      } else ok = socket.write(chunk);
      if (!ok) {
        body.pause();
        this.bodyBlocked = true;
        socket.once('drain', () => {
          this.bodyBlocked = false;
          this.bodyActiveAt = Date.now();
          body.resume();
        });
      }
    };
    const onEnd = () => {
      if (chunked) socket.write('0\r\n\r\n', 'latin1');
      this.detachBody?.();
      this.requestSent = true;
      this.sentAt = Date.now();
    };
    // A client that goes away mid-upload is handled by the caller (it aborts the exchange).
    const onError = () => this.pool.end(this, new UpstreamError('closed', 'the request body failed'));
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onError);
    this.detachBody = () => {
      this.detachBody = undefined;
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
    };
  }

  /** Stops reading the request body (the exchange ended). */
  stopBody() {
    this.detachBody?.();
  }
}

/** One upstream connection and the response parser reading it. */
class Connection {
  readonly parser: ResponseParser;
  exchange: Exchange | undefined;
  /** Has carried a request before (so the server may have closed it meanwhile). */
  reused = false;
  /** The current response has ended (set inside the parser, acted on after it returns). */
  completed = false;
  /** When it last became idle; idle connections are closed after the pool's keep-alive time. */
  idleSince = 0;
  /** The 101 head, once the upstream switched protocols (set inside the parser). */
  switched: ResponseHead | undefined;
  /** Removes the pool's socket listeners (when the socket leaves the pool after a 101). */
  unlisten: (() => void) | undefined;
  /** Not to be reused from then on: the server's Keep-Alive hint, less a second in hand. */
  expiresAt = Number.POSITIVE_INFINITY;

  constructor(
    readonly origin: Origin,
    readonly socket: net.Socket,
  ) {
    const conn = this;
    this.parser = new ResponseParser({
      onHead(head: ResponseHead) {
        const ex = conn.exchange;
        // The parser passes a 101 only to a request with `upgrade`; acted on after it returns.
        if (ex && head.status === 101) {
          ex.responded = true;
          conn.switched = head;
          return;
        }
        if (!ex || head.status < 200) return;
        if (head.keepAliveTimeoutS !== undefined)
          conn.expiresAt = Date.now() + Math.max(0, head.keepAliveTimeoutS * 1000 - 1000);
        ex.responded = true;
        ex.sink.onHead(head);
      },
      onBody(chunk: Buffer) {
        const ex = conn.exchange;
        if (ex && !ex.sink.onData(chunk)) socket.pause();
      },
      onEnd() {
        conn.completed = true;
      },
    });
  }
}

interface Origin {
  target: UpstreamTarget;
  idle: Connection[];
  all: Set<Connection>;
  waiting: Exchange[];
}

export class UpstreamPool {
  private readonly origins = new Map<string, Origin>();
  private readonly max: number;
  private readonly keepAliveMs: number;
  private readonly headersTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly queueTimeoutMs: number;
  private readonly bodyIdleTimeoutMs: number;
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(opts: PoolOptions = {}) {
    this.max = opts.connections ?? 256;
    this.keepAliveMs = opts.keepAliveMs ?? 30_000;
    this.headersTimeoutMs = opts.headersTimeoutMs ?? 60_000;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
    this.queueTimeoutMs = opts.queueTimeoutMs ?? 10_000;
    this.bodyIdleTimeoutMs = opts.bodyIdleTimeoutMs ?? 30_000;
    // One timer for every connection's time limits, instead of timers per request.
    const shortest = Math.min(this.headersTimeoutMs, this.queueTimeoutMs, this.bodyIdleTimeoutMs);
    const every = Math.max(50, Math.min(1000, Math.floor(shortest / 4)));
    this.sweeper = setInterval(() => this.sweep(), every);
    this.sweeper.unref();
  }

  /** Sends a request; the sink hears the response. */
  request(req: UpstreamRequest, sink: ResponseSink): Exchange {
    const ex = new Exchange(this, req, sink);
    if (this.closed) {
      ex.finished = true;
      sink.onError(new UpstreamError('closed', 'the proxy is shutting down'), false);
      return ex;
    }
    this.dispatch(ex, false);
    return ex;
  }

  /** Open connections per origin key (for tests and diagnostics). */
  connectionCount(key: string): number {
    return this.origins.get(key)?.all.size ?? 0;
  }

  async close() {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const origin of this.origins.values()) {
      for (const ex of origin.waiting.splice(0))
        this.end(ex, new UpstreamError('closed', 'the proxy is shutting down'));
      for (const conn of origin.all) conn.socket.destroy();
    }
  }

  private origin(target: UpstreamTarget): Origin {
    let o = this.origins.get(target.key);
    if (!o) {
      o = { target, idle: [], all: new Set(), waiting: [] };
      this.origins.set(target.key, o);
    }
    return o;
  }

  private dispatch(ex: Exchange, fresh: boolean) {
    const origin = this.origin(ex.req.target);
    let conn: Connection | undefined;
    if (!fresh) {
      const now = Date.now();
      conn = origin.idle.pop();
      while (conn !== undefined && (conn.socket.destroyed || conn.expiresAt <= now)) {
        conn.socket.destroy();
        conn = origin.idle.pop();
      }
    }
    if (!conn) {
      if (origin.all.size >= this.max) {
        ex.queuedAt = Date.now();
        origin.waiting.push(ex);
        return;
      }
      conn = this.connect(origin);
    }
    this.start(conn, ex);
  }

  private start(conn: Connection, ex: Exchange) {
    conn.exchange = ex;
    ex.conn = conn;
    conn.parser.start(ex.req.method === 'HEAD', ex.req.upgrade === true);
    ex.send(conn.socket);
  }

  private connect(origin: Origin): Connection {
    const { target } = origin;
    const socket = connectTo(target);
    const conn = new Connection(origin, socket);
    origin.all.add(conn);
    let connected = false;
    const timer = setTimeout(
      () => socket.destroy(new UpstreamError('timeout', 'connecting to the upstream timed out')),
      this.connectTimeoutMs,
    );
    socket.once(readyEvent(target), () => {
      connected = true;
      clearTimeout(timer);
    });
    const onData = (data: Buffer) => this.onData(conn, data);
    const onEnd = () => {
      // The server closed its side: the end of a close-delimited body, or of the connection.
      if (conn.exchange && conn.parser.eof()) this.release(conn, false);
      socket.destroy();
    };
    let failure: Error | undefined;
    const onClose = () => {
      clearTimeout(timer);
      origin.all.delete(conn);
      const i = origin.idle.indexOf(conn);
      if (i >= 0) origin.idle.splice(i, 1);
      const ex = conn.exchange;
      conn.exchange = undefined;
      if (ex && !ex.finished) {
        ex.conn = undefined;
        // A kept-alive connection closed as we reused it, before any byte of an answer: most
        // likely the server's idle timeout. An idempotent bodiless request (RFC 9110 9.2.2) may
        // go again once, on a new connection.
        if (
          !this.closed &&
          conn.reused &&
          !ex.retried &&
          conn.parser.idle &&
          ex.req.body === null &&
          RETRYABLE.has(ex.req.method)
        ) {
          ex.retried = true;
          this.dispatch(ex, true);
        } else this.end(ex, closedError(failure, connected));
      }
      this.next(origin);
    };
    socket.on('data', onData);
    socket.on('end', onEnd);
    // Stays after a 101 too: the socket's new owner adds its own; this one only records.
    socket.on('error', (e) => {
      failure = e;
    });
    socket.once('close', onClose);
    conn.unlisten = () => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onClose);
    };
    return conn;
  }

  private onData(conn: Connection, data: Buffer) {
    if (!conn.exchange) {
      // Bytes nobody asked for: the connection cannot be trusted with another request.
      conn.socket.destroy();
      return;
    }
    let used: number;
    try {
      used = conn.parser.feed(data);
    } catch (e) {
      const err =
        e instanceof ResponseParseError
          ? new UpstreamError('protocol', e.message)
          : new UpstreamError('protocol', `the response could not be relayed: ${(e as Error).message}`);
      this.end(conn.exchange, err);
      return;
    }
    if (conn.switched) this.switchProtocols(conn, conn.switched, data.subarray(used));
    else if (conn.completed) this.release(conn, used < data.length);
  }

  /** The upstream answered 101: the connection leaves the pool and goes to the exchange's sink. */
  private switchProtocols(conn: Connection, head: ResponseHead, rest: Buffer) {
    const ex = conn.exchange as Exchange;
    conn.exchange = undefined;
    conn.switched = undefined;
    ex.conn = undefined;
    ex.finished = true;
    conn.unlisten?.();
    conn.origin.all.delete(conn);
    if (ex.sink.onSwitch) ex.sink.onSwitch(head, conn.socket, rest);
    else {
      conn.socket.destroy();
      ex.sink.onError(new UpstreamError('protocol', 'the upstream switched protocols unasked'), true);
    }
    this.next(conn.origin);
  }

  /** The response ended: hand the connection to the next request, keep it idle, or close it. */
  private release(conn: Connection, extraBytes: boolean) {
    conn.completed = false;
    const ex = conn.exchange as Exchange;
    conn.exchange = undefined;
    ex.conn = undefined;
    ex.finished = true;
    ex.stopBody();
    // A connection that carried an upgrade request is not reused even when it was refused: an
    // upstream that switched without saying so would take the next user's request as tunnel data.
    const reusable =
      conn.parser.reusable && ex.requestSent && !extraBytes && !this.closed && ex.req.upgrade !== true;
    ex.sink.onEnd();
    if (!reusable || conn.socket.destroyed) {
      conn.socket.destroy();
      return;
    }
    conn.reused = true;
    conn.socket.resume();
    const origin = conn.origin;
    const waiting = origin.waiting.shift();
    if (waiting) return this.start(conn, waiting);
    conn.idleSince = Date.now();
    origin.idle.push(conn);
  }

  /** Ends an exchange early: with `err` it failed (the sink hears it), without it was aborted. */
  end(ex: Exchange, err: UpstreamError | undefined) {
    if (ex.finished) return;
    ex.finished = true;
    ex.stopBody();
    const conn = ex.conn;
    ex.conn = undefined;
    if (conn) {
      conn.exchange = undefined;
      conn.socket.destroy();
    } else {
      const waiting = this.origins.get(ex.req.target.key)?.waiting;
      const i = waiting ? waiting.indexOf(ex) : -1;
      if (i >= 0) waiting?.splice(i, 1);
    }
    if (err) ex.sink.onError(err, ex.responded);
  }

  /** A connection closed: a waiting request may now open a new one. */
  private next(origin: Origin) {
    if (this.closed) return;
    while (origin.waiting.length > 0 && origin.all.size < this.max) {
      const ex = origin.waiting.shift() as Exchange;
      this.start(this.connect(origin), ex);
    }
  }

  /**
   * The time limits: requests waiting too long for a connection, request bodies that stopped
   * coming, response heads that do not come, kept-alive connections idle too long.
   */
  private sweep() {
    const now = Date.now();
    for (const origin of this.origins.values()) {
      // The queue is in arrival order: the ones waiting longest are first.
      const { waiting } = origin;
      while (waiting.length > 0 && now - (waiting[0] as Exchange).queuedAt > this.queueTimeoutMs)
        this.end(
          waiting[0] as Exchange,
          new UpstreamError('busy', 'no connection to the upstream became free in time'),
        );
      for (const conn of origin.all) {
        const ex = conn.exchange;
        if (ex) {
          if (!ex.responded && ex.sentAt !== 0 && now - ex.sentAt > this.headersTimeoutMs)
            this.end(ex, new UpstreamError('timeout', 'the upstream did not answer in time'));
          else if (
            !ex.requestSent &&
            !ex.bodyBlocked &&
            ex.bodyActiveAt !== 0 &&
            now - ex.bodyActiveAt > this.bodyIdleTimeoutMs
          )
            this.end(ex, new UpstreamError('body-idle', 'the client stopped sending the request body'));
        } else if (now - conn.idleSince > this.keepAliveMs || conn.expiresAt <= now) conn.socket.destroy();
      }
    }
  }
}

/**
 * Opens a connection to an upstream (TLS with SNI for a name, not for an address), for HTTP/1.1:
 * pooled requests and websocket upgrades alike. Ready at `readyEvent(target)`.
 */
export function connectTo(target: UpstreamTarget): net.Socket {
  const socket = target.secure
    ? tls.connect({
        host: target.host,
        port: target.port,
        servername: net.isIP(target.host) ? undefined : target.host,
        ALPNProtocols: ['http/1.1'],
      })
    : net.connect({ host: target.host, port: target.port });
  socket.setNoDelay(true);
  return socket;
}

/** The event after which a socket from connectTo can carry requests. */
export const readyEvent = (target: UpstreamTarget) => (target.secure ? 'secureConnect' : 'connect');

function closedError(e: Error | undefined, connected: boolean): UpstreamError {
  if (e instanceof UpstreamError) return e;
  if (!connected)
    return new UpstreamError('connect', `the upstream cannot be reached: ${e?.message ?? 'closed'}`);
  return new UpstreamError(
    'closed',
    `the upstream closed the connection: ${e?.message ?? 'before answering'}`,
  );
}
