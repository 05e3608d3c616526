/**
 * The proxy's HTTP/1.1 client for upstream requests: keep-alive connections per upstream origin,
 * one request at a time on each (no pipelining), request and response bodies streamed with
 * backpressure. It does only what a reverse proxy needs, which makes it about a third cheaper
 * per request than undici here (docs/decisions.md, "The proxy's upstream client").
 * What a caller gives and gets is in request.ts; an exchange and its connection in exchange.ts;
 * this file is the state machine that moves them (dispatch, release, end, sweep).
 */
import { Connection, Exchange, type ExchangeOwner, type Origin } from './exchange.js';
import {
  connectTo,
  type ResponseSink,
  readyEvent,
  UpstreamError,
  type UpstreamRequest,
  type UpstreamTarget,
} from './request.js';
import { type ResponseHead, ResponseParseError } from './response.js';

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

export class UpstreamPool implements ExchangeOwner {
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

function closedError(e: Error | undefined, connected: boolean): UpstreamError {
  if (e instanceof UpstreamError) return e;
  if (!connected)
    return new UpstreamError('connect', `the upstream cannot be reached: ${e?.message ?? 'closed'}`);
  return new UpstreamError(
    'closed',
    `the upstream closed the connection: ${e?.message ?? 'before answering'}`,
  );
}
