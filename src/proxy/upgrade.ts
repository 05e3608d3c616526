/**
 * Upgrade requests (`Connection: Upgrade`): Node hands the client's socket over raw, so the proxy
 * answers on it itself. Only a websocket handshake that the upstream accepts with a 101 naming
 * websocket becomes a tunnel; any other answer is relayed as an ordinary response and the
 * connection closed, so bytes the client sent after its request can never reach the upstream
 * as requests of their own (request smuggling).
 */
import type { IncomingMessage } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { type HttpError, proxyError } from './errorcodes.js';
import { endSoon, rawResponse } from './errors.js';
import { endToEndHeaders, RETRY_AFTER_S, upstreamFailure } from './relay.js';
import type { Exchange } from './upstream/exchange.js';
import type { UpstreamPool } from './upstream/pool.js';
import type { ResponseSink, UpstreamError, UpstreamRequest } from './upstream/request.js';
import type { ResponseHead } from './upstream/response.js';

/**
 * What a websocket client may send after its handshake and before the 101 (RFC 6455 4.1 says
 * it must wait; a little is kept for clients that do not): held back, then sent after the 101.
 */
export const MAX_EARLY_BYTES = 64 * 1024;

/**
 * Whether the request is a websocket handshake, the one protocol the proxy tunnels: a GET whose
 * Upgrade lists `websocket` (in any letter case). Others (`h2c` above all: an HTTP/2 connection
 * to the upstream would carry requests the proxy never sees) are forwarded without Upgrade.
 */
export function isWebsocketUpgrade(req: IncomingMessage): boolean {
  if (req.method !== 'GET') return false;
  return protocolTokens(req.headers.upgrade).includes('websocket');
}

/** An Upgrade value's protocols, lower case: `WebSocket, h2c` is ['websocket', 'h2c']. */
function protocolTokens(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  const text = typeof value === 'string' ? value : value.join(',');
  return text
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
}

/** An error answer on a raw socket, in the proxy's JSON error shape, then the socket is closed (endSoon). */
export function rawError(socket: Duplex, err: HttpError, headers: Record<string, string> = {}) {
  rawResponse(
    socket,
    err.status,
    { 'content-type': 'application/json', 'cache-control': 'no-store', 'x-error-code': err.code, ...headers },
    JSON.stringify({ Status: err.status, Code: err.code, Message: err.message }),
  );
}

/**
 * The upstream's answer to an upgrade request, relayed onto the client's raw socket. Until the
 * answer, client bytes are held back (websocket, bounded) or dropped (any other request: the
 * connection closes after its response, so pipelined requests are not served).
 */
export class UpgradeRelay implements ResponseSink {
  exchange: Exchange | undefined;
  private state: 'waiting' | 'relaying' | 'tunnel' | 'done' = 'waiting';
  private early: Buffer[] = [];
  private earlyBytes = 0;
  private answered = false;

  constructor(
    private readonly client: Duplex,
    private readonly extraCookies: string[] | undefined,
    /** Called once, when the upstream answered or the exchange ended otherwise. */
    private readonly onAnswer: () => void,
    private readonly log: Logger,
  ) {}

  /** The request asked the upstream for websocket: a 101 naming it becomes a tunnel. */
  private get websocket() {
    return this.exchange?.req.upgrade === true;
  }

  /**
   * Sends the request upstream and starts watching the client: `head` is what it sent after its
   * request head (Node read it already), more may follow.
   */
  start(pool: UpstreamPool, request: UpstreamRequest, head: Buffer) {
    this.exchange = pool.request(request, this);
    if (head.length > 0) this.onClientData(head);
    this.client.on('data', this.onClientData);
    this.client.once('close', this.onClientClose);
  }

  private readonly onClientData = (chunk: Buffer) => {
    this.earlyBytes += chunk.length;
    if (this.state !== 'waiting' || !this.websocket) {
      // Dropped (the connection closes after the answer), but not without end: past the bound
      // the client is no longer read while the upstream answers.
      if (this.earlyBytes > MAX_EARLY_BYTES) this.client.pause();
      return;
    }
    if (this.earlyBytes > MAX_EARLY_BYTES) {
      this.finish();
      this.exchange?.abort();
      rawError(this.client, proxyError('EarlyDataTooLarge'));
      return;
    }
    this.early.push(chunk);
  };

  private readonly onClientClose = () => {
    if (this.state === 'tunnel') return;
    this.finish();
    this.exchange?.abort();
  };

  private finish() {
    this.state = 'done';
    this.early = [];
    if (!this.answered) {
      this.answered = true;
      this.onAnswer();
    }
  }

  /** Any final answer but a 101: relayed with `Connection: close`, body by its own framing. */
  onHead(head: ResponseHead) {
    if (this.state !== 'waiting') return;
    this.finish();
    this.state = 'relaying';
    const headers = endToEndHeaders(head, this.extraCookies);
    this.client.write(responseHead(head.status, headers, 'connection: close\r\n'), 'latin1');
  }

  onData(chunk: Buffer): boolean {
    if (this.state !== 'relaying') return true;
    if (this.client.write(chunk)) return true;
    this.client.once('drain', () => this.exchange?.resume());
    return false;
  }

  onEnd() {
    if (this.state !== 'relaying') return;
    this.state = 'done';
    endSoon(this.client);
  }

  onError(err: UpstreamError, responded: boolean) {
    const relaying = this.state === 'relaying';
    if (this.state !== 'waiting' && !relaying) return;
    this.finish();
    if (responded || relaying) return void this.client.destroy();
    const out = upstreamFailure(err);
    this.log.warn({ status: out.status, reason: err.message }, 'upgrade request failed');
    rawError(this.client, out, err.kind === 'busy' ? { 'retry-after': RETRY_AFTER_S } : {});
  }

  /** The upstream switched protocols: a tunnel, if it is to websocket and websocket was asked for. */
  onSwitch(head: ResponseHead, upstream: net.Socket, rest: Buffer) {
    upstream.on('error', () => upstream.destroy());
    if (this.state !== 'waiting') return void upstream.destroy();
    const early = this.early;
    this.finish();
    if (!this.websocket || !namesWebsocket(head)) {
      upstream.destroy();
      this.log.warn('the upstream answered an upgrade with a 101 to another protocol');
      return rawError(this.client, proxyError('UpstreamSwitchedProtocol'));
    }
    this.state = 'tunnel';
    const { client } = this;
    const headers = endToEndHeaders(head, this.extraCookies);
    client.write(responseHead(101, headers, 'connection: Upgrade\r\nupgrade: websocket\r\n'), 'latin1');
    if (rest.length > 0) client.write(rest);
    for (const chunk of early) upstream.write(chunk);
    client.off('data', this.onClientData);
    client.off('close', this.onClientClose);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.once('close', end);
    upstream.once('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  }
}

/** The 101's Upgrade names websocket and nothing else. */
function namesWebsocket(head: ResponseHead): boolean {
  const values: string[] = [];
  for (let i = 0; i < head.headers.length; i += 2)
    if ((head.headers[i] as string).toLowerCase() === 'upgrade') values.push(head.headers[i + 1] as string);
  const tokens = protocolTokens(values);
  return tokens.length === 1 && tokens[0] === 'websocket';
}

function responseHead(status: number, headers: string[], extra: string): string {
  let text = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return `${text}${extra}\r\n`;
}
