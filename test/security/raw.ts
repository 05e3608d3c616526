/**
 * Raw-socket helpers for the adversarial tests: send bytes exactly as written (no client library
 * would send most of them) and read back every response the server wrote, however many.
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';

export interface RawOptions {
  /** Stop once this many complete final (non-1xx) responses arrived (default 1); the server may keep the connection open. */
  responses?: number;
  /** After those responses, wait this long for anything more (a response to a hidden second request). */
  settleMs?: number;
  /** Give up this long after the last byte arrived, when fewer responses came and the server keeps silent. */
  idleMs?: number;
}

/**
 * Writes `parts` to 127.0.0.1:port in order (each as its own write) and resolves with everything
 * the server sent, as latin1 text, once it closes, or once the expected responses are complete and
 * nothing more came for `settleMs`. The connection is never half-closed by us first: Node's server
 * aborts requests still in flight when the client ends its side.
 */
export function rawExchange(port: number, parts: string | (string | Buffer)[], opts: RawOptions = {}) {
  const list = typeof parts === 'string' ? [parts] : parts;
  const want = opts.responses ?? 1;
  const settleMs = opts.settleMs ?? 60;
  const idleMs = opts.idleMs ?? 2000;
  return new Promise<string>((resolve, reject) => {
    let got = '';
    let timer: NodeJS.Timeout | undefined;
    const sock = net.connect(port, '127.0.0.1', () => {
      for (const p of list) sock.write(typeof p === 'string' ? Buffer.from(p, 'latin1') : p);
      arm();
    });
    const arm = () => {
      clearTimeout(timer);
      const done = parseResponses(got).filter((r) => r.complete && r.status >= 200).length >= want;
      timer = setTimeout(() => sock.destroy(), done ? settleMs : idleMs);
    };
    sock.setEncoding('latin1');
    sock.on('data', (d: string) => {
      got += d;
      arm();
    });
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(got);
    });
    sock.on('error', (e: NodeJS.ErrnoException) => {
      // A server that refuses may reset the connection after answering: keep what it answered.
      if (e.code === 'ECONNRESET' || e.code === 'EPIPE') return;
      clearTimeout(timer);
      reject(e);
    });
  });
}

/** An open connection to send on in steps, reading what arrived so far between them. */
export class RawConnection {
  private readonly sock: net.Socket;
  private readonly ready: Promise<void>;
  received = '';
  closed = false;

  constructor(port: number) {
    this.sock = net.connect(port, '127.0.0.1');
    this.sock.setEncoding('latin1');
    this.sock.on('data', (d: string) => {
      this.received += d;
    });
    this.sock.on('close', () => {
      this.closed = true;
    });
    this.sock.on('error', () => undefined);
    this.ready = new Promise((resolve) => this.sock.once('connect', () => resolve()));
  }

  async write(text: string) {
    await this.ready;
    this.sock.write(Buffer.from(text, 'latin1'));
  }

  /** Waits until `pred` holds for what was received (or the connection closed), at most `ms`. */
  async until(pred: (received: string) => boolean, ms = 3000) {
    const stop = Date.now() + ms;
    while (!pred(this.received) && !this.closed && Date.now() < stop)
      await new Promise((r) => setTimeout(r, 10));
    return this.received;
  }

  close() {
    this.sock.destroy();
  }
}

export interface RawResponse {
  status: number;
  /** Header names in lower case; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: string;
  /** Whether the whole body arrived (a body read to the end of the connection counts as complete only then). */
  complete: boolean;
}

/**
 * Splits what a server sent into its responses (interim 1xx ones included), reading each body by
 * Content-Length or chunked framing, else to the end. Stops at the first thing that is not a response.
 */
export function parseResponses(text: string): RawResponse[] {
  const out: RawResponse[] = [];
  let at = 0;
  while (at < text.length) {
    const headEnd = text.indexOf('\r\n\r\n', at);
    if (headEnd < 0) break;
    const lines = text.slice(at, headEnd).split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
    if (!m) break;
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const i = line.indexOf(':');
      const name = line.slice(0, i).trim().toLowerCase();
      const value = line.slice(i + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    const status = Number(m[1]);
    at = headEnd + 4;
    let body = '';
    let complete = true;
    if (status >= 100 && status < 200) {
      // Interim: no body.
    } else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      body = text.slice(at, at + n);
      complete = at + n <= text.length;
      at += n;
    } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      for (;;) {
        const eol = text.indexOf('\r\n', at);
        if (eol < 0) {
          at = text.length;
          complete = false;
          break;
        }
        const size = Number.parseInt(text.slice(at, eol), 16);
        at = eol + 2;
        if (!(size > 0)) {
          const end = text.indexOf('\r\n\r\n', at - 2);
          complete = end >= 0;
          at = end < 0 ? text.length : end + 4;
          break;
        }
        body += text.slice(at, at + size);
        at += size + 2;
        if (at > text.length) complete = false;
      }
    } else if (status !== 204 && status !== 304) {
      body = text.slice(at);
      at = text.length;
      complete = false;
    }
    out.push({ status, headers, body, complete });
  }
  return out;
}

/** The final (non-1xx) responses in what a server sent. */
export const finalResponses = (text: string) => parseResponses(text).filter((r) => r.status >= 200);

export interface Recorded {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** Header lines as sent, names in their original spelling. */
  rawHeaders: string[];
  body: Buffer;
  /** Trailer lines after a chunked body, as sent. */
  rawTrailers: string[];
  /** The whole body arrived (false: the request was cut off before its end). */
  complete: boolean;
}

export interface Recorder {
  url: string;
  /** Every request the upstream's parser started, in arrival order. */
  seen: Recorded[];
  /**
   * The requests seen from index `from` on, once the upstream is quiet: no request still
   * arriving and none new for a moment (at most `ms` in all).
   */
  since(from: number, ms?: number): Promise<Recorded[]>;
  /** Waits until the upstream is quiet, so what arrives next belongs to what is sent next. */
  quiet(ms?: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * An upstream that records every request its (Node's, strict) parser reads: head, body and whether
 * the body ended. It answers 200 with the body's size once the body is complete.
 */
export async function startRecorder(): Promise<Recorder> {
  const seen: Recorded[] = [];
  /** Each request's end (body complete or cut off), by its index in `seen`. */
  const ended: Promise<void>[] = [];
  let lastArrival = 0;
  /** A request the proxy already took may still be on its way: quiet means none for this long. */
  const QUIET_MS = 30;
  const quiet = async (ms = 2000) => {
    const stop = Date.now() + ms;
    while (Date.now() - lastArrival < QUIET_MS && Date.now() < stop)
      await new Promise((r) => setTimeout(r, 5));
  };
  const server = http.createServer((req, res) => {
    const rec: Recorded = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: Buffer.alloc(0),
      rawTrailers: [],
      complete: false,
    };
    seen.push(rec);
    lastArrival = Date.now();
    const chunks: Buffer[] = [];
    const done = new Promise<void>((resolve) => {
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        rec.body = Buffer.concat(chunks);
        rec.rawTrailers = req.rawTrailers;
        rec.complete = true;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ url: rec.url, size: rec.body.length }));
        resolve();
      });
      req.on('close', () => {
        rec.body = Buffer.concat(chunks);
        resolve();
      });
    });
    ended.push(done);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    async since(from, ms = 2000) {
      // Requests of this window end first (a body still arriving), then nothing new may follow.
      const stop = new Promise<void>((r) => setTimeout(r, ms).unref());
      await Promise.race([Promise.all(ended.slice(from)), stop]);
      await quiet(ms);
      return seen.slice(from);
    },
    quiet,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
