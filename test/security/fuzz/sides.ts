/**
 * The two sides of the request-side differential (request.ts): a node:http server that records
 * what llhttp reads from a connection (the reference), the upstream behind the proxy that records
 * what arrived, and the client that sends a case through the proxy.
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { ResponseCounter } from './llhttp.js';

/** A header on every response of the upstream: the client tells them from the proxy's own. */
export const UPSTREAM_MARK = 'x-fuzz-upstream';

export interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  complete: boolean;
  /** llhttp handed the connection over (an Upgrade request): what follows is not HTTP. */
  upgrade: boolean;
}

interface Recording {
  seen: Seen[];
  reqs: [Seen, http.IncomingMessage][];
  refused: boolean;
  /** llhttp's error code when it refused. */
  why?: string;
}

function record(rec: Recording, req: http.IncomingMessage, upgrade: boolean): Seen {
  const seen: Seen = {
    method: req.method ?? '',
    url: req.url ?? '',
    headers: { ...req.headers },
    body: '',
    complete: upgrade,
    upgrade,
  };
  rec.seen.push(seen);
  if (!upgrade) {
    rec.reqs.push([seen, req]);
    req.on('data', (d: Buffer) => {
      seen.body += d.toString('latin1');
    });
  }
  return seen;
}

/** The proxy's own answer to a malformed request (src/proxy/run.ts), so that both sides end alike. */
function onClientError(_err: Error, socket: net.Socket | import('node:stream').Duplex) {
  if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
  else socket.destroy();
}

/** A node:http server as the proxy's (default parser settings), recording each connection. */
export class Oracle {
  private readonly byPort = new Map<number, Recording>();

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<Oracle> {
    const server = http.createServer();
    const oracle = new Oracle(server);
    // Finish the requests already read when the client ends its side (the client sends and ends).
    (server as unknown as { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
    server.on('connection', (s: net.Socket) => {
      oracle.byPort.set(s.remotePort as number, { seen: [], reqs: [], refused: false });
    });
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const rec = oracle.byPort.get(req.socket.remotePort as number);
      if (!rec) return res.destroy();
      record(rec, req, false);
      req.on('end', () => res.end());
    });
    server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
      const rec = oracle.byPort.get(socket.remotePort as number);
      if (rec) record(rec, req, true);
      socket.destroy();
    });
    server.on('clientError', (err: Error, socket: net.Socket) => {
      const rec = oracle.byPort.get(socket.remotePort as number);
      if (rec) {
        rec.refused = true;
        rec.why = (err as NodeJS.ErrnoException).code;
      }
      onClientError(err, socket);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return oracle;
  }

  /** What llhttp reads in `bytes` sent on one connection that then ends. */
  async parse(bytes: Buffer): Promise<Recording> {
    const port = (this.server.address() as AddressInfo).port;
    const local = await new Promise<number>((resolve) => {
      let localPort = 0;
      const sock = net.connect(port, '127.0.0.1', () => {
        localPort = sock.localPort as number;
        sock.end(bytes);
      });
      const timer = setTimeout(() => sock.destroy(), 3000);
      sock.on('error', () => undefined);
      sock.resume();
      sock.on('close', () => {
        clearTimeout(timer);
        resolve(localPort);
      });
    });
    const rec = this.byPort.get(local) ?? { seen: [], reqs: [], refused: true };
    this.byPort.delete(local);
    for (const [seen, req] of rec.reqs) seen.complete = req.complete;
    return rec;
  }

  close() {
    return new Promise<void>((r) => {
      this.server.closeAllConnections();
      this.server.close(() => r());
    });
  }
}

/** The upstream behind the proxy: records every request its parser reads, answers 200 keep-alive. */
export class Upstream {
  rec: Recording = { seen: [], reqs: [], refused: false };
  url = '';

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<Upstream> {
    const server = http.createServer();
    // No idle close while the proxy reuses a connection: that race makes the proxy send a GET or
    // HEAD again (RFC 9110 9.2.2), which would look like a request llhttp never read.
    server.keepAliveTimeout = 600_000;
    const up = new Upstream(server);
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      record(up.rec, req, false);
      req.on('end', () => {
        res.setHeader(UPSTREAM_MARK, '1');
        res.end('ok');
      });
    });
    server.on('clientError', (_e: Error, socket: net.Socket) => {
      up.rec.refused = true;
      socket.destroy();
    });
    // An application that does not switch protocols: it answers an Upgrade request like any other
    // and reads the next request from the same connection. A proxy that tunnels before the
    // upstream said 101 would have the client's next bytes read here as requests.
    server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      record(up.rec, req, true);
      socket.write(`HTTP/1.1 200 OK\r\n${UPSTREAM_MARK}: 1\r\ncontent-length: 2\r\n\r\nok`);
      if (head.length > 0) socket.unshift(head);
      server.emit('connection', socket);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    up.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return up;
  }

  reset() {
    this.rec = { seen: [], reqs: [], refused: false };
  }

  /** What arrived, once no request is still arriving (or after 1 s). */
  async settle(): Promise<Seen[]> {
    const stop = Date.now() + 1000;
    while (Date.now() < stop && this.rec.reqs.some(([, r]) => !r.complete && !r.destroyed))
      await new Promise((r) => setTimeout(r, 5));
    for (const [seen, req] of this.rec.reqs) seen.complete = req.complete;
    return this.rec.seen;
  }

  close() {
    return new Promise<void>((r) => {
      this.server.closeAllConnections();
      this.server.close(() => r());
    });
  }
}

/**
 * Sends `bytes` to the proxy and reads its responses; ends its side once `want` responses arrived
 * (ending earlier would make Node's server abort requests still in flight), or after 2 s of silence.
 */
export function throughProxy(
  port: number,
  bytes: Buffer,
  methods: string[],
  want: number,
): Promise<ResponseCounter['finals']> {
  return new Promise((resolve) => {
    const counter = new ResponseCounter(methods, UPSTREAM_MARK);
    let ended = false;
    let timer: NodeJS.Timeout | undefined;
    const end = () => {
      if (ended) return;
      ended = true;
      sock.end();
      clearTimeout(timer);
      timer = setTimeout(() => sock.destroy(), 2000);
    };
    const idle = () => {
      clearTimeout(timer);
      timer = setTimeout(end, 2000);
    };
    const sock = net.connect(port, '127.0.0.1', () => {
      sock.write(bytes);
      if (want === 0) end();
      else idle();
    });
    sock.on('data', (d: Buffer) => {
      counter.feed(d);
      if (counter.count >= want) end();
      else if (!ended) idle();
    });
    sock.on('error', () => undefined);
    sock.on('close', () => {
      clearTimeout(timer);
      counter.close();
      resolve(counter.finals);
    });
  });
}
