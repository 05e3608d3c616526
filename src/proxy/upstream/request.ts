/**
 * What a caller of the upstream pool (src/proxy/upstream/pool.ts) gives and gets: where a request
 * goes, the request, why it failed and the sink that hears its answer; and how a connection to an
 * upstream is opened, for pooled requests and websocket upgrades alike.
 */
import net from 'node:net';
import type { Readable } from 'node:stream';
import tls from 'node:tls';
import type { ResponseHead } from './response.js';

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
