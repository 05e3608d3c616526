/**
 * One request's journey through the upstream pool (Exchange) and the kept-alive connection that
 * carries it (Connection). They point at each other; only the pool (src/proxy/upstream/pool.ts)
 * moves them between waiting, sending, idle and closed, through ExchangeOwner.
 */
import type net from 'node:net';
import { type ResponseSink, UpstreamError, type UpstreamRequest, type UpstreamTarget } from './request.js';
import { type ResponseHead, ResponseParser } from './response.js';

/** What ends an exchange early: the pool (UpstreamPool.end). */
export interface ExchangeOwner {
  /** With `err` the exchange failed (the sink hears it); without, it was aborted. */
  end(ex: Exchange, err: UpstreamError | undefined): void;
}

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
    readonly pool: ExchangeOwner,
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
export class Connection {
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

export interface Origin {
  target: UpstreamTarget;
  idle: Connection[];
  all: Set<Connection>;
  waiting: Exchange[];
}
